// Conversions between plain NCHW and the channel-blocked layout nChw16c, inserted by the
// layout pass (exec/layout.h) at the ends of blocked chains, and between NCHW and the
// channels-last layout of int8 chains (ToNhwc / FromNhwc, below). Domain "bulkhead":
//   ToBlocked16(X: float32[N, C, H, W]) -> float32[N, ceil(C/16), H, W, 16]
//   FromBlocked16(X: float32[N, ceil(C/16), H, W, 16], channels = C) -> float32[N, C, H, W]
// FromBlocked16 also takes a bfloat16 X (the end of a bf16 chain, SessionOptions::precision)
// and converts it to float32 in the same reorder. Padded channels are written as zeros. Both run as oneDNN reorders,
// cached per shape, except float32 with a partial last block (block_to_plain, plain_to_block).
// ToBlocked16 may carry fused element-wise post-ops (`_post_ops` / `_post_args`, as a
// Conv's but without "sum": the chain the layout pass folded into it, exec/layout.h):
// applied to each channel block, padding included (it stays finite), right after that
// block is converted, by the same transposing path.
#include <oneapi/dnnl/dnnl.hpp>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_util.h"
#include "backends/cpu/kernels/dnnl_common.h"
#include "backends/cpu/kernels/post_ops.h"

namespace bulkhead::cpu {
namespace {

using namespace dnnl_util;

// float32 nChw16c <-> NCHW by 8x8 transposes, for channel counts that are not whole
// blocks: oneDNN's reorder takes a slow path for a partial last block (1x24x56x56 to NCHW:
// 39 us, here 6; 1x136x28x28: 40 against 8.5, one thread, an AVX-512 EPYC); for whole
// blocks it is as fast as this and stays.
#if defined(__AVX2__)
inline void transpose8x8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}
#endif

// One image's channel block `cb` (channels [16 cb, min(16 cb + 16, C))), S pixels:
// blocked b[S][16] <-> plain p[C][S] (p points at the image's channel 0).
void block_to_plain(const float* b, float* p, int64_t C, int64_t S, int64_t cb) {
  for (int64_t half = 0; half < 2; ++half) {
    const int64_t c0 = cb * kBlock + half * 8;
    if (c0 >= C) break;
    const int64_t nc = std::min<int64_t>(8, C - c0);
    int64_t s = 0;
#if defined(__AVX2__)
    for (; s + 8 <= S; s += 8) {
      __m256 r[8];
      for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(b + (s + i) * kBlock + half * 8);
      transpose8x8(r);
      for (int64_t c = 0; c < nc; ++c) _mm256_storeu_ps(p + (c0 + c) * S + s, r[c]);
    }
#endif
    for (; s < S; ++s)
      for (int64_t c = 0; c < nc; ++c) p[(c0 + c) * S + s] = b[s * kBlock + half * 8 + c];
  }
}

void plain_to_block(const float* p, float* b, int64_t C, int64_t S, int64_t cb) {
  for (int64_t half = 0; half < 2; ++half) {
    const int64_t c0 = cb * kBlock + half * 8;
    const int64_t nc = std::clamp<int64_t>(C - c0, 0, 8);  // channels past C are zeros
    int64_t s = 0;
#if defined(__AVX2__)
    for (; s + 8 <= S; s += 8) {
      __m256 r[8];
      for (int64_t c = 0; c < 8; ++c) r[c] = c < nc ? _mm256_loadu_ps(p + (c0 + c) * S + s) : _mm256_setzero_ps();
      transpose8x8(r);
      for (int i = 0; i < 8; ++i) _mm256_storeu_ps(b + (s + i) * kBlock + half * 8, r[i]);
    }
#endif
    for (; s < S; ++s)
      for (int64_t c = 0; c < 8; ++c) b[s * kBlock + half * 8 + c] = c < nc ? p[(c0 + c) * S + s] : 0.f;
  }
}

class BlockedReorderKernel final : public Kernel {
 public:
  BlockedReorderKernel(bool to_blocked, int64_t channels, std::vector<PostOp> ops, dnnl::engine eng)
      : to_blocked_(to_blocked), channels_(channels), ops_(std::move(ops)), eng_(std::move(eng)) {}

