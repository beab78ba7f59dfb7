// The CPU's int8 matrix product on oneDNN (dnnl_int8_matmul.cc), shared by the kernel
// families that register MatMulInteger (misc.cc) and QLinearMatMul (quantize.cc).
#pragma once

#include "backend/kernel.h"

namespace bulkhead::cpu {

// A MatMulInteger (`qlinear` false) or QLinearMatMul kernel: oneDNN where it applies,
// else `reference` (the exact loop, which also reports every error).
// BULKHEAD_CPU_INT8=0 keeps the reference for every node (to compare results).
Result<std::unique_ptr<Kernel>> make_int8_matmul(const KernelInfo& info, bool qlinear, LambdaKernel::Fn reference);

}  // namespace bulkhead::cpu
