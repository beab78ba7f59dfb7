// QLinearGemm, an internal operator (domain "bulkhead"): a QDQ Gemm as one int8 matrix
// product. The optimiser makes it (exec/optimize.h) for CPU sessions from
//
//   DequantizeLinear(aq, as, az) → Gemm(·, DequantizeLinear(bq, bs, bz)
//                                       [, DequantizeLinear(cq int32 [N], as·bs)]) → QuantizeLinear(·, ys, yz)
//
// with transA 0, alpha 1 and beta 1; a B written transposed (transB 1, as quantisers write
// a fully connected layer) is stored transposed once, when the graph is optimised.
//
// QLinearGemm(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point
//             [, bias]) -> y
//   - the first eight inputs and y: exactly QLinearMatMul's (opset 10) — b [K, N], its
//     scale and zero point one value or one per column;
//   - bias: int32 [N], in units of a_scale * b_scale (zero point 0), added to each row's
//     exact integer sums before the requantisation: y = saturate(round((sum + bias) *
//     a_scale * b_scale / y_scale) + y_zero_point).
// Nothing outside a session's own optimised graph writes or reads this node.
#pragma once

namespace bulkhead {

inline constexpr const char* kQLinearGemm = "QLinearGemm";
inline constexpr const char* kQLinearGemmDomain = "bulkhead";

}  // namespace bulkhead
