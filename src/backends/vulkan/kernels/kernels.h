// The Vulkan kernel table and what its kernels share.
//
// A Vulkan kernel checks at session creation that it can run its node (element types
// known and supported, attributes valid) — otherwise the node falls back to the next
// device in the session's list — and at run time records dispatches into the run's
// RunState (recorder.h). Kernels hold no device objects: pipelines come from the run's
// device, so one table serves every device.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "backend/kernel.h"
#include "backends/vulkan/recorder.h"

namespace bulkhead::vulkan {

KernelTable make_kernel_table();

// Families, each adding its operators to the table (kernels/<family>.cc).
void add_elementwise_kernels(KernelTable& t);
void add_layout_kernels(KernelTable& t);   // views, Transpose, Concat, Slice, Pad, Gather, Resize
void add_compute_kernels(KernelTable& t);  // MatMul, Gemm, Conv, ConvTranspose, pooling
void add_reduction_kernels(KernelTable& t);  // reductions, Softmax, normalisations

// The run's recording on this device; an error outside a run.
Result<RunState*> run_state(KernelContext& ctx);

// Rejects the node (so it falls back to another device) unless the listed inputs have a
// known type in `allowed` (all inputs when `inputs` is empty).
Status require_types(const KernelInfo& info, std::initializer_list<DataType> allowed,
                     std::initializer_list<int> inputs = {});

// Workgroups for `n` invocations of a 1-D shader with local size kLocal, laid out as
// (x, y) so that x stays within the device limit; the shader flattens them back.
constexpr uint32_t kLocal = 256;
struct Groups {
  uint32_t x = 1, y = 1;
};
Groups groups_for(uint64_t n);

}  // namespace bulkhead::vulkan
