// oneDNN-backed heavy operators, part 2: pooling and BatchNormalization.
//
// MaxPool (without the Indices output) and AveragePool on float32 run on oneDNN's
// pooling primitive (plain layout, cached per input shape, user-managed scratchpad)
// where oneDNN has a vectorised implementation for the layout; where it would use its
// reference or scalar one ("ref:any": nChw16c pooling on a CPU without AVX-512, 28 ms for
// ShuffleNet's first MaxPool where these loops take well under 1 ms; "simple_nchw:any":
// plain pooling there) the loops below run instead, on the layout as it is.
// Everything else -- Indices, integer types, float64, LpPool, the global pools,
// BatchNormalization -- runs on plain loops.

#include <oneapi/dnnl/dnnl.hpp>

#include "backend/conv_attrs.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <string>
#include <vector>

#include "backend/qlinear_pool.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_util.h"
#include "backends/cpu/kernels/dnnl_common.h"
#include "backends/cpu/kernels/type_check.h"

namespace bulkhead::cpu {

void register_dnnl_pool_kernels(KernelTable& t);

namespace {

using dnnl::memory;
using Dims = memory::dims;

enum class PoolKind { kMax, kAvg, kLp };

struct PoolAttrs {
  PoolKind kind = PoolKind::kMax;
  std::string auto_pad = "NOTSET";
  std::vector<int64_t> kernel_shape, strides, dilations, pads;
  bool ceil_mode = false;
  bool count_include_pad = false;
  int64_t storage_order = 0;
  double p = 2.0;
};

struct PoolGeo {
  int nsp = 0;
  std::vector<int64_t> in, k, s, d, pb, pe, out;
};

std::string vstr(const std::vector<int64_t>& v) { return shape_to_string(v); }

Status resolve_pool(const PoolAttrs& a, const Shape& x, const std::string& where, PoolGeo* g) {
  int nsp = static_cast<int>(x.size()) - 2;
  g->nsp = nsp;
  g->in.assign(x.begin() + 2, x.end());
  if (a.kernel_shape.size() != static_cast<size_t>(nsp))
    return invalid_argument(where + "kernel_shape " + vstr(a.kernel_shape) + " does not match input " + shape_to_string(x));
  g->k = a.kernel_shape;
  auto fill = [&](const std::vector<int64_t>& v, int64_t def, size_t n, const char* name,
                  std::vector<int64_t>* out) -> Status {
    if (v.empty()) {
      out->assign(n, def);
      return Status::ok();
    }
    if (v.size() != n)
      return invalid_argument(where + name + " has " + std::to_string(v.size()) + " values, expected " + std::to_string(n));
    *out = v;
    return Status::ok();
  };
  for (auto [name, v] : {std::pair<const char*, const std::vector<int64_t>*>{"kernel_shape", &a.kernel_shape},
                         {"strides", &a.strides}, {"dilations", &a.dilations}, {"pads", &a.pads}})
    BH_RETURN_IF_ERROR(check_geometry(name, *v, where));
  std::vector<int64_t> pads;
  BH_RETURN_IF_ERROR(fill(a.strides, 1, nsp, "strides", &g->s));
  BH_RETURN_IF_ERROR(fill(a.dilations, 1, nsp, "dilations", &g->d));
  BH_RETURN_IF_ERROR(fill(a.pads, 0, 2 * nsp, "pads", &pads));
  const std::string& ap = a.auto_pad;
  if (ap != "NOTSET" && ap != "SAME_UPPER" && ap != "SAME_LOWER" && ap != "VALID")
    return invalid_argument(where + "unknown auto_pad '" + ap + "'");
  g->pb.assign(nsp, 0);
  g->pe.assign(nsp, 0);
  g->out.assign(nsp, 0);
  for (int i = 0; i < nsp; ++i) {
    if (g->k[i] < 1 || g->s[i] < 1 || g->d[i] < 1)
      return invalid_argument(where + "kernel_shape, strides and dilations must be positive");
    if (pads[i] < 0 || pads[i + nsp] < 0) return invalid_argument(where + "pads must be non-negative, got " + vstr(pads));
    int64_t dk = (g->k[i] - 1) * g->d[i] + 1, in = g->in[i], s = g->s[i];
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      g->out[i] = (in - 1) / s + 1;
      int64_t total = std::max<int64_t>(0, (g->out[i] - 1) * s + dk - in);
      g->pb[i] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
      g->pe[i] = total - g->pb[i];
      if (in == 0) g->out[i] = 0;
    } else {
      if (ap == "NOTSET") {
        g->pb[i] = pads[i];
        g->pe[i] = pads[i + nsp];
      }
      int64_t span = in + g->pb[i] + g->pe[i] - dk;
      if (span < 0)
        return invalid_argument(where + "kernel " + vstr(g->k) + " (dilations " + vstr(g->d) +
                                ") is larger than the padded input " + shape_to_string(x));
      if (a.ceil_mode && ap == "NOTSET") {
        g->out[i] = (span + s - 1) / s + 1;
        if ((g->out[i] - 1) * s >= in + g->pb[i]) --g->out[i];
      } else {
        g->out[i] = span / s + 1;
      }
    }
  }
  return Status::ok();
}

struct Geo3 {
  int64_t in[3], k[3], s[3], d[3], pb[3], pe[3], out[3];
};

Geo3 to_geo3(const PoolGeo& g) {
  Geo3 r;
  int off = 3 - g.nsp;
  for (int i = 0; i < 3; ++i) {
    int j = i - off;
    bool real = j >= 0;
    r.in[i] = real ? g.in[j] : 1;
    r.k[i] = real ? g.k[j] : 1;
    r.s[i] = real ? g.s[j] : 1;
    r.d[i] = real ? g.d[j] : 1;
    r.pb[i] = real ? g.pb[j] : 0;
    r.pe[i] = real ? g.pe[j] : 0;
    r.out[i] = real ? g.out[j] : 1;
  }
  return r;
}

// The window of output (od, oh, ow): f(ii, id, ih, iw) for each of its positions inside
// the input (ii: the position's offset in its plane); returns how many of its positions
// lie inside the explicitly padded input [-pb, in + pe) (count_include_pad's divisor).
template <typename F>
__attribute__((always_inline)) inline int64_t visit_window(const Geo3& g, int64_t od, int64_t oh, int64_t ow, F f) {
  int64_t padded = 0;
  const int64_t start[3] = {od * g.s[0] - g.pb[0], oh * g.s[1] - g.pb[1], ow * g.s[2] - g.pb[2]};
  for (int64_t kd = 0; kd < g.k[0]; ++kd) {
    const int64_t id = start[0] + kd * g.d[0];
    if (id < -g.pb[0] || id >= g.in[0] + g.pe[0]) continue;
    for (int64_t kh = 0; kh < g.k[1]; ++kh) {
      const int64_t ih = start[1] + kh * g.d[1];
      if (ih < -g.pb[1] || ih >= g.in[1] + g.pe[1]) continue;
      for (int64_t kw = 0; kw < g.k[2]; ++kw) {
        const int64_t iw = start[2] + kw * g.d[2];
        if (iw < -g.pb[2] || iw >= g.in[2] + g.pe[2]) continue;
        ++padded;
        if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1] || iw < 0 || iw >= g.in[2]) continue;
        f((id * g.in[1] + ih) * g.in[2] + iw, id, ih, iw);
      }
    }
  }
  return padded;
}

