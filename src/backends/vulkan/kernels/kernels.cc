#include "backends/vulkan/kernels/kernels.h"

#include <algorithm>

namespace bulkhead::vulkan {

KernelTable make_kernel_table() {
  KernelTable t;
  add_elementwise_kernels(t);
  add_layout_kernels(t);
  add_compute_kernels(t);
  add_reduction_kernels(t);
  return t;
}

Result<RunState*> run_state(KernelContext& ctx) {
  auto* rs = static_cast<RunState*>(ctx.device_run_state());
  if (!rs) return internal_error(ctx.where() + "a Vulkan kernel ran outside a run");
  return rs;
}

Status require_types(const KernelInfo& info, std::initializer_list<DataType> allowed, std::initializer_list<int> inputs) {
  std::vector<int> which(inputs);
  if (which.empty())
    for (size_t i = 0; i < info.input_types.size(); ++i) which.push_back(static_cast<int>(i));
  for (int i : which) {
    if (i >= static_cast<int>(info.node.inputs.size()) || info.node.inputs[i].empty()) continue;
    DataType t = i < static_cast<int>(info.input_types.size()) ? info.input_types[i] : DataType::kUndefined;
    if (std::find(allowed.begin(), allowed.end(), t) == allowed.end())
      return unsupported(info.where() + "the Vulkan kernel does not take input " + std::to_string(i) + " of type " +
                         dtype_name(t));
  }
  return Status::ok();
}

Groups groups_for(uint64_t n) {
  const uint64_t g = (n + kLocal - 1) / kLocal;
  constexpr uint64_t kMaxX = 65535;
  if (g <= kMaxX) return {static_cast<uint32_t>(std::max<uint64_t>(g, 1)), 1};
  return {static_cast<uint32_t>(kMaxX), static_cast<uint32_t>((g + kMaxX - 1) / kMaxX)};
}

}  // namespace bulkhead::vulkan
