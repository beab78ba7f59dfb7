// Channel-blocked layout for chains of convolutions on the CPU (issue 5).
//
// oneDNN's fastest float32 convolution kernels (Winograd, 1x1, direct, depthwise) read and
// write "nChw16c": a [N, C, H, W] tensor stored as [N, ceil(C/16), H, W, 16], channels
// padded with zeros to a multiple of 16. A Conv that takes and returns plain NCHW pays two
// reorders per node. This pass keeps whole chains blocked and reorders only at their ends.
//
// A blocked value is an ordinary float32 tensor of the physical shape [N, Cb, H, W, 16]
// (Cb = ceil(C/16)) under a new name ("<name>__nChw16c"); the graph's value_info records
// that shape. What runs on it:
//   - Conv (2-D, float32): attributes _x_layout / _y_layout = "nChw16c" when its input /
//     output is blocked; a fused summand (input 3) has the output's layout;
//   - MaxPool / AveragePool / GlobalAveragePool / GlobalMaxPool: _layout = "nChw16c"
//     (input and output blocked; padded channels are pooled like any other);
//   - BatchNormalization in inference with constant per-channel parameters (a fused
//     _relu too): _layout = "nChw16c"; padded channels come out zero;
//   - Relu, LeakyRelu, Clip, Sigmoid, HardSigmoid, HardSwish, Tanh and Add / Sub / Mul of
//     two blocked tensors (same N and C; the second may be [N, C, 1, 1]) or of a blocked
//     tensor and a one-element constant: as they are — numpy broadcasting on the physical
//     shapes is the same computation. Each keeps a finite padding finite, and a Conv
//     multiplies the padded channels of its input by zero weights;
//   - Concat on the channel axis of blocked tensors whose channel counts are multiples
//     of 16 (no padding inside the result): axis 1 of the physical shape.
//   - Resize in nearest mode with constant scales [1, 1, sh, sw] (not tf_crop_and_resize,
//     no axes or sizes): _layout = "nChw16c" and `channels` = C, when its input is
//     blocked and a reader takes its output blocked (a plain reader would otherwise get
//     the larger output converted instead of the input);
// Conversions are internal nodes of domain "bulkhead": ToBlocked16 (NCHW -> nChw16c) and
// FromBlocked16 (attribute `channels`: C). A chain of element-wise ops that only a
// ToBlocked16 reads (what fused_ops.h recognises: activations, Clip, Mul/Add/Sub by a
// one-element constant), each value of it read once and by no graph output or subgraph,
// is folded into that ToBlocked16 as its `_post_ops` / `_post_args` (as a Conv's, without
// "sum"), which it applies to each converted block: the back part of a split model,
// which applies to its inputs the activation that the whole model fused into a Conv. A plain value that two or more Convs read as X (a graph
// input of 16 or more channels, or what a node writes plain) is converted once, right
// after it is made, and the Convs read it blocked. A blocked value's plain name is still produced
// (by FromBlocked16) when a graph output, a subgraph or an other node reads it; a graph
// output is computed blocked only when some node reads it blocked.
//
// Applied to a session's own graph after optimize_graph, only when every node runs on the
// CPU (the first device of the session is the CPU), and only where value_info gives the
// static channel count.
//
// bfloat16 (LayoutOptions::bf16, SessionOptions::precision "bf16"): every float32 Conv and
// ConvTranspose with constant weights, and every MatMul / Gemm whose B is a constant 2-D
// float32 tensor, gets `_precision` = "bf16" (the kernel computes on bfloat16 inputs and
// weights, float32 sums). A blocked value produced by such a Conv is stored as bfloat16
// (value_info dtype bfloat16; the Conv gets `_y_type` = "bf16") when each of its readers
// takes that: a bf16 Conv reading it as X, a bf16 Conv with a bfloat16 Y reading it as the
// fused summand, or FromBlocked16 (which converts to plain float32). Everything else —
// element-wise ops, pooling, Concat, outputs — keeps float32, so a chain's ends convert
// inside the Conv kernels or FromBlocked16 and no new conversion node is needed.
#pragma once

#include "bulkhead/status.h"
#include "ir/graph.h"

namespace bulkhead::exec {

inline constexpr const char* kLayoutDomain = "bulkhead";
inline constexpr const char* kBlocked16 = "nChw16c";
inline constexpr const char* kNhwc = "nhwc";

struct LayoutStats {
  int blocked_nodes = 0;   // nodes that run on blocked tensors
  int nhwc_nodes = 0;      // nodes that run channels-last (int8 chains, below)
  int conversions = 0;     // ToBlocked16 / FromBlocked16 / ToNhwc / FromNhwc nodes inserted
  int folded_nodes = 0;    // element-wise nodes folded into a ToBlocked16 (below)
  int bf16_nodes = 0;      // nodes computing in bfloat16 (LayoutOptions::bf16)
  int bf16_values = 0;     // blocked values stored as bfloat16
};

struct LayoutOptions {
  // Weights must be constant: an initializer that is also a graph input is a default the
  // caller may override, unless this is set (IR < 4 models, which list every initializer
  // as an input).
  bool input_defaults_constant = false;
  // Convolutions and products with constant weights in bfloat16 (see above).
  bool bf16 = false;
};

// Rewrites `g` (a top-level graph). Never fails on a graph it cannot improve: it leaves
// those parts as they are. Both the nChw16c chains above and the channels-last int8
// chains below.
Result<LayoutStats> block_channels(ir::Graph& g, const LayoutOptions& options);

// Channels-last chains of int8 convolutions (layout_nhwc.cc). oneDNN's int8 convolutions
// (VNNI, AMX) read and write NHWC; a QLinearConv between plain NCHW tensors paid a
// reorder of its input and of its output (ResNet-50's QDQ form: 7.8 of its 21 ms in
// QLinearConv). A channels-last value is the tensor stored as [N, H, W, C] under the name
// "<name>__nhwc" (value_info records the physical shape). What runs on it:
//   - QLinearConv (2-D, uint8/int8 X, constant weights, scales and zero points):
//     attributes _x_layout / _y_layout = "nhwc";
//   - DequantizeLinear / QuantizeLinear with one scale and zero point, Relu, LeakyRelu,
//     Clip, Sigmoid, HardSigmoid, HardSwish, Tanh, and the fused QLinearEltwise of one
//     input (exec/qdq_eltwise.h): element-wise, as they are;
//   - MaxPool over a uint8/int8 rank-4 tensor (the QDQ pair around it folded away by
//     exec/qdq_eltwise.h) and QLinearGlobalAveragePool: attribute _layout = "nhwc", X and
//     Y both channels-last; QLinearConvTranspose as QLinearConv;
//   - Add, Sub, Mul, Div, Sum of two inputs, and QLinearEltwise of two or more, when one
//     operand is channels-last: numpy broadcasting commutes with permuting all operands
//     alike, so each other one is taken as it is (a one-element constant), permuted once
//     (another constant), through a Reshape (a [N, C, 1, 1] value: the same bytes as
//     [N, 1, 1, C]) or converted (ToNhwc).
// Plain readers of a channels-last value get it from a FromNhwc conversion (domain
// "bulkhead", uint8, int8 and float32). Only where value_info gives the rank-4 shape with
// a fixed channel count.
LayoutStats nhwc_int8_chains(ir::Graph& g, bool input_defaults_constant);
inline Result<LayoutStats> block_channels(ir::Graph& g, bool input_defaults_constant = false) {
  return block_channels(g, LayoutOptions{input_defaults_constant, false});
}

}  // namespace bulkhead::exec