// Plain-loop pooling over NC planes. For kAvg with count_include_pad the divisor counts
// window positions inside the explicitly padded input [-pb, in + pe).
template <typename T, typename Acc>
void pool_ref(const PoolAttrs& a, const T* x, T* y, int64_t* indices, int64_t NC, const Geo3& g, int threads) {
  int64_t isz = g.in[0] * g.in[1] * g.in[2], osz = g.out[0] * g.out[1] * g.out[2];
  parallel_for(threads, NC, 1, [&](int64_t b0, int64_t e0) {
    for (int64_t nc = b0; nc < e0; ++nc) {
      const T* xp = x + nc * isz;
      T* yp = y + nc * osz;
      for (int64_t od = 0; od < g.out[0]; ++od)
        for (int64_t oh = 0; oh < g.out[1]; ++oh)
          for (int64_t ow = 0; ow < g.out[2]; ++ow) {
            int64_t o = (od * g.out[1] + oh) * g.out[2] + ow;
            Acc acc = a.kind == PoolKind::kMax ? static_cast<Acc>(std::numeric_limits<T>::lowest()) : Acc(0);
            int64_t best = -1, count = 0;
            const int64_t padded_count = visit_window(g, od, oh, ow, [&](int64_t ii, int64_t id, int64_t ih, int64_t iw) {
              Acc v = static_cast<Acc>(xp[ii]);
              ++count;
              if (a.kind == PoolKind::kMax) {
                if (best < 0 || v > acc) {
                  acc = v;
                  best = a.storage_order == 0 ? ii : id + g.in[0] * (ih + g.in[1] * iw);
                }
              } else if (a.kind == PoolKind::kAvg) {
                acc += v;
              } else {
                acc += static_cast<Acc>(std::pow(std::abs(static_cast<double>(v)), a.p));
              }
            });
            if (a.kind == PoolKind::kMax) {
              yp[o] = static_cast<T>(acc);
              if (indices) indices[nc * osz + o] = best < 0 ? 0 : nc * isz + best;
            } else if (a.kind == PoolKind::kAvg) {
              int64_t div = a.count_include_pad ? padded_count : count;
              yp[o] = div > 0 ? static_cast<T>(acc / static_cast<Acc>(div)) : static_cast<T>(NAN);
            } else {
              yp[o] = static_cast<T>(std::pow(static_cast<double>(acc), 1.0 / a.p));
            }
          }
    }
  });
}

class PoolKernel final : public Kernel {
 public:
  // blocked: X and Y in nChw16c (exec/layout.h), as [N, C/16, H, W, 16] tensors.
  // nhwc: X and Y channels-last, [N, H, W, C] (int8 / uint8 MaxPool only).
  PoolKernel(PoolAttrs a, dnnl::engine eng, bool blocked, bool nhwc)
      : a_(std::move(a)), eng_(std::move(eng)), blocked_(blocked), nhwc_(nhwc) {}
  Status compute(KernelContext& ctx) const override;

 private:
  struct Plan {
    bool use_ref = false;
    dnnl::pooling_v2_forward prim;
    memory::desc src_md, dst_md, scratch_md;
  };
  std::shared_ptr<const Plan> plan_for(const Shape& x, const PoolGeo& g) const;
  Status run_plan(KernelContext& ctx, const Plan& plan, const void* x, void* y) const;
  // X in nChw16c: pooled as [N, 16 * C/16, H, W] (the padded channels are pooled too).
  Status compute_blocked(KernelContext& ctx, const Tensor& x) const;
  Status compute_nhwc(KernelContext& ctx, const Tensor& x) const;

  // resolve_pool for `x`, kept for the last shape seen (once per node for fixed shapes).
  Result<std::shared_ptr<const PoolGeo>> geometry_for(const Shape& x, const std::string& where) const {
    return geometry_.get({&x}, [&](PoolGeo* g) { return resolve_pool(a_, x, where, g); });
  }

  PoolAttrs a_;
  dnnl::engine eng_;
  bool blocked_ = false;
  bool nhwc_ = false;
  mutable std::mutex mu_;
  mutable std::map<std::pair<Shape, int>, std::shared_ptr<const Plan>> plans_;
  dnnl_util::LastShapesCache<PoolGeo, 1> geometry_;
  dnnl_util::CallPool calls_{eng_};
};

// Max / average pooling of float32 NCHW planes, an output row at a time: for each
// window offset (kh, kw) the valid output columns are computed once and the row is
// swept along contiguous (stride 1) or evenly strided memory, which vectorises; the
// average divisor is the product of the row's and the column's counts (validity is
// separable). pool_ref's results, except that a NaN never wins a maximum.
void pool_plain_2d(const PoolAttrs& a, const Geo3& g, const float* x, float* y, int64_t NC, int threads) {
  const int64_t IH = g.in[1], IW = g.in[2], OH = g.out[1], OW = g.out[2];
  const int64_t SH = g.s[1], SW = g.s[2], KH = g.k[1], KW = g.k[2];
  const bool is_max = a.kind == PoolKind::kMax;
  // Per output column and row: window positions inside the input, and inside the padded input.
  auto counts = [&](int64_t out, int64_t in, int64_t s, int64_t k, int64_t d, int64_t pb, int64_t pe,
                    std::vector<int64_t>* valid, std::vector<int64_t>* padded) {
    valid->assign(out, 0);
    padded->assign(out, 0);
    for (int64_t o = 0; o < out; ++o)
      for (int64_t j = 0; j < k; ++j) {
        int64_t i = o * s - pb + j * d;
        if (i < -pb || i >= in + pe) continue;
        ++(*padded)[o];
        if (i >= 0 && i < in) ++(*valid)[o];
      }
  };
  std::vector<int64_t> vh, ph, vw, pw;
  counts(OH, IH, SH, KH, g.d[1], g.pb[1], g.pe[1], &vh, &ph);
  counts(OW, IW, SW, KW, g.d[2], g.pb[2], g.pe[2], &vw, &pw);
  parallel_for(threads, NC * OH, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, OW * KH * KW)), [&](int64_t b0, int64_t e0) {
    std::vector<float> acc(static_cast<size_t>(OW));
    for (int64_t r = b0; r < e0; ++r) {
      const int64_t nc = r / OH, oh = r % OH;
      const float* xp = x + nc * IH * IW;
      float* yr = y + r * OW;
      std::fill(acc.begin(), acc.end(), is_max ? std::numeric_limits<float>::lowest() : 0.f);
      for (int64_t kh = 0; kh < KH; ++kh) {
        const int64_t ih = oh * SH - g.pb[1] + kh * g.d[1];
        if (ih < 0 || ih >= IH) continue;
        const float* row = xp + ih * IW;
        for (int64_t kw = 0; kw < KW; ++kw) {
          const int64_t off = kw * g.d[2] - g.pb[2];  // iw = ow * SW + off
          const int64_t lo = off >= 0 ? 0 : (-off + SW - 1) / SW;
          const int64_t hi = IW - 1 - off < 0 ? -1 : std::min(OW - 1, (IW - 1 - off) / SW);
          if (is_max) {
            for (int64_t ow = lo; ow <= hi; ++ow) {
              const float v = row[ow * SW + off];
              acc[ow] = v > acc[ow] ? v : acc[ow];
            }
          } else {
            for (int64_t ow = lo; ow <= hi; ++ow) acc[ow] += row[ow * SW + off];
          }
        }
      }
      if (is_max) {
        std::copy(acc.begin(), acc.end(), yr);
      } else {
        const auto& ch = a.count_include_pad ? ph : vh;
        const auto& cw = a.count_include_pad ? pw : vw;
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t div = ch[oh] * cw[ow];
          yr[ow] = div > 0 ? acc[ow] / static_cast<float>(div) : NAN;
        }
      }
    }
  });
}

