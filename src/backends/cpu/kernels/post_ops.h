// Fused element-wise post-ops, as the graph passes set them (exec/optimize.h: a Conv's
// `_post_ops` / `_post_args`; exec/layout.h: ToBlocked16's): applied in order to a
// kernel's output. Free functions; thread-safe (no state).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backends/cpu/cpu_util.h"
#include "bulkhead/status.h"
#include "ir/graph.h"

namespace bulkhead::cpu {

// A Conv's: the sgemm and depthwise paths apply them per row while the row is hot;
// oneDNN applies them as primitive post-ops; every other path applies them afterwards.
// ToBlocked16 applies them to each converted channel block while it is in cache.

enum class PostKind { kRelu, kLeakyRelu, kClip, kHardSigmoid, kHardSwish, kSigmoid, kLinear, kSum };

struct PostOp {
  PostKind kind;
  float a = 0, b = 0;
};

// Applies `ops` to y[0, n); `s` is the summand at the same offset (for kSum).
template <typename T>
__attribute__((noinline)) void apply_post_ops(const PostOp* ops, size_t nops, T* __restrict y, const T* __restrict s,
                                              int64_t n) {
  for (size_t k = 0; k < nops; ++k) {
    const PostOp& p = ops[k];
    const T a = static_cast<T>(p.a), b = static_cast<T>(p.b);
    switch (p.kind) {
      case PostKind::kRelu:
        for (int64_t i = 0; i < n; ++i) y[i] = y[i] < T(0) ? T(0) : y[i];
        break;
      case PostKind::kLeakyRelu:
        for (int64_t i = 0; i < n; ++i) y[i] = y[i] < T(0) ? a * y[i] : y[i];
        break;
      case PostKind::kClip:
        for (int64_t i = 0; i < n; ++i) y[i] = std::min(std::max(y[i], a), b);
        break;
      case PostKind::kHardSigmoid:
        for (int64_t i = 0; i < n; ++i) y[i] = std::max(T(0), std::min(T(1), a * y[i] + b));
        break;
      case PostKind::kHardSwish:
        for (int64_t i = 0; i < n; ++i) y[i] = y[i] * std::min(std::max(y[i] + T(3), T(0)), T(6)) / T(6);
        break;
      case PostKind::kSigmoid:
        for (int64_t i = 0; i < n; ++i) y[i] = T(1) / (T(1) + std::exp(-y[i]));
        break;
      case PostKind::kLinear:
        for (int64_t i = 0; i < n; ++i) y[i] = a * y[i] + b;
        break;
      case PostKind::kSum:
        for (int64_t i = 0; i < n; ++i) y[i] += s[i];
        break;
    }
  }
}

// y[0, n) += bias, then `ops`: the bias folded into the first pass over y where that op
// is a Relu or a sum (a 1x1 product's output row, still in cache).
template <typename T>
void add_bias_and_post_ops(const PostOp* ops, size_t nops, T* __restrict y, const T* __restrict s, int64_t n, T bias) {
  if (nops && ops[0].kind == PostKind::kRelu) {
    for (int64_t i = 0; i < n; ++i) {
      const T v = y[i] + bias;
      y[i] = v < T(0) ? T(0) : v;
    }
    ++ops, --nops;
  } else if (nops && ops[0].kind == PostKind::kSum) {
    for (int64_t i = 0; i < n; ++i) y[i] = (y[i] + bias) + s[i];
    ++ops, --nops;
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] += bias;
  }
  if (nops) apply_post_ops(ops, nops, y, s, n);
}

// The same over a whole tensor, split across threads.
template <typename T>
void apply_post_ops_all(const std::vector<PostOp>& ops, T* y, const T* s, int64_t n, int threads) {
  if (ops.empty()) return;
  parallel_for(threads, n, 1 << 14, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; i += 4096) {
      int64_t m = std::min<int64_t>(4096, e - i);
      apply_post_ops(ops.data(), ops.size(), y + i, s ? s + i : nullptr, m);
    }
  });
}

inline Result<std::vector<PostOp>> parse_post_ops(const ir::Node& n, const std::string& where) {
  std::vector<PostOp> ops;
  std::vector<std::string> names = n.attr_strings("_post_ops");
  std::vector<float> args = n.attr_floats("_post_args");
  if (args.size() != 2 * names.size()) return invalid_argument(where + "_post_args must have two values per post-op");
  int sums = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    static const std::map<std::string, PostKind> kinds = {
        {"relu", PostKind::kRelu},       {"leaky_relu", PostKind::kLeakyRelu}, {"clip", PostKind::kClip},
        {"hardsigmoid", PostKind::kHardSigmoid}, {"hardswish", PostKind::kHardSwish}, {"sigmoid", PostKind::kSigmoid},
        {"linear", PostKind::kLinear},   {"sum", PostKind::kSum}};
    auto it = kinds.find(names[i]);
    if (it == kinds.end()) return invalid_argument(where + "unknown fused post-op '" + names[i] + "'");
    sums += it->second == PostKind::kSum;
    ops.push_back({it->second, args[2 * i], args[2 * i + 1]});
  }
  if (sums > 1) return invalid_argument(where + "at most one fused sum post-op is supported");
  if (sums && (n.inputs.size() < 4 || n.inputs[3].empty()))
    return invalid_argument(where + "a fused sum post-op needs the summand as input 3");
  return ops;
}

}  // namespace bulkhead::cpu
