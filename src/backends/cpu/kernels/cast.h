// Element conversion between any two element types (elementwise_cast.cc), for Cast,
// CastLike and the kernels that compute in another type than they store.
#pragma once

#include <string>

#include "bulkhead/dtype.h"
#include "bulkhead/status.h"
#include "bulkhead/tensor.h"

namespace bulkhead::cpu::ew {

// ONNX Cast's `saturate` (float8 targets) and `round_mode` (float8e8m0 target).
struct CastOptions {
  bool saturate = true;
  E8M0Round e8m0_round = E8M0Round::kUp;
};

// Converts src into dst (same element count, host memory) with NumPy's astype rules for the
// standard types (see elementwise_cast.cc) and ONNX's for the small floats and sub-byte
// integers: those wrap like the other integers (float -> int4 truncates, then keeps the low
// bits).
Status convert_into(const Tensor& src, const Tensor& dst, int threads, const std::string& where,
                    const CastOptions& options);
Status convert_into(const Tensor& src, const Tensor& dst, int threads, const std::string& where);

}  // namespace bulkhead::cpu::ew