// Max / average pooling straight on nChw16c ([N, C/16, H, W, 16]), 16 channels a step,
// with pool_ref's semantics: the first element of a window seeds the maximum (a NaN there
// stays), an empty window gives lowest() (max) or NaN (avg), count_include_pad counts
// the window's positions inside [-pb, in + pe).
void pool_blocked_2d(const PoolAttrs& a, const Geo3& g, const float* x, float* y, int64_t NCb, int threads) {
  constexpr int64_t B = dnnl_util::kBlock;
  const int64_t IH = g.in[1], IW = g.in[2], OH = g.out[1], OW = g.out[2];
  const bool is_max = a.kind == PoolKind::kMax;
  parallel_for(threads, NCb * OH, 1, [&](int64_t b0, int64_t e0) {
    for (int64_t r = b0; r < e0; ++r) {
      const int64_t nc = r / OH, oh = r % OH;
      const float* xs = x + nc * IH * IW * B;
      float* yr = y + r * OW * B;
      for (int64_t ow = 0; ow < OW; ++ow) {
        float acc[B];
        for (int64_t c = 0; c < B; ++c) acc[c] = is_max ? std::numeric_limits<float>::lowest() : 0.f;
        int64_t count = 0, padded_count = 0;
        const int64_t h0 = oh * g.s[1] - g.pb[1], w0 = ow * g.s[2] - g.pb[2];
        for (int64_t kh = 0; kh < g.k[1]; ++kh) {
          const int64_t ih = h0 + kh * g.d[1];
          if (ih < -g.pb[1] || ih >= IH + g.pe[1]) continue;
          for (int64_t kw = 0; kw < g.k[2]; ++kw) {
            const int64_t iw = w0 + kw * g.d[2];
            if (iw < -g.pb[2] || iw >= IW + g.pe[2]) continue;
            ++padded_count;
            if (ih < 0 || ih >= IH || iw < 0 || iw >= IW) continue;
            const float* p = xs + (ih * IW + iw) * B;
            if (is_max && count == 0) {
              for (int64_t c = 0; c < B; ++c) acc[c] = p[c];
            } else if (is_max) {
              for (int64_t c = 0; c < B; ++c) acc[c] = p[c] > acc[c] ? p[c] : acc[c];
            } else {
              for (int64_t c = 0; c < B; ++c) acc[c] += p[c];
            }
            ++count;
          }
        }
        float* o = yr + ow * B;
        if (is_max) {
          for (int64_t c = 0; c < B; ++c) o[c] = acc[c];
        } else {
          const int64_t div = a.count_include_pad ? padded_count : count;
          for (int64_t c = 0; c < B; ++c) o[c] = div > 0 ? acc[c] / static_cast<float>(div) : NAN;
        }
      }
    }
  });
}

