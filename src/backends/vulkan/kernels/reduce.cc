// Vulkan reductions and normalisations, float32: Reduce{Sum,Mean,Max,Min,SumSquare,L1,L2,
// LogSumExp} over contiguous axes (shaders/reduce.comp), Softmax and LogSoftmax
// (shaders/softmax.comp), LayerNormalization and InstanceNormalization
// (shaders/normalize.comp), BatchNormalization for inference (shaders/batchnorm.comp).
// Anything else — non-contiguous axes, axes given at run time, training outputs — falls
// back to the CPU.
#include <algorithm>
#include <limits>

#include "backends/vulkan/kernels/kernels.h"
#include "ir/graph.h"

namespace bulkhead::vulkan {
namespace {

struct RowPush {
  uint32_t outer, r, inner, op;
};

int64_t product(const Shape& s, int from, int to) {
  int64_t n = 1;
  for (int d = from; d < to; ++d) n *= s[d];
  return n;
}

Status fits_u32(const KernelContext& ctx, int64_t n) {
  if (n > std::numeric_limits<uint32_t>::max()) return unsupported(ctx.where() + "tensor too large for the Vulkan kernel");
  return Status::ok();
}

// The axes of a reduction: from the `axes` attribute, or from a constant input 1 at the
// opsets that moved them there. `from_input`: whether this opset takes them as input.
Result<std::vector<int64_t>> reduce_axes(const KernelInfo& info, bool from_input) {
  const ir::Node& n = info.node;
  if (!from_input) {
    const ir::Attribute* a = n.attr("axes");
    return a ? a->ints : std::vector<int64_t>{};
  }
  if (n.inputs.size() < 2 || n.inputs[1].empty()) return std::vector<int64_t>{};
  if (!info.input_is_constant(1)) return unsupported(info.where() + "the Vulkan kernel takes axes only as a constant");
  const Tensor& t = info.constant_inputs[1];
  if (t.dtype() != DataType::kInt64 || !t.raw()) return unsupported(info.where() + "axes must be int64");
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel());
}

class ReduceKernel final : public Kernel {
 public:
  ReduceKernel(uint32_t op, std::vector<int64_t> axes, bool keepdims, bool noop_empty)
      : op_(op), axes_(std::move(axes)), keepdims_(keepdims), noop_empty_(noop_empty) {}
  Status compute(KernelContext& ctx) const override {
    BH_ASSIGN_OR_RETURN(RunState * rs, run_state(ctx));
    const Tensor* x = ctx.input(0);
    if (!x || x->dtype() != DataType::kFloat32) return invalid_argument(ctx.where() + "expects a float32 input");
    const int rank = x->rank();
    if (axes_.empty() && noop_empty_) return ctx.set_output(0, Value(*x));
    std::vector<int> axes;
    for (int64_t a : axes_) {
      if (a < -rank || a >= rank) return invalid_argument(ctx.where() + "axis " + std::to_string(a) + " is out of range");
      axes.push_back(static_cast<int>(a < 0 ? a + rank : a));
    }
    if (axes.empty())
      for (int d = 0; d < rank; ++d) axes.push_back(d);
    std::sort(axes.begin(), axes.end());
    axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
    for (size_t i = 1; i < axes.size(); ++i)
      if (axes[i] != axes[i - 1] + 1) return unsupported(ctx.where() + "the Vulkan reduction needs contiguous axes");
    const int first = axes.empty() ? 0 : axes.front(), last = axes.empty() ? -1 : axes.back();
    Shape out;
    for (int d = 0; d < rank; ++d) {
      const bool reduced = d >= first && d <= last;
      if (!reduced) out.push_back(x->shape()[d]);
      else if (keepdims_) out.push_back(1);
    }
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kFloat32, out));
    RowPush push{static_cast<uint32_t>(product(x->shape(), 0, first)),
                 static_cast<uint32_t>(product(x->shape(), first, last + 1)),
                 static_cast<uint32_t>(product(x->shape(), last + 1, rank)), op_};
    BH_RETURN_IF_ERROR(fits_u32(ctx, x->numel()));
    if (y.numel() == 0) return Status::ok();
    if (push.r == 0) return unsupported(ctx.where() + "reducing an empty axis");
    Groups g = groups_for(uint64_t(push.outer) * push.inner);
    return rs->dispatch("reduce", {{x, false}, {&y, true}}, &push, sizeof push, g.x, g.y);
  }

 private:
  uint32_t op_;
  std::vector<int64_t> axes_;
  bool keepdims_, noop_empty_;
};

