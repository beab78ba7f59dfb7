// Graph rewrites applied to a session's own copy of the graph before compile().
//
// Every rewrite keeps the graph's results (up to float rounding of folded weights) and
// fires only when it is safe: each intermediate value it removes has exactly the
// consumers the pattern expects, is not a graph output, is not read by a subgraph, and
// the constants it folds are initializers that are not overridable graph inputs.
//
//   - ConstantOfShape with a constant shape becomes an initializer;
//   - Identity and inference Dropout are removed;
//   - Conv followed by BatchNormalization (inference), or by Mul/Add/Sub with a scalar
//     or per-output-channel constant, is folded into the Conv's weights and a new bias
//     (the weights are scaled in place when that Conv is all that reads them, else copied);
//   - QDQ convolutions — DequantizeLinear of x, w (and an int32 bias of scale
//     x_scale*w_scale) → Conv [→ Relu that clips nothing] → QuantizeLinear, with constant
//     scales and zero points — become one QLinearConv on the int8 data (within one
//     quantisation step of the float path); DequantizeLinear of a and a constant 2-D b →
//     MatMul → QuantizeLinear likewise becomes one QLinearMatMul; when `cpu_ops`, a
//     ConvTranspose whose kernel equals its stride becomes the CPU's internal
//     QLinearConvTranspose (backend/qlinear_conv_transpose.h), and a
//     Gemm with transA 0, alpha 1 and beta 1 — its int32 bias of scale a_scale*b_scale
//     included, a transposed b stored [K, N] — becomes the CPU's internal QLinearGemm
//     (backend/qlinear_gemm.h);
//   - the element-wise chain that follows a Conv is fused into it as post-ops, in order:
//     Relu, LeakyRelu, Clip, HardSigmoid, HardSwish (the op, or written out as
//     x*Clip(x+3,0,6)/6 or x*HardSigmoid(x)), Sigmoid, Mul/Add by a scalar constant
//     (a linear op), and one Add/Sum of another tensor (a residual, "sum");
//   - HardSwish written out on a value no Conv took (a graph input, an Add's output)
//     becomes one HardSwish node.
//
// Fused post-ops are internal attributes of the Conv node, read by the CPU Conv kernel:
//   _post_ops  (strings): "relu", "leaky_relu", "clip", "hardsigmoid", "hardswish",
//                         "sigmoid", "linear", "sum" — applied in order to the output;
//   _post_args (floats):  two per op (alpha, beta): leaky_relu alpha; clip min, max;
//                         hardsigmoid alpha, beta; linear alpha*x + beta;
//   _sum_input (string):  the tensor added by "sum", also the Conv's input 3 (input 2,
//                         the bias, is "" when absent).
// The fused Conv takes the place of the last node of its chain and writes that node's
// output, so the graph stays topologically sorted.
#pragma once

#include "bulkhead/status.h"
#include "ir/graph.h"

namespace bulkhead::exec {

// Rewrites `g` (a top-level graph; subgraphs are left as they are). An initializer that is
// also a graph input is a default the caller may override, and is not folded, unless
// `input_defaults_constant` (IR < 4 models, which list every initializer as an input).
// `cpu_ops`: every node will run on the CPU backend, which also has internal operators
// (QLinearGemm) the rewrites may use.
Status optimize_graph(ir::Graph& g, bool input_defaults_constant = false, bool cpu_ops = false);

}  // namespace bulkhead::exec