Dims row_major(const Dims& d) {
  Dims s(d.size(), 1);
  for (int i = static_cast<int>(d.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * d[i + 1];
  return s;
}

std::shared_ptr<const PoolKernel::Plan> PoolKernel::plan_for(const Shape& x, const PoolGeo& g) const {
  // One plan per thread count granted (oneDNN fixes a primitive's count when it is made).
  std::pair<Shape, int> key{x, omp_get_max_threads()};
  std::lock_guard<std::mutex> lock(mu_);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  auto p = std::make_shared<Plan>();
  try {
    int nsp = g.nsp;
    Dims src(x.begin(), x.end()), dst{x[0], x[1]};
    dst.insert(dst.end(), g.out.begin(), g.out.end());
    Dims strides(g.s.begin(), g.s.end()), kernel(g.k.begin(), g.k.end()), dil(nsp), pl(g.pb.begin(), g.pb.end()), pr(nsp);
    for (int i = 0; i < nsp; ++i) {
      dil[i] = g.d[i] - 1;
      int64_t dk = (g.k[i] - 1) * g.d[i] + 1;
      // Right padding oneDNN needs to produce exactly `out` windows.
      pr[i] = (g.out[i] - 1) * g.s[i] + dk - g.in[i] - g.pb[i];
      if (pr[i] < 0) pr[i] = 0;
      // With count_include_pad, a window reaching past the declared end padding (ceil
      // mode) divides by fewer elements than oneDNN would: use the loops.
      if (a_.kind == PoolKind::kAvg && a_.count_include_pad && pr[i] > g.pe[i]) p->use_ref = true;
    }
    if (!p->use_ref) {
      dnnl::algorithm alg = a_.kind == PoolKind::kMax ? dnnl::algorithm::pooling_max
                            : a_.count_include_pad       ? dnnl::algorithm::pooling_avg_include_padding
                                                         : dnnl::algorithm::pooling_avg_exclude_padding;
      p->src_md = blocked_ ? dnnl_util::blocked_md(src) : memory::desc(src, memory::data_type::f32, row_major(src));
      p->dst_md = blocked_ ? dnnl_util::blocked_md(dst) : memory::desc(dst, memory::data_type::f32, row_major(dst));
      dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, alg, p->src_md, p->dst_md, strides, kernel, dil,
                                       pl, pr);
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      dnnl::pooling_v2_forward::primitive_desc pd(d, attr, eng_);
      const char* impl = pd.impl_info_str();
      if (std::strncmp(impl, "ref", 3) == 0 || std::strncmp(impl, "simple", 6) == 0) {
        p->use_ref = true;  // oneDNN's reference or scalar loops: ours are faster
      } else {
        p->scratch_md = pd.scratchpad_desc();
        p->prim = dnnl::pooling_v2_forward(pd);
      }
    }
  } catch (const dnnl::error&) {
    p->use_ref = true;
  }
  plans_.emplace(key, p);
  return p;
}

Status PoolKernel::compute(KernelContext& ctx) const {
  const std::string& where = ctx.where();
  const Tensor* x = ctx.input(0);
  if (!x) return invalid_argument(where + "input X is required");
  DataType dt = x->dtype();
  bool ok_type = dt == DataType::kFloat32 || dt == DataType::kFloat64;
  if (a_.kind == PoolKind::kMax) ok_type = ok_type || dt == DataType::kInt8 || dt == DataType::kUInt8;
  if (!ok_type) BH_UNSUPPORTED_DTYPE(where, dt);
  if (blocked_) return compute_blocked(ctx, *x);
  if (nhwc_) return compute_nhwc(ctx, *x);
  if (x->rank() < 3 || x->rank() > 5)
    return invalid_argument(where + "X must have rank 3 to 5 (N, C, spatial...), got " + x->describe());
  BH_ASSIGN_OR_RETURN(std::shared_ptr<const PoolGeo> geometry, geometry_for(x->shape(), where));
  const PoolGeo& g = *geometry;
  Shape yshape{x->dim(0), x->dim(1)};
  yshape.insert(yshape.end(), g.out.begin(), g.out.end());
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, dt, yshape));
  bool want_idx = a_.kind == PoolKind::kMax && ctx.output_wanted(1);
  Tensor idx;
  if (want_idx) {
    BH_ASSIGN_OR_RETURN(idx, ctx.allocate_output(1, DataType::kInt64, yshape));
  }
  if (y.numel() == 0) return Status::ok();
  if (x->numel() == 0) return invalid_argument(where + "empty input " + x->describe() + " gives no pooling windows");
  if (dt == DataType::kFloat32 && !want_idx && a_.kind != PoolKind::kLp) {
    auto plan = plan_for(x->shape(), g);
    if (!plan->use_ref) return run_plan(ctx, *plan, x->raw(), y.raw());
    if (g.nsp == 2) {
      pool_plain_2d(a_, to_geo3(g), x->data<float>(), y.data<float>(), x->dim(0) * x->dim(1), ctx.threads());
      return Status::ok();
    }
  }
  Geo3 g3 = to_geo3(g);
  int64_t NC = x->dim(0) * x->dim(1);
  int64_t* ip = want_idx ? idx.data<int64_t>() : nullptr;
  int th = ctx.threads();
  switch (dt) {
    case DataType::kFloat32: pool_ref<float, float>(a_, x->data<float>(), y.data<float>(), ip, NC, g3, th); break;
    case DataType::kFloat64: pool_ref<double, double>(a_, x->data<double>(), y.data<double>(), ip, NC, g3, th); break;
    case DataType::kInt8: pool_ref<int8_t, int32_t>(a_, x->data<int8_t>(), y.data<int8_t>(), ip, NC, g3, th); break;
    case DataType::kUInt8: pool_ref<uint8_t, int32_t>(a_, x->data<uint8_t>(), y.data<uint8_t>(), ip, NC, g3, th); break;
    default: BH_UNSUPPORTED_DTYPE(where, dt);
  }
  return Status::ok();
}

Status PoolKernel::run_plan(KernelContext& ctx, const Plan& plan, const void* x, void* y) const {
  try {
    dnnl_util::CallPool::Call call(calls_);
    Tensor scratch;  // alive until the primitive has finished
    const memory* scratch_m = nullptr;
    if (size_t ss = plan.scratch_md.get_size()) {
      BH_ASSIGN_OR_RETURN(scratch, ctx.allocate_scratch(DataType::kUInt8, Shape{static_cast<int64_t>(ss)}));
      scratch_m = &call.memory(plan.scratch_md, scratch.raw());
    }
    call.execute(plan.prim, {{DNNL_ARG_SRC, &call.memory(plan.src_md, const_cast<void*>(x))},
                             {DNNL_ARG_DST, &call.memory(plan.dst_md, y)}, {DNNL_ARG_SCRATCHPAD, scratch_m}});
    return Status::ok();
  } catch (const dnnl::error& e) {
    return internal_error(ctx.where() + "oneDNN pooling failed: " + e.what());
  }
}

// Max pooling of a channels-last [N, H, W, C] tensor: each output pixel is the element-wise
// maximum of its window's input pixels, taken over 64 channels at a time in a local
// accumulator with vector maxima (written into Y through std::max, GCC 12 kept the loop
// scalar: 5 ms for ResNet-50's stem pool, against 0.12). Window
// positions outside the input are skipped, as in pool_ref; a window with none inside
// gives the type's lowest value, as there.
template <typename T>
void max_pool_nhwc(const Geo3& g, const T* x, T* y, int64_t N, int64_t C, int threads) {
  constexpr int64_t kLanes = 64;
  const int64_t IH = g.in[1], IW = g.in[2], OH = g.out[1], OW = g.out[2];
  // Rows of at least ~64 K window-element maxima per piece: small pools stay on one thread.
  const int64_t row_work = std::max<int64_t>(1, OW * C * g.k[1] * g.k[2]);
  // By value: through std::max's reference GCC 12 will not vectorise it.
  auto max_into = [](T* acc, const T* xp, int64_t len) __attribute__((always_inline)) {
    for (int64_t l = 0; l < len; ++l) {
      const T v = xp[l], a = acc[l];
      acc[l] = v > a ? v : a;
    }
  };
  parallel_for(threads, N * OH, std::max<int64_t>(1, (int64_t{1} << 16) / row_work), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t n = r / OH, oh = r % OH;
      for (int64_t ow = 0; ow < OW; ++ow) {
        T* yp = y + (r * OW + ow) * C;
        for (int64_t c0 = 0; c0 < C; c0 += kLanes) {
          const int64_t cn = std::min(kLanes, C - c0);
          T acc[kLanes];
          for (int64_t l = 0; l < kLanes; ++l) acc[l] = std::numeric_limits<T>::lowest();
          for (int64_t kh = 0; kh < g.k[1]; ++kh) {
            const int64_t ih = oh * g.s[1] - g.pb[1] + kh * g.d[1];
            if (ih < 0 || ih >= IH) continue;
            for (int64_t kw = 0; kw < g.k[2]; ++kw) {
              const int64_t iw = ow * g.s[2] - g.pb[2] + kw * g.d[2];
              if (iw < 0 || iw >= IW) continue;
              const T* xp = x + ((n * IH + ih) * IW + iw) * C + c0;
              max_into(acc, xp, cn);
            }
          }
          std::memcpy(yp + c0, acc, static_cast<size_t>(cn) * sizeof(T));
        }
      }
    }
  });
}

