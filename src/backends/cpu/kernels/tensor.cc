#include "backends/cpu/cpu_kernels.h"

namespace bulkhead::cpu {

void register_tensor_kernels(KernelTable& t) { (void)t; }

}  // namespace bulkhead::cpu
