// Element-wise kernels on Vulkan, float32: unary activations (shaders/unary.comp) and
// broadcasting binary ops (shaders/binary.comp). Other element types fall back.
#include <cstring>
#include <limits>

#include "backends/vulkan/kernels/kernels.h"
#include "ir/graph.h"

namespace bulkhead::vulkan {
namespace {

struct UnaryPush {
  uint32_t n, op;
  float alpha, beta;
};

// A scalar float from a constant input (Clip's min/max), or `fallback` when omitted.
Result<float> constant_scalar(const KernelInfo& info, int i, float fallback) {
  if (i >= static_cast<int>(info.node.inputs.size()) || info.node.inputs[i].empty()) return fallback;
  if (!info.input_is_constant(i))
    return unsupported(info.where() + "the Vulkan Clip takes min and max only as constants");
  const Tensor& t = info.constant_inputs[i];
  if (t.dtype() != DataType::kFloat32 || t.numel() != 1 || !t.raw())
    return unsupported(info.where() + "min/max must be float32 scalars");
  return t.data<float>()[0];
}

class UnaryKernel final : public Kernel {
 public:
  UnaryKernel(uint32_t op, float alpha, float beta) : op_(op), alpha_(alpha), beta_(beta) {}
  Status compute(KernelContext& ctx) const override {
    BH_ASSIGN_OR_RETURN(RunState * rs, run_state(ctx));
    const Tensor* x = ctx.input(0);
    if (!x || x->dtype() != DataType::kFloat32) return invalid_argument(ctx.where() + "expects a float32 input");
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kFloat32, x->shape()));
    const uint64_t n = static_cast<uint64_t>(x->numel());
    if (n == 0) return Status::ok();
    if (n > std::numeric_limits<uint32_t>::max()) return unsupported(ctx.where() + "tensor too large for the Vulkan kernel");
    UnaryPush push{static_cast<uint32_t>(n), op_, alpha_, beta_};
    Groups g = groups_for(n);
    return rs->dispatch("unary", {{x, false}, {&y, true}}, &push, sizeof push, g.x, g.y);
  }

 private:
  uint32_t op_;
  float alpha_, beta_;
};

struct BinaryPush {
  uint32_t n, op, rank;
  uint32_t dims[6], a_stride[6], b_stride[6];
};
constexpr int kMaxRank = 6;

class BinaryKernel final : public Kernel {
 public:
  explicit BinaryKernel(uint32_t op) : op_(op) {}
  Status compute(KernelContext& ctx) const override {
    BH_ASSIGN_OR_RETURN(RunState * rs, run_state(ctx));
    const Tensor* a = ctx.input(0);
    const Tensor* b = ctx.input(1);
    if (!a || !b || a->dtype() != DataType::kFloat32 || b->dtype() != DataType::kFloat32)
      return invalid_argument(ctx.where() + "expects two float32 inputs");
    // Broadcast shape (numpy rules), right-aligned.
    const int rank = std::max(a->rank(), b->rank());
    if (rank > kMaxRank) return unsupported(ctx.where() + "rank " + std::to_string(rank) + " is above the Vulkan kernel's 6");
    Shape out(rank);
    for (int d = 0; d < rank; ++d) {
      int64_t da = d - (rank - a->rank()) >= 0 ? a->shape()[d - (rank - a->rank())] : 1;
      int64_t db = d - (rank - b->rank()) >= 0 ? b->shape()[d - (rank - b->rank())] : 1;
      if (da != db && da != 1 && db != 1)
        return invalid_argument(ctx.where() + "shapes " + shape_to_string(a->shape()) + " and " +
                                shape_to_string(b->shape()) + " do not broadcast");
      out[d] = da == 1 ? db : da;
    }
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kFloat32, out));
    const uint64_t n = static_cast<uint64_t>(y.numel());
    if (n == 0) return Status::ok();
    if (n > std::numeric_limits<uint32_t>::max()) return unsupported(ctx.where() + "tensor too large for the Vulkan kernel");
    BinaryPush push{};
    push.n = static_cast<uint32_t>(n);
    push.op = op_;
    push.rank = static_cast<uint32_t>(std::max(rank, 1));
    if (rank == 0) push.dims[0] = 1;
    auto strides = [&](const Tensor& t, uint32_t* s) {
      int64_t stride = 1;
      for (int d = rank - 1; d >= 0; --d) {
        int td = d - (rank - t.rank());
        int64_t dim = td >= 0 ? t.shape()[td] : 1;
        s[d] = dim == 1 ? 0 : static_cast<uint32_t>(stride);
        stride *= dim;
      }
    };
    for (int d = 0; d < rank; ++d) push.dims[d] = static_cast<uint32_t>(out[d]);
    strides(*a, push.a_stride);
    strides(*b, push.b_stride);
    Groups g = groups_for(n);
    return rs->dispatch("binary", {{a, false}, {b, false}, {&y, true}}, &push, sizeof push, g.x, g.y);
  }

 private:
  uint32_t op_;
};