Status PoolKernel::compute_nhwc(KernelContext& ctx, const Tensor& x) const {
  const std::string& where = ctx.where();
  const DataType dt = x.dtype();
  if (a_.kind != PoolKind::kMax || (dt != DataType::kUInt8 && dt != DataType::kInt8) || x.rank() != 4)
    return invalid_argument(where + "a channels-last pooling is a MaxPool of a uint8 or int8 [N, H, W, C] input, got " +
                            x.describe());
  if (ctx.output_wanted(1)) return invalid_argument(where + "a channels-last MaxPool has no Indices output");
  const int64_t N = x.dim(0), H = x.dim(1), W = x.dim(2), C = x.dim(3);
  BH_ASSIGN_OR_RETURN(std::shared_ptr<const PoolGeo> geometry, geometry_for(Shape{N, C, H, W}, where));
  const PoolGeo& g = *geometry;
  if (g.nsp != 2) return invalid_argument(where + "a channels-last MaxPool has 2 spatial dimensions");
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, dt, Shape{N, g.out[0], g.out[1], C}));
  if (y.numel() == 0) return Status::ok();
  if (x.numel() == 0) return invalid_argument(where + "empty input " + x.describe() + " gives no pooling windows");
  const Geo3 g3 = to_geo3(g);
  if (dt == DataType::kUInt8) max_pool_nhwc(g3, x.data<uint8_t>(), y.data<uint8_t>(), N, C, ctx.threads());
  else max_pool_nhwc(g3, x.data<int8_t>(), y.data<int8_t>(), N, C, ctx.threads());
  return Status::ok();
}

Status PoolKernel::compute_blocked(KernelContext& ctx, const Tensor& x) const {
  const std::string& where = ctx.where();
  using dnnl_util::kBlock;
  if (x.dtype() != DataType::kFloat32 || x.rank() != 5 || x.dim(4) != kBlock || a_.kind == PoolKind::kLp)
    return invalid_argument(where + "an nChw16c pooling needs a float32 [N, C/16, H, W, 16] input, got " + x.describe());
  if (ctx.output_wanted(1)) return invalid_argument(where + "an nChw16c pooling has no Indices output");
  const int64_t N = x.dim(0), Cp = x.dim(1) * kBlock;
  Shape xs{N, Cp, x.dim(2), x.dim(3)};
  BH_ASSIGN_OR_RETURN(std::shared_ptr<const PoolGeo> geometry, geometry_for(xs, where));
  const PoolGeo& g = *geometry;
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kFloat32, Shape{N, x.dim(1), g.out[0], g.out[1], kBlock}));
  if (y.numel() == 0) return Status::ok();
  if (x.numel() == 0) return invalid_argument(where + "empty input " + x.describe() + " gives no pooling windows");
  auto plan = plan_for(xs, g);
  if (!plan->use_ref) return run_plan(ctx, *plan, x.raw(), y.raw());
  pool_blocked_2d(a_, to_geo3(g), x.data<float>(), y.data<float>(), N * x.dim(1), ctx.threads());
  return Status::ok();
}

// A pooling node's attributes, checked.
Result<PoolAttrs> pool_attrs(const KernelInfo& info, PoolKind kind) {
  const ir::Node& n = info.node;
  PoolAttrs a;
  a.kind = kind;
  a.auto_pad = n.attr_string("auto_pad", "NOTSET");
  a.kernel_shape = n.attr_ints("kernel_shape");
  if (a.kernel_shape.empty()) return invalid_argument(info.where() + "attribute kernel_shape is required");
  a.strides = n.attr_ints("strides");
  a.dilations = n.attr_ints("dilations");
  a.pads = n.attr_ints("pads");
  a.ceil_mode = n.attr_int("ceil_mode", 0) != 0;
  a.count_include_pad = n.attr_int("count_include_pad", 0) != 0;
  a.storage_order = n.attr_int("storage_order", 0);
  if (a.storage_order != 0 && a.storage_order != 1)
    return invalid_argument(info.where() + "storage_order must be 0 or 1, got " + std::to_string(a.storage_order));
  a.p = n.attr_float("p", 2.f);
  if (kind == PoolKind::kLp && !(a.p > 0)) return invalid_argument(info.where() + "p must be positive");
  return a;
}

Result<std::unique_ptr<Kernel>> make_pool(const KernelInfo& info, PoolKind kind) {
  const ir::Node& n = info.node;
  BH_RETURN_IF_ERROR(
      check_input_type(info, 0, {ew::kFloats | (kind == PoolKind::kMax ? ew::kI8 | ew::kU8 : 0u), false}));
  BH_ASSIGN_OR_RETURN(PoolAttrs a, pool_attrs(info, kind));
  try {
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    const std::string layout = n.attr_string("_layout", "");
    const bool blocked = layout == "nChw16c", nhwc = layout == "nhwc";
    if (nhwc && kind != PoolKind::kMax) return invalid_argument(info.where() + "only MaxPool runs channels-last");
    return std::unique_ptr<Kernel>(std::make_unique<PoolKernel>(std::move(a), std::move(eng), blocked, nhwc));
  } catch (const dnnl::error& e) {
    return internal_error(info.where() + "cannot create a oneDNN CPU engine: " + e.what());
  }
}

// ---------------------------------------------------------------------------------------
// QLinearAveragePool (internal, backend/qlinear_pool.h): AveragePool over a quantised X,
// requantised. Each output: the exact sum of (x - x_zero_point) over the window's
// positions inside X, times x_scale, over the divisor (those positions, or with
// count_include_pad also those in the padding), over y_scale, rounded half to even, plus
// y_zero_point: what DequantizeLinear → AveragePool → QuantizeLinear computes, to within
// a step (the float path rounds each dequantised value first).

struct QPoolParams {
  PoolAttrs a;
  double xs = 1, ys = 1;
  int32_t zx = 0, zy = 0;
  DataType yt = DataType::kUInt8;
};

