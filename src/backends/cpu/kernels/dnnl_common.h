// Helpers shared by the oneDNN-backed CPU kernels (dnnl*.cc): plain memory descriptors,
// reorders with user-managed scratchpads, per-call scratch memory, and the channel-blocked
// layout nChw16c that exec/layout.h keeps convolution chains in.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "backend/kernel.h"

namespace bulkhead::cpu::dnnl_util {

using dnnl::memory;
using Dims = memory::dims;

inline Dims row_major_strides(const Dims& d) {
  Dims s(d.size(), 1);
  for (int i = static_cast<int>(d.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * d[i + 1];
  return s;
}

inline memory::desc plain_md(const Dims& dims) {
  return memory::desc(dims, memory::data_type::f32, row_major_strides(dims));
}

// Channels per block of the blocked layout, and a value's attribute naming it.
inline constexpr int64_t kBlock = 16;
inline int64_t blocks_of(int64_t channels) { return (channels + kBlock - 1) / kBlock; }

// nChw16c (2-D spatial) or nCw16c / nCdhw16c for logical dims [N, C, spatial...].
inline memory::desc blocked_md(const Dims& dims) {
  using tag = memory::format_tag;
  tag t = dims.size() == 3 ? tag::nCw16c : dims.size() == 5 ? tag::nCdhw16c : tag::nChw16c;
  return memory::desc(dims, memory::data_type::f32, t);
}

// Plain [N, C, S] <-> nChw16c [N, ceil(C/16), S, 16] with zero padding, for the paths
// oneDNN has no kernel for.
inline void plain_to_blocked(const float* x, float* y, int64_t N, int64_t C, int64_t S) {
  const int64_t Cb = blocks_of(C);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t cb = 0; cb < Cb; ++cb) {
      float* yb = y + (n * Cb + cb) * S * kBlock;
      for (int64_t c = 0; c < kBlock; ++c) {
        const int64_t ch = cb * kBlock + c;
        const float* xp = ch < C ? x + (n * C + ch) * S : nullptr;
        for (int64_t i = 0; i < S; ++i) yb[i * kBlock + c] = xp ? xp[i] : 0.f;
      }
    }
}

inline void blocked_to_plain(const float* x, float* y, int64_t N, int64_t C, int64_t S) {
  const int64_t Cb = blocks_of(C);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ch = 0; ch < C; ++ch) {
      const float* xb = x + (n * Cb + ch / kBlock) * S * kBlock + ch % kBlock;
      float* yp = y + (n * C + ch) * S;
      for (int64_t i = 0; i < S; ++i) yp[i] = xb[i * kBlock];
    }
}

// A reorder with a user-managed scratchpad (so it can run on several threads at once).
struct Reorder {
  dnnl::reorder prim;
  memory::desc scratch_md;
  size_t scratch = 0;
  static Reorder make(const dnnl::engine& eng, const memory::desc& from, const memory::desc& to) {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::reorder::primitive_desc pd(eng, from, eng, to, attr);
    Reorder r;
    r.scratch_md = pd.scratchpad_desc();
    r.scratch = r.scratch_md.get_size();
    r.prim = dnnl::reorder(pd);
    return r;
  }
};

// Weight dims of a convolution as oneDNN sees them: [G,] M/G, C/G, k...
inline Dims conv_weight_dims(int64_t M, int64_t C, int64_t G, const std::vector<int64_t>& k) {
  Dims d;
  if (G > 1) d.push_back(G);
  d.push_back(M / G);
  d.push_back(C / G);
  d.insert(d.end(), k.begin(), k.end());
  return d;
}

// Constant weights at `data` (laid out as `from`) in a new buffer of layout `to`, through
// `re` (a Reorder from `from` to `to`) or copied when the two layouts are one.
inline memory pack_constant(const dnnl::engine& eng, const memory::desc& from, const memory::desc& to, const Reorder* re,
                            const void* data) {
  memory packed(to, eng);
  memory src(from, eng, const_cast<void*>(data));
  if (!re) {
    std::memcpy(packed.get_data_handle(), data, to.get_size());
    return packed;
  }
  dnnl::stream s(eng);
  std::unordered_map<int, memory> args{{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, packed}};
  std::vector<char> scratch(re->scratch);
  if (re->scratch) args.emplace(DNNL_ARG_SCRATCHPAD, memory(re->scratch_md, eng, scratch.data()));
  re->prim.execute(s, args);
  s.wait();
  return packed;
}

// Memory for one call: scratch tensors from the context, kept alive until the call ends.
struct CallScratch {
  KernelContext& ctx;
  std::vector<Tensor> held;
  Result<void*> get(size_t bytes) {
    BH_ASSIGN_OR_RETURN(Tensor t, ctx.allocate_scratch(DataType::kUInt8, Shape{static_cast<int64_t>(std::max<size_t>(bytes, 1))}));
    held.push_back(t);
    return t.raw();
  }
};

inline Status run_reorder(const Reorder& r, dnnl::stream& s, const dnnl::engine& eng, memory& from, memory& to,
                          CallScratch& sc) {
  std::unordered_map<int, memory> args{{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
  if (r.scratch) {
    BH_ASSIGN_OR_RETURN(void* p, sc.get(r.scratch));
    args.emplace(DNNL_ARG_SCRATCHPAD, memory(r.scratch_md, eng, p));
  }
  r.prim.execute(s, args);
  return Status::ok();
}

}  // namespace bulkhead::cpu::dnnl_util