  Status compute(KernelContext& ctx) const override {
    const std::string& where = ctx.where();
    const Tensor* x = ctx.input(0);
    if (!x) return invalid_argument(where + "input X is required");
    const bool xbf = !to_blocked_ && x->dtype() == DataType::kBFloat16;
    if (x->dtype() != DataType::kFloat32 && !xbf)
      return invalid_argument(where + (to_blocked_ ? "X must be float32, got " : "X must be float32 or bfloat16, got ") +
                              x->describe());
    Dims logical;
    Shape yshape;
    if (to_blocked_) {
      if (x->rank() != 4) return invalid_argument(where + "X must be [N, C, H, W], got " + x->describe());
      logical = {x->dim(0), x->dim(1), x->dim(2), x->dim(3)};
      yshape = {x->dim(0), blocks_of(x->dim(1)), x->dim(2), x->dim(3), kBlock};
    } else {
      if (x->rank() != 5 || x->dim(4) != kBlock || x->dim(1) != blocks_of(channels_))
        return invalid_argument(where + "X must be [N, " + std::to_string(blocks_of(channels_)) + ", H, W, 16] for " +
                                std::to_string(channels_) + " channels, got " + x->describe());
      logical = {x->dim(0), channels_, x->dim(2), x->dim(3)};
      yshape = {x->dim(0), channels_, x->dim(2), x->dim(3)};
    }
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kFloat32, yshape));
    if (y.numel() == 0) return Status::ok();
    if (!xbf && (logical[1] % kBlock != 0 || !ops_.empty())) {
      const int64_t N = logical[0], C = logical[1], S = logical[2] * logical[3], CB = blocks_of(C);
      const float* xp = x->data<float>();
      float* yp = y.data<float>();
      parallel_for(ctx.threads(), N * CB, 1, [&](int64_t b0, int64_t e0) {
        for (int64_t i = b0; i < e0; ++i) {
          const int64_t n = i / CB, cb = i % CB;
          if (to_blocked_) {
            plain_to_block(xp + n * C * S, yp + i * S * kBlock, C, S, cb);
            if (!ops_.empty()) apply_post_ops<float>(ops_.data(), ops_.size(), yp + i * S * kBlock, nullptr, S * kBlock);
          } else {
            block_to_plain(xp + i * S * kBlock, yp + n * C * S, C, S, cb);
          }
        }
      });
      return Status::ok();
    }
    try {
      std::shared_ptr<const Reorder> r = reorder_for(logical, xbf);
      memory::desc from = to_blocked_ ? plain_md(logical) : blocked_md(logical, dnnl_float_type(x->dtype()));
      memory::desc to = to_blocked_ ? blocked_md(logical) : plain_md(logical);
      CallPool::Call call(calls_);
      CallScratch sc{ctx, {}};
      BH_RETURN_IF_ERROR(run_reorder(*r, call, call.memory(from, const_cast<void*>(x->raw())), call.memory(to, y.raw()), sc));
    } catch (const dnnl::error& e) {
      return internal_error(where + "oneDNN reorder failed: " + e.what());
    }
    return Status::ok();
  }

 private:
  std::shared_ptr<const Reorder> reorder_for(const Dims& logical, bool from_bf16) const {
    // One reorder per thread count granted, as for every oneDNN primitive.
    std::pair<Dims, int> key{logical, omp_get_max_threads() * 2 + (from_bf16 ? 1 : 0)};
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    memory::desc from = to_blocked_ ? plain_md(logical)
                                    : blocked_md(logical, from_bf16 ? memory::data_type::bf16 : memory::data_type::f32);
    memory::desc to = to_blocked_ ? blocked_md(logical) : plain_md(logical);
    auto r = std::make_shared<const Reorder>(Reorder::make(eng_, from, to));
    cache_.emplace(key, r);
    return r;
  }

  bool to_blocked_;
  int64_t channels_;
  std::vector<PostOp> ops_;  // ToBlocked16's fused element-wise ops
  dnnl::engine eng_;
  mutable std::mutex mu_;
  mutable std::map<std::pair<Dims, int>, std::shared_ptr<const Reorder>> cache_;
  CallPool calls_{eng_};
};

// ToNhwc(X: [N, C, H, W]) -> [N, H, W, C] and FromNhwc(X: [N, H, W, C]) -> [N, C, H, W],
// uint8 / int8 / int32 / float32: the ends of the channels-last int8 chains.
class NhwcReorderKernel final : public Kernel {
 public:
  NhwcReorderKernel(bool to_nhwc, dnnl::engine eng) : to_nhwc_(to_nhwc), eng_(std::move(eng)) {}