template <typename T>
Status qlinear_avg_pool(KernelContext& ctx, const Tensor& x, const QPoolParams& q) {
  const std::string& where = ctx.where();
  if (x.rank() < 3 || x.rank() > 5) return invalid_argument(where + "X must be [N, C, spatial...] of 1 to 3 spatial dimensions, got " + x.describe());
  PoolGeo pg;
  BH_RETURN_IF_ERROR(resolve_pool(q.a, x.shape(), where, &pg));
  const Geo3 g = to_geo3(pg);
  Shape ys{x.dim(0), x.dim(1)};
  ys.insert(ys.end(), pg.out.begin(), pg.out.end());
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, q.yt, ys));
  const int64_t NC = x.dim(0) * x.dim(1);
  const int64_t isz = g.in[0] * g.in[1] * g.in[2], osz = g.out[0] * g.out[1] * g.out[2];
  if (NC == 0 || osz == 0) return Status::ok();
  const T* xp = x.data<T>();
  uint8_t* out = static_cast<uint8_t*>(y.raw());
  const int32_t lo = q.yt == DataType::kUInt8 ? 0 : -128, hi = q.yt == DataType::kUInt8 ? 255 : 127;
  const double mult = q.xs / q.ys;
  parallel_for(ctx.threads(), NC, 1, [&](int64_t b0, int64_t e0) {
    for (int64_t nc = b0; nc < e0; ++nc) {
      const T* xc = xp + nc * isz;
      uint8_t* yc = out + nc * osz;
      for (int64_t od = 0; od < g.out[0]; ++od)
        for (int64_t oh = 0; oh < g.out[1]; ++oh)
          for (int64_t ow = 0; ow < g.out[2]; ++ow) {
            int64_t sum = 0, count = 0;
            const int64_t padded = visit_window(g, od, oh, ow, [&](int64_t ii, int64_t, int64_t, int64_t) {
              sum += int64_t{xc[ii]} - q.zx;
              ++count;
            });
            const int64_t div = q.a.count_include_pad ? padded : count;
            // No position at all: the float path's NaN, which quantises to the zero point.
            double v = div > 0 ? std::nearbyint(static_cast<double>(sum) * mult / static_cast<double>(div)) + q.zy : q.zy;
            v = std::clamp(v, static_cast<double>(lo), static_cast<double>(hi));
            yc[(od * g.out[1] + oh) * g.out[2] + ow] = static_cast<uint8_t>(static_cast<int32_t>(v));
          }
    }
  });
  return Status::ok();
}

Result<std::unique_ptr<Kernel>> make_qlinear_average_pool(const KernelInfo& info) {
  const ir::Node& n = info.node;
  QPoolParams q;
  BH_ASSIGN_OR_RETURN(q.a, pool_attrs(info, PoolKind::kAvg));
  q.xs = n.attr_float("_x_scale", 1.f);
  q.ys = n.attr_float("_y_scale", 1.f);
  q.zx = static_cast<int32_t>(n.attr_int("_x_zero_point", 0));
  q.zy = static_cast<int32_t>(n.attr_int("_y_zero_point", 0));
  q.yt = static_cast<DataType>(n.attr_int("_y_type", static_cast<int64_t>(DataType::kUInt8)));
  if (q.yt != DataType::kUInt8 && q.yt != DataType::kInt8) return invalid_argument(info.where() + "_y_type must be uint8 or int8");
  if (q.zy < (q.yt == DataType::kUInt8 ? 0 : -128) || q.zy > (q.yt == DataType::kUInt8 ? 255 : 127) || q.zx < -128 || q.zx > 255)
    return invalid_argument(info.where() + "zero points out of their types' ranges");
  if (!(q.xs > 0) || !(q.ys > 0) || !std::isfinite(q.xs) || !std::isfinite(q.ys))
    return invalid_argument(info.where() + "_x_scale and _y_scale must be positive and finite");
  return make_kernel([q](KernelContext& ctx) -> Status {
    BH_ASSIGN_OR_RETURN(const Tensor* x, required_input(ctx, 0, "X"));
    if (x->dtype() == DataType::kUInt8) return qlinear_avg_pool<uint8_t>(ctx, *x, q);
    if (x->dtype() == DataType::kInt8) return qlinear_avg_pool<int8_t>(ctx, *x, q);
    return unsupported(ctx.where() + "X must be uint8 or int8, got " + x->describe());
  });
}

// ---------------------------------------------------------------------------------------
// Global pools

template <typename T>
void global_pool(PoolKind kind, double p, const T* x, T* y, int64_t NC, int64_t sp, int threads) {
  parallel_for(threads, NC, 4, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const T* xp = x + i * sp;
      if (kind == PoolKind::kMax) {
        T m = xp[0];
        for (int64_t j = 1; j < sp; ++j) m = xp[j] > m ? xp[j] : m;
        y[i] = m;
      } else if (kind == PoolKind::kAvg) {
        // 32 partial sums in double (independent chains the compiler vectorises: one
        // chain of dependent adds was latency-bound, 1 ms for det's [96, 120, 160]).
        constexpr int kLanes = 32;
        double part[kLanes] = {};
        int64_t j = 0;
        for (; j + kLanes <= sp; j += kLanes)
          for (int l = 0; l < kLanes; ++l) part[l] += static_cast<double>(xp[j + l]);
        double s = 0;
        for (int l = 0; l < kLanes; ++l) s += part[l];
        for (; j < sp; ++j) s += xp[j];
        y[i] = static_cast<T>(s / static_cast<double>(sp));
      } else {
        double s = 0;
        for (int64_t j = 0; j < sp; ++j) s += std::pow(std::abs(static_cast<double>(xp[j])), p);
        y[i] = static_cast<T>(std::pow(s, 1.0 / p));
      }
    }
  });
}

// X in nChw16c as [N, C/16, H, W, 16]: Y is [N, C/16, 1, 1, 16].
Status global_pool_blocked(PoolKind kind, const Tensor& x, KernelContext& ctx) {
  using dnnl_util::kBlock;
  if (x.dtype() != DataType::kFloat32 || x.rank() != 5 || x.dim(4) != kBlock)
    return invalid_argument(ctx.where() + "an nChw16c global pooling needs a float32 [N, C/16, H, W, 16] input, got " +
                            x.describe());
  const int64_t NB = x.dim(0) * x.dim(1), S = x.dim(2) * x.dim(3);
  if (S == 0) return invalid_argument(ctx.where() + "empty spatial extent in " + x.describe());
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kFloat32, Shape{x.dim(0), x.dim(1), 1, 1, kBlock}));
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  parallel_for(ctx.threads(), NB, std::max<int64_t>(1, 4096 / std::max<int64_t>(S, 1)), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float* src = xp + i * S * kBlock;
      float acc[kBlock];
      for (int c = 0; c < kBlock; ++c) acc[c] = kind == PoolKind::kMax ? src[c] : 0.f;
      for (int64_t s = kind == PoolKind::kMax ? 1 : 0; s < S; ++s)
        for (int c = 0; c < kBlock; ++c)
          acc[c] = kind == PoolKind::kMax ? std::max(acc[c], src[s * kBlock + c]) : acc[c] + src[s * kBlock + c];
      for (int c = 0; c < kBlock; ++c)
        yp[i * kBlock + c] = kind == PoolKind::kMax ? acc[c] : acc[c] / static_cast<float>(S);
    }
  });
  return Status::ok();
}

