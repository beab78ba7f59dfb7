// The CPU's int8 matrix product on oneDNN (dnnl_int8_matmul.cc), shared by the kernel
// families that register MatMulInteger (misc.cc), QLinearMatMul and QLinearGemm (quantize.cc).
#pragma once

#include <functional>

#include "backend/kernel.h"

namespace bulkhead::cpu {

// Which node an int8 matrix-product kernel runs: MatMulInteger (int32 sums), QLinearMatMul
// (requantised), or the internal QLinearGemm (QLinearMatMul's inputs and an int32 bias [N]
// added to the sums before the requantisation: backend/qlinear_gemm.h).
enum class Int8MatMulKind { kInteger, kQLinear, kQLinearGemm };

// The kernel for `kind`: oneDNN where it applies, else `reference` (the exact loop, which
// also reports every error). BULKHEAD_CPU_INT8=0 keeps the reference for every node (to
// compare results).
Result<std::unique_ptr<Kernel>> make_int8_matmul(const KernelInfo& info, Int8MatMulKind kind, LambdaKernel::Fn reference);

// The internal QLinearConvTranspose (backend/qlinear_conv_transpose.h): one int8 product
// where w is constant, else (and with BULKHEAD_CPU_INT8=0) the reference loops.
Result<std::unique_ptr<Kernel>> make_qlinear_conv_transpose(const KernelInfo& info);

// Constant 8-bit weights less their zero point (`zp`: null, one value, or one per channel:
// element i's is zp[(i / run) % zp.numel()] — run = elements per output channel for a
// Conv's [M, ...] weights, 1 for a MatMul's [K, N]), in int8 — oneDNN's weight type — when
// every value fits: then `*out` holds them and `*most` the largest magnitude. Nothing is
// set otherwise.
void shift_to_int8(const Tensor& w, const Tensor* zp, int64_t run, Tensor* out, int* most);

// The fp32 path of the int8 Conv and MatMul kernels, where oneDNN's int8 sums are not exact
// (int8_sums_exact, dnnl_common.h): the same integers as float32, whose sums are exact
// below 2^24.
// - float_weights: `w_s8` (shift_to_int8's, max magnitude `w_max`) as float32, interned in
//   `shared` when given; undefined when w_s8 is, or when the int8 sums are exact for it.
// - shifted_to_float: x - z for the `n` uint8 or int8 values `x` of type `t`, into `out`.
// - largest_shifted: the largest |x - z| of those values (the fp32 path is exact while
//   K * that * w_max stays below 2^24).
// - float_sums_to_int32: sums that are exact integers, as int32.
Tensor float_weights(const Tensor& w_s8, int w_max, SharedConstants* shared);
void shifted_to_float(const void* x, DataType t, int64_t n, int32_t z, float* out, int threads);
int64_t largest_shifted(const void* x, DataType t, int64_t n, int32_t z);
void float_sums_to_int32(const float* in, int32_t* out, int64_t n, int threads);

}  // namespace bulkhead::cpu