  Status compute(KernelContext& ctx) const override {
    const std::string& where = ctx.where();
    const Tensor* x = ctx.input(0);
    if (!x) return invalid_argument(where + "input X is required");
    if (x->rank() != 4)
      return invalid_argument(where + "X must be " + (to_nhwc_ ? "[N, C, H, W]" : "[N, H, W, C]") + ", got " + x->describe());
    auto t = dnnl_nhwc_type(x->dtype());
    if (!t.is_ok()) return t.status().with_context(where);
    const Dims logical = to_nhwc_ ? Dims{x->dim(0), x->dim(1), x->dim(2), x->dim(3)}
                                  : Dims{x->dim(0), x->dim(3), x->dim(1), x->dim(2)};
    const Shape yshape = to_nhwc_ ? Shape{logical[0], logical[2], logical[3], logical[1]} : Shape(logical.begin(), logical.end());
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, x->dtype(), yshape));
    if (y.numel() == 0) return Status::ok();
    try {
      const memory::desc plain = plain_md(logical, *t), nhwc = nhwc_md(logical, *t);
      std::shared_ptr<const Reorder> r = reorder_for(logical, *t);
      CallPool::Call call(calls_);
      CallScratch sc{ctx, {}};
      BH_RETURN_IF_ERROR(run_reorder(*r, call, call.memory(to_nhwc_ ? plain : nhwc, const_cast<void*>(x->raw())),
                                     call.memory(to_nhwc_ ? nhwc : plain, y.raw()), sc));
    } catch (const dnnl::error& e) {
      return internal_error(where + "oneDNN reorder failed: " + e.what());
    }
    return Status::ok();
  }

 private:
  std::shared_ptr<const Reorder> reorder_for(const Dims& logical, memory::data_type t) const {
    std::pair<Dims, int> key{logical, omp_get_max_threads() * 64 + static_cast<int>(t)};
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    const memory::desc plain = plain_md(logical, t), nhwc = nhwc_md(logical, t);
    auto r = std::make_shared<const Reorder>(Reorder::make(eng_, to_nhwc_ ? plain : nhwc, to_nhwc_ ? nhwc : plain));
    cache_.emplace(key, r);
    return r;
  }

  bool to_nhwc_;
  dnnl::engine eng_;
  mutable std::mutex mu_;
  mutable std::map<std::pair<Dims, int>, std::shared_ptr<const Reorder>> cache_;
  CallPool calls_{eng_};
};

Result<std::unique_ptr<Kernel>> make_blocked_reorder(const KernelInfo& info, bool to_blocked) {
  int64_t channels = info.node.attr_int("channels", -1);
  if (!to_blocked && channels <= 0)
    return invalid_argument(info.where() + "attribute channels must be positive, got " + std::to_string(channels));
  std::vector<PostOp> ops;
  if (info.node.has_attr("_post_ops")) {
    if (!to_blocked) return invalid_argument(info.where() + "FromBlocked16 takes no fused post-ops");
    BH_ASSIGN_OR_RETURN(ops, parse_post_ops(info.node, info.where()));
    for (const PostOp& p : ops)
      if (p.kind == PostKind::kSum) return invalid_argument(info.where() + "ToBlocked16 takes no fused sum");
  }
  try {
    return std::unique_ptr<Kernel>(std::make_unique<BlockedReorderKernel>(to_blocked, channels, std::move(ops),
                                                                         dnnl::engine(dnnl::engine::kind::cpu, 0)));
  } catch (const dnnl::error& e) {
    return internal_error(info.where() + "cannot create a oneDNN CPU engine: " + e.what());
  }
}

}  // namespace

void register_dnnl_layout_kernels(KernelTable& t) {
  t.add("ToBlocked16", 1, [](const KernelInfo& info) { return make_blocked_reorder(info, true); }, "bulkhead");
  t.add("FromBlocked16", 1, [](const KernelInfo& info) { return make_blocked_reorder(info, false); }, "bulkhead");
  for (bool to : {true, false})
    t.add(to ? "ToNhwc" : "FromNhwc", 1, [to](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
      try {
        return std::unique_ptr<Kernel>(std::make_unique<NhwcReorderKernel>(to, dnnl::engine(dnnl::engine::kind::cpu, 0)));
      } catch (const dnnl::error& e) {
        return internal_error(info.where() + "cannot create a oneDNN CPU engine: " + e.what());
      }
    }, "bulkhead");
}

}  // namespace bulkhead::cpu
