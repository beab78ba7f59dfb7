#include "backends/cpu/cpu_kernels.h"

namespace bulkhead::cpu {

void register_dnnl_kernels(KernelTable& t) { (void)t; }

}  // namespace bulkhead::cpu
