// Helpers shared by the oneDNN-backed CPU kernels (dnnl*.cc): plain memory descriptors,
// reorders with user-managed scratchpads, per-call scratch memory, and the channel-blocked
// layout nChw16c that exec/layout.h keeps convolution chains in.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <omp.h>

#include "backend/kernel.h"
#include "backends/cpu/kernels/dnnl_call.h"
#include "backends/cpu/core_budget.h"
#include "memory/host_pages.h"

namespace bulkhead::cpu::dnnl_util {

using dnnl::memory;
using Dims = memory::dims;

inline Dims row_major_strides(const Dims& d) {
  Dims s(d.size(), 1);
  for (int i = static_cast<int>(d.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * d[i + 1];
  return s;
}

inline memory::desc plain_md(const Dims& dims, memory::data_type t = memory::data_type::f32) {
  return memory::desc(dims, t, row_major_strides(dims));
}

// oneDNN's element type for a tensor's: f32 or bf16 (the two the float kernels take).
inline memory::data_type dnnl_float_type(DataType t) {
  return t == DataType::kBFloat16 ? memory::data_type::bf16 : memory::data_type::f32;
}

// Channels per block of the blocked layout, and a value's attribute naming it.
inline constexpr int64_t kBlock = 16;
inline int64_t blocks_of(int64_t channels) { return (channels + kBlock - 1) / kBlock; }

// nChw16c (2-D spatial) or nCw16c / nCdhw16c for logical dims [N, C, spatial...].
inline memory::desc blocked_md(const Dims& dims, memory::data_type dt = memory::data_type::f32) {
  using tag = memory::format_tag;
  tag t = dims.size() == 3 ? tag::nCw16c : dims.size() == 5 ? tag::nCdhw16c : tag::nChw16c;
  return memory::desc(dims, dt, t);
}

// Channels-last (NHWC) for logical [N, C, H, W] dims: the int8 chains' layout
// (exec/layout.h nhwc_int8_chains), and oneDNN's element type for the tensors on it.
inline memory::desc nhwc_md(const Dims& dims, memory::data_type t) { return memory::desc(dims, t, memory::format_tag::acdb); }
inline Result<memory::data_type> dnnl_nhwc_type(DataType t) {
  switch (t) {
    case DataType::kUInt8: return memory::data_type::u8;
    case DataType::kInt8: return memory::data_type::s8;
    case DataType::kFloat32: return memory::data_type::f32;
    case DataType::kInt32: return memory::data_type::s32;
    default: return unsupported("channels-last tensors are uint8, int8, int32 or float32, got " + dtype_name(t));
  }
}

// bfloat16 <-> float32 copies, for the paths that compute in float32 on bfloat16 tensors.
inline void bf16_to_f32(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = bfloat16_to_float(x[i]);
}
inline void f32_to_bf16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = float_to_bfloat16(x[i]);
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

// Whether the layout pass asked this node to compute in bfloat16 (attribute `_precision`
// = "bf16", SessionOptions::precision); an error for any other value. precision.cc.
Result<bool> bf16_precision(const KernelInfo& info);

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

// Constant weights at `data` (laid out as `from`) written to `out` in layout `to`, through
// `re` (a Reorder from `from` to `to`) or copied when the two layouts are one.
inline void pack_constant_into(const dnnl::engine& eng, const memory::desc& from, const memory::desc& to, const Reorder* re,
                               const void* data, void* out) {
  if (!re) {
    std::memcpy(out, data, to.get_size());
    return;
  }
  memory src(from, eng, const_cast<void*>(data));
  memory packed(to, eng, out);
  dnnl::stream s(eng);
  std::unordered_map<int, memory> args{{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, packed}};
  // Uninitialised (the reorder writes before it reads) and mapped in at once: Winograd
  // weights need MiBs of scratch, and zero-filling fresh pages faulted them in one by one.
  std::unique_ptr<char[]> scratch(re->scratch ? new char[re->scratch] : nullptr);
  prefault_for_write(scratch.get(), re->scratch);
  if (re->scratch) args.emplace(DNNL_ARG_SCRATCHPAD, memory(re->scratch_md, eng, scratch.get()));
  re->prim.execute(s, args);
  s.wait();
}

// The same into a new buffer that the returned memory owns.
inline memory pack_constant(const dnnl::engine& eng, const memory::desc& from, const memory::desc& to, const Reorder* re,
                            const void* data) {
  memory packed(to, eng);
  pack_constant_into(eng, from, to, re, data, packed.get_data_handle());
  return packed;
}

// Whether oneDNN's int8 kernels give exact sums for u8/s8 activations and s8 weights of
// magnitude up to `w_max`. With VNNI or AMX each u8×s8 product is summed in int32. Without
// (AVX2, AVX-512 before VNNI, as on some AMD and older Intel CPUs) oneDNN pairs products
// with vpmaddubsw, which saturates at int16: exact for u8 activations only while
// 2·255·w_max fits (w_max <= 64), and never for s8 ones (oneDNN halves the weights then).
inline bool int8_sums_exact(bool activations_u8, int w_max) {
  static const bool vnni = [] {
    const auto isa = dnnl::get_effective_cpu_isa();
    using I = dnnl::cpu_isa;
    return isa == I::avx512_core_vnni || isa == I::avx512_core_bf16 || isa == I::avx512_core_amx || isa == I::avx2_vnni;
  }();
  return vnni || (activations_u8 && w_max <= 64);
}

// Plans made at session creation (the kernels' prepare()): the OpenMP thread count a run
// of the session gives its kernels when nothing else holds cores (CoreBudget grants at
// most the machine's), which is part of a plan's key; set on the calling thread for the
// scope and put back after.
inline int prepared_threads(const KernelInfo& info) {
  return std::clamp(info.threads, 1, std::max(1, process_core_budget().cores()));
}
class OmpThreadsScope {
 public:
  explicit OmpThreadsScope(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(std::max(1, n)); }
  ~OmpThreadsScope() { omp_set_num_threads(saved_); }
  OmpThreadsScope(const OmpThreadsScope&) = delete;
  OmpThreadsScope& operator=(const OmpThreadsScope&) = delete;

 private:
  int saved_;
};

// oneDNN's sgemm generates its JIT kernels on first use: ~40 ms on a 2-core EPYC for the
// process's first product of several rows, ~5 ms for its first one-row product (a
// vector times a matrix, another path). A kernel that will make such a call makes one
// while its session is created, so that the session's first run is as fast as the next.
// Once per process and kind; thread-safe.
inline void warm_sgemm(bool several_rows) {
  static std::once_flag rows, one_row;
  std::call_once(several_rows ? rows : one_row, [several_rows] {
    std::vector<float> a(64, 1.f), b(64, 1.f), c(64);
    (void)dnnl::sgemm('N', 'N', several_rows ? 8 : 1, 8, 8, 1.f, a.data(), 8, b.data(), 8, 0.f, c.data(), 8);
  });
}

// For a MatMul or Gemm factory: warms sgemm for the products a float32 node makes: one
// row or several (A's rows, its batches collapsed as a 2-D B collapses them), as far as
// the graph says before any run. Where A's rows depend on the inputs (a dynamic batch or
// sequence: ppocrv4_rec's first MatMul paid 22 ms at the first run), both kinds.
inline void warm_sgemm_for(const KernelInfo& info, bool transposed_a) {
  if (info.graph_input_type(0) != DataType::kFloat32 || !info.graph || info.node.inputs.empty()) return;
  const ir::ValueInfo* vi = info.graph->info(info.node.inputs[0]);
  if (!vi || vi->type != ir::ValueType::kTensor || !vi->shape || vi->shape->empty()) return;
  const auto& dims = *vi->shape;
  const size_t k_axis = transposed_a && dims.size() == 2 ? 0 : dims.size() - 1;
  if (dims[k_axis].fixed() && dims[k_axis].value == 0) return;
  bool rows_known = true, several = false;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i == k_axis) continue;
    if (!dims[i].fixed()) rows_known = false;
    else if (dims[i].value == 0) return;  // an empty product: no call
    else if (dims[i].value > 1) several = true;
  }
  if (several || !rows_known) warm_sgemm(true);
  if (!several) warm_sgemm(false);
}

// Constant weights packed for a primitive and what keeps their bytes alive: a
// memory object on the kernel's own engine over bytes that may be shared with the Env's
// other sessions (SharedConstants). The bytes are never written after packing.
struct PackedWeights {
  memory mem;
  std::shared_ptr<const void> hold;  // the shared bytes (null when `mem` owns its own)
};

// pack_constant, made once per Env when `shared` is set: keyed by what the result
// depends on — the kernel kind `what`, the interned source tensor and both layouts —
// so every session of the model (and every plan of one kernel) finds the same bytes.
inline PackedWeights pack_constant_shared(const std::shared_ptr<SharedConstants>& shared, const std::string& what,
                                          const dnnl::engine& eng, const memory::desc& from, const memory::desc& to,
                                          const Reorder* re, const Tensor& source) {
  // Weights too small to share (SharedConstants::kMinBytes) are packed privately.
  if (!shared || source.nbytes() < SharedConstants::kMinBytes) return {pack_constant(eng, from, to, re, source.raw()), nullptr};
  Tensor src = shared->intern(source);
  std::string key = what + ":" + SharedConstants::source_key(src) + ":";
  key.append(reinterpret_cast<const char*>(&from.data), sizeof(from.data));
  key.append(reinterpret_cast<const char*>(&to.data), sizeof(to.data));
  auto bytes = shared->get_or_make(
      key, to.get_size(),
      [&](void* out) { pack_constant_into(eng, from, to, re, src.raw(), out); },
      {src.buffer()});
  return {memory(to, eng, bytes->data), bytes};
}

// A run-time zero point's descriptor (one int32).
inline const memory::desc& zero_point_md() {
  static const memory::desc md({1}, memory::data_type::s32, memory::format_tag::a);
  return md;
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

inline Status run_reorder(const Reorder& r, CallPool::Call& call, const memory& from, const memory& to, CallScratch& sc) {
  const memory* scratch = nullptr;
  if (r.scratch) {
    BH_ASSIGN_OR_RETURN(void* p, sc.get(r.scratch));
    scratch = &call.memory(r.scratch_md, p);
  }
  call.execute(r.prim, {{DNNL_ARG_FROM, &from}, {DNNL_ARG_TO, &to}, {DNNL_ARG_SCRATCHPAD, scratch}});
  return Status::ok();
}

// A value resolved from a kernel's input shapes (a convolution's or pooling's geometry),
// kept for the last shapes it was resolved for: a model of fixed shapes resolves it once
// per node instead of on every call. `make(G*)` resolves it (a Status); errors are not
// kept. Thread-safe: calls may come from overlapping runs.
template <class G, size_t N>
class LastShapesCache {
 public:
  template <class Make>
  Result<std::shared_ptr<const G>> get(const std::array<const Shape*, N>& shapes, Make&& make) const {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (value_ && same(shapes)) return value_;
    }
    auto g = std::make_shared<G>();
    BH_RETURN_IF_ERROR(make(g.get()));
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < N; ++i) last_[i] = *shapes[i];
    value_ = g;
    return std::shared_ptr<const G>(std::move(g));
  }

 private:
  bool same(const std::array<const Shape*, N>& shapes) const {
    for (size_t i = 0; i < N; ++i)
      if (!(last_[i] == *shapes[i])) return false;
    return true;
  }
  mutable std::mutex mu_;
  mutable std::array<Shape, N> last_;            // guarded by mu_
  mutable std::shared_ptr<const G> value_;        // guarded by mu_
};

}  // namespace bulkhead::cpu::dnnl_util
