// Vulkan kernels: see kernels.h for the family this file adds.
#include "backends/vulkan/kernels/kernels.h"

namespace bulkhead::vulkan {

void add_layout_kernels(KernelTable& t) {}

}  // namespace bulkhead::vulkan
