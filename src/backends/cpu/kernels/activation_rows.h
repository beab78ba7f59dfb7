// The float32 Sigmoid and Tanh of the CPU's element-wise kernels, over rows (defined in
// elementwise.cc, with that file's compile flags), for kernels that must give exactly
// their values: QLinearEltwise (quant_eltwise.cc). y[i] = f(x[i]) for i < n; x and y do
// not overlap. Thread-safe.
#pragma once

#include <cstdint>

namespace bulkhead::cpu {

void sigmoid_rows_f32(const float* __restrict x, float* __restrict y, int64_t n);
void tanh_rows_f32(const float* __restrict x, float* __restrict y, int64_t n);

}  // namespace bulkhead::cpu
