#include "backends/cpu/cpu_kernels.h"

namespace bulkhead::cpu {

void register_misc_kernels(KernelTable& t) { (void)t; }

}  // namespace bulkhead::cpu
