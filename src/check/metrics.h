// Error metrics of one output against its reference, and tensor hashing.
// Pure functions over host tensors; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "bulkhead/status.h"
#include "bulkhead/tensor.h"

namespace bulkhead::check {

struct Metrics {
  int64_t count = 0;
  double max_abs = 0;   // max |out - ref| over elements where both are finite
  double rmse = 0;
  double cosine = 1;    // of out and ref as vectors (1 when both are all zeros)
  double psnr = 0;      // dB, peak = max |ref|; +inf when identical (JSON "inf", HTML "exact")
  double nan_frac = 0, inf_frac = 0, zero_frac = 0;         // of the output
  double ref_nan_frac = 0, ref_inf_frac = 0;                // of the reference
  double ref_max_abs = 0;
  // Elements where exactly one of out/ref is NaN, or their Infs differ: never tolerated.
  int64_t nonfinite_mismatch = 0;
  bool shape_mismatch = false;
  std::string note;  // e.g. "shape float32[1,2] vs float32[1,3]"
};

// Compares `out` with `ref` element by element (any numeric or bool type, converted to
// double). Host tensors only.
Metrics compare(const Tensor& out, const Tensor& ref);

// SHA-256 of a tensor's element type, shape and bytes (strings: their contents).
std::string tensor_hash(const Tensor& t);

// Element `i` of a numeric or bool host tensor as a double.
double element_as_double(const Tensor& t, int64_t i);

}  // namespace bulkhead::check
