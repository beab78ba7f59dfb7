// Element-wise ops that kernels apply to their results (`_post_ops` / `_post_args`,
// optimize.h): which node computes one, shared by the passes that fold chains of them
// into a Conv (optimize.cc) and into a conversion to the blocked layout (layout.cc).
// Free functions; thread-safe (no state).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bulkhead/tensor.h"
#include "ir/graph.h"

namespace bulkhead::exec {

struct FusedOp {
  const char* op = "";  // "relu", "leaky_relu", "clip", "hardsigmoid", "hardswish", "sigmoid", "linear"
  float a = 0, b = 0;   // as _post_args: leaky_relu alpha; clip min, max; hardsigmoid alpha, beta; linear a*x + b
};

// The graph's constants: an initializer that the caller cannot override, or null.
using ConstantLookup = std::function<const Tensor*(const std::string&)>;

// The value of a one-element float32 constant of rank <= `max_rank`.
bool scalar_f32(const ConstantLookup& constant, const std::string& name, int max_rank, float* v);
// Clip's bounds: attributes before opset 11, optional constant scalar inputs since
// (absent: unbounded). False when a bound is not such a constant.
bool clip_bounds(const ir::Node& n, const ConstantLookup& constant, float* lo, float* hi);

// What `n` computes from its activation input `x` as one fused op, or nullopt: Relu,
// LeakyRelu, HardSigmoid, HardSwish, Sigmoid, Clip with constant scalar bounds, and
// Mul / Add by (or Sub of) a one-element float32 constant of rank <= `rank` (so that it
// broadcasts nothing), as a linear op. The caller checks that `n` is a standard-domain
// node whose first output alone is used.
std::optional<FusedOp> unary_fused_op(const ir::Node& n, const std::string& x, int rank, const ConstantLookup& constant);

// Appends `op` to a chain (`ops`, two `args` each), composing a linear op with a linear
// op before it; `prepend` puts it first instead (a chain walked from its end).
void add_fused_op(std::vector<std::string>& ops, std::vector<float>& args, const FusedOp& op, bool prepend = false);

// Sets `n`'s `_post_ops` / `_post_args` to the chain.
void set_fused_ops(ir::Node& n, const std::vector<std::string>& ops, const std::vector<float>& args);

}  // namespace bulkhead::exec
