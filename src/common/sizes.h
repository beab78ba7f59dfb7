// Element and byte counts of shapes that came from outside (a file, a message, an option)
// or were computed from one, with the one error every caller reports. The unchecked
// shape_numel() is for tensors that already exist.
#pragma once

#include <string>

#include "bulkhead/dtype.h"
#include "bulkhead/status.h"

namespace bulkhead {

// Why `s` has no valid size: a negative dimension, or a count that overflows.
inline Status shape_size_error(DataType t, const Shape& s) {
  for (int64_t d : s)
    if (d < 0) return invalid_argument(dtype_name(t) + shape_to_string(s) + " has a negative dimension");
  return invalid_argument(dtype_name(t) + shape_to_string(s) + " is too large: its size overflows 64 bits");
}

// a * b for dimensions computed from input values or attributes (Tile's repeats, a
// Resize's scales): false when it overflows int64.
inline bool checked_mul(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }

// The bytes a tensor of type `t` and shape `s` occupies.
inline Result<size_t> tensor_nbytes(DataType t, const Shape& s) {
  size_t n = 0;
  if (checked_nbytes(t, s, &n)) return n;
  return shape_size_error(t, s);
}

// The element count of a tensor of type `t` and shape `s`.
inline Result<int64_t> tensor_numel(DataType t, const Shape& s) {
  int64_t n = 0;
  if (checked_numel(s, &n)) return n;
  return shape_size_error(t, s);
}

}  // namespace bulkhead
