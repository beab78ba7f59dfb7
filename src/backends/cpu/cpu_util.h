// Small helpers shared by CPU kernels: parallel loops, axis handling, broadcasting,
// dtype dispatch. Header-only, no state.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/kernel.h"
#include "bulkhead/dtype.h"

namespace bulkhead::cpu {

// Calls fn(begin, end) over [0, n) split across up to `threads` threads. Chunks are at
// least `grain` items so small loops stay on the calling thread.
// `threads` is capped by the run's OpenMP thread count (the cores the run was granted,
// core_budget.h).
//
// The loop is cut into up to kPiecesPerThread pieces per thread, claimed one at a time
// (schedule(dynamic)): on a machine where another process takes one of the cores, the
// descheduled thread holds up only the piece it is on while the others take the rest,
// where a static split would make the whole loop wait for its share. Pieces are
// contiguous ranges, so each fn call still streams through its own part of memory.
inline constexpr int64_t kPiecesPerThread = 4;

template <typename Fn>
void parallel_for(int threads, int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  threads = std::min(threads, omp_get_max_threads());
  const int64_t most = std::max<int64_t>(1, n / std::max<int64_t>(grain, 1));
  const int64_t team = std::min<int64_t>(threads, most);
  if (team <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  const int64_t pieces = std::min<int64_t>(most, team * kPiecesPerThread);
#pragma omp parallel for num_threads(static_cast<int>(team)) schedule(dynamic, 1)
  for (int64_t c = 0; c < pieces; ++c) {
    int64_t b = n * c / pieces, e = n * (c + 1) / pieces;
    fn(b, e);
  }
}

// Runs the scope on one OpenMP thread when `on` (oneDNN and parallel_for read the
// calling thread's count), then puts the count back. For work too small to be worth a
// fork and a join, and the cross-core traffic of handing half a tensor to another core.
class SerialScope {
 public:
  explicit SerialScope(bool on) : saved_(on ? omp_get_max_threads() : 1) {
    if (saved_ > 1) omp_set_num_threads(1);
  }
  ~SerialScope() {
    if (saved_ > 1) omp_set_num_threads(saved_);
  }
  SerialScope(const SerialScope&) = delete;
  SerialScope& operator=(const SerialScope&) = delete;

 private:
  int saved_;
};

// Normalises a possibly negative axis against `rank`; error names the node.
inline Result<int> normalize_axis(int64_t axis, int rank, const std::string& where) {
  if (axis < -rank || axis >= std::max(rank, 1)) {
    if (!(rank == 0 && (axis == 0 || axis == -1)))
      return invalid_argument(where + "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

// Row-major strides in elements.
inline std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int i = static_cast<int>(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

// Numpy-style multidirectional broadcast of two shapes.
inline Result<Shape> broadcast_shapes(const Shape& a, const Shape& b, const std::string& where) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1)
      return invalid_argument(where + "shapes " + shape_to_string(a) + " and " + shape_to_string(b) + " cannot be broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Strides (in elements) for reading `in` as if broadcast to `out` (0 on broadcast dims).
inline std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out) {
  std::vector<int64_t> st(out.size(), 0);
  auto s = strides_of(in);
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) st[off + i] = in[i] == 1 ? 0 : s[i];
  return st;
}

// Reads an int64 or int32 tensor's elements as int64 (shape/axes/indices inputs).
inline std::vector<int64_t> read_int_tensor(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  if (v.empty()) return v;
  if (t.dtype() == DataType::kInt64) std::memcpy(v.data(), t.raw(), v.size() * 8);
  else if (t.dtype() == DataType::kInt32) for (size_t i = 0; i < v.size(); ++i) v[i] = t.data<int32_t>()[i];
  return v;
}

// Element-size dispatch for ops that move elements without computing on them: calls
// f(T{}) with T an unsigned integer of the element size of `dt`, or std::string.
template <class F>
Status by_elem_size(DataType dt, const std::string& where, F&& f) {
  if (dt == DataType::kString) return f(std::string());
  switch (dtype_size(dt)) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    case 8: return f(uint64_t{});
    default: return unsupported(where + "unsupported element type " + dtype_name(dt));
  }
}

// The elements of `t` as T (the string array for string tensors).
template <class T>
T* elems(const Tensor& t) {
  if constexpr (std::is_same_v<T, std::string>) return t.strings();
  else return t.data<T>();
}

template <class T>
inline void copy_elems(const T* s, int64_t n, T* d) {
  if (n <= 0) return;
  if constexpr (std::is_trivially_copyable_v<T>) std::memcpy(d, s, static_cast<size_t>(n) * sizeof(T));
  else std::copy_n(s, n, d);
}

// Error unless `t` is readable by the CPU.
inline Status need_host(const Tensor& t, const std::string& where, const char* what) {
  if (t.dtype() == DataType::kString) return Status::ok();
  if (t.numel() > 0 && t.raw() == nullptr) return invalid_argument(where + what + " is not in host memory");
  return Status::ok();
}

// Input `i`, which must be present and readable by the CPU; errors name it (`what`).
inline Result<const Tensor*> required_input(KernelContext& ctx, int i, const std::string& what) {
  const Tensor* t = ctx.input(i);
  if (!t) return invalid_argument(ctx.where() + "missing required input " + std::to_string(i) + " (" + what + ")");
  if (!t->raw() && t->numel() > 0)
    return invalid_argument(ctx.where() + "input " + std::to_string(i) + " (" + what + ") is not in host memory");
  return t;
}

// An optional input: nullptr when omitted, else as required_input.
inline Result<const Tensor*> optional_input(KernelContext& ctx, int i, const std::string& what) {
  if (!ctx.has_input(i)) return static_cast<const Tensor*>(nullptr);
  return required_input(ctx, i, what);
}

}  // namespace bulkhead::cpu

// Dispatch helpers: BH_DISPATCH_FLOAT(dtype, T, body) runs `body` with T bound to the
// C++ type for float32/float64; others return kUnsupported naming the type.
#define BH_TYPE_CASE(enum_value, ctype, ...) \
  case ::bulkhead::DataType::enum_value: {   \
    using T = ctype;                         \
    __VA_ARGS__;                             \
    break;                                   \
  }
#define BH_UNSUPPORTED_DTYPE(where, dt) \
  return ::bulkhead::unsupported((where) + std::string("unsupported element type ") + ::bulkhead::dtype_name(dt))
