// Vulkan compute kernels, float32: MatMul and Gemm (compute_matmul.cc), Conv and
// ConvTranspose (compute_conv.cc), pooling (compute_pool.cc). Other element types and
// attribute combinations the shaders lack fall back to the next device.
#include "backends/vulkan/kernels/kernels.h"

namespace bulkhead::vulkan {

// Defined in the compute_*.cc files of this family.
void add_matmul_kernels(KernelTable& t);
void add_conv_kernels(KernelTable& t);
void add_pool_kernels(KernelTable& t);

void add_compute_kernels(KernelTable& t) {
  add_matmul_kernels(t);
  add_conv_kernels(t);
  add_pool_kernels(t);
}

}  // namespace bulkhead::vulkan
