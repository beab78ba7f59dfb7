// QLinearConvTranspose, an internal operator (domain "bulkhead"): a QDQ ConvTranspose whose
// kernel equals its stride (each input pixel writes its own kh x kw block of outputs: an
// upsampling layer, as in det's head) as one int8 product. The optimiser makes it
// (exec/optimize.h) for CPU sessions from
//
//   DequantizeLinear(xq, xs, xz) ┐
//   DequantizeLinear(wq, ws, wz) ┼ ConvTranspose [→ Relu that clips nothing] → QuantizeLinear(·, ys, yz)
//   [DequantizeLinear(bq, xs·ws)]┘
//
// QLinearConvTranspose(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
//                      y_zero_point [, B]) -> y
//   - x: uint8 / int8 [N, C, H, W]; w: uint8 / int8 [C, M, kh, kw]; scales float32, zero
//     points of their tensor's type; x and y per tensor, w per tensor or per output
//     channel ([M], ConvTranspose's weight axis 1); B: int32 [M] in units of
//     x_scale * w_scale (zero point 0);
//   - y [N, M, H·kh, W·kw] of y_zero_point's type:
//       y[n, m, h·kh + i, w·kw + j] = saturate(round((sum over c of (x[n, c, h, w] - xz)
//                                     · (w[c, m, i, j] - wz[m]) + B[m]) · xs · ws[m] / ys) + yz);
//   - attributes: ConvTranspose's, which must describe exactly that geometry — group 1,
//     strides = kernel_shape (2-D), no pads, dilations 1, no output_padding or output_shape
//     other than the one above; and `_x_layout` / `_y_layout` = "nhwc" where the layout pass
//     keeps x or y channels-last ([N, H, W, C], exec/layout.h), as for QLinearConv.
// Nothing outside a session's own optimised graph writes or reads this node.
#pragma once

namespace bulkhead {

inline constexpr const char* kQLinearConvTranspose = "QLinearConvTranspose";
inline constexpr const char* kQLinearConvTransposeDomain = "bulkhead";

}  // namespace bulkhead