void add_unary(KernelTable& t, const char* op, int since, uint32_t code) {
  t.add(op, since, [code](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    BH_RETURN_IF_ERROR(require_types(info, {DataType::kFloat32}, {0}));
    const ir::Node& n = info.node;
    float alpha = 0, beta = 0;
    switch (code) {
      case 12: alpha = n.attr_float("alpha", 0.2f); beta = n.attr_float("beta", 0.5f); break;  // HardSigmoid
      case 14: alpha = n.attr_float("alpha", 0.01f); break;                                      // LeakyRelu
      case 16: alpha = n.attr_float("alpha", 1.0f); break;                                       // Elu
      case 15:                                                                                     // Clip
        if (n.opset < 11) {
          alpha = n.attr_float("min", -std::numeric_limits<float>::infinity());
          beta = n.attr_float("max", std::numeric_limits<float>::infinity());
        } else {
          BH_ASSIGN_OR_RETURN(alpha, constant_scalar(info, 1, -std::numeric_limits<float>::infinity()));
          BH_ASSIGN_OR_RETURN(beta, constant_scalar(info, 2, std::numeric_limits<float>::infinity()));
        }
        break;
      case 20:  // Gelu: only the exact form
        if (const ir::Attribute* a = n.attr("approximate"); a && a->s != "none")
          return unsupported(info.where() + "the Vulkan Gelu has no tanh approximation");
        break;
      default: break;
    }
    return std::unique_ptr<Kernel>(std::make_unique<UnaryKernel>(code, alpha, beta));
  });
}

void add_binary(KernelTable& t, const char* op, int since, uint32_t code) {
  t.add(op, since, [code](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    if (info.node.inputs.size() != 2)
      return unsupported(info.where() + "the Vulkan kernel takes exactly two inputs");
    // Before opset 7 a 1-D slope applied per channel (PRelu) and broadcasting was an
    // attribute: the CPU keeps those rules.
    if (info.node.opset < 7) return unsupported(info.where() + "opset < 7 broadcasting rules run on the CPU");
    BH_RETURN_IF_ERROR(require_types(info, {DataType::kFloat32}, {0, 1}));
    return std::unique_ptr<Kernel>(std::make_unique<BinaryKernel>(code));
  });
}

}  // namespace

void add_elementwise_kernels(KernelTable& t) {
  const struct {
    const char* op;
    uint32_t code;
  } unary[] = {{"Relu", 0},       {"Sigmoid", 1},     {"Tanh", 2},   {"Exp", 3},       {"Log", 4},
               {"Neg", 5},        {"Abs", 6},         {"Sqrt", 7},   {"Reciprocal", 8}, {"Floor", 9},
               {"Ceil", 10},      {"Erf", 11},        {"HardSigmoid", 12}, {"HardSwish", 13}, {"LeakyRelu", 14},
               {"Clip", 15},      {"Elu", 16},        {"Softplus", 17}, {"Sin", 18},   {"Cos", 19},
               {"Gelu", 20},      {"Mish", 22},       {"Sign", 23},  {"Round", 24}};
  for (const auto& u : unary) add_unary(t, u.op, 1, u.code);
  const struct {
    const char* op;
    uint32_t code;
  } binary[] = {{"Add", 0}, {"Sub", 1}, {"Mul", 2}, {"Div", 3}, {"Pow", 4}, {"Max", 5}, {"Min", 6}, {"PRelu", 7}};
  for (const auto& b : binary) add_binary(t, b.op, 1, b.code);
}

}  // namespace bulkhead::vulkan