Status global_pool_compute(PoolKind kind, double p, KernelContext& ctx, bool blocked = false) {
  const std::string& where = ctx.where();
  const Tensor* x = ctx.input(0);
  if (!x) return invalid_argument(where + "input X is required");
  if (blocked) return global_pool_blocked(kind, *x, ctx);
  if (x->rank() < 2) return invalid_argument(where + "X must have rank >= 2 (N, C, ...), got " + x->describe());
  DataType dt = x->dtype();
  if (dt != DataType::kFloat32 && dt != DataType::kFloat64) BH_UNSUPPORTED_DTYPE(where, dt);
  Shape ys = x->shape();
  for (size_t i = 2; i < ys.size(); ++i) ys[i] = 1;
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, dt, ys));
  int64_t NC = x->dim(0) * x->dim(1);
  if (NC == 0) return Status::ok();
  int64_t sp = x->numel() / NC;
  if (sp == 0) return invalid_argument(where + "empty spatial extent in " + x->describe());
  if (dt == DataType::kFloat32) global_pool<float>(kind, p, x->data<float>(), y.data<float>(), NC, sp, ctx.threads());
  else global_pool<double>(kind, p, x->data<double>(), y.data<double>(), NC, sp, ctx.threads());
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// BatchNormalization

// A channel's BatchNormalization as x·a + b: a = scale / sqrt(var + eps), b = B - mean·a,
// in double (each path rounds them to its element type once).
std::pair<double, double> bn_affine(double scale, double bias, double mean, double var, double eps) {
  const double a = scale / std::sqrt(var + eps);
  return {a, bias - mean * a};
}

template <typename T>
Status batchnorm_typed(KernelContext& ctx, const Tensor& X, const Tensor& S, const Tensor& B, const Tensor& mean,
                       const Tensor& var, double eps, double momentum, bool training, bool relu, int64_t C,
                       int64_t inner) {
  int64_t N = X.dim(0);
  BH_ASSIGN_OR_RETURN(Tensor Y, ctx.allocate_output(0, X.dtype(), X.shape()));
  const T* x = X.data<T>();
  T* y = Y.data<T>();
  bool per_elem = S.numel() == C * inner && inner != 1;  // legacy spatial=0
  int64_t pstride = per_elem ? inner : 0;
  std::vector<double> bm, bv;  // batch statistics (training)
  if (training) {
    bm.assign(C, 0.0);
    bv.assign(C, 0.0);
    double cnt = static_cast<double>(N * inner);
    for (int64_t c = 0; c < C; ++c) {
      double s = 0;
      for (int64_t n = 0; n < N; ++n) {
        const T* xp = x + (n * C + c) * inner;
        for (int64_t i = 0; i < inner; ++i) s += xp[i];
      }
      double m = cnt > 0 ? s / cnt : 0.0, q = 0;
      for (int64_t n = 0; n < N; ++n) {
        const T* xp = x + (n * C + c) * inner;
        for (int64_t i = 0; i < inner; ++i) q += (xp[i] - m) * (xp[i] - m);
      }
      bm[c] = m;
      bv[c] = cnt > 0 ? q / cnt : 0.0;
    }
  }
  const T* sp = S.data<T>();
  const T* bp = B.data<T>();
  const T* mp = mean.data<T>();
  const T* vp = var.data<T>();
  parallel_for(ctx.threads(), N * C, 1, [&](int64_t b0, int64_t e0) {
    for (int64_t nc = b0; nc < e0; ++nc) {
      int64_t c = nc % C;
      const T* xp = x + nc * inner;
      T* yp = y + nc * inner;
      if (!per_elem) {
        // The affine map in the element type (vectorised), its coefficients in double.
        const auto [ad, shd] = bn_affine(sp[c], bp[c], training ? bm[c] : mp[c], training ? bv[c] : vp[c], eps);
        const T a = static_cast<T>(ad), sh = static_cast<T>(shd);
        if (relu) {
          for (int64_t i = 0; i < inner; ++i) {
            T t = xp[i] * a + sh;
            yp[i] = t > T(0) ? t : T(0);
          }
        } else {
          for (int64_t i = 0; i < inner; ++i) yp[i] = xp[i] * a + sh;
        }
      } else {
        for (int64_t i = 0; i < inner; ++i) {
          int64_t k = c * pstride + i;
          double a = sp[k] / std::sqrt(static_cast<double>(vp[k]) + eps);
          T t = static_cast<T>((xp[i] - mp[k]) * a + bp[k]);
          yp[i] = relu && !(t > T(0)) ? T(0) : t;
        }
      }
    }
  });
  if (training) {
    if (ctx.output_wanted(1)) {
      BH_ASSIGN_OR_RETURN(Tensor rm, ctx.allocate_output(1, X.dtype(), mean.shape()));
      for (int64_t c = 0; c < C; ++c) rm.data<T>()[c] = static_cast<T>(mp[c] * momentum + bm[c] * (1 - momentum));
    }
    if (ctx.output_wanted(2)) {
      BH_ASSIGN_OR_RETURN(Tensor rv, ctx.allocate_output(2, X.dtype(), var.shape()));
      for (int64_t c = 0; c < C; ++c) rv.data<T>()[c] = static_cast<T>(vp[c] * momentum + bv[c] * (1 - momentum));
    }
    if (ctx.output_wanted(3)) {
      BH_ASSIGN_OR_RETURN(Tensor o, ctx.allocate_output(3, X.dtype(), mean.shape()));
      for (int64_t c = 0; c < C; ++c) o.data<T>()[c] = static_cast<T>(bm[c]);
    }
    if (ctx.output_wanted(4)) {
      BH_ASSIGN_OR_RETURN(Tensor o, ctx.allocate_output(4, X.dtype(), var.shape()));
      for (int64_t c = 0; c < C; ++c) o.data<T>()[c] = static_cast<T>(bv[c]);
    }
  }
  return Status::ok();
}

