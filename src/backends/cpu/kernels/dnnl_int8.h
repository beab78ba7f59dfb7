// The CPU's int8 matrix product on oneDNN (dnnl_int8_matmul.cc), shared by the kernel
// families that register MatMulInteger (misc.cc) and QLinearMatMul (quantize.cc).
#pragma once

#include <functional>

#include "backend/kernel.h"

namespace bulkhead::cpu {

// A MatMulInteger (`qlinear` false) or QLinearMatMul kernel: oneDNN where it applies,
// else `reference` (the exact loop, which also reports every error).
// BULKHEAD_CPU_INT8=0 keeps the reference for every node (to compare results).
Result<std::unique_ptr<Kernel>> make_int8_matmul(const KernelInfo& info, bool qlinear, LambdaKernel::Fn reference);

// Constant 8-bit weights less their zero point (`zp`: null, one value, or one per channel,
// element i's at zp_index(i)), in int8 — oneDNN's weight type — when every value fits:
// then `*out` holds them and `*most` the largest magnitude. Nothing is set otherwise.
void shift_to_int8(const Tensor& w, const Tensor* zp, const std::function<int64_t(int64_t)>& zp_index, Tensor* out, int* most);

}  // namespace bulkhead::cpu
