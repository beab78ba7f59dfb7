#include "exec/fused_ops.h"

#include <limits>

namespace bulkhead::exec {

bool scalar_f32(const ConstantLookup& constant, const std::string& name, int max_rank, float* v) {
  const Tensor* t = name.empty() ? nullptr : constant(name);
  if (!t || t->dtype() != DataType::kFloat32 || t->numel() != 1 || t->rank() > max_rank || !t->on_host()) return false;
  *v = t->data<float>()[0];
  return true;
}

bool clip_bounds(const ir::Node& n, const ConstantLookup& constant, float* lo, float* hi) {
  *lo = -std::numeric_limits<float>::infinity();
  *hi = std::numeric_limits<float>::infinity();
  if (n.opset < 11) {
    *lo = n.attr_float("min", *lo);
    *hi = n.attr_float("max", *hi);
    return n.inputs.size() == 1;
  }
  if (n.inputs.size() > 1 && !n.inputs[1].empty() && !scalar_f32(constant, n.inputs[1], 0, lo)) return false;
  if (n.inputs.size() > 2 && !n.inputs[2].empty() && !scalar_f32(constant, n.inputs[2], 0, hi)) return false;
  return n.inputs.size() <= 3;
}

std::optional<FusedOp> unary_fused_op(const ir::Node& n, const std::string& x, int rank, const ConstantLookup& constant) {
  if (n.inputs.empty()) return std::nullopt;
  if (n.inputs[0] == x && n.inputs.size() == 1) {
    if (n.op_type == "Relu") return FusedOp{"relu"};
    if (n.op_type == "LeakyRelu") return FusedOp{"leaky_relu", n.attr_float("alpha", 0.01f)};
    if (n.op_type == "HardSigmoid") return FusedOp{"hardsigmoid", n.attr_float("alpha", 0.2f), n.attr_float("beta", 0.5f)};
    if (n.op_type == "HardSwish") return FusedOp{"hardswish"};
    if (n.op_type == "Sigmoid") return FusedOp{"sigmoid"};
  }
  if (n.op_type == "Clip" && n.inputs[0] == x) {
    FusedOp c{"clip"};
    if (!clip_bounds(n, constant, &c.a, &c.b)) return std::nullopt;
    return c;
  }
  if (n.inputs.size() != 2 || n.inputs[0] == n.inputs[1] || (n.inputs[0] != x && n.inputs[1] != x)) return std::nullopt;
  const std::string& other = n.inputs[0] == x ? n.inputs[1] : n.inputs[0];
  float s;
  if ((n.op_type == "Mul" || n.op_type == "Add" || (n.op_type == "Sub" && n.inputs[0] == x)) &&
      scalar_f32(constant, other, rank, &s)) {
    if (n.op_type == "Mul") return FusedOp{"linear", s, 0.f};
    return FusedOp{"linear", 1.f, n.op_type == "Sub" ? -s : s};
  }
  return std::nullopt;
}

void add_fused_op(std::vector<std::string>& ops, std::vector<float>& args, const FusedOp& op, bool prepend) {
  const bool linear = std::string(op.op) == "linear";
  if (linear && !ops.empty() && (prepend ? ops.front() : ops.back()) == "linear") {
    // f(x) = a2 (a1 x + b1) + b2, with (a1, b1) the op applied first.
    float& a = prepend ? args[0] : args[args.size() - 2];
    float& b = prepend ? args[1] : args.back();
    if (prepend) {  // op first, then (a, b)
      b = a * op.b + b;
      a = a * op.a;
    } else {  // (a, b) first, then op
      b = op.a * b + op.b;
      a = op.a * a;
    }
    return;
  }
  if (prepend) {
    ops.insert(ops.begin(), op.op);
    args.insert(args.begin(), {op.a, op.b});
  } else {
    ops.push_back(op.op);
    args.push_back(op.a);
    args.push_back(op.b);
  }
}

void set_fused_ops(ir::Node& n, const std::vector<std::string>& ops, const std::vector<float>& args) {
  ir::Attribute a;
  a.type = ir::AttrType::kStrings;
  a.strings = ops;
  n.attrs["_post_ops"] = a;
  ir::Attribute f;
  f.type = ir::AttrType::kFloats;
  f.floats = args;
  n.attrs["_post_args"] = f;
}

}  // namespace bulkhead::exec