// Inference BatchNormalization of an nChw16c tensor ([N, C/16, H, W, 16], exec/layout.h):
// per channel the same x·a + b (bn_affine, rounded once) as the plain loop, so the same
// bits; padded channels get a = b = 0 and come out zero.
Status batchnorm_blocked(KernelContext& ctx, double eps, bool relu) {
  using dnnl_util::kBlock;
  const std::string& where = ctx.where();
  const Tensor* X = ctx.input(0);
  const Tensor *S = ctx.input(1), *B = ctx.input(2), *mean = ctx.input(3), *var = ctx.input(4);
  if (!X || !S || !B || !mean || !var) return invalid_argument(where + "needs inputs X, scale, B, input_mean, input_var");
  if (X->dtype() != DataType::kFloat32 || X->rank() != 5 || X->dim(4) != kBlock)
    return invalid_argument(where + "an nChw16c BatchNormalization needs a float32 [N, C/16, H, W, 16] input, got " +
                            X->describe());
  if (ctx.output_wanted(1) || ctx.output_wanted(2))
    return invalid_argument(where + "an nChw16c BatchNormalization has no statistics outputs");
  const int64_t N = X->dim(0), Cb = X->dim(1), HW = X->dim(2) * X->dim(3), C = S->numel();
  for (const Tensor* t : {S, B, mean, var})
    if (t->dtype() != DataType::kFloat32 || t->numel() != C)
      return invalid_argument(where + "parameter " + t->describe() + " does not match scale " + S->describe());
  if (C > Cb * kBlock || C <= (Cb - 1) * kBlock)
    return invalid_argument(where + std::to_string(C) + " channels do not fit the blocked input " + X->describe());
  std::vector<float> a(static_cast<size_t>(Cb * kBlock), 0.f), b(a.size(), 0.f);
  for (int64_t c = 0; c < C; ++c) {
    const auto [ad, shd] =
        bn_affine(S->data<float>()[c], B->data<float>()[c], mean->data<float>()[c], var->data<float>()[c], eps);
    a[c] = static_cast<float>(ad);
    b[c] = static_cast<float>(shd);
  }
  BH_ASSIGN_OR_RETURN(Tensor Y, ctx.allocate_output(0, DataType::kFloat32, X->shape()));
  const float* x = X->data<float>();
  float* y = Y.data<float>();
  parallel_for(ctx.threads(), N * Cb, 1, [&](int64_t b0, int64_t e0) {
    for (int64_t nc = b0; nc < e0; ++nc) {
      const float* ap = a.data() + (nc % Cb) * kBlock;
      const float* bp = b.data() + (nc % Cb) * kBlock;
      const float* xp = x + nc * HW * kBlock;
      float* yp = y + nc * HW * kBlock;
      for (int64_t i = 0; i < HW; ++i)
        for (int64_t l = 0; l < kBlock; ++l) {
          const float t = xp[i * kBlock + l] * ap[l] + bp[l];
          yp[i * kBlock + l] = relu ? (t > 0.f ? t : 0.f) : t;
        }
    }
  });
  return Status::ok();
}

// relu: the optimiser fused a Relu after this node (`_relu`, exec/optimize.cc).
Status batchnorm_compute(KernelContext& ctx, double eps, double momentum, bool training_attr, int opset, bool relu) {
  const std::string& where = ctx.where();
  const Tensor* X = ctx.input(0);
  const Tensor* S = ctx.input(1);
  const Tensor* B = ctx.input(2);
  const Tensor* mean = ctx.input(3);
  const Tensor* var = ctx.input(4);
  if (!X || !S || !B || !mean || !var) return invalid_argument(where + "needs inputs X, scale, B, input_mean, input_var");
  DataType dt = X->dtype();
  if (dt != DataType::kFloat32 && dt != DataType::kFloat64) BH_UNSUPPORTED_DTYPE(where, dt);
  for (const Tensor* t : {S, B, mean, var})
    if (t->dtype() != dt)
      return unsupported(where + "mixed element types are not supported: X " + X->describe() + ", parameter " +
                         t->describe());
  if (X->rank() < 2) return invalid_argument(where + "X must have rank >= 2 (N, C, ...), got " + X->describe());
  int64_t C = X->dim(1);
  int64_t inner = 1;
  for (int i = 2; i < X->rank(); ++i) inner *= X->dim(i);
  for (const Tensor* t : {S, B, mean, var})
    if (t->numel() != C && t->numel() != C * inner)
      return invalid_argument(where + "parameter " + t->describe() + " does not match " + std::to_string(C) +
                              " channels of X " + X->describe());
  if (S->numel() != B->numel() || S->numel() != mean->numel() || S->numel() != var->numel())
    return invalid_argument(where + "scale, B, mean and var must have the same size");
  // Training statistics: opset >= 14 via training_mode; older opsets when the optional
  // statistics outputs are requested.
  bool training = opset >= 14 ? training_attr : (ctx.output_wanted(1) || ctx.output_wanted(2));
  if (training && S->numel() != C)
    return unsupported(where + "training mode with per-element (spatial=0) parameters is not supported");
  if (dt == DataType::kFloat32)
    return batchnorm_typed<float>(ctx, *X, *S, *B, *mean, *var, eps, momentum, training, relu, C, inner);
  return batchnorm_typed<double>(ctx, *X, *S, *B, *mean, *var, eps, momentum, training, relu, C, inner);
}

}  // namespace

void register_dnnl_pool_kernels(KernelTable& t) {
  t.add("MaxPool", 1, [](const KernelInfo& info) { return make_pool(info, PoolKind::kMax); });
  t.add("AveragePool", 1, [](const KernelInfo& info) { return make_pool(info, PoolKind::kAvg); });
  t.add("LpPool", 1, [](const KernelInfo& info) { return make_pool(info, PoolKind::kLp); });
  t.add(kQLinearAveragePool, 1, make_qlinear_average_pool, kQLinearPoolDomain);
  t.add("GlobalAveragePool", 1, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    BH_RETURN_IF_ERROR(check_input_type(info, 0, {ew::kFloats, false}));
    bool blocked = info.node.attr_string("_layout", "") == "nChw16c";
    return make_kernel([blocked](KernelContext& ctx) { return global_pool_compute(PoolKind::kAvg, 1.0, ctx, blocked); });
  });
  t.add("GlobalMaxPool", 1, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    BH_RETURN_IF_ERROR(check_input_type(info, 0, {ew::kFloats, false}));
    bool blocked = info.node.attr_string("_layout", "") == "nChw16c";
    return make_kernel([blocked](KernelContext& ctx) { return global_pool_compute(PoolKind::kMax, 1.0, ctx, blocked); });
  });
  t.add("BatchNormalization", 1, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    const ir::Node& n = info.node;
    if (n.inputs.size() < 5) return invalid_argument(info.where() + "needs inputs X, scale, B, input_mean, input_var");
    BH_RETURN_IF_ERROR(check_input_type(info, 0, {ew::kFloats, false}));
    double eps = n.attr_float("epsilon", 1e-5f);
    double momentum = n.attr_float("momentum", 0.9f);
    bool training = n.attr_int("training_mode", 0) != 0;
    int opset = n.opset;
    bool relu = n.attr_int("_relu", 0) != 0;
    if (n.attr_string("_layout", "") == "nChw16c") {
      if (training) return invalid_argument(info.where() + "an nChw16c BatchNormalization is for inference only");
      return make_kernel([=](KernelContext& ctx) { return batchnorm_blocked(ctx, eps, relu); });
    }
    return make_kernel(
        [=](KernelContext& ctx) { return batchnorm_compute(ctx, eps, momentum, training, opset, relu); });
  });
}

}  // namespace bulkhead::cpu
