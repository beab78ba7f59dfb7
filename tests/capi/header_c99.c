/* bulkhead.h is plain C99: this file is compiled with -std=c99 -pedantic-errors. */
#include <bulkhead/bulkhead.h>

uint32_t bulkhead_header_is_c99(void) { return BH_API_VERSION + (uint32_t)sizeof(BhApi) * 0u; }
