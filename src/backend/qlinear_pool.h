// QLinearGlobalAveragePool, an internal operator (domain "bulkhead"): a QDQ model's
// DequantizeLinear → GlobalAveragePool → QuantizeLinear (a classifier's pooling, a
// squeeze-and-excitation block's) as one pass over the quantised tensor. The QDQ pass
// makes it (exec/qdq_eltwise.h) for CPU sessions.
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
#pragma once

namespace bulkhead {

inline constexpr const char* kQLinearGlobalAveragePool = "QLinearGlobalAveragePool";
inline constexpr const char* kQLinearPoolDomain = "bulkhead";

}  // namespace bulkhead
