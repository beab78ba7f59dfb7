// QLinearGlobalAveragePool and QLinearAveragePool, internal operators (domain
// "bulkhead"): a QDQ model's DequantizeLinear → GlobalAveragePool / AveragePool →
// QuantizeLinear (a classifier's pooling, a squeeze-and-excitation block's, DenseNet's
// transitions) as one pass over the quantised tensor. The QDQ pass makes them
// (exec/qdq_eltwise.h) for CPU sessions.
//
// QLinearGlobalAveragePool(X: uint8/int8 [N, C, spatial...]) -> Y [N, C, 1, ...] of
// `_y_type`, attributes:
//   _x_scale (float), _x_zero_point (int): X's dequantisation;
//   _y_scale (float), _y_zero_point (int), _y_type (int, a DataType: uint8 or int8);
//   _layout (string, optional): "nhwc" where the layout pass keeps X channels-last
//   ([N, H, W, C]; Y is then [N, 1, 1, C], the same bytes as [N, C, 1, 1]).
// Y[n, c] = saturate(round((sum of X[n, c, ...] - count · x_zero_point) · x_scale / count
//           / y_scale) + y_zero_point), the sum exact, the rest in double, rounded half to
// even: within one quantisation step of the float path (which rounds each dequantised
// value to float32 first).
//
// QLinearAveragePool(X: uint8/int8 [N, C, spatial...]) -> Y: AveragePool's attributes
// (kernel_shape, strides, pads, auto_pad, ceil_mode, count_include_pad, dilations) and the
// same five quantisation attributes (no _layout: NCHW only). Each output is the exact sum
// of (X - x_zero_point) over the window's positions inside X, times x_scale, over
// AveragePool's divisor, over y_scale, rounded half to even, plus y_zero_point; a window
// with no position gives y_zero_point (the float path's NaN, quantised).
#pragma once

namespace bulkhead {

inline constexpr const char* kQLinearGlobalAveragePool = "QLinearGlobalAveragePool";
inline constexpr const char* kQLinearAveragePool = "QLinearAveragePool";
inline constexpr const char* kQLinearPoolDomain = "bulkhead";

}  // namespace bulkhead