void add_reduce(KernelTable& t, const char* op, uint32_t code, int axes_input_since) {
  t.add(op, 1, [code, axes_input_since](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    BH_RETURN_IF_ERROR(require_types(info, {DataType::kFloat32}, {0}));
    BH_ASSIGN_OR_RETURN(auto axes, reduce_axes(info, info.node.opset >= axes_input_since));
    // The kernel reduces one contiguous run of axes; known here when the axes share a
    // sign (the rank is not needed to tell).
    std::vector<int64_t> sorted = axes;
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    bool contiguous = sorted.empty() || (sorted.front() < 0) == (sorted.back() < 0);
    for (size_t i = 1; contiguous && i < sorted.size(); ++i) contiguous = sorted[i] == sorted[i - 1] + 1;
    if (!contiguous) return unsupported(info.where() + "the Vulkan reduction needs one contiguous run of axes");
    const ir::Attribute* keep = info.node.attr("keepdims");
    const ir::Attribute* noop = info.node.attr("noop_with_empty_axes");
    return std::unique_ptr<Kernel>(
        std::make_unique<ReduceKernel>(code, std::move(axes), !keep || keep->i != 0, noop && noop->i != 0));
  });
}

class SoftmaxKernel final : public Kernel {
 public:
  SoftmaxKernel(uint32_t op, int64_t axis, bool coerce_2d) : op_(op), axis_(axis), coerce_2d_(coerce_2d) {}
  Status compute(KernelContext& ctx) const override {
    BH_ASSIGN_OR_RETURN(RunState * rs, run_state(ctx));
    const Tensor* x = ctx.input(0);
    if (!x || x->dtype() != DataType::kFloat32) return invalid_argument(ctx.where() + "expects a float32 input");
    const int rank = x->rank();
    if (axis_ < -rank || axis_ >= std::max(rank, 1))
      return invalid_argument(ctx.where() + "axis " + std::to_string(axis_) + " is out of range");
    const int axis = static_cast<int>(axis_ < 0 ? axis_ + rank : axis_);
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kFloat32, x->shape()));
    BH_RETURN_IF_ERROR(fits_u32(ctx, x->numel()));
    if (x->numel() == 0) return Status::ok();
    RowPush push{static_cast<uint32_t>(product(x->shape(), 0, axis)),
                 static_cast<uint32_t>(coerce_2d_ ? product(x->shape(), axis, rank) : x->shape()[axis]),
                 static_cast<uint32_t>(coerce_2d_ ? 1 : product(x->shape(), axis + 1, rank)), op_};
    Groups g = groups_for(uint64_t(push.outer) * push.inner);
    return rs->dispatch("softmax", {{x, false}, {&y, true}}, &push, sizeof push, g.x, g.y);
  }

 private:
  uint32_t op_;
  int64_t axis_;
  bool coerce_2d_;
};

struct NormPush {
  uint32_t rows, n, per_element, channels, has_bias;
  float eps;
};

// LayerNormalization (per_element) and InstanceNormalization.
class NormalizeKernel final : public Kernel {
 public:
  NormalizeKernel(bool layer, int64_t axis, float eps) : layer_(layer), axis_(axis), eps_(eps) {}
  Status compute(KernelContext& ctx) const override {
    BH_ASSIGN_OR_RETURN(RunState * rs, run_state(ctx));
    const Tensor* x = ctx.input(0);
    const Tensor* scale = ctx.input(1);
    const Tensor* bias = ctx.has_input(2) ? ctx.input(2) : nullptr;
    if (!x || !scale || x->dtype() != DataType::kFloat32) return invalid_argument(ctx.where() + "expects float32 X and scale");
    const int rank = x->rank();
    NormPush push{};
    if (layer_) {
      if (axis_ < -rank || axis_ >= rank) return invalid_argument(ctx.where() + "axis is out of range");
      const int axis = static_cast<int>(axis_ < 0 ? axis_ + rank : axis_);
      push.rows = static_cast<uint32_t>(product(x->shape(), 0, axis));
      push.n = static_cast<uint32_t>(product(x->shape(), axis, rank));
      push.per_element = 1;
      push.channels = 1;
      if (scale->numel() != push.n || (bias && bias->numel() != push.n))
        return unsupported(ctx.where() + "the Vulkan LayerNormalization needs full-size scale and bias");
    } else {
      if (rank < 3) return invalid_argument(ctx.where() + "expects N, C and spatial dimensions");
      push.rows = static_cast<uint32_t>(x->shape()[0] * x->shape()[1]);
      push.n = static_cast<uint32_t>(product(x->shape(), 2, rank));
      push.channels = static_cast<uint32_t>(x->shape()[1]);
      if (scale->numel() != x->shape()[1] || (bias && bias->numel() != x->shape()[1]))
        return invalid_argument(ctx.where() + "scale and B must have C elements");
    }
    push.has_bias = bias ? 1 : 0;
    push.eps = eps_;
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kFloat32, x->shape()));
    BH_RETURN_IF_ERROR(fits_u32(ctx, x->numel()));
    if (x->numel() == 0) return Status::ok();
    Groups g = groups_for(push.rows);
    return rs->dispatch("normalize", {{x, false}, {scale, false}, {bias ? bias : scale, false}, {&y, true}}, &push,
                        sizeof push, g.x, g.y);
  }

 private:
  bool layer_;
  int64_t axis_;
  float eps_;
};

struct BatchNormPush {
  uint32_t n, channels, spatial;
  float eps;
  uint32_t relu;
};

class BatchNormKernel final : public Kernel {
 public:
  // relu: the optimiser fused a Relu after this node (`_relu`, exec/optimize.cc).
  BatchNormKernel(float eps, bool relu) : eps_(eps), relu_(relu) {}
  Status compute(KernelContext& ctx) const override {
    BH_ASSIGN_OR_RETURN(RunState * rs, run_state(ctx));
    const Tensor* x = ctx.input(0);
    if (!x || x->dtype() != DataType::kFloat32 || x->rank() < 2)
      return invalid_argument(ctx.where() + "expects a float32 input of rank >= 2");
    const int64_t c = x->shape()[1];
    for (int i = 1; i <= 4; ++i)
      if (!ctx.input(i) || ctx.input(i)->numel() != c)
        return invalid_argument(ctx.where() + "input " + std::to_string(i) + " must have C = " + std::to_string(c) + " elements");
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kFloat32, x->shape()));
    BH_RETURN_IF_ERROR(fits_u32(ctx, x->numel()));
    if (x->numel() == 0) return Status::ok();
    BatchNormPush push{static_cast<uint32_t>(x->numel()), static_cast<uint32_t>(c),
                       static_cast<uint32_t>(product(x->shape(), 2, x->rank())), eps_, relu_ ? 1u : 0u};
    Groups g = groups_for(push.n);
    return rs->dispatch("batchnorm",
                        {{x, false}, {ctx.input(1), false}, {ctx.input(2), false}, {ctx.input(3), false},
                         {ctx.input(4), false}, {&y, true}},
                        &push, sizeof push, g.x, g.y);
  }

 private:
  float eps_;
  bool relu_;
};

bool extra_outputs_wanted(const ir::Node& n) {
  for (size_t i = 1; i < n.outputs.size(); ++i)
    if (!n.outputs[i].empty()) return true;
  return false;
}

}  // namespace

void add_reduction_kernels(KernelTable& t) {
  add_reduce(t, "ReduceSum", 0, 13);
  add_reduce(t, "ReduceMean", 1, 18);
  add_reduce(t, "ReduceMax", 2, 18);
  add_reduce(t, "ReduceMin", 3, 18);
  add_reduce(t, "ReduceSumSquare", 4, 18);
  add_reduce(t, "ReduceL2", 5, 18);
  add_reduce(t, "ReduceL1", 6, 18);
  add_reduce(t, "ReduceLogSumExp", 7, 18);
  for (const auto& [op, code] : {std::pair<const char*, uint32_t>{"Softmax", 0}, {"LogSoftmax", 1}}) {
    const uint32_t c = code;
    t.add(op, 1, [c](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
      BH_RETURN_IF_ERROR(require_types(info, {DataType::kFloat32}, {0}));
      const bool coerce = info.node.opset < 13;
      return std::unique_ptr<Kernel>(std::make_unique<SoftmaxKernel>(c, info.node.attr_int("axis", coerce ? 1 : -1), coerce));
    });
  }
  t.add("LayerNormalization", 17, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    BH_RETURN_IF_ERROR(require_types(info, {DataType::kFloat32}));
    if (extra_outputs_wanted(info.node)) return unsupported(info.where() + "the Vulkan kernel does not output Mean/InvStdDev");
    if (info.node.attr_int("stash_type", 1) != 1) return unsupported(info.where() + "stash_type must be float32");
    return std::unique_ptr<Kernel>(
        std::make_unique<NormalizeKernel>(true, info.node.attr_int("axis", -1), info.node.attr_float("epsilon", 1e-5f)));
  });
  t.add("InstanceNormalization", 1, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    BH_RETURN_IF_ERROR(require_types(info, {DataType::kFloat32}));
    return std::unique_ptr<Kernel>(std::make_unique<NormalizeKernel>(false, 0, info.node.attr_float("epsilon", 1e-5f)));
  });
  t.add("BatchNormalization", 1, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    BH_RETURN_IF_ERROR(require_types(info, {DataType::kFloat32}));
    if (extra_outputs_wanted(info.node) || info.node.attr_int("training_mode", 0) != 0)
      return unsupported(info.where() + "the Vulkan kernel is for inference only");
    if (info.node.opset < 7) return unsupported(info.where() + "opset < 7 BatchNormalization is not supported on Vulkan");
    return std::unique_ptr<Kernel>(std::make_unique<BatchNormKernel>(info.node.attr_float("epsilon", 1e-5f),
                                                                     info.node.attr_int("_relu", 0) != 0));
  });
}

}  // namespace bulkhead::vulkan
