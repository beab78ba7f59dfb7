// oneDNN-backed heavy operators, part 1: Conv and ConvTranspose.
//
// float32 runs on oneDNN primitives: the primitive picks its own (blocked) layouts
// (format_tag::any) and we reorder plain NCHW <-> blocked at the node's boundaries.
// Primitives are cached per (input shape, weight shape, thread count) in a mutex-guarded
// map; constant weights are reordered into the primitive's layout once and kept, shared by
// the primitives of one problem made for different thread counts.
// Scratchpads are user-managed (allocated per call from the KernelContext), so one
// primitive can run concurrently on several threads. float64, and any problem oneDNN
// rejects, run on plain loops.
//
// Pooling and BatchNormalization live in dnnl_pool.cc, MatMul and Gemm in dnnl_gemm.cc.

#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <atomic>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend/conv_attrs.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_util.h"
#include "backends/cpu/kernels/dnnl_common.h"
#include "backends/cpu/kernels/dnnl_int8.h"
#include "backends/cpu/kernels/post_ops.h"
#include "backends/cpu/kernels/quant_util.h"
#include "backends/cpu/kernels/type_check.h"

namespace bulkhead::cpu {

void register_dnnl_pool_kernels(KernelTable& t);  // dnnl_pool.cc
void register_dnnl_gemm_kernels(KernelTable& t);  // dnnl_gemm.cc
void register_dnnl_layout_kernels(KernelTable& t);  // dnnl_layout.cc

namespace {

using dnnl::memory;
using Dims = memory::dims;
using namespace dnnl_util;

int64_t floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

std::string vec_str(const std::vector<int64_t>& v) { return shape_to_string(v); }

// ---------------------------------------------------------------------------------------
// float16 / bfloat16: run the float32 kernel on converted copies and convert back.

bool is_half(DataType t) { return t == DataType::kFloat16 || t == DataType::kBFloat16; }

// A kernel context that hands a kernel substitutes for some of its inputs (`inputs_`) and
// forwards everything else to the context it wraps; subclasses decide what an output is.
class SubstituteContext : public KernelContext {
 public:
  explicit SubstituteContext(KernelContext& inner) : inner_(inner) {}
  int num_inputs() const override { return inner_.num_inputs(); }
  const Value* input_value(int i) const override {
    return i >= 0 && i < static_cast<int>(inputs_.size()) && !inputs_[i].is_none() ? &inputs_[i] : nullptr;
  }
  int num_outputs() const override { return inner_.num_outputs(); }
  bool output_wanted(int i) const override { return inner_.output_wanted(i); }
  Status set_output(int i, Value value) override { return inner_.set_output(i, std::move(value)); }
  Result<Tensor> allocate_scratch(DataType dtype, const Shape& shape) override { return inner_.allocate_scratch(dtype, shape); }
  int threads() const override { return inner_.threads(); }
  Result<std::vector<Value>> run_subgraph(const std::string& attr, std::vector<Value> inputs) override {
    return inner_.run_subgraph(attr, std::move(inputs));
  }
  const std::string& where() const override { return inner_.where(); }

 protected:
  KernelContext& inner_;
  std::vector<Value> inputs_;
};

class FloatContext final : public SubstituteContext {
 public:
  FloatContext(KernelContext& inner, DataType half) : SubstituteContext(inner), half_(half) {}
  Status convert_inputs() {
    for (int i = 0; i < inner_.num_inputs(); ++i) {
      const Value* v = inner_.input_value(i);
      if (!v) {
        inputs_.emplace_back();
        continue;
      }
      if (v->is_tensor() && v->tensor.dtype() == half_) {
        const Tensor& t = v->tensor;
        BH_ASSIGN_OR_RETURN(Tensor f, inner_.allocate_scratch(DataType::kFloat32, t.shape()));
        const uint16_t* src = t.data<uint16_t>();
        float* dst = f.data<float>();
        for (int64_t k = 0; k < t.numel(); ++k)
          dst[k] = half_ == DataType::kFloat16 ? half_to_float(src[k]) : bfloat16_to_float(src[k]);
        inputs_.emplace_back(f);
      } else {
        inputs_.push_back(*v);
      }
    }
    return Status::ok();
  }
  Status convert_outputs() {
    for (auto& [i, f] : outs_) {
      BH_ASSIGN_OR_RETURN(Tensor t, inner_.allocate_output(i, half_, f.shape()));
      const float* src = f.data<float>();
      uint16_t* dst = t.data<uint16_t>();
      for (int64_t k = 0; k < f.numel(); ++k)
        dst[k] = half_ == DataType::kFloat16 ? float_to_half(src[k]) : float_to_bfloat16(src[k]);
    }
    return Status::ok();
  }
  Result<Tensor> allocate_output(int i, DataType dtype, const Shape& shape) override {
    if (dtype != DataType::kFloat32) return inner_.allocate_output(i, dtype, shape);
    BH_ASSIGN_OR_RETURN(Tensor f, inner_.allocate_scratch(DataType::kFloat32, shape));
    outs_.emplace_back(i, f);
    return f;
  }

 private:
  DataType half_;
  std::vector<std::pair<int, Tensor>> outs_;
};

}  // namespace

// Runs `fn` with float16/bfloat16 inputs seen as float32 and its float32 outputs stored
// back in the half type. Used by the dnnl family for its half-precision support.
Status dnnl_run_as_float32(KernelContext& ctx, DataType half, const std::function<Status(KernelContext&)>& fn) {
  FloatContext fc(ctx, half);
  BH_RETURN_IF_ERROR(fc.convert_inputs());
  BH_RETURN_IF_ERROR(fn(fc));
  return fc.convert_outputs();
}

namespace {

// ---------------------------------------------------------------------------------------
// Attributes and geometry


// Spatial geometry of one call, resolved from the attributes and the input shapes.
struct Geometry {
  int nsp = 0;
  std::vector<int64_t> in, k, s, d, pb, pe, out;
};

// The multiply-adds of a convolution of N images, M output channels and Cg input channels
// per group (a double: a hostile shape's product may not fit in int64).
double conv_macs(int64_t N, int64_t M, int64_t Cg, const Geometry& g) {
  double macs = static_cast<double>(N) * static_cast<double>(M) * static_cast<double>(Cg);
  for (size_t i = 0; i < g.out.size(); ++i) macs *= static_cast<double>(g.out[i]) * static_cast<double>(g.k[i]);
  return macs;
}

// Whether a 1x1 convolution of G groups of Cg -> Mg channels runs as sgemm products
// (conv1x1_sgemm): every ungrouped one, and grouped ones (ShuffleNet) unless each group is
// whole 16-channel blocks, which oneDNN's kernels take as they are.
bool pointwise_on_sgemm(int64_t G, int64_t Cg, int64_t Mg) { return G == 1 || Cg % 16 != 0 || Mg % 16 != 0; }

Status resolve_geometry(const ConvAttrs& a, bool transpose, const Shape& x, const Shape& w, const std::string& where,
                        Geometry* g) {
  int nsp = static_cast<int>(x.size()) - 2;
  g->nsp = nsp;
  g->in.assign(x.begin() + 2, x.end());
  g->k.assign(w.begin() + 2, w.end());
  if (!a.kernel_shape.empty()) {
    if (a.kernel_shape != g->k)
      return invalid_argument(where + "kernel_shape " + vec_str(a.kernel_shape) + " does not match weight shape " +
                              shape_to_string(w));
  }
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
  BH_RETURN_IF_ERROR(fill(a.strides, 1, nsp, "strides", &g->s));
  BH_RETURN_IF_ERROR(fill(a.dilations, 1, nsp, "dilations", &g->d));
  std::vector<int64_t> pads;
  BH_RETURN_IF_ERROR(fill(a.pads, 0, 2 * nsp, "pads", &pads));
  std::vector<int64_t> opad;
  BH_RETURN_IF_ERROR(fill(a.output_padding, 0, nsp, "output_padding", &opad));
  for (int i = 0; i < nsp; ++i) {
    if (g->s[i] < 1) return invalid_argument(where + "strides must be positive, got " + vec_str(g->s));
    if (g->d[i] < 1) return invalid_argument(where + "dilations must be positive, got " + vec_str(g->d));
    if (g->k[i] < 1) return invalid_argument(where + "kernel dimensions must be positive, got " + vec_str(g->k));
    if (pads[i] < 0 || pads[i + nsp] < 0) return invalid_argument(where + "pads must be non-negative, got " + vec_str(pads));
  }
  const std::string& ap = a.auto_pad;
  if (ap != "NOTSET" && ap != "SAME_UPPER" && ap != "SAME_LOWER" && ap != "VALID")
    return invalid_argument(where + "unknown auto_pad '" + ap + "'");
  g->pb.assign(nsp, 0);
  g->pe.assign(nsp, 0);
  g->out.assign(nsp, 0);
  for (int i = 0; i < nsp; ++i) {
    int64_t dk = (g->k[i] - 1) * g->d[i] + 1;
    int64_t in = g->in[i], s = g->s[i];
    if (!transpose) {
      if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
        int64_t out = (in + s - 1) / s;
        int64_t total = std::max<int64_t>(0, (out - 1) * s + dk - in);
        g->pb[i] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
        g->pe[i] = total - g->pb[i];
      } else if (ap == "NOTSET") {
        g->pb[i] = pads[i];
        g->pe[i] = pads[i + nsp];
      }
      int64_t span = in + g->pb[i] + g->pe[i] - dk;
      if (span < 0)
        return invalid_argument(where + "kernel " + vec_str(g->k) + " (dilations " + vec_str(g->d) +
                                ") is larger than the padded input " + shape_to_string(x));
      g->out[i] = span / s + 1;
    } else {
      int64_t natural = s * (in - 1) + opad[i] + dk;
      bool same = ap == "SAME_UPPER" || ap == "SAME_LOWER";
      if (!a.output_shape.empty() || (same && !a.has_pads)) {
        int64_t target;
        if (!a.output_shape.empty()) {
          size_t n = a.output_shape.size();
          if (n != static_cast<size_t>(nsp) && n != static_cast<size_t>(nsp + 2))
            return invalid_argument(where + "output_shape " + vec_str(a.output_shape) + " does not fit input " +
                                    shape_to_string(x));
          target = a.output_shape[n - nsp + i];
        } else {
          target = in * s;
        }
        int64_t total = natural - target;
        if (ap == "SAME_UPPER") {
          g->pb[i] = floordiv(total, 2);
          g->pe[i] = total - g->pb[i];
        } else {
          g->pe[i] = floordiv(total, 2);
          g->pb[i] = total - g->pe[i];
        }
        g->out[i] = target;
      } else {
        if (ap == "NOTSET" || same) {
          g->pb[i] = pads[i];
          g->pe[i] = pads[i + nsp];
        }
        g->out[i] = natural - g->pb[i] - g->pe[i];
      }
      if (g->out[i] < 0)
        return invalid_argument(where + "computed output size " + std::to_string(g->out[i]) + " is negative");
    }
  }
  return Status::ok();
}

// A kernel's resolve_geometry for the last shapes it saw (X and W): nine vectors and the
// auto_pad compares a call, once per node for a model of fixed shapes.
using GeometryCache = dnnl_util::LastShapesCache<Geometry, 2>;

// ---------------------------------------------------------------------------------------
// Reference loops (float64 and anything oneDNN rejects). Spatial dims are padded to 3.

struct Geo3 {
  int64_t in[3], k[3], s[3], d[3], pb[3], out[3];
};

Geo3 to_geo3(const Geometry& g) {
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
    r.out[i] = real ? g.out[j] : 1;
  }
  return r;
}

template <typename T>
void conv_ref(const T* x, const T* w, const T* b, T* y, int64_t N, int64_t C, int64_t M, int64_t G, const Geo3& g,
              int threads) {
  int64_t Cg = C / G, Mg = M / G;
  int64_t isz = g.in[0] * g.in[1] * g.in[2], osz = g.out[0] * g.out[1] * g.out[2], ksz = g.k[0] * g.k[1] * g.k[2];
  parallel_for(threads, N * M, 1, [&](int64_t b0, int64_t e0) {
    for (int64_t nm = b0; nm < e0; ++nm) {
      int64_t n = nm / M, m = nm % M, grp = m / Mg;
      T* yp = y + nm * osz;
      for (int64_t od = 0; od < g.out[0]; ++od)
        for (int64_t oh = 0; oh < g.out[1]; ++oh)
          for (int64_t ow = 0; ow < g.out[2]; ++ow) {
            double acc = b ? static_cast<double>(b[m]) : 0.0;
            for (int64_t c = 0; c < Cg; ++c) {
              const T* xp = x + (n * C + grp * Cg + c) * isz;
              const T* wp = w + (m * Cg + c) * ksz;
              for (int64_t kd = 0; kd < g.k[0]; ++kd) {
                int64_t id = od * g.s[0] - g.pb[0] + kd * g.d[0];
                if (id < 0 || id >= g.in[0]) continue;
                for (int64_t kh = 0; kh < g.k[1]; ++kh) {
                  int64_t ih = oh * g.s[1] - g.pb[1] + kh * g.d[1];
                  if (ih < 0 || ih >= g.in[1]) continue;
                  for (int64_t kw = 0; kw < g.k[2]; ++kw) {
                    int64_t iw = ow * g.s[2] - g.pb[2] + kw * g.d[2];
                    if (iw < 0 || iw >= g.in[2]) continue;
                    acc += static_cast<double>(xp[(id * g.in[1] + ih) * g.in[2] + iw]) *
                           static_cast<double>(wp[(kd * g.k[1] + kh) * g.k[2] + kw]);
                  }
                }
              }
            }
            yp[(od * g.out[1] + oh) * g.out[2] + ow] = static_cast<T>(acc);
          }
    }
  });
}

// ConvTranspose: x [N, C, in], w [C, M/G, k], y [N, M, out].
template <typename T>
void conv_transpose_ref(const T* x, const T* w, const T* b, T* y, int64_t N, int64_t C, int64_t M, int64_t G,
                        const Geo3& g, int threads) {
  int64_t Cg = C / G, Mg = M / G;
  int64_t isz = g.in[0] * g.in[1] * g.in[2], osz = g.out[0] * g.out[1] * g.out[2], ksz = g.k[0] * g.k[1] * g.k[2];
  parallel_for(threads, N * M, 1, [&](int64_t b0, int64_t e0) {
    std::vector<double> acc(static_cast<size_t>(osz));
    for (int64_t nm = b0; nm < e0; ++nm) {
      int64_t n = nm / M, m = nm % M, grp = m / Mg, mg = m % Mg;
      std::fill(acc.begin(), acc.end(), b ? static_cast<double>(b[m]) : 0.0);
      for (int64_t c = 0; c < Cg; ++c) {
        const T* xp = x + (n * C + grp * Cg + c) * isz;
        const T* wp = w + ((grp * Cg + c) * Mg + mg) * ksz;
        for (int64_t id = 0; id < g.in[0]; ++id)
          for (int64_t ih = 0; ih < g.in[1]; ++ih)
            for (int64_t iw = 0; iw < g.in[2]; ++iw) {
              double xv = static_cast<double>(xp[(id * g.in[1] + ih) * g.in[2] + iw]);
              for (int64_t kd = 0; kd < g.k[0]; ++kd) {
                int64_t od = id * g.s[0] - g.pb[0] + kd * g.d[0];
                if (od < 0 || od >= g.out[0]) continue;
                for (int64_t kh = 0; kh < g.k[1]; ++kh) {
                  int64_t oh = ih * g.s[1] - g.pb[1] + kh * g.d[1];
                  if (oh < 0 || oh >= g.out[1]) continue;
                  for (int64_t kw = 0; kw < g.k[2]; ++kw) {
                    int64_t ow = iw * g.s[2] - g.pb[2] + kw * g.d[2];
                    if (ow < 0 || ow >= g.out[2]) continue;
                    acc[(od * g.out[1] + oh) * g.out[2] + ow] +=
                        xv * static_cast<double>(wp[(kd * g.k[1] + kh) * g.k[2] + kw]);
                  }
                }
              }
            }
      }
      T* yp = y + nm * osz;
      for (int64_t i = 0; i < osz; ++i) yp[i] = static_cast<T>(acc[i]);
    }
  });
}


// ---------------------------------------------------------------------------------------
// Fast NCHW paths that beat oneDNN plus two layout reorders at the node's boundaries.

// 1x1, stride 1, no padding: per image and group, Y[Mg, S] = W[Mg, Cg] * X[Cg, S] (+ bias),
// then the post-ops, by column blocks so that each block is still in cache.
Status conv1x1_sgemm(const std::string& where, const float* x, const float* w, const float* b, float* y, int64_t N,
                     int64_t C, int64_t M, int64_t S, const std::vector<PostOp>& ops, const float* sum, int64_t G,
                     int threads) {
  const int64_t Cg = C / G, Mg = M / G;
  // oneDNN threads each sgemm on its own: for the small products of a grouped 1x1 that
  // costs more than it gains (ShuffleNet's 24 -> 112 in 4 groups at 56x56, 2.1 M
  // multiply-adds: 0.05 ms on one thread, 0.15 ms on two). Such products run one per
  // thread instead, the groups (and images) shared among the threads: ShuffleNet's
  // 544 -> 544 in 4 groups at 7x7 had run its four products one after the other on one
  // thread at any thread count.
  const bool small_groups = G > 1 && Mg * Cg * S < (int64_t{8} << 20);
  // Column block: Mg rows of it should stay within L2.
  int64_t blk = S;
  if (!ops.empty() || b) {
    blk = std::max<int64_t>(256, ((int64_t{512} << 10) / (4 * std::max<int64_t>(Mg, 1))) / 64 * 64);
    if (blk * 2 > S) blk = S;
  }
  auto group = [&](int64_t n, int64_t g) -> dnnl::status {
    const float* xp = x + (n * C + g * Cg) * S;
    const float* wp = w + g * Mg * Cg;
    const float* bp = b ? b + g * Mg : nullptr;
    float* yp = y + (n * M + g * Mg) * S;
    const float* sp = sum ? sum + (n * M + g * Mg) * S : nullptr;
    for (int64_t c0 = 0; c0 < S; c0 += blk) {
      int64_t nc = std::min(blk, S - c0);
      // The bias is added in the pass that applies the post-ops (no fill of Y before
      // the product, which would then read it back).
      dnnl::status st = dnnl::sgemm('N', 'N', Mg, nc, Cg, 1.f, wp, Cg, xp + c0, S, 0.f, yp + c0, S);
      if (st != dnnl::status::success) return st;
      for (int64_t m = 0; m < Mg; ++m) {
        float* row = yp + m * S + c0;
        const float* srow = sp ? sp + m * S + c0 : nullptr;
        if (bp) add_bias_and_post_ops(ops.data(), ops.size(), row, srow, nc, bp[m]);
        else if (!ops.empty()) apply_post_ops(ops.data(), ops.size(), row, srow, nc);
      }
    }
    return dnnl::status::success;
  };
  // Small products: one per thread, each on the thread that took it. Larger ones: one
  // after the other on this thread, each threaded by oneDNN.
  std::atomic<int> failed{0};
  parallel_for(small_groups ? threads : 1, N * G, 1, [&](int64_t t0, int64_t t1) {
    SerialScope one_thread(small_groups);
    for (int64_t t = t0; t < t1 && !failed; ++t)
      if (dnnl::status st = group(t / G, t % G); st != dnnl::status::success) failed = static_cast<int>(st);
  });
  if (failed) return internal_error(where + "oneDNN sgemm failed with status " + std::to_string(failed.load()));
  return Status::ok();
}

// ConvTranspose whose kernel equals its stride (conv_attrs.h transpose_is_pixel_product),
// 2-D, on NCHW: per image T[M*kh*kw, H*W] = W^T[M*kh*kw, C] * X[C, H*W], each row of T
// interleaved into the output rows it covers, plus the bias. Done a block of input rows
// at a time (T's block stays in L2 between its product and its interleave), the blocks
// shared among the threads. oneDNN's deconvolution pads these few channels to 16 and ran
// several times slower (det's 24 -> 24 2x2 upsampling at 120x160: 3.2 ms).
Status deconv_pixels_sgemm(KernelContext& ctx, const float* x, const float* w, const float* b, float* y, int64_t N,
                           int64_t C, int64_t M, const Geometry& g) {
  const int64_t kh = g.k[0], kw = g.k[1], H = g.in[0], W = g.in[1], S = H * W, R = M * kh * kw, OW = W * kw;
  BH_ASSIGN_OR_RETURN(Tensor t, ctx.allocate_scratch(DataType::kFloat32, Shape{R, S}));
  float* tp = t.data<float>();
  const int64_t block = std::max<int64_t>(1, (int64_t{256} << 10) / (4 * R * W));  // input rows
  std::atomic<int> failed{0};
  for (int64_t n = 0; n < N; ++n) {
    const float* xn = x + n * C * S;
    float* yn = y + n * M * H * kh * OW;
    parallel_for(ctx.threads(), H, block, [&](int64_t h0, int64_t h1) {
      for (int64_t hb = h0; hb < h1; hb += block) {
        const int64_t he = std::min(h1, hb + block);
        // W is [C, R] row-major: op(A) = W^T. One thread per block (no nested teams).
        dnnl::status st = dnnl::sgemm('T', 'N', R, (he - hb) * W, C, 1.f, w, R, xn + hb * W, S, 0.f, tp + hb * W, S);
        if (st != dnnl::status::success) {
          failed = static_cast<int>(st);
          return;
        }
        for (int64_t m = 0; m < M; ++m) {
          const float bias = b ? b[m] : 0.f;
          for (int64_t h = hb; h < he; ++h)
            for (int64_t i = 0; i < kh; ++i) {
              float* yr = yn + (m * H * kh + h * kh + i) * OW;
              for (int64_t j = 0; j < kw; ++j) {
                const float* tr = tp + ((m * kh + i) * kw + j) * S + h * W;
                for (int64_t q = 0; q < W; ++q) yr[q * kw + j] = tr[q] + bias;
              }
            }
        }
      }
    });
    if (failed) return internal_error(ctx.where() + "oneDNN sgemm failed with status " + std::to_string(failed.load()));
  }
  return Status::ok();
}

// y[i] += w * x[i] for i in [0, n). Out of line with restrict pointers so that GCC
// vectorises it (inlined into the caller it lost the no-alias facts and ran scalar).
__attribute__((noinline)) void axpy_row(float* __restrict y, const float* __restrict x, float w, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += w * x[i];
}

// Eight floats; loads and stores through it need only a float's alignment.
typedef float Float8 __attribute__((vector_size(32), aligned(4)));

// One output row of a KxK depthwise convolution of column stride S: out[o] = bias +
// sum over taps of w[kh][kw] * rows[kh * S + kw % S][kw / S + o], for o in [0, n), n a
// multiple of 16. rows[kh * S + r] is phase r of the input row under tap row kh (a row of
// zeros outside the plane), so every tap is one unaligned load: no bounds, no gathers.
template <int K, int S>
__attribute__((noinline)) void depthwise_row(float* __restrict out, const float* const* rows, const float* w,
                                             float bias, int64_t n) {
  Float8 wv[K * K];
  for (int i = 0; i < K * K; ++i) wv[i] = Float8{} + w[i];
  for (int64_t o = 0; o < n; o += 16) {
    Float8 a0 = Float8{} + bias, a1 = a0;
#pragma GCC unroll 7
    for (int kh = 0; kh < K; ++kh) {
#pragma GCC unroll 7
      for (int kw = 0; kw < K; ++kw) {
        const float* p = rows[kh * S + kw % S] + kw / S + o;
        a0 += wv[kh * K + kw] * *reinterpret_cast<const Float8*>(p);
        a1 += wv[kh * K + kw] * *reinterpret_cast<const Float8*>(p + 8);
      }
    }
    *reinterpret_cast<Float8*>(out + o) = a0;
    *reinterpret_cast<Float8*>(out + o + 8) = a1;
  }
}

// Depthwise KxK, column stride S (row stride, pads any; no dilation) on NCHW planes. Each
// input row is copied once into S zero-padded phases (phase r holds padded columns
// r, r + S, ...), rounded up to whole 16-float blocks, so that depthwise_row reads them
// without bounds; the row is computed in registers, its post-ops applied, then stored.
// `planes` (or null): channel c of X is plane planes[c] (a channel shuffle read in place).
template <int K, int S>
void depthwise2d_nchw_k(const float* x, const float* w, const float* b, float* y, int64_t N, int64_t C, const Geometry& g,
                        int threads, const std::vector<PostOp>& ops, const float* sum, const int64_t* planes) {
  static_assert(S == 1 || S == 2);
  const int64_t H = g.in[0], W = g.in[1], OH = g.out[0], OW = g.out[1];
  const int64_t SH = g.s[0], PH = g.pb[0], PW = g.pb[1];
  const int64_t OWr = (OW + 15) / 16 * 16;
  // Phase row length (the 8: the last load's slack), whole Float8s for the stride-2 split.
  const int64_t L = (OWr + (K - 1) / S + 8 + 7) / 8 * 8;
  // Stride 2: each input row is first copied into a zero-padded row (padded column i at
  // i), whose even and odd columns are then split 16 at a time.
  const int64_t padded = S == 2 ? 2 * L + 16 : 0;
  parallel_for(threads, N * C, 1, [&](int64_t b0, int64_t e0) {
    // phases of every input row, a row of zeros, the output row, the padded row
    std::vector<float> buf(static_cast<size_t>((H * S + 1) * L + OWr + padded), 0.f);
    float* zero = buf.data() + H * S * L;
    float* row = zero + L;
    float* pad = row + OWr;
    // The padded row's columns outside [PW, PW + W) stay zero: only those are written.
    const int64_t copy_from = std::min(PW, padded), copy_n = std::clamp<int64_t>(padded - PW, 0, W);
    const float* rows[K * S];
    for (int64_t nc = b0; nc < e0; ++nc) {
      const int64_t c = nc % C;
      const float* xp = x + (planes ? nc - c + planes[c] : nc) * H * W;
      for (int64_t ih = 0; ih < H; ++ih) {
        const float* xr = xp + ih * W;
        if constexpr (S == 1) {
          // phase[j] = padded[j] = x[j - PW] where that is inside the row
          float* ph = buf.data() + ih * L;
          const int64_t j0 = std::clamp<int64_t>(PW, 0, L);
          const int64_t j1 = std::clamp<int64_t>(W + PW, j0, L);
          std::fill(ph, ph + j0, 0.f);
          std::memcpy(ph + j0, xr + (j0 - PW), sizeof(float) * (j1 - j0));
          std::fill(ph + j1, ph + L, 0.f);
        } else {
          // phase r [j] = padded[2 j + r]
          std::memcpy(pad + copy_from, xr, sizeof(float) * copy_n);
          float* even = buf.data() + ih * 2 * L;
          float* odd = even + L;
          for (int64_t j = 0; j < L; j += 8) {
            const Float8 a = *reinterpret_cast<const Float8*>(pad + 2 * j);
            const Float8 c8 = *reinterpret_cast<const Float8*>(pad + 2 * j + 8);
            *reinterpret_cast<Float8*>(even + j) = __builtin_shufflevector(a, c8, 0, 2, 4, 6, 8, 10, 12, 14);
            *reinterpret_cast<Float8*>(odd + j) = __builtin_shufflevector(a, c8, 1, 3, 5, 7, 9, 11, 13, 15);
          }
        }
      }
      float* yp = y + nc * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh) {
        for (int kh = 0; kh < K; ++kh) {
          const int64_t ih = oh * SH - PH + kh;
          for (int r = 0; r < S; ++r) rows[kh * S + r] = ih < 0 || ih >= H ? zero : buf.data() + (ih * S + r) * L;
        }
        depthwise_row<K, S>(row, rows, w + c * K * K, b ? b[c] : 0.f, OWr);
        if (!ops.empty()) apply_post_ops(ops.data(), ops.size(), row, sum ? sum + nc * OH * OW + oh * OW : nullptr, OW);
        std::memcpy(yp + oh * OW, row, sizeof(float) * OW);
      }
    }
  });
}

// Depthwise 3x3, stride 1, padding 1, no dilation (the common "same" depthwise layer) on
// NCHW planes of at least 3 rows and 8 columns, without copying the plane: the interior
// rows are one flat loop over the plane, where each output reads its 3x3 neighbourhood at
// fixed offsets (-W-1 ... W+1); the taps that would wrap to the neighbouring row at the
// first and last column are multiplied by 0 (masks of period W). The first and last rows
// go through zero-padded copies (depthwise_row); the corner elements of the flat range
// whose left or right tap lies outside the plane are computed one by one.
// 136 channels at 28x28: 53 us on one thread, against ~100 for oneDNN's depthwise kernel
// with a reorder each way and 172 for the row-axpy loop (an AVX-512 EPYC).
// `planes` (or null: channel c): the input plane channel c reads, of the same image
// (a channel shuffle read in place, exec/channel_shuffle.h).
void depthwise3x3s1_nchw(const float* x, const float* w, const float* b, float* y, int64_t N, int64_t C, int64_t H,
                         int64_t W, int threads, const std::vector<PostOp>& ops, const float* sum,
                         const int64_t* planes = nullptr) {
  const int64_t HW = H * W, Wr = (W + 15) / 16 * 16, L = Wr + 2 + 8;
  parallel_for(threads, N * C, 1, [&](int64_t b0, int64_t e0) {
    // masks (left, right) of period W, 8 past it; 2 padded rows, a zero row, an output row
    std::vector<float> buf(static_cast<size_t>(2 * (W + 8) + 4 * L + Wr), 0.f);
    float* mask_l = buf.data();
    float* mask_r = mask_l + W + 8;
    for (int64_t j = 0; j < W + 8; ++j) {
      mask_l[j] = j % W != 0 ? 1.f : 0.f;
      mask_r[j] = j % W != W - 1 ? 1.f : 0.f;
    }
    float* padded = mask_r + W + 8;
    float* zero = padded + 3 * L;
    float* row = zero + L;
    for (int64_t nc = b0; nc < e0; ++nc) {
      const float* xp = x + (planes ? nc - nc % C + planes[nc % C] : nc) * HW;
      float* yp = y + nc * HW;
      const float* k = w + (nc % C) * 9;
      const float bias = b ? b[nc % C] : 0.f;
      // Rows 0 and H-1: the missing row is zeros.
      for (int64_t oh : {int64_t{0}, H - 1}) {
        const float* rows[3];
        for (int kh = 0; kh < 3; ++kh) {
          const int64_t ih = oh - 1 + kh;
          if (ih < 0 || ih >= H) {
            rows[kh] = zero;
            continue;
          }
          float* p = padded + kh * L;
          p[0] = 0.f;
          std::memcpy(p + 1, xp + ih * W, sizeof(float) * W);
          std::fill(p + 1 + W, p + L, 0.f);
          rows[kh] = p;
        }
        depthwise_row<3, 1>(row, rows, k, bias, Wr);
        std::memcpy(yp + oh * W, row, sizeof(float) * W);
      }
      // The interior, flat: i in [W, (H-1)W) reads i + (kh-1)W + (kw-1), inside the plane
      // except at i = W (kw = 0 reads index -1) and i = (H-1)W - 1 (kw = 2 reads HW).
      auto one = [&](int64_t i) {
        const int64_t oh = i / W, ow = i % W;
        float acc = bias;
        for (int kh = 0; kh < 3; ++kh)
          for (int kw = 0; kw < 3; ++kw) {
            const int64_t iw = ow - 1 + kw;
            if (iw >= 0 && iw < W) acc += k[kh * 3 + kw] * xp[(oh - 1 + kh) * W + iw];
          }
        yp[i] = acc;
      };
      Float8 wl[3], wm[3], wr[3];
      for (int kh = 0; kh < 3; ++kh) {
        wl[kh] = Float8{} + k[kh * 3];
        wm[kh] = Float8{} + k[kh * 3 + 1];
        wr[kh] = Float8{} + k[kh * 3 + 2];
      }
      const Float8 vb = Float8{} + bias;
      const int64_t last = (H - 1) * W - 1;
      one(W);
      int64_t i = W + 1;
      for (; i + 8 <= last; i += 8) {
        Float8 l{}, m = vb, r{};
#pragma GCC unroll 3
        for (int kh = 0; kh < 3; ++kh) {
          const float* p = xp + i + (kh - 1) * W;
          l += wl[kh] * *reinterpret_cast<const Float8*>(p - 1);
          m += wm[kh] * *reinterpret_cast<const Float8*>(p);
          r += wr[kh] * *reinterpret_cast<const Float8*>(p + 1);
        }
        const int64_t ph = i % W;
        *reinterpret_cast<Float8*>(yp + i) = m + l * *reinterpret_cast<const Float8*>(mask_l + ph) +
                                            r * *reinterpret_cast<const Float8*>(mask_r + ph);
      }
      for (; i <= last; ++i) one(i);
      if (!ops.empty()) apply_post_ops(ops.data(), ops.size(), yp, sum ? sum + nc * HW : nullptr, HW);
    }
  });
}

// Depthwise 2-D (group == C == M) directly on NCHW planes, channel c read from plane
// planes[c] where `planes` is given. Other shapes: each input row is copied once
// per channel into zero-padded, stride-deinterleaved phases, so that every kernel tap
// becomes one contiguous, bounds-free axpy over a whole output row.
void depthwise2d_nchw(const float* x, const float* w, const float* b, float* y, int64_t N, int64_t C, const Geometry& g,
                      int threads, const std::vector<PostOp>& ops, const float* sum, const int64_t* planes) {
  // 3x3 and 5x5 at column stride 1 or 2 without dilation (MobileNets, ShuffleNet,
  // PP-LCNet): in registers (depthwise2d_nchw_k).
  const bool square = g.k[0] == g.k[1] && g.d[0] == 1 && g.d[1] == 1;
  if (square && g.k[0] == 3 && g.s[1] == 1) return depthwise2d_nchw_k<3, 1>(x, w, b, y, N, C, g, threads, ops, sum, planes);
  if (square && g.k[0] == 3 && g.s[1] == 2) return depthwise2d_nchw_k<3, 2>(x, w, b, y, N, C, g, threads, ops, sum, planes);
  if (square && g.k[0] == 5 && g.s[1] == 1) return depthwise2d_nchw_k<5, 1>(x, w, b, y, N, C, g, threads, ops, sum, planes);
  if (square && g.k[0] == 5 && g.s[1] == 2) return depthwise2d_nchw_k<5, 2>(x, w, b, y, N, C, g, threads, ops, sum, planes);
  const int64_t H = g.in[0], W = g.in[1], OH = g.out[0], OW = g.out[1];
  const int64_t KH = g.k[0], KW = g.k[1], SH = g.s[0], SW = g.s[1], DH = g.d[0], DW = g.d[1];
  const int64_t PH = g.pb[0], PW = g.pb[1];
  const int64_t L = OW + ((KW - 1) * DW) / SW + 1;  // phase length
  parallel_for(threads, N * C, 1, [&](int64_t b0, int64_t e0) {
    std::vector<float> phases(static_cast<size_t>(H * SW * L));
    for (int64_t nc = b0; nc < e0; ++nc) {
      int64_t c = nc % C;
      const float* xp = x + (planes ? nc - c + planes[c] : nc) * H * W;
      const float* wp = w + c * KH * KW;
      float* yp = y + nc * OH * OW;
      const float bias = b ? b[c] : 0.f;
      // phases[(ih * SW + r) * L + j] = padded_row(ih)[j * SW + r]
      for (int64_t ih = 0; ih < H; ++ih) {
        const float* xr = xp + ih * W;
        for (int64_t r = 0; r < SW; ++r) {
          float* ph = phases.data() + (ih * SW + r) * L;
          for (int64_t j = 0; j < L; ++j) {
            int64_t iw = j * SW + r - PW;
            ph[j] = (iw >= 0 && iw < W) ? xr[iw] : 0.f;
          }
        }
      }
      for (int64_t oh = 0; oh < OH; ++oh) {
        float* yr = yp + oh * OW;
        for (int64_t ow = 0; ow < OW; ++ow) yr[ow] = bias;
        for (int64_t kh = 0; kh < KH; ++kh) {
          int64_t ih = oh * SH - PH + kh * DH;
          if (ih < 0 || ih >= H) continue;
          for (int64_t kw = 0; kw < KW; ++kw) {
            int64_t q = (kw * DW) / SW, r = (kw * DW) % SW;
            axpy_row(yr, phases.data() + (ih * SW + r) * L + q, wp[kh * KW + kw], OW);
          }
        }
        if (!ops.empty())
          apply_post_ops(ops.data(), ops.size(), yr, sum ? sum + nc * OH * OW + oh * OW : nullptr, OW);
      }
    }
  });
}

// Whether a 3x3, stride-1 convolution of `ic` -> `oc` channels with an output plane of
// `out_hw` pixels runs as oneDNN's Winograd at `threads` threads (where oneDNN has a
// Winograd kernel for it). On planes of up to 14x14 oneDNN takes its F(2,3) kernel, whose
// blocking is chosen for the thread count and at two threads can be slower than at one;
// a direct convolution there splits evenly. Measured one convolution at a time, nChw16c,
// ReLU fused, medians of 280 (bench/winograd_bench; 2-core AVX-512 EPYC), direct / Winograd
// at 2 threads:
//   7x7:   128->32 0.52, 160->224 0.54, 192->224 0.56, 224->224 0.60, 192->320 1.02,
//          512->512 1.54;  6x6: 192->384 0.60, 160->320 1.33
//   13x13, 14x14, 208 or more output channels: 96->208 0.45, 112->224 0.84, 160->320 0.79,
//          192->256 0.89, 128->256 0.92, 144->288 0.95, 64->256 0.98, 256->256 1.88
//   13x13, 14x14, fewer: 64->96 1.08, 48->192 1.09, 128->128 1.12, 128->192 1.22,
//          160->192 1.27, 128->32 1.50
//   12x12 with 256 or more input channels 2.0, 28x28 and wider 1.6-2.2.
// At one thread Winograd wins all but two of them (96->208 and 112->224 at 13x13).
bool winograd_pays(int64_t ic, int64_t oc, int64_t out_hw, int threads) {
  if (threads <= 1 || ic >= 256) return true;
  if (out_hw <= 49) return false;
  return out_hw > 196 || oc < 208;
}

// Output rows at least this wide run on depthwise2d_nchw; narrower planes go to oneDNN's
// depthwise kernels on channel blocks (a reorder each way), whose AVX-512 kernels win up to
// wide planes: 10 depthwise 3x3 convolutions of 136 channels at 28x28 took 2.0 ms here
// and 1.3 ms there, 32 channels at 56x56 0.83-1.35 against 0.61, at 112x112 3.1 against
// 2.5 (1 thread, an AVX-512 EPYC); ShuffleNet at 1 thread 4.0-5.6 -> 3.5 ms.
int64_t nchw_depthwise_min_width() {
  static const int64_t w = [] {
    using I = dnnl::cpu_isa;
    const I isa = dnnl::get_effective_cpu_isa();
    const bool avx512 = isa == I::avx512_core || isa == I::avx512_core_vnni || isa == I::avx512_core_bf16 ||
                        isa == I::avx512_core_amx;
    return avx512 ? int64_t{128} : int64_t{16};
  }();
  return w;
}

// ---------------------------------------------------------------------------------------
// The kernel

class ConvKernel final : public Kernel {
 public:
  ConvKernel(ConvAttrs a, bool transpose, Tensor const_w, dnnl::engine eng, std::vector<PostOp> post)
      : a_(std::move(a)), transpose_(transpose), const_w_(std::move(const_w)), eng_(std::move(eng)), post_(std::move(post)) {
    for (const PostOp& p : post_) has_sum_ = has_sum_ || p.kind == PostKind::kSum;
    // BULKHEAD_CPU_WINOGRAD=0 keeps every convolution direct (to compare results).
    const char* wv = std::getenv("BULKHEAD_CPU_WINOGRAD");
    winograd_ = !(wv && std::string(wv) == "0");
  }
  void set_layouts(bool x_blocked, bool y_blocked) {
    x_blocked_ = x_blocked;
    y_blocked_ = y_blocked;
  }
  // X is the unshuffled tensor of a channel shuffle of `groups` groups (`_x_shuffle`).
  void set_shuffle(int64_t groups) { shuffle_ = groups; }
  // SessionOptions::precision "bf16" (set by the layout pass): bfloat16 inputs and weights,
  // float32 sums; `y_bf16`: a blocked Y is stored as bfloat16 (its readers take that).
  void set_bf16(bool bf16, bool y_bf16) {
    bf16_ = bf16;
    y_bf16_ = bf16 && y_bf16;
  }
  // Packed weights are then shared with the Env's other sessions (KernelInfo::shared).
  void share_with(std::shared_ptr<SharedConstants> shared) { shared_ = std::move(shared); }
  // Builds now, at session creation, the primitive a run will use and packs the weights
  // for it, where X's shape is fixed before any run (KernelInfo::static_input_shape) and
  // W is constant: the session's first run is then as fast as the next. A run with
  // another shape or thread count (the core budget granted fewer) makes its own plan, as
  // before. Call after the set_* methods.
  void prepare(const KernelInfo& info) const;

  Status compute(KernelContext& ctx) const override;

 private:
  // Which code a float32 convolution on plain NCHW runs (conv_into): oneDNN's primitive,
  // or one of the kernels that beat it on such shapes. `plain_ops`: post-ops or a sum
  // come with it.
  enum class PlainPath { kPlan, kDeconvPixels, kPointwise, kDepthwise3x3, kDepthwise };
  PlainPath plain_path(const Geometry& g, int64_t C, int64_t M, bool plain_ops) const;

  struct Plan {
    bool use_ref = false;
    std::string why_ref;
    dnnl::primitive prim;
    memory::desc user_src, user_dst, user_w, bias_md;
    memory::desc src_md, dst_md, w_md, scratch_md;
    bool re_src = false, re_dst = false, re_w = false;
    Reorder src_re, dst_re, w_re;
    Reorder dst_in_re;  // summand (plain) -> dst layout, for a fused sum
    memory packed_w;  // weights in the primitive's layout (constant weights only)
    std::shared_ptr<const void> packed_hold;  // keeps packed_w's bytes (shared) alive
    bool has_packed = false;
    bool fused = false;  // the primitive applies the kernel's post-ops
  };

  // xb / yb: X / Y in nChw16c; xbf / ybf: X / Y are bfloat16 tensors.
  std::shared_ptr<const Plan> plan_for(const Shape& x, const Shape& w, bool has_bias, const Geometry& g, int64_t G,
                                       bool xb = false, bool yb = false, bool xbf = false, bool ybf = false) const;
  // One attempt at a plan: computing in bfloat16 (`cbf`) or float32, with the fused
  // post-ops in the primitive or not. `problem` / `key`: the plan's keys (for sharing
  // packed weights between the plans of one problem). Called with mu_ held.
  std::shared_ptr<Plan> make_plan(const Shape& x, const Shape& w, bool has_bias, const Geometry& g, int64_t G, bool xb,
                                  bool yb, bool xbf, bool ybf, bool cbf, bool with_post,
                                  const std::vector<int64_t>& problem, const std::vector<int64_t>& key) const;
  Status run_dnnl(KernelContext& ctx, const Plan& p, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y,
                  const Tensor* sum) const;
  // A Conv with X and/or Y in nChw16c; `xs` is X's logical [N, C, H, W] shape.
  Status conv_blocked(KernelContext& ctx, const Tensor& x, const Shape& xs, const Tensor& w, const Tensor* b, Tensor& y,
                      const Geometry& g, const Tensor* sum) const;
  // The convolution itself with `ops` fused (sum reads `sum`, of y's shape).
  // `planes` (or null): X is a channel shuffle's input, output channel c reads X's plane
  // planes[c] (_x_shuffle); paths that cannot read so get a shuffled copy.
  Status conv_into(KernelContext& ctx, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y, const Geometry& g,
                   const std::vector<PostOp>& ops, const Tensor* sum, const int64_t* planes = nullptr) const;

  ConvAttrs a_;
  bool transpose_;
  Tensor const_w_;
  dnnl::engine eng_;
  std::vector<PostOp> post_;  // fused post-ops (Conv only), in order
  bool has_sum_ = false;
  bool winograd_ = true;
  // Layouts chosen by the layout pass (exec/layout.h): X and/or Y in nChw16c.
  bool x_blocked_ = false, y_blocked_ = false;
  int64_t shuffle_ = 0;
  bool bf16_ = false, y_bf16_ = false;
  std::shared_ptr<SharedConstants> shared_;
  mutable std::mutex mu_;
  mutable std::map<std::vector<int64_t>, std::shared_ptr<const Plan>> plans_;
  GeometryCache geometry_;
  CallPool calls_{eng_};
};

std::shared_ptr<const ConvKernel::Plan> ConvKernel::plan_for(const Shape& x, const Shape& w, bool has_bias,
                                                             const Geometry& g, int64_t G, bool xb, bool yb, bool xbf,
                                                             bool ybf) const {
  // The key is built in this thread's own vector: a lookup that finds its plan (every
  // run after the first) allocates nothing.
  thread_local std::vector<int64_t> key;
  key.assign(x.begin(), x.end());
  key.push_back(-1);
  key.insert(key.end(), w.begin(), w.end());
  key.push_back(has_bias ? 1 : 0);
  key.push_back(xb ? 1 : 0);
  key.push_back(yb ? 1 : 0);
  key.push_back(xbf ? 1 : 0);
  key.push_back(ybf ? 1 : 0);
  // oneDNN fixes a primitive's thread count when it is made (the calling thread's OpenMP
  // count, which is what the core budget granted this run), so a session keeps one plan
  // per count it has been granted; the plans of one problem share their packed weights.
  key.push_back(omp_get_max_threads());
  std::lock_guard<std::mutex> lock(mu_);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  const std::vector<int64_t> problem(key.begin(), key.end() - 1);

  std::shared_ptr<Plan> p;
  // In bfloat16 first when the session asked for it, then in float32 where oneDNN has no
  // optimised bfloat16 kernel for the problem; with the fused post-ops in the primitive
  // first, then without (they are then applied after it).
  for (bool cbf : {true, false}) {
    if (cbf && !bf16_) continue;
    for (bool with_post : {true, false}) {
      if (!with_post && post_.empty()) break;
      p = make_plan(x, w, has_bias, g, G, xb, yb, xbf, ybf, cbf, with_post, problem, key);
      if (!p->use_ref) break;
    }
    if (!p->use_ref) break;
  }
  plans_.emplace(key, p);
  return p;
}

std::shared_ptr<ConvKernel::Plan> ConvKernel::make_plan(const Shape& x, const Shape& w, bool has_bias, const Geometry& g,
                                                       int64_t G, bool xb, bool yb, bool xbf, bool ybf, bool cbf,
                                                       bool with_post, const std::vector<int64_t>& problem,
                                                       const std::vector<int64_t>& key) const {
  auto p = std::make_shared<Plan>();
  p->fused = with_post;
  using dt = memory::data_type;
  // The element types of the tensors (user) and of the computation.
  const dt xt = xbf ? dt::bf16 : dt::f32, yt = ybf ? dt::bf16 : dt::f32, ct = cbf ? dt::bf16 : dt::f32;
  try {
    int nsp = g.nsp;
    int64_t N = x[0], C = x[1];
    int64_t M = transpose_ ? w[1] * G : w[0];
    Dims src_dims(x.begin(), x.end());
    Dims dst_dims{N, M};
    dst_dims.insert(dst_dims.end(), g.out.begin(), g.out.end());
    Dims wdims = conv_weight_dims(M, C, G, g.k);
    Dims wstrides;
    int64_t ksz = 1;
    for (int64_t k : g.k) ksz *= k;
    Dims kstr = row_major_strides(Dims(g.k.begin(), g.k.end()));
    if (!transpose_) {
      wstrides = row_major_strides(wdims);
    } else {
      // ONNX layout [C, M/G, k] = (G, C/G, M/G, k).
      int64_t Mg = M / G, Cg = C / G;
      if (G > 1) wstrides.push_back(Cg * Mg * ksz);
      wstrides.push_back(ksz);       // o
      wstrides.push_back(Mg * ksz);  // i
      wstrides.insert(wstrides.end(), kstr.begin(), kstr.end());
    }
    p->user_src = xb ? blocked_md(src_dims, xt) : plain_md(src_dims, xt);
    p->user_dst = yb ? blocked_md(dst_dims, yt) : plain_md(dst_dims, yt);
    p->user_w = memory::desc(wdims, dt::f32, wstrides);
    p->bias_md = has_bias ? memory::desc({M}, dt::f32, memory::format_tag::a) : memory::desc();
    // The computation's source and weights are in its type; its destination in Y's
    // (oneDNN's bfloat16 convolutions write float32 too).
    const dt dst_t = cbf ? yt : dt::f32;
    auto any = [](const Dims& d, dt t) { return memory::desc(d, t, memory::format_tag::any); };
    Dims strides(g.s.begin(), g.s.end()), dil(nsp), pl(g.pb.begin(), g.pb.end()), pr(nsp);
    for (int i = 0; i < nsp; ++i) dil[i] = g.d[i] - 1;
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (with_post && !post_.empty()) {
      dnnl::post_ops po;
      for (const PostOp& op : post_) {
        switch (op.kind) {
          case PostKind::kRelu: po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f); break;
          case PostKind::kLeakyRelu: po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, op.a, 0.f); break;
          case PostKind::kClip: po.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, op.a, op.b); break;
          case PostKind::kHardSigmoid:
            po.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, op.a, op.b);
            po.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, 0.f, 1.f);
            break;
          case PostKind::kHardSwish: po.append_eltwise(1.f, dnnl::algorithm::eltwise_hardswish, 0.f, 0.f); break;
          case PostKind::kSigmoid: po.append_eltwise(1.f, dnnl::algorithm::eltwise_logistic, 0.f, 0.f); break;
          case PostKind::kLinear: po.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, op.a, op.b); break;
          case PostKind::kSum: po.append_sum(1.f); break;
        }
      }
      attr.set_post_ops(po);
    }
    // oneDNN's reference kernels take any layout and type, at a hundred times the cost of
    // a reorder: in bfloat16, or with forced layouts, only an optimised kernel will do.
    auto is_ref = [](const char* impl) { return std::string(impl).rfind("ref", 0) == 0; };
    if (!transpose_) {
      for (int i = 0; i < nsp; ++i) pr[i] = g.pe[i];
      // A blocked X or Y is given to the primitive as it is (no reorder, or a conversion
      // of its element type only) when oneDNN has a kernel for it; otherwise the
      // primitive picks its layouts and we reorder.
      bool forced = xb || yb;
      auto make_pd = [&](dnnl::algorithm alg) {
        memory::desc sd = forced && xb ? blocked_md(src_dims, ct) : any(src_dims, ct);
        memory::desc dd = forced && yb ? blocked_md(dst_dims, dst_t) : any(dst_dims, dst_t);
        dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, alg, sd, any(wdims, ct), p->bias_md, dd,
                                          strides, dil, pl, pr);
        return dnnl::convolution_forward::primitive_desc(d, attr, eng_);
      };
      // 3x3, stride 1, no dilation, one group: Winograd (oneDNN's F(2,3)/F(4,3)) does
      // about half the multiplications of a direct convolution, at a float error of the
      // order of 1e-6 relative. oneDNN says when it has no Winograd kernel for a shape.
      dnnl::convolution_forward::primitive_desc pd;
      bool wino = winograd_ && !cbf && G == 1 && nsp == 2 && g.k[0] == 3 && g.k[1] == 3 && g.s[0] == 1 &&
                  g.s[1] == 1 && g.d[0] == 1 && g.d[1] == 1 &&
                  winograd_pays(w[1], w[0], g.out[0] * g.out[1], omp_get_max_threads());
      if (wino) {
        try {
          pd = make_pd(dnnl::algorithm::convolution_winograd);
        } catch (const dnnl::error&) {
          wino = false;
        }
      }
      if (!wino) {
        try {
          pd = make_pd(dnnl::algorithm::convolution_direct);
          if (forced && is_ref(pd.impl_info_str()))
            throw dnnl::error(dnnl_unimplemented, "only the reference kernel takes these layouts");
        } catch (const dnnl::error&) {
          if (!forced) throw;
          forced = false;
          pd = make_pd(dnnl::algorithm::convolution_direct);
        }
      }
      if (cbf && is_ref(pd.impl_info_str()))
        throw dnnl::error(dnnl_unimplemented, "no optimised bfloat16 kernel");
      p->src_md = pd.src_desc();
      p->dst_md = pd.dst_desc();
      p->w_md = pd.weights_desc();
      p->scratch_md = pd.scratchpad_desc();
      p->prim = dnnl::convolution_forward(pd);
    } else {
      // dst = (in - 1) * s + dk - pl - pr  =>  pr = (in - 1) * s + dk - pl - out
      for (int i = 0; i < nsp; ++i) {
        int64_t dk = (g.k[i] - 1) * g.d[i] + 1;
        pr[i] = (g.in[i] - 1) * g.s[i] + dk - g.pb[i] - g.out[i];
        if (pr[i] < 0 || pl[i] < 0) {
          p->use_ref = true;
          p->why_ref = "negative padding";
        }
      }
      if (!p->use_ref) {
        // A few output channels (a segmentation head's last layer): in a 16-channel block
        // layout the primitive would write up to 16 times the output and a reorder would
        // read it all back, so ask for the plain layout, where oneDNN has a kernel for it.
        auto make_pd = [&](bool plain_dst) {
          dnnl::deconvolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct,
                                              any(src_dims, ct), any(wdims, ct), p->bias_md,
                                              plain_dst ? plain_md(dst_dims, dst_t) : any(dst_dims, dst_t), strides, dil,
                                              pl, pr);
          return dnnl::deconvolution_forward::primitive_desc(d, attr, eng_);
        };
        dnnl::deconvolution_forward::primitive_desc pd;
        bool plain_dst = M <= kBlock / 2;
        if (plain_dst) {
          try {
            pd = make_pd(true);
            plain_dst = !is_ref(pd.impl_info_str());
          } catch (const dnnl::error&) {
            plain_dst = false;
          }
        }
        if (!plain_dst) pd = make_pd(false);
        if (cbf && is_ref(pd.impl_info_str()))
          throw dnnl::error(dnnl_unimplemented, "no optimised bfloat16 kernel");
        p->src_md = pd.src_desc();
        p->dst_md = pd.dst_desc();
        p->w_md = pd.weights_desc();
        p->scratch_md = pd.scratchpad_desc();
        p->prim = dnnl::deconvolution_forward(pd);
      }
    }
    if (!p->use_ref) {
      p->re_src = p->src_md != p->user_src;
      p->re_dst = p->dst_md != p->user_dst;
      p->re_w = p->w_md != p->user_w;
      if (p->re_src) p->src_re = Reorder::make(eng_, p->user_src, p->src_md);
      if (p->re_dst) p->dst_re = Reorder::make(eng_, p->dst_md, p->user_dst);
      if (p->re_w) p->w_re = Reorder::make(eng_, p->user_w, p->w_md);
      if (p->re_dst && has_sum_ && with_post) p->dst_in_re = Reorder::make(eng_, p->user_dst, p->dst_md);
      if (const_w_.defined() && p->re_w) {
        auto same_problem = [&](const std::vector<int64_t>& k) {
          return k.size() == key.size() && std::equal(problem.begin(), problem.end(), k.begin());
        };
        for (auto o = plans_.lower_bound(problem); o != plans_.end() && same_problem(o->first); ++o)
          if (o->second->has_packed && o->second->w_md == p->w_md) {
            p->packed_w = o->second->packed_w;
            p->packed_hold = o->second->packed_hold;
            p->has_packed = true;
            break;
          }
      }
      if (const_w_.defined() && p->re_w && !p->has_packed) {
        // Pack the constant weights once for this primitive (in bfloat16 for a bfloat16
        // computation: the conversion happens here, once).
        PackedWeights pw = pack_constant_shared(shared_, transpose_ ? "deconv-w" : "conv-w", eng_, p->user_w, p->w_md,
                                                &p->w_re, const_w_);
        p->packed_w = pw.mem;
        p->packed_hold = std::move(pw.hold);
        p->has_packed = true;
      }
    }
  } catch (const dnnl::error& e) {
    p->use_ref = true;
    p->why_ref = e.what();
  }
  return p;
}

Status ConvKernel::run_dnnl(KernelContext& ctx, const Plan& p, const Tensor& x, const Tensor& w, const Tensor* b,
                            Tensor& y, const Tensor* sum) const {
  CallScratch sc{ctx, {}};
  try {
    CallPool::Call call(calls_);
    const memory& usr_src = call.memory(p.user_src, x.raw());
    const memory& usr_dst = call.memory(p.user_dst, y.raw());
    const memory *src = &usr_src, *dst = &usr_dst;
    if (p.re_src) {
      BH_ASSIGN_OR_RETURN(void* buf, sc.get(p.src_md.get_size()));
      src = &call.memory(p.src_md, buf);
      BH_RETURN_IF_ERROR(run_reorder(p.src_re, call, usr_src, *src, sc));
    }
    const memory* wm = &p.packed_w;
    if (!p.has_packed) {
      wm = &call.memory(p.user_w, w.raw());
      if (p.re_w) {
        const memory& usr_w = *wm;
        BH_ASSIGN_OR_RETURN(void* buf, sc.get(p.w_md.get_size()));
        wm = &call.memory(p.w_md, buf);
        BH_RETURN_IF_ERROR(run_reorder(p.w_re, call, usr_w, *wm, sc));
      }
    }
    if (p.re_dst) {
      BH_ASSIGN_OR_RETURN(void* buf, sc.get(p.dst_md.get_size()));
      dst = &call.memory(p.dst_md, buf);
    }
    if (sum) {
      // The sum post-op adds to what dst holds.
      if (p.re_dst) {
        BH_RETURN_IF_ERROR(run_reorder(p.dst_in_re, call, call.memory(p.user_dst, sum->raw()), *dst, sc));
      } else if (y.raw() != sum->raw()) {  // else the output was written over the summand
        std::memcpy(y.raw(), sum->raw(), y.nbytes());
      }
    }
    const memory* bias = b ? &call.memory(p.bias_md, b->raw()) : nullptr;
    const memory* scratch = nullptr;
    if (size_t ss = p.scratch_md.get_size()) {
      BH_ASSIGN_OR_RETURN(void* buf, sc.get(ss));
      scratch = &call.memory(p.scratch_md, buf);
    }
    call.execute(p.prim, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, dst}, {DNNL_ARG_BIAS, bias},
                          {DNNL_ARG_SCRATCHPAD, scratch}});
    if (p.re_dst) BH_RETURN_IF_ERROR(run_reorder(p.dst_re, call, *dst, usr_dst, sc));
  } catch (const dnnl::error& e) {
    return internal_error(ctx.where() + "oneDNN failed: " + e.what());
  }
  return Status::ok();
}

Status ConvKernel::compute(KernelContext& ctx) const {
  const std::string& where = ctx.where();
  const Tensor* x = ctx.input(0);
  const Tensor* w = const_w_.defined() ? &const_w_ : ctx.input(1);
  const Tensor* b = ctx.input(2);
  if (!x || !w) return invalid_argument(where + "inputs X and W are required");
  if (b && !b->defined()) b = nullptr;
  DataType dt = x->dtype();
  // A bfloat16 X in nChw16c: the layout pass's bf16 chain (SessionOptions::precision);
  // everything else about the node is float32.
  const bool xbf = bf16_ && x_blocked_ && dt == DataType::kBFloat16;
  if (xbf) dt = DataType::kFloat32;
  const DataType ydt = y_bf16_ && y_blocked_ ? DataType::kBFloat16 : dt;
  if (is_half(dt) && !const_w_.defined())
    return dnnl_run_as_float32(ctx, dt, [this](KernelContext& c) { return compute(c); });
  if (dt != DataType::kFloat32 && dt != DataType::kFloat64) BH_UNSUPPORTED_DTYPE(where, dt);
  if (w->dtype() != dt || (b && b->dtype() != dt))
    return invalid_argument(where + "X, W and B must have the same element type, got " + x->describe() + ", " +
                            w->describe() + (b ? ", " + b->describe() : std::string()));
  // A blocked X is [N, ceil(C/16), H, W, 16]; the checks below see its logical shape.
  Shape xs = x->shape();
  if (x_blocked_) {
    int64_t Cl = w->rank() == 4 ? w->dim(1) * a_.group : 0;
    if (dt != DataType::kFloat32 || x->rank() != 5 || x->dim(4) != kBlock || Cl <= 0 || x->dim(1) != blocks_of(Cl))
      return invalid_argument(where + "X " + x->describe() + " is not the nChw16c layout of " + std::to_string(Cl) +
                              (bf16_ ? " float32 or bfloat16 channels" : " float32 channels"));
    xs = {x->dim(0), Cl, x->dim(2), x->dim(3)};
  }
  if (y_blocked_ && (dt != DataType::kFloat32 || xs.size() != 4))
    return invalid_argument(where + "an nChw16c output needs a float32 2-D convolution, got X " + x->describe());
  int rank = static_cast<int>(xs.size());
  if (rank < 3 || rank > 5)
    return invalid_argument(where + "X must have rank 3 to 5 (N, C, spatial...), got " + x->describe());
  if (w->rank() != rank)
    return invalid_argument(where + "W " + w->describe() + " must have the same rank as X " + x->describe());
  int64_t G = a_.group;
  int64_t N = xs[0], C = xs[1];
  if (G < 1 || C % G != 0) return invalid_argument(where + "group " + std::to_string(G) + " does not divide channels of X " + x->describe());
  int64_t M;
  if (!transpose_) {
    M = w->dim(0);
    if (w->dim(1) * G != C)
      return invalid_argument(where + "W " + w->describe() + " expects " + std::to_string(w->dim(1) * G) +
                              " input channels, X " + x->describe() + " has " + std::to_string(C));
    if (M % G != 0)
      return invalid_argument(where + "group " + std::to_string(G) + " does not divide output channels of W " + w->describe());
  } else {
    if (w->dim(0) != C)
      return invalid_argument(where + "W " + w->describe() + " expects " + std::to_string(w->dim(0)) +
                              " input channels, X " + x->describe() + " has " + std::to_string(C));
    M = w->dim(1) * G;
  }
  if (b && (b->rank() != 1 || b->dim(0) != M))
    return invalid_argument(where + "B " + b->describe() + " must be 1-D with " + std::to_string(M) + " elements");
  auto resolved = geometry_.get({&xs, &w->shape()}, [&](Geometry* g) {
    return resolve_geometry(a_, transpose_, xs, w->shape(), where, g);
  });
  BH_ASSIGN_OR_RETURN(std::shared_ptr<const Geometry> geometry, std::move(resolved));
  const Geometry& g = *geometry;
  Shape yshape{N, M};
  yshape.insert(yshape.end(), g.out.begin(), g.out.end());
  // Too few multiply-adds to share between threads: one (kernels/serial_small.cc), except
  // on the NCHW depthwise kernels. Those hand whole channel planes to the threads as they
  // ask (parallel_for), with no fork of oneDNN's and no reorder: ShuffleNet's, all under
  // 2 Mi multiply-adds, took 0.58 of its 1.43 ms at 2 threads on one, and the model
  // 1.42-1.55 -> 1.22-1.34 ms on both (alternating runs, 2-core AVX-512 EPYC).
  const bool nchw_depthwise = !x_blocked_ && !y_blocked_ && dt == DataType::kFloat32 && [&] {
    const PlainPath p = plain_path(g, C, M, false);
    return p == PlainPath::kDepthwise3x3 || p == PlainPath::kDepthwise;
  }();
  SerialScope serial(!nchw_depthwise && serial_for_macs(conv_macs(N, M, C / G, g)));
  const Tensor* sum = nullptr;
  if (has_sum_) {
    sum = ctx.input(3);
    if (!sum || !sum->defined()) return invalid_argument(where + "the fused summand (input 3) is missing");
    if (sum->dtype() != ydt)
      return invalid_argument(where + "the fused summand " + sum->describe() + " must have element type " + dtype_name(ydt));
  }
  if (x_blocked_ || y_blocked_) {
    Shape ashape = yshape;
    if (y_blocked_) ashape = {N, blocks_of(M), yshape[2], yshape[3], kBlock};
    if (sum && sum->shape() != ashape)
      return invalid_argument(where + "the fused summand " + sum->describe() + " must have the output's shape " +
                              shape_to_string(ashape));
    Tensor y;
    if (sum) {
      // oneDNN's sum post-op adds the convolution to what the output holds: the summand's
      // memory can be the output when nothing reads it after this node.
      auto plan = plan_for(xs, w->shape(), b != nullptr, g, a_.group, x_blocked_, y_blocked_, xbf, ydt != dt);
      if (!plan->use_ref && plan->fused && !plan->re_dst) {
        BH_ASSIGN_OR_RETURN(y, ctx.reuse_input_as_output(3, 0, ydt, ashape));
      }
    }
    if (!y.defined()) {
      BH_ASSIGN_OR_RETURN(y, ctx.allocate_output(0, ydt, ashape));
    }
    return conv_blocked(ctx, *x, xs, *w, b, y, g, sum);
  }
  // A channel shuffle read in place: output channel c reads the unshuffled plane
  // (c mod G)·(C/G) + c/G (exec/channel_shuffle.h).
  std::vector<int64_t> planes;
  if (shuffle_) {
    if (x_blocked_ || y_blocked_ || rank != 4 || C % shuffle_ != 0)
      return invalid_argument(where + "_x_shuffle " + std::to_string(shuffle_) + " needs a plain 4-D X whose channels it divides, got " +
                              x->describe());
    planes.resize(static_cast<size_t>(C));
    for (int64_t c = 0; c < C; ++c) planes[c] = (c % shuffle_) * (C / shuffle_) + c / shuffle_;
  }
  const int64_t* pl = planes.empty() ? nullptr : planes.data();
  if (!sum || sum->shape() == yshape) {
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, dt, yshape));
    return conv_into(ctx, *x, *w, b, y, g, post_, sum, pl);
  }
  // The summand broadcasts: the convolution and the ops before the sum into scratch, the
  // broadcast add into the output, then the ops after it.
  size_t k = 0;
  while (post_[k].kind != PostKind::kSum) ++k;
  std::vector<PostOp> before(post_.begin(), post_.begin() + k), after(post_.begin() + k + 1, post_.end());
  BH_ASSIGN_OR_RETURN(Shape oshape, broadcast_shapes(yshape, sum->shape(), where));
  BH_ASSIGN_OR_RETURN(Tensor t, ctx.allocate_scratch(dt, yshape));
  BH_RETURN_IF_ERROR(conv_into(ctx, *x, *w, b, t, g, before, nullptr, pl));
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, dt, oshape));
  std::vector<int64_t> st = broadcast_strides(yshape, oshape), ss = broadcast_strides(sum->shape(), oshape);
  const int r = static_cast<int>(oshape.size());
  auto add = [&](auto* yp, const auto* tp, const auto* sp) {
    std::vector<int64_t> idx(r, 0);
    int64_t ot = 0, os = 0;
    for (int64_t i = 0, n = y.numel(); i < n; ++i) {
      yp[i] = tp[ot] + sp[os];
      for (int d = r - 1; d >= 0; --d) {
        ot += st[d];
        os += ss[d];
        if (++idx[d] < oshape[d]) break;
        ot -= st[d] * oshape[d];
        os -= ss[d] * oshape[d];
        idx[d] = 0;
      }
    }
  };
  if (dt == DataType::kFloat32) {
    add(y.data<float>(), t.data<float>(), sum->data<float>());
    apply_post_ops_all(after, y.data<float>(), static_cast<const float*>(nullptr), y.numel(), ctx.threads());
  } else {
    add(y.data<double>(), t.data<double>(), sum->data<double>());
    apply_post_ops_all(after, y.data<double>(), static_cast<const double*>(nullptr), y.numel(), ctx.threads());
  }
  return Status::ok();
}

Status ConvKernel::conv_blocked(KernelContext& ctx, const Tensor& x, const Shape& xs, const Tensor& w, const Tensor* b,
                                Tensor& y, const Geometry& g, const Tensor* sum) const {
  if (y.numel() == 0) return Status::ok();
  const bool xbf = x.dtype() == DataType::kBFloat16, ybf = y.dtype() == DataType::kBFloat16;
  auto plan = plan_for(xs, w.shape(), b != nullptr, g, a_.group, x_blocked_, y_blocked_, xbf, ybf);
  if (!plan->use_ref) {
    if (plan->fused || post_.empty()) return run_dnnl(ctx, *plan, x, w, b, y, sum);
    if (!ybf) {
      // The post-ops are element-wise: applied to the blocked output as they are (the
      // summand has the same layout).
      BH_RETURN_IF_ERROR(run_dnnl(ctx, *plan, x, w, b, y, nullptr));
      apply_post_ops_all(post_, y.data<float>(), sum ? sum->data<float>() : nullptr, y.numel(), ctx.threads());
      return Status::ok();
    }
  }
  // No oneDNN kernel for this problem (or post-ops it cannot fuse into a bfloat16
  // output): the plain float32 paths on converted copies.
  const int64_t N = xs[0], C = xs[1];
  const int64_t M = y_blocked_ ? w.dim(0) : y.dim(1);
  Shape ys{N, M, g.out[0], g.out[1]};
  const int64_t S_in = xs[2] * xs[3], S_out = ys[2] * ys[3];
  // A float32 copy of a bfloat16 tensor (the same layout), or the tensor itself.
  auto as_f32 = [&](const Tensor& t) -> Result<Tensor> {
    if (t.dtype() != DataType::kBFloat16) return t;
    BH_ASSIGN_OR_RETURN(Tensor f, ctx.allocate_scratch(DataType::kFloat32, t.shape()));
    bf16_to_f32(t.data<uint16_t>(), f.data<float>(), t.numel());
    return f;
  };
  Tensor xp = x, yp = y, sp;
  if (x_blocked_) {
    BH_ASSIGN_OR_RETURN(Tensor xf, as_f32(x));
    BH_ASSIGN_OR_RETURN(xp, ctx.allocate_scratch(DataType::kFloat32, xs));
    blocked_to_plain(xf.data<float>(), xp.data<float>(), N, C, S_in);
  }
  const Tensor* sum_plain = sum;
  if (y_blocked_) {
    BH_ASSIGN_OR_RETURN(yp, ctx.allocate_scratch(DataType::kFloat32, ys));
    if (sum) {
      BH_ASSIGN_OR_RETURN(Tensor sf, as_f32(*sum));
      BH_ASSIGN_OR_RETURN(sp, ctx.allocate_scratch(DataType::kFloat32, ys));
      blocked_to_plain(sf.data<float>(), sp.data<float>(), N, M, S_out);
      sum_plain = &sp;
    }
  }
  BH_RETURN_IF_ERROR(conv_into(ctx, xp, w, b, yp, g, post_, sum_plain));
  if (y_blocked_) {
    if (!ybf) {
      plain_to_blocked(yp.data<float>(), y.data<float>(), N, M, S_out);
    } else {
      BH_ASSIGN_OR_RETURN(Tensor yf, ctx.allocate_scratch(DataType::kFloat32, y.shape()));
      plain_to_blocked(yp.data<float>(), yf.data<float>(), N, M, S_out);
      f32_to_bf16(yf.data<float>(), y.data<uint16_t>(), y.numel());
    }
  }
  return Status::ok();
}

ConvKernel::PlainPath ConvKernel::plain_path(const Geometry& g, int64_t C, int64_t M, bool plain_ops) const {
  const int64_t G = a_.group;
  if (transpose_) {
    // Each input pixel makes its own k x k block of output pixels: one product.
    bool pixels = G == 1 && g.nsp == 2 && !plain_ops;
    for (int i = 0; pixels && i < 2; ++i)
      pixels = g.k[i] == g.s[i] && g.d[i] == 1 && g.pb[i] == 0 && g.pe[i] == 0 && g.out[i] == g.in[i] * g.s[i];
    return pixels ? PlainPath::kDeconvPixels : PlainPath::kPlan;
  }
  if (bf16_) return PlainPath::kPlan;
  bool pointwise = pointwise_on_sgemm(G, C / G, M / G);
  for (int i = 0; i < g.nsp; ++i) pointwise = pointwise && g.k[i] == 1 && g.s[i] == 1 && g.pb[i] == 0 && g.pe[i] == 0;
  if (pointwise) return PlainPath::kPointwise;
  // NCHW depthwise beats oneDNN + two reorders on wide planes, and the 3x3 "same" one
  // down to 12 columns (depthwise3x3s1_nchw; ShuffleNet's 14 and 28); narrower planes go to oneDNN's brdgmm/jit
  // depthwise kernels (nchw_depthwise_min_width): 544 channels at 7x7 took 28 us here,
  // 23 us there with its reorders.
  const bool dw = g.nsp == 2 && G == C && M == C;
  if (dw && g.k[0] == 3 && g.k[1] == 3 && g.s[0] == 1 && g.s[1] == 1 && g.d[0] == 1 && g.d[1] == 1 && g.pb[0] == 1 &&
      g.pb[1] == 1 && g.pe[0] == 1 && g.pe[1] == 1 && g.in[0] >= 3 && g.in[1] >= 12)
    return PlainPath::kDepthwise3x3;
  if (dw && g.out[1] >= nchw_depthwise_min_width()) return PlainPath::kDepthwise;
  // 3x3 at column stride 2 from 12 output columns on the row kernel too, which reads a
  // shuffled X in place: ShuffleNet's 112 channels 56x56 -> 28x28 took 0.159 ms on oneDNN
  // (a shuffled copy and a reorder each way) and 0.10-0.11 on the row kernel, 136 at
  // 28x28 -> 14x14 0.051 and 0.047; 272 at 14x14 -> 7x7 0.026 and 0.049 (1 thread).
  if (dw && g.k[0] == 3 && g.k[1] == 3 && g.s[1] == 2 && g.d[0] == 1 && g.d[1] == 1 && g.out[1] >= 12)
    return PlainPath::kDepthwise;
  return PlainPath::kPlan;
}

void ConvKernel::prepare(const KernelInfo& info) const {
  const ir::Node& n = info.node;
  std::optional<Shape> static_x = info.static_input_shape(0);
  if (!const_w_.defined() || !static_x) return;
  Shape xs = *static_x;
  const DataType xt = info.graph_input_type(0);
  const Shape& ws = const_w_.shape();
  const int64_t G = a_.group;
  if (x_blocked_) {
    if (xs.size() != 5 || ws.size() != 4) return;
    xs = {xs[0], ws[1] * G, xs[2], xs[3]};  // the logical shape of [N, C/16, H, W, 16]
  }
  // What compute() would take: a float32 X, or the bfloat16 chain's blocked one.
  const bool xbf = bf16_ && x_blocked_ && xt == DataType::kBFloat16;
  if (xt != DataType::kFloat32 && !xbf) return;
  if (xs.size() < 3 || xs.size() > 5 || ws.size() != xs.size() || G < 1 || xs[1] % G != 0) return;
  if (transpose_ ? ws[0] != xs[1] : ws[1] * G != xs[1]) return;
  Geometry g;
  if (!resolve_geometry(a_, transpose_, xs, ws, info.where(), &g).is_ok()) return;
  const int64_t M = transpose_ ? ws[1] * G : ws[0];
  const bool has_bias = n.inputs.size() > 2 && !n.inputs[2].empty();
  // The thread count a run gives oneDNN: one for a small convolution (SerialScope in
  // compute), else prepared_threads.
  OmpThreadsScope threads(serial_for_macs(conv_macs(xs[0], M, xs[1] / G, g)) ? 1 : prepared_threads(info));
  try {
    if (x_blocked_ || y_blocked_)
      plan_for(xs, ws, has_bias, g, G, x_blocked_, y_blocked_, xbf, y_bf16_ && y_blocked_);
    else if (plain_path(g, xs[1], M, !post_.empty()) == PlainPath::kPlan)
      plan_for(xs, ws, has_bias, g, G);
  } catch (const std::exception&) {
    // Out of memory packing the weights: the first run tries again and reports it.
  }
}

Status ConvKernel::conv_into(KernelContext& ctx, const Tensor& xt, const Tensor& wt, const Tensor* b, Tensor& y,
                             const Geometry& g, const std::vector<PostOp>& ops, const Tensor* sum,
                             const int64_t* planes) const {
  const std::string& where = ctx.where();
  const Tensor* x = &xt;
  const Tensor* w = &wt;
  DataType dt = x->dtype();
  int64_t G = a_.group;
  int64_t N = x->dim(0), C = x->dim(1), M = y.dim(1);
  const PlainPath path = dt == DataType::kFloat32 ? plain_path(g, C, M, !ops.empty() || sum) : PlainPath::kPlan;
  // The depthwise kernels on NCHW (below) can read X through `planes`.
  const bool dw_nchw = path == PlainPath::kDepthwise3x3 || path == PlainPath::kDepthwise;
  Tensor shuffled;
  if (planes && !dw_nchw) {
    BH_ASSIGN_OR_RETURN(shuffled, ctx.allocate_scratch(dt, x->shape()));
    const int64_t plane = x->numel() / (N * C);
    const size_t bytes = static_cast<size_t>(plane) * dtype_size(dt);
    const char* src = static_cast<const char*>(x->raw());
    char* dst = static_cast<char*>(shuffled.raw());
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c)
        std::memcpy(dst + (n * C + c) * bytes, src + (n * C + planes[c]) * bytes, bytes);
    x = &shuffled;
    planes = nullptr;
  }
  auto finish_generic = [&]() {
    if (ops.empty()) return;
    if (dt == DataType::kFloat32)
      apply_post_ops_all(ops, y.data<float>(), sum ? sum->data<float>() : nullptr, y.numel(), ctx.threads());
    else
      apply_post_ops_all(ops, y.data<double>(), sum ? sum->data<double>() : nullptr, y.numel(), ctx.threads());
  };
  if (y.numel() == 0) return Status::ok();
  if (x->numel() == 0 || w->numel() == 0) {
    // Nothing to accumulate: the output is the bias.
    for (int64_t i = 0; i < y.numel(); ++i) {
      int64_t m = (i / (y.numel() / (N * M))) % M;
      if (dt == DataType::kFloat32) y.data<float>()[i] = b ? b->data<float>()[m] : 0.f;
      else y.data<double>()[i] = b ? b->data<double>()[m] : 0.0;
    }
    finish_generic();
    return Status::ok();
  }
  const float* sumf = sum && dt == DataType::kFloat32 ? sum->data<float>() : nullptr;
  switch (path) {
    case PlainPath::kDeconvPixels:
      return deconv_pixels_sgemm(ctx, x->data<float>(), w->data<float>(), b ? b->data<float>() : nullptr, y.data<float>(),
                                 N, C, M, g);
    case PlainPath::kPointwise:
      return conv1x1_sgemm(where, x->data<float>(), w->data<float>(), b ? b->data<float>() : nullptr, y.data<float>(), N,
                           C, M, x->numel() / (N * C), ops, sumf, G, ctx.threads());
    case PlainPath::kDepthwise3x3:
      depthwise3x3s1_nchw(x->data<float>(), w->data<float>(), b ? b->data<float>() : nullptr, y.data<float>(), N, C,
                          g.in[0], g.in[1], ctx.threads(), ops, sumf, planes);
      return Status::ok();
    case PlainPath::kDepthwise:
      depthwise2d_nchw(x->data<float>(), w->data<float>(), b ? b->data<float>() : nullptr, y.data<float>(), N, C, g,
                       ctx.threads(), ops, sumf, planes);
      return Status::ok();
    case PlainPath::kPlan: break;
  }
  if (dt == DataType::kFloat32) {
    auto plan = plan_for(x->shape(), w->shape(), b != nullptr, g, G);
    if (!plan->use_ref) {
      if (plan->fused && ops.size() == post_.size()) return run_dnnl(ctx, *plan, *x, *w, b, y, sum);
      if (!plan->fused || post_.empty()) {
        BH_RETURN_IF_ERROR(run_dnnl(ctx, *plan, *x, *w, b, y, nullptr));
        finish_generic();
        return Status::ok();
      }
      // A partial list (the ops before a broadcast sum) with a primitive that applies
      // them all: the reference loops below.
    }
  }
  Geo3 g3 = to_geo3(g);
  if (dt == DataType::kFloat32) {
    if (!transpose_)
      conv_ref<float>(x->data<float>(), w->data<float>(), b ? b->data<float>() : nullptr, y.data<float>(), N, C, M, G, g3,
                      ctx.threads());
    else
      conv_transpose_ref<float>(x->data<float>(), w->data<float>(), b ? b->data<float>() : nullptr, y.data<float>(), N, C,
                                M, G, g3, ctx.threads());
  } else {
    if (!transpose_)
      conv_ref<double>(x->data<double>(), w->data<double>(), b ? b->data<double>() : nullptr, y.data<double>(), N, C, M,
                       G, g3, ctx.threads());
    else
      conv_transpose_ref<double>(x->data<double>(), w->data<double>(), b ? b->data<double>() : nullptr,
                                 y.data<double>(), N, C, M, G, g3, ctx.threads());
  }
  finish_generic();
  return Status::ok();
}

Result<std::unique_ptr<Kernel>> make_conv(const KernelInfo& info, bool transpose) {
  const ir::Node& n = info.node;
  if (n.inputs.size() < 2 || n.inputs[0].empty() || n.inputs[1].empty())
    return invalid_argument(info.where() + "needs inputs X and W");
  BH_RETURN_IF_ERROR(check_input_types(info, {0, 1}, {ew::kFloats, true}));
  ConvAttrs a = parse_conv_attrs(n);
  BH_RETURN_IF_ERROR(check_conv_attrs(a, info.where()));
  std::vector<PostOp> post;
  if (!transpose && n.has_attr("_post_ops")) {
    BH_ASSIGN_OR_RETURN(post, parse_post_ops(n, info.where()));
  }
  Tensor cw;
  if (info.input_is_constant(1) && info.constant_inputs[1].dtype() == DataType::kFloat32 &&
      info.constant_inputs[1].on_host())
    cw = info.constant_inputs[1];
  auto layout = [&](const char* attr) -> Result<bool> {
    std::string v = n.attr_string(attr, "");
    if (v.empty()) return false;
    if (v != "nChw16c" || transpose)
      return invalid_argument(info.where() + "unsupported " + attr + " '" + v + "' (only nChw16c, for Conv)");
    return true;
  };
  BH_ASSIGN_OR_RETURN(bool xb, layout("_x_layout"));
  BH_ASSIGN_OR_RETURN(bool yb, layout("_y_layout"));
  BH_ASSIGN_OR_RETURN(bool bf16, bf16_precision(info));
  const int64_t shuffle = n.attr_int("_x_shuffle", 0);
  if (shuffle && (shuffle < 2 || transpose || xb || bf16))
    return invalid_argument(info.where() + "unsupported _x_shuffle " + std::to_string(shuffle) +
                            " (2 or more groups, for a float32 Conv on plain NCHW)");
  const std::string yt = n.attr_string("_y_type", "");
  if (!yt.empty() && (yt != "bf16" || !bf16 || !yb))
    return invalid_argument(info.where() + "unsupported _y_type '" + yt + "' (only bf16, for a blocked Y computed in bf16)");
  // Plain 1x1 products (PlainPath::kPointwise: Mg rows) and transposed convolutions may
  // run on sgemm (conv_into).
  bool sgemm = !xb && !yb && !bf16 && (transpose || (cw.defined() && cw.rank() >= 3));
  bool several_rows = transpose;
  if (sgemm && !transpose) {
    const int64_t G = a.group, Mg = G > 0 ? cw.dim(0) / G : 0;
    sgemm = pointwise_on_sgemm(G, cw.dim(1), Mg);
    for (int i = 2; i < cw.rank(); ++i) sgemm = sgemm && cw.dim(i) == 1;
    several_rows = Mg > 1;
  }
  try {
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    auto k = std::make_unique<ConvKernel>(std::move(a), transpose, std::move(cw), std::move(eng), std::move(post));
    k->set_layouts(xb, yb);
    k->set_shuffle(shuffle);
    k->set_bf16(bf16, !yt.empty());
    k->share_with(info.shared);
    k->prepare(info);
    if (sgemm) warm_sgemm(several_rows);
    return std::unique_ptr<Kernel>(std::move(k));
  } catch (const dnnl::error& e) {
    return internal_error(info.where() + "cannot create a oneDNN CPU engine: " + e.what());
  }
}

// ---------------------------------------------------------------------------------------
// ConvInteger and QLinearConv (reference loops): (x - x_zero_point) * (w - w_zero_point)
// accumulated exactly, w's zero point per tensor or per output channel. ConvInteger
// returns the int32 sums; QLinearConv adds its int32 bias and requantises with
// x_scale * w_scale[m] / y_scale.

struct IntConvInputs {
  const Tensor *x = nullptr, *w = nullptr;
  std::vector<int64_t> xs, ws;  // the inputs less their zero points
  Geometry g;
  int64_t N = 0, C = 0, M = 0;
};

Status int_conv_prepare(KernelContext& ctx, const ConvAttrs& a, int xi, int xzi, int wi, int wzi, IntConvInputs* in) {
  const Tensor* x = ctx.input(xi);
  const Tensor* w = ctx.input(wi);
  if (!x || !w) return invalid_argument(ctx.where() + "missing input x or w");
  auto eight_bit = [](DataType t) { return t == DataType::kUInt8 || t == DataType::kInt8; };
  if (!eight_bit(x->dtype()) || !eight_bit(w->dtype()))
    return unsupported(ctx.where() + "takes int8/uint8 x and w, got " + dtype_name(x->dtype()) + " and " + dtype_name(w->dtype()));
  if (x->rank() < 3 || x->rank() > 5 || w->rank() != x->rank())
    return invalid_argument(ctx.where() + "x and w must both have rank 3 to 5, got " + x->describe() + " and " + w->describe());
  in->x = x;
  in->w = w;
  in->N = x->dim(0);
  in->C = x->dim(1);
  in->M = w->dim(0);
  if (in->C != w->dim(1) * a.group || in->M % a.group != 0)
    return invalid_argument(ctx.where() + "w " + w->describe() + " does not fit x " + x->describe() + " with group " + std::to_string(a.group));
  BH_RETURN_IF_ERROR(resolve_geometry(a, false, x->shape(), w->shape(), ctx.where(), &in->g));
  auto zero = [&](int i, const Tensor& of, int64_t per, const char* what) -> Result<std::vector<int64_t>> {
    std::vector<int64_t> z(static_cast<size_t>(per), 0);
    const Tensor* t = i < ctx.num_inputs() ? ctx.input(i) : nullptr;
    if (!t || t->numel() == 0) return z;
    if (t->dtype() != of.dtype() || (t->numel() != 1 && t->numel() != per))
      return invalid_argument(ctx.where() + what + " must be one " + dtype_name(of.dtype()) + " value or " + std::to_string(per) +
                              ", got " + t->describe());
    for (int64_t j = 0; j < per; ++j) z[j] = int_at(*t, t->numel() == 1 ? 0 : j);
    return z;
  };
  BH_ASSIGN_OR_RETURN(auto zx, zero(xzi, *x, 1, "x_zero_point"));
  BH_ASSIGN_OR_RETURN(auto zw, zero(wzi, *w, in->M, "w_zero_point"));
  in->xs.resize(static_cast<size_t>(x->numel()));
  for (int64_t i = 0; i < x->numel(); ++i) in->xs[i] = int_at(*x, i) - zx[0];
  in->ws.resize(static_cast<size_t>(w->numel()));
  const int64_t per_m = in->M ? w->numel() / in->M : 0;
  for (int64_t i = 0; i < w->numel(); ++i) in->ws[i] = int_at(*w, i) - zw[per_m ? i / per_m : 0];
  return Status::ok();
}

Shape int_conv_out_shape(const IntConvInputs& in) {
  Shape out{in.N, in.M};
  out.insert(out.end(), in.g.out.begin(), in.g.out.end());
  return out;
}

Status conv_integer_compute(KernelContext& ctx, const ConvAttrs& a) {
  IntConvInputs in;
  BH_RETURN_IF_ERROR(int_conv_prepare(ctx, a, 0, 2, 1, 3, &in));
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kInt32, int_conv_out_shape(in)));
  std::vector<int64_t> acc(static_cast<size_t>(y.numel()));
  conv_ref<int64_t>(in.xs.data(), in.ws.data(), nullptr, acc.data(), in.N, in.C, in.M, a.group, to_geo3(in.g), ctx.threads());
  int32_t* yp = y.data<int32_t>();
  for (size_t i = 0; i < acc.size(); ++i) yp[i] = static_cast<int32_t>(static_cast<uint32_t>(acc[i]));  // wraps as int32 would
  return Status::ok();
}

Status qlinear_conv_compute(KernelContext& ctx, const ConvAttrs& a) {
  // x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B
  IntConvInputs in;
  BH_RETURN_IF_ERROR(int_conv_prepare(ctx, a, 0, 2, 3, 5, &in));
  const Tensor* xs = ctx.input(1);
  const Tensor* ws = ctx.input(4);
  const Tensor* ys = ctx.input(6);
  const Tensor* yz = ctx.num_inputs() > 7 ? ctx.input(7) : nullptr;
  const Tensor* bias = ctx.num_inputs() > 8 ? ctx.input(8) : nullptr;
  auto is_scale = [](const Tensor* t) {
    return t && (t->dtype() == DataType::kFloat32 || t->dtype() == DataType::kFloat16 || t->dtype() == DataType::kBFloat16);
  };
  if (!is_scale(xs) || !is_scale(ws) || !is_scale(ys))
    return invalid_argument(ctx.where() + "x_scale, w_scale and y_scale must be float tensors");
  if (xs->numel() != 1 || ys->numel() != 1 || (ws->numel() != 1 && ws->numel() != in.M))
    return invalid_argument(ctx.where() + "x_scale and y_scale must hold one value and w_scale one or " + std::to_string(in.M) +
                            ", got " + xs->describe() + ", " + ys->describe() + " and " + ws->describe());
  const DataType yt = yz && yz->numel() ? yz->dtype() : in.x->dtype();
  if (yz && yz->numel() && yz->numel() != 1)
    return invalid_argument(ctx.where() + "y_zero_point must hold one value, got " + yz->describe());
  if (yt != DataType::kUInt8 && yt != DataType::kInt8) return unsupported(ctx.where() + "y_zero_point must be int8 or uint8");
  if (bias && bias->numel() && (bias->dtype() != DataType::kInt32 || bias->numel() != in.M))
    return invalid_argument(ctx.where() + "B must be int32 with " + std::to_string(in.M) + " values, got " + bias->describe());
  std::vector<int64_t> b;
  if (bias && bias->numel()) b.assign(bias->data<int32_t>(), bias->data<int32_t>() + in.M);
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, yt, int_conv_out_shape(in)));
  std::vector<int64_t> acc(static_cast<size_t>(y.numel()));
  conv_ref<int64_t>(in.xs.data(), in.ws.data(), b.empty() ? nullptr : b.data(), acc.data(), in.N, in.C, in.M, a.group,
                    to_geo3(in.g), ctx.threads());
  const int64_t zy = yz && yz->numel() ? int_at(*yz, 0) : 0;
  const double lo = yt == DataType::kUInt8 ? 0 : -128, hi = yt == DataType::kUInt8 ? 255 : 127;
  const int64_t osz = in.M ? y.numel() / (in.N * in.M) : 0;
  std::vector<float> mult(static_cast<size_t>(in.M));  // x_scale * w_scale[m] / y_scale, per output channel
  for (int64_t m = 0; m < in.M; ++m) mult[m] = float_at(*xs, 0) * float_at(*ws, ws->numel() == 1 ? 0 : m) / float_at(*ys, 0);
  for (int64_t i = 0; i < y.numel(); ++i) {
    const int64_t m = (i / osz) % in.M;
    double v = std::nearbyint(static_cast<double>(static_cast<float>(acc[i]) * mult[m])) + zy;
    v = std::isnan(v) ? static_cast<double>(zy) : std::clamp(v, lo, hi);  // a NaN or zero scale: the zero point
    if (yt == DataType::kUInt8) y.data<uint8_t>()[i] = static_cast<uint8_t>(v);
    else y.data<int8_t>()[i] = static_cast<int8_t>(v);
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// DeformConv (opset 19), 2-D: each kernel tap samples X bilinearly at its place moved by
// `offset` ([N, offset_group * 2 * kH * kW, oH, oW], dy then dx), scaled by `mask` where
// given; samples outside X are 0 (as torchvision's deform_conv2d).

float bilinear_at(const float* img, int64_t H, int64_t W, double y, double x) {
  if (y <= -1 || y >= static_cast<double>(H) || x <= -1 || x >= static_cast<double>(W)) return 0.0f;
  const int64_t y0 = static_cast<int64_t>(std::floor(y)), x0 = static_cast<int64_t>(std::floor(x));
  const double ly = y - static_cast<double>(y0), lx = x - static_cast<double>(x0);
  auto px = [&](int64_t yy, int64_t xx) -> double { return yy >= 0 && yy < H && xx >= 0 && xx < W ? img[yy * W + xx] : 0.0; };
  return static_cast<float>((1 - ly) * (1 - lx) * px(y0, x0) + (1 - ly) * lx * px(y0, x0 + 1) + ly * (1 - lx) * px(y0 + 1, x0) +
                            ly * lx * px(y0 + 1, x0 + 1));
}

Status deform_conv_compute(KernelContext& ctx, const ConvAttrs& a, int64_t offset_group) {
  const Tensor* x = ctx.input(0);
  const Tensor* w = ctx.input(1);
  const Tensor* off = ctx.input(2);
  const Tensor* b = ctx.num_inputs() > 3 ? ctx.input(3) : nullptr;
  const Tensor* mask = ctx.num_inputs() > 4 ? ctx.input(4) : nullptr;
  if (!x || !w || !off) return invalid_argument(ctx.where() + "needs X, W and offset");
  for (const Tensor* t : {x, w, off, b, mask})
    if (t && t->dtype() != DataType::kFloat32) return unsupported(ctx.where() + "takes float32 tensors, got " + t->describe());
  if (x->rank() != 4 || w->rank() != 4)
    return unsupported(ctx.where() + "only 2-D deformable convolution is supported, got X " + x->describe() + " and W " + w->describe());
  Geometry g;
  BH_RETURN_IF_ERROR(resolve_geometry(a, false, x->shape(), w->shape(), ctx.where(), &g));
  const int64_t N = x->dim(0), C = x->dim(1), H = x->dim(2), Wd = x->dim(3), M = w->dim(0), kH = w->dim(2), kW = w->dim(3);
  const int64_t G = a.group, K = kH * kW, oH = g.out[0], oW = g.out[1];
  if (C != w->dim(1) * G || M % G != 0 || offset_group < 1 || C % offset_group != 0)
    return invalid_argument(ctx.where() + "W " + w->describe() + " does not fit X " + x->describe() + " with group " + std::to_string(G) +
                            " and offset_group " + std::to_string(offset_group));
  if (off->shape() != Shape{N, offset_group * 2 * K, oH, oW})
    return invalid_argument(ctx.where() + "offset must have shape " + shape_to_string({N, offset_group * 2 * K, oH, oW}) + ", got " +
                            off->describe());
  if (mask && mask->numel() && mask->shape() != Shape{N, offset_group * K, oH, oW})
    return invalid_argument(ctx.where() + "mask must have shape " + shape_to_string({N, offset_group * K, oH, oW}) + ", got " +
                            mask->describe());
  if (b && b->numel() && b->numel() != M) return invalid_argument(ctx.where() + "B must have " + std::to_string(M) + " values");
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kFloat32, {N, M, oH, oW}));
  const float *xp = x->data<float>(), *wp = w->data<float>(), *op = off->data<float>();
  const float* mp = mask && mask->numel() ? mask->data<float>() : nullptr;
  const float* bp = b && b->numel() ? b->data<float>() : nullptr;
  float* yp = y.data<float>();
  const int64_t Cg = C / G, Mg = M / G, Co = C / offset_group;
  parallel_for(ctx.threads(), N * M, 1, [&](int64_t b0, int64_t e0) {
    for (int64_t nm = b0; nm < e0; ++nm) {
      const int64_t n = nm / M, m = nm % M, grp = m / Mg;
      for (int64_t oh = 0; oh < oH; ++oh)
        for (int64_t ow = 0; ow < oW; ++ow) {
          double acc = bp ? bp[m] : 0.0;
          for (int64_t c = 0; c < Cg; ++c) {
            const int64_t ic = grp * Cg + c, og = ic / Co;
            const float* img = xp + (n * C + ic) * H * Wd;
            for (int64_t kh = 0; kh < kH; ++kh)
              for (int64_t kw = 0; kw < kW; ++kw) {
                const int64_t k = kh * kW + kw;
                const int64_t oi = ((n * offset_group + og) * 2 * K + 2 * k) * oH * oW + oh * oW + ow;
                const double sy = static_cast<double>(oh * g.s[0] - g.pb[0] + kh * g.d[0]) + op[oi];
                const double sx = static_cast<double>(ow * g.s[1] - g.pb[1] + kw * g.d[1]) + op[oi + oH * oW];
                double v = bilinear_at(img, H, Wd, sy, sx);
                if (mp) v *= mp[((n * offset_group + og) * K + k) * oH * oW + oh * oW + ow];
                acc += v * wp[((m * Cg + c) * kH + kh) * kW + kw];
              }
          }
          yp[(nm * oH + oh) * oW + ow] = static_cast<float>(acc);
        }
    }
  });
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// ConvInteger and QLinearConv on oneDNN's int8 convolutions (VNNI / AMX-INT8 where the CPU
// has them): u8 or s8 x with its zero point (a run-time argument), s8 weights.
//
// oneDNN takes signed weights without a zero point: constant weights with one (uint8
// weights, say) are shifted once at session creation when w - w_zero_point fits in int8,
// and pre-packed for the primitive. This oneDNN (2.6) fixes a convolution's output scales
// when the primitive is made, so QLinearConv whose scales and y zero point are constants
// (as quantisers write them) gets the whole requantisation x_scale * w_scale[m] / y_scale,
// the int32 bias and y's zero point fused into the primitive, which writes int8 directly;
// with scales that are inputs, the primitive writes int32 sums and the requantisation runs
// here, as the reference does. Everything else (non-constant weights with a zero point,
// per-channel x zero points, shapes oneDNN has no kernel for) runs on the reference loops
// above, which also give every error message.
//
// oneDNN converts int32 results through float32 on the way out: exact while they stay
// below 2^24 in magnitude. ConvInteger's result must be exact, so it runs on oneDNN only
// when window * max|x - x_zp| * max|w| is below that, checked on each run's data; for
// QLinearConv the reference itself rounds the sum to float32 before scaling, so the two
// differ at most where that rounding lands a value on the other side of a half: one step.

class IntConvKernel final : public Kernel {
 public:
  // Requantisation fixed at session creation (QLinearConv with constant scales).
  struct Fixed {
    std::vector<float> mult;  // x_scale * w_scale[m] / y_scale, per output channel
    int32_t zy = 0;
    DataType yt = DataType::kUInt8;
  };
  IntConvKernel(ConvAttrs a, bool qlinear, Tensor w_s8, int w_max, std::optional<Fixed> fixed, dnnl::engine eng)
      : a_(std::move(a)), qlinear_(qlinear), w_s8_(std::move(w_s8)), w_max_(w_max), fixed_(std::move(fixed)), eng_(std::move(eng)) {}
  // Where oneDNN's int8 sums are not exact (no VNNI, int8_sums_exact): the constant weights
  // as float32, for an fp32 convolution whose sums are exact integers (below 2^24).
  void set_float_weights(Tensor w_f32) { w_f32_ = std::move(w_f32); }
  // Channels-last X and/or Y (exec/layout.h nhwc_int8_chains): [N, H, W, C] tensors.
  void set_layouts(bool x_nhwc, bool y_nhwc) {
    x_nhwc_ = x_nhwc;
    y_nhwc_ = y_nhwc;
  }
  Status compute(KernelContext& ctx) const override;
  // Packed weights are then shared with the Env's other sessions (KernelInfo::shared).
  void share_with(std::shared_ptr<SharedConstants> shared) { shared_ = std::move(shared); }
  // QLinearConv whose requantisation is fixed (fixed_) and whose X has a shape fixed
  // before any run: builds the fused primitive and packs the weights now, at session
  // creation, as ConvKernel::prepare does. Call after the set_* methods.
  void prepare(const KernelInfo& info) const;

 private:
  // X's logical [N, C, ...] shape and W's make a convolution the oneDNN path takes (whole
  // groups, some output channels and pixels, a non-empty X); its geometry in `g`.
  bool int_geometry(const Shape& xs, const Shape& ws, const std::string& where, std::shared_ptr<const Geometry>* g) const {
    const int64_t M = ws[0], G = a_.group;
    int64_t numel = 0;  // X's shape may be one declared in the model, whose size need not fit
    if (xs[1] != ws[1] * G || M % G != 0 || M == 0 || !checked_numel(xs, &numel) || numel == 0) return false;
    auto got = geometry_.get({&xs, &ws}, [&](Geometry* g) { return resolve_geometry(a_, false, xs, ws, where, g); });
    if (!got.is_ok()) return false;
    *g = std::move(got).value();
    for (int64_t o : (*g)->out)
      if (o <= 0) return false;
    return true;
  }
  // Whether the requantisation fixed at creation (fixed_) serves a Y of type `yt` with `M`
  // channels: the primitive then requantises itself (given exact int8 sums).
  bool fixed_serves(DataType yt, int64_t M) const {
    return qlinear_ && fixed_ && fixed_->yt == yt &&
           (fixed_->mult.size() == 1 || static_cast<int64_t>(fixed_->mult.size()) == M);
  }

  struct Plan {
    bool use_ref = false;
    std::string why_ref;
    dnnl::primitive prim;
    memory::desc user_src, user_dst, user_w, bias_md, src_md, dst_md, w_md, scratch_md;
    bool re_src = false, re_dst = false, re_w = false;
    Reorder src_re, dst_re, w_re;
    memory packed_w;
    std::shared_ptr<const void> packed_hold;  // keeps packed_w's bytes (shared) alive
    bool has_packed = false;
    bool f32 = false;  // an fp32 convolution of x - zx and w_f32_ (sums exact below 2^24)
    bool zx = false;   // the primitive takes X's zero point at run time (else it is 0)
  };
  // `fused`: the primitive requantises (fixed_) and writes fixed_->yt; else int32 sums.
  // `f32`: float32 source, weights (w_f32_) and sums instead (never fused). `x` is the
  // logical [N, C, ...] shape; xn / yn: X / Y channels-last; zx0: X's zero point is 0.
  std::shared_ptr<const Plan> plan_for(const Shape& x, DataType xt, const Shape& w, bool fused, bool has_bias,
                                       const Geometry& g, bool f32, bool xn, bool yn, bool zx0) const;
  // The convolution with X / Y channels-last as `xn` / `yn` say. Only oneDNN's fused int8
  // path reads and writes channels-last; for every other path it sets *plain and returns
  // (the caller then runs it on NCHW copies).
  Status compute_on(KernelContext& ctx, bool xn, bool yn, bool* plain) const;
  Status reference(KernelContext& ctx) const {
    return qlinear_ ? qlinear_conv_compute(ctx, a_) : conv_integer_compute(ctx, a_);
  }

  ConvAttrs a_;
  bool qlinear_;
  Tensor w_s8_;   // constant weights less their zero points, in int8 (undefined: none)
  Tensor w_f32_;  // the same as float32 where the fp32 path is used (undefined: not made)
  int w_max_ = 128;  // max |w_s8_| (128 when not known)
  std::optional<Fixed> fixed_;
  dnnl::engine eng_;
  bool x_nhwc_ = false, y_nhwc_ = false;
  std::shared_ptr<SharedConstants> shared_;
  mutable std::mutex mu_;
  mutable std::map<std::vector<int64_t>, std::shared_ptr<const Plan>> plans_;
  GeometryCache geometry_;
  CallPool calls_{eng_};
};

// A kernel context whose input 0 and output 0 are NCHW copies of a channels-last input and
// output: for the paths of a kernel that compute only on NCHW.
class PlainLayoutContext final : public SubstituteContext {
 public:
  PlainLayoutContext(KernelContext& inner, bool xn, bool yn, dnnl::engine eng)
      : SubstituteContext(inner), xn_(xn), yn_(yn), eng_(std::move(eng)) {}
  Status convert_input() {
    for (int i = 0; i < inner_.num_inputs(); ++i) {
      const Value* v = inner_.input_value(i);
      inputs_.push_back(v ? *v : Value());
    }
    if (!xn_) return Status::ok();
    const Tensor* x = inner_.input(0);
    if (!x || x->rank() != 4) return invalid_argument(inner_.where() + "a channels-last X must be [N, H, W, C]");
    BH_ASSIGN_OR_RETURN(Tensor p, inner_.allocate_scratch(x->dtype(), {x->dim(0), x->dim(3), x->dim(1), x->dim(2)}));
    BH_RETURN_IF_ERROR(reorder(*x, p, false));
    inputs_[0] = Value(p);
    return Status::ok();
  }
  Status convert_output() {
    if (!yn_ || !plain_out_.defined()) return Status::ok();
    const Tensor& p = plain_out_;
    BH_ASSIGN_OR_RETURN(Tensor y, inner_.allocate_output(0, p.dtype(), {p.dim(0), p.dim(2), p.dim(3), p.dim(1)}));
    return reorder(p, y, true);
  }
  Result<Tensor> allocate_output(int i, DataType dtype, const Shape& shape) override {
    if (i != 0 || !yn_) return inner_.allocate_output(i, dtype, shape);
    if (shape.size() != 4) return invalid_argument(inner_.where() + "a channels-last Y must have rank 4");
    BH_ASSIGN_OR_RETURN(plain_out_, inner_.allocate_scratch(dtype, shape));
    return plain_out_;
  }

 private:
  // NCHW `src` to channels-last `dst` (to_nhwc) or back; both hold the same logical tensor.
  Status reorder(const Tensor& src, const Tensor& dst, bool to_nhwc) {
    auto t = dnnl_nhwc_type(src.dtype());
    if (!t.is_ok()) return t.status().with_context(inner_.where());
    const Tensor& nchw = to_nhwc ? src : dst;
    const Dims logical{nchw.dim(0), nchw.dim(1), nchw.dim(2), nchw.dim(3)};
    try {
      const memory::desc plain = plain_md(logical, *t), nhwc = nhwc_md(logical, *t);
      Reorder r = Reorder::make(eng_, to_nhwc ? plain : nhwc, to_nhwc ? nhwc : plain);
      // A rare path (a fallback's copies): a pool of its own for the one call.
      CallPool pool(eng_);
      CallPool::Call call(pool);
      CallScratch sc{inner_, {}};
      BH_RETURN_IF_ERROR(run_reorder(r, call, call.memory(to_nhwc ? plain : nhwc, const_cast<void*>(src.raw())),
                                     call.memory(to_nhwc ? nhwc : plain, const_cast<void*>(dst.raw())), sc));
    } catch (const dnnl::error& e) {
      return internal_error(inner_.where() + "oneDNN reorder failed: " + e.what());
    }
    return Status::ok();
  }
  bool xn_, yn_;
  dnnl::engine eng_;
  Tensor plain_out_;
};

memory::data_type dnnl_int_type(DataType t) {
  return t == DataType::kUInt8 ? memory::data_type::u8 : t == DataType::kInt8 ? memory::data_type::s8 : memory::data_type::s32;
}

std::shared_ptr<const IntConvKernel::Plan> IntConvKernel::plan_for(const Shape& x, DataType xt, const Shape& w, bool fused,
                                                                   bool has_bias, const Geometry& g, bool f32, bool xn,
                                                                   bool yn, bool zx0) const {
  std::vector<int64_t> key(x.begin(), x.end());
  key.push_back(zx0 ? 1 : 0);
  key.push_back(xn ? 1 : 0);
  key.push_back(yn ? 1 : 0);
  key.push_back(-1);
  key.insert(key.end(), w.begin(), w.end());
  key.push_back(static_cast<int64_t>(xt));
  key.push_back(fused ? 1 : 0);
  key.push_back(has_bias ? 1 : 0);
  key.push_back(f32 ? 1 : 0);
  key.push_back(omp_get_max_threads());  // oneDNN fixes a primitive's thread count when it is made
  std::lock_guard<std::mutex> lock(mu_);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  auto p = std::make_shared<Plan>();
  try {
    const int64_t N = x[0], C = x[1], M = w[0], G = a_.group;
    p->f32 = f32;
    const DataType yt = fused ? fixed_->yt : DataType::kInt32;
    Dims src_dims(x.begin(), x.end());
    Dims dst_dims{N, M};
    dst_dims.insert(dst_dims.end(), g.out.begin(), g.out.end());
    const Dims wdims = conv_weight_dims(M, C, G, g.k);
    const auto f = memory::data_type::f32;
    const auto st = f32 ? f : dnnl_int_type(xt), dt = f32 ? f : dnnl_int_type(yt), wt = f32 ? f : memory::data_type::s8;
    p->user_src = xn ? nhwc_md(src_dims, st) : memory::desc(src_dims, st, row_major_strides(src_dims));
    p->user_dst = yn ? nhwc_md(dst_dims, dt) : memory::desc(dst_dims, dt, row_major_strides(dst_dims));
    p->user_w = memory::desc(wdims, wt, row_major_strides(wdims));
    p->bias_md = fused && has_bias ? memory::desc({M}, memory::data_type::s32, memory::format_tag::a) : memory::desc();
    auto any = [](const Dims& d, memory::data_type t) { return memory::desc(d, t, memory::format_tag::any); };
    const int nsp = g.nsp;
    Dims strides(g.s.begin(), g.s.end()), dil(nsp), pl(g.pb.begin(), g.pb.end()), pr(g.pe.begin(), g.pe.end());
    for (int i = 0; i < nsp; ++i) dil[i] = g.d[i] - 1;
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    // A source zero point costs oneDNN a compensation pass over every output; activations
    // past a Relu have none, and the primitive without one is made for them.
    p->zx = !f32 && !zx0;
    if (p->zx) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    if (fused) {
      attr.set_output_scales(fixed_->mult.size() == 1 ? 0 : 1 << 1, fixed_->mult);
      if (fixed_->zy) attr.set_zero_points(DNNL_ARG_DST, 0, {fixed_->zy});
    }
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                      any(src_dims, st), any(wdims, wt), p->bias_md, any(dst_dims, dt), strides, dil, pl, pr);
    dnnl::convolution_forward::primitive_desc pd(d, attr, eng_);
    // oneDNN's reference int8 kernel is no faster than ours, which is exact.
    if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0) throw dnnl::error(dnnl_unimplemented, "reference kernel only");
    p->src_md = pd.src_desc();
    p->dst_md = pd.dst_desc();
    p->w_md = pd.weights_desc();
    p->scratch_md = pd.scratchpad_desc();
    p->prim = dnnl::convolution_forward(pd);
    p->re_src = p->src_md != p->user_src;
    p->re_dst = p->dst_md != p->user_dst;
    p->re_w = p->w_md != p->user_w;
    if (p->re_src) p->src_re = Reorder::make(eng_, p->user_src, p->src_md);
    if (p->re_dst) p->dst_re = Reorder::make(eng_, p->dst_md, p->user_dst);
    if (p->re_w) p->w_re = Reorder::make(eng_, p->user_w, p->w_md);
    if (f32 ? w_f32_.defined() : w_s8_.defined()) {
      // Pack the constant weights once (the packed layout carries oneDNN's compensation).
      PackedWeights pw = pack_constant_shared(shared_, f32 ? "int-conv-w-f32" : "int-conv-w", eng_, p->user_w, p->w_md,
                                              p->re_w ? &p->w_re : nullptr, f32 ? w_f32_ : w_s8_);
      p->packed_w = pw.mem;
      p->packed_hold = std::move(pw.hold);
      p->has_packed = true;
    }
  } catch (const dnnl::error& e) {
    p->use_ref = true;
    p->why_ref = e.what();
  }
  plans_.emplace(key, p);
  return p;
}

void IntConvKernel::prepare(const KernelInfo& info) const {
  const ir::Node& n = info.node;
  std::optional<Shape> static_x = info.static_input_shape(0);
  const DataType xt = info.graph_input_type(0);
  if (!qlinear_ || !fixed_ || !w_s8_.defined() || !static_x || (xt != DataType::kUInt8 && xt != DataType::kInt8)) return;
  Shape xs = *static_x;
  if (xs.size() < 3 || xs.size() > 5 || (x_nhwc_ && xs.size() != 4)) return;
  if (x_nhwc_) xs = {xs[0], xs[3], xs[1], xs[2]};  // the logical shape of [N, H, W, C]
  const Shape& ws = w_s8_.shape();
  std::shared_ptr<const Geometry> g;
  if (ws.size() != xs.size() || !int_geometry(xs, ws, info.where(), &g)) return;
  // As compute_on decides: the fused path needs exact int8 sums and Y of fixed_'s type.
  auto given = [&](size_t i) { return i < n.inputs.size() && !n.inputs[i].empty(); };
  auto constant = [&](size_t i) { return info.input_is_constant(i) ? &info.constant_inputs[i] : nullptr; };
  const Tensor* yz = given(7) ? constant(7) : nullptr;
  const DataType yt = yz && yz->numel() ? yz->dtype() : xt;
  if (!int8_sums_exact(xt == DataType::kUInt8, w_max_) || !fixed_serves(yt, ws[0])) return;
  const Tensor* xz = given(2) ? constant(2) : nullptr;
  if (given(2) && (!xz || xz->numel() > 1 || (xz->numel() == 1 && xz->dtype() != xt))) return;
  const bool zx0 = !xz || xz->numel() == 0 || int_at(*xz, 0) == 0;
  const Tensor* b = given(8) ? constant(8) : nullptr;
  const bool has_bias = given(8) && !(b && b->numel() == 0);
  OmpThreadsScope threads(prepared_threads(info));
  try {
    plan_for(xs, xt, ws, true, has_bias, *g, false, x_nhwc_, y_nhwc_, zx0);
  } catch (const std::exception&) {
    // Out of memory packing the weights: the first run tries again and reports it.
  }
}

Status IntConvKernel::compute(KernelContext& ctx) const {
  if (!x_nhwc_ && !y_nhwc_) return compute_on(ctx, false, false, nullptr);
  bool plain = false;
  Status st = compute_on(ctx, x_nhwc_, y_nhwc_, &plain);
  if (!plain) return st;
  // Every path but oneDNN's fused int8 one computes on NCHW: on converted copies.
  PlainLayoutContext pc(ctx, x_nhwc_, y_nhwc_, eng_);
  BH_RETURN_IF_ERROR(pc.convert_input());
  BH_RETURN_IF_ERROR(compute_on(pc, false, false, nullptr));
  return pc.convert_output();
}

Status IntConvKernel::compute_on(KernelContext& ctx, bool xn, bool yn, bool* plain) const {
  // Anything but the fused oneDNN path: the caller's NCHW copies when channels-last,
  // else the reference loops.
  auto fallback = [&]() -> Status {
    if (xn || yn) {
      *plain = true;
      return Status::ok();
    }
    return reference(ctx);
  };
  // ConvInteger: x, w, [x_zero_point], [w_zero_point]. QLinearConv: x, x_scale,
  // x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, [B].
  const int xzi = 2, wi = qlinear_ ? 3 : 1, wzi = qlinear_ ? 5 : 3;
  const Tensor* x = ctx.input(0);
  const Tensor* w = ctx.input(wi);
  auto int8 = [](DataType t) { return t == DataType::kUInt8 || t == DataType::kInt8; };
  if (!x || !w || !int8(x->dtype()) || !int8(w->dtype()) || x->rank() < 3 || x->rank() > 5 || w->rank() != x->rank())
    return fallback();
  if (xn && x->rank() != 4) return fallback();
  // X's logical [N, C, ...] shape.
  const Shape xshape = xn ? Shape{x->dim(0), x->dim(3), x->dim(1), x->dim(2)} : x->shape();
  const int64_t C = xshape[1], M = w->dim(0), G = a_.group;
  std::shared_ptr<const Geometry> geometry;
  if (!int_geometry(xshape, w->shape(), ctx.where(), &geometry)) return fallback();
  const Geometry& g = *geometry;
  auto scalar_of = [&](int i, DataType dt, bool* ok) -> int64_t {
    const Tensor* t = i < ctx.num_inputs() ? ctx.input(i) : nullptr;
    if (!t || t->numel() == 0) return 0;
    if (t->numel() != 1 || t->dtype() != dt) *ok = false;
    return *ok ? int_at(*t, 0) : 0;
  };
  bool ok = true;
  const int64_t zx = scalar_of(xzi, x->dtype(), &ok);
  // The weights: the constant int8 ones made at creation, else s8 weights without a zero point.
  const Tensor* wz = wzi < ctx.num_inputs() ? ctx.input(wzi) : nullptr;
  int w_max = w_max_;
  if (!w_s8_.defined()) {
    if (w->dtype() != DataType::kInt8) return fallback();
    if (wz && wz->numel()) {
      if (wz->dtype() != DataType::kInt8) return fallback();
      for (int64_t i = 0; i < wz->numel(); ++i)
        if (int_at(*wz, i) != 0) return fallback();
    }
    w_max = 128;
  }
  if (!ok) return fallback();

  // QLinearConv's scales, zero point and bias, checked as the reference checks them.
  const Tensor *xs = nullptr, *ws = nullptr, *ys = nullptr, *bias = nullptr;
  DataType yt = DataType::kInt32;
  int64_t zy = 0;
  if (qlinear_) {
    xs = ctx.input(1);
    ws = ctx.input(4);
    ys = ctx.input(6);
    const Tensor* yz = ctx.num_inputs() > 7 ? ctx.input(7) : nullptr;
    bias = ctx.num_inputs() > 8 ? ctx.input(8) : nullptr;
    auto f32 = [](const Tensor* t, int64_t n1, int64_t n2) {
      return t && t->dtype() == DataType::kFloat32 && (t->numel() == n1 || t->numel() == n2);
    };
    if (!f32(xs, 1, 1) || !f32(ys, 1, 1) || !f32(ws, 1, M)) return fallback();
    yt = yz && yz->numel() ? yz->dtype() : x->dtype();
    if (!int8(yt)) return fallback();
    zy = scalar_of(7, yt, &ok);
    if (!ok) return fallback();
    if (bias && bias->numel() == 0) bias = nullptr;
    if (bias && (bias->dtype() != DataType::kInt32 || bias->numel() != M)) return fallback();
  }
  // Without exact int8 sums here (no VNNI): an fp32 convolution of the same integers,
  // exact below 2^24 (checked below); constant weights only.
  const bool f32 = !int8_sums_exact(x->dtype() == DataType::kUInt8, w_max);
  if (f32 && !w_f32_.defined()) return fallback();
  const bool fused = !f32 && fixed_serves(yt, M);
  if ((xn || yn) && !fused) return fallback();
  if (!fused) {
    // int32 sums through float32: exact only below 2^24 (see above).
    int64_t window = C / G;
    for (int64_t k : g.k) window *= k;
    int64_t xmax = 0;
    if (x->dtype() == DataType::kUInt8) {
      uint8_t lo = 255, hi = 0;
      const uint8_t* xp = x->data<uint8_t>();
      for (int64_t i = 0; i < x->numel(); ++i) lo = std::min(lo, xp[i]), hi = std::max(hi, xp[i]);
      xmax = std::max<int64_t>(std::abs(hi - zx), std::abs(lo - zx));
    } else {
      int8_t lo = 127, hi = -128;
      const int8_t* xp = x->data<int8_t>();
      for (int64_t i = 0; i < x->numel(); ++i) lo = std::min(lo, xp[i]), hi = std::max(hi, xp[i]);
      xmax = std::max<int64_t>(std::abs(hi - zx), std::abs(lo - zx));
    }
    if (window * xmax * w_max >= (int64_t{1} << 24)) return fallback();
  }
  std::vector<float> mult;
  if (qlinear_ && !fused) {
    mult.resize(static_cast<size_t>(M));  // as the reference computes it
    for (int64_t m = 0; m < M; ++m) mult[m] = float_at(*xs, 0) * float_at(*ws, ws->numel() == 1 ? 0 : m) / float_at(*ys, 0);
    for (float v : mult)
      if (!std::isfinite(v)) return fallback();  // the reference's rule for NaN and zero scales
  }

  auto p = plan_for(xshape, x->dtype(), w->shape(), fused, bias != nullptr, g, f32, xn, yn, zx == 0);
  if (p->use_ref) return fallback();
  Shape out{xshape[0], M};
  out.insert(out.end(), g.out.begin(), g.out.end());
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, yt, yn ? Shape{out[0], out[2], out[3], out[1]} : out));
  Tensor sums;  // QLinearConv with scales given at run time: the int32 sums, requantised below
  if (qlinear_ && !fused) {
    BH_ASSIGN_OR_RETURN(sums, ctx.allocate_scratch(DataType::kInt32, out));
  }
  Tensor& dst_t = sums.defined() ? sums : y;
  // The fp32 path: x - zx and the sums as float32 (exact integers), the sums converted below.
  Tensor xf, sums_f;
  if (f32) {
    BH_ASSIGN_OR_RETURN(xf, ctx.allocate_scratch(DataType::kFloat32, x->shape()));
    BH_ASSIGN_OR_RETURN(sums_f, ctx.allocate_scratch(DataType::kFloat32, out));
    shifted_to_float(x->raw(), x->dtype(), x->numel(), static_cast<int32_t>(zx), xf.data<float>(), ctx.threads());
  }
  CallScratch sc{ctx, {}};
  try {
    CallPool::Call call(calls_);
    const memory& usr_src = call.memory(p->user_src, f32 ? xf.raw() : const_cast<void*>(x->raw()));
    const memory& usr_dst = call.memory(p->user_dst, f32 ? sums_f.raw() : dst_t.raw());
    const memory *src = &usr_src, *dst = &usr_dst;
    if (p->re_src) {
      BH_ASSIGN_OR_RETURN(void* buf, sc.get(p->src_md.get_size()));
      src = &call.memory(p->src_md, buf);
      BH_RETURN_IF_ERROR(run_reorder(p->src_re, call, usr_src, *src, sc));
    }
    const memory* wm = &p->packed_w;
    if (!p->has_packed) {
      wm = &call.memory(p->user_w, const_cast<void*>(w->raw()));
      if (p->re_w) {
        const memory& usr_w = *wm;
        BH_ASSIGN_OR_RETURN(void* buf, sc.get(p->w_md.get_size()));
        wm = &call.memory(p->w_md, buf);
        BH_RETURN_IF_ERROR(run_reorder(p->w_re, call, usr_w, *wm, sc));
      }
    }
    if (p->re_dst) {
      BH_ASSIGN_OR_RETURN(void* buf, sc.get(p->dst_md.get_size()));
      dst = &call.memory(p->dst_md, buf);
    }
    int32_t zx32 = static_cast<int32_t>(zx);
    const memory* zero_point = p->zx ? &call.memory(zero_point_md(), &zx32) : nullptr;
    const memory* bias_m = fused && bias ? &call.memory(p->bias_md, const_cast<void*>(bias->raw())) : nullptr;
    const memory* scratch = nullptr;
    if (size_t ss = p->scratch_md.get_size()) {
      BH_ASSIGN_OR_RETURN(void* buf, sc.get(ss));
      scratch = &call.memory(p->scratch_md, buf);
    }
    call.execute(p->prim, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, dst},
                           {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zero_point}, {DNNL_ARG_BIAS, bias_m},
                           {DNNL_ARG_SCRATCHPAD, scratch}});
    if (p->re_dst) BH_RETURN_IF_ERROR(run_reorder(p->dst_re, call, *dst, usr_dst, sc));
  } catch (const dnnl::error& e) {
    return internal_error(ctx.where() + "oneDNN failed: " + e.what());
  }
  if (f32) float_sums_to_int32(sums_f.data<float>(), dst_t.data<int32_t>(), dst_t.numel(), ctx.threads());
  if (sums.defined()) {
    const int32_t* acc = sums.data<int32_t>();
    const int64_t osz = y.numel() / (x->dim(0) * M);
    const int32_t* bp = bias ? bias->data<int32_t>() : nullptr;
    const float lo = yt == DataType::kUInt8 ? 0.f : -128.f, hi = yt == DataType::kUInt8 ? 255.f : 127.f;
    parallel_for(ctx.threads(), x->dim(0) * M, 1, [&](int64_t b0, int64_t e0) {
      for (int64_t nm = b0; nm < e0; ++nm) {
        const int64_t m = nm % M;
        const float k = mult[m];
        const int64_t b = bp ? bp[m] : 0;
        for (int64_t i = nm * osz; i < (nm + 1) * osz; ++i) {
          const float v = std::clamp(std::nearbyint(static_cast<float>(acc[i] + b) * k) + static_cast<float>(zy), lo, hi);
          if (yt == DataType::kUInt8) y.data<uint8_t>()[i] = static_cast<uint8_t>(v);
          else y.data<int8_t>()[i] = static_cast<int8_t>(v);
        }
      }
    });
  }
  return Status::ok();
}

Result<std::unique_ptr<Kernel>> make_int_conv(const KernelInfo& info, bool qlinear) {
  ConvAttrs a = parse_conv_attrs(info.node);
  BH_RETURN_IF_ERROR(check_conv_attrs(a, info.where()));
  // Channels-last X / Y (the layout pass's int8 chains).
  auto layout = [&](const char* attr) -> Result<bool> {
    const std::string v = info.node.attr_string(attr, "");
    if (v.empty()) return false;
    if (v != "nhwc" || !qlinear)
      return invalid_argument(info.where() + "unsupported " + attr + " '" + v + "' (only nhwc, for QLinearConv)");
    return true;
  };
  BH_ASSIGN_OR_RETURN(bool xn, layout("_x_layout"));
  BH_ASSIGN_OR_RETURN(bool yn, layout("_y_layout"));
  // BULKHEAD_CPU_INT8=0 keeps the reference loops (to compare results).
  const char* env = std::getenv("BULKHEAD_CPU_INT8");
  if (env && std::string(env) == "0") {
    if (!qlinear) return make_kernel([a](KernelContext& ctx) { return conv_integer_compute(ctx, a); });
    if (!xn && !yn) return make_kernel([a](KernelContext& ctx) { return qlinear_conv_compute(ctx, a); });
    try {
      dnnl::engine eng(dnnl::engine::kind::cpu, 0);
      return make_kernel([a, xn, yn, eng](KernelContext& ctx) {
        PlainLayoutContext pc(ctx, xn, yn, eng);
        BH_RETURN_IF_ERROR(pc.convert_input());
        BH_RETURN_IF_ERROR(qlinear_conv_compute(pc, a));
        return pc.convert_output();
      });
    } catch (const dnnl::error& e) {
      return internal_error(info.where() + "cannot create a oneDNN CPU engine: " + e.what());
    }
  }
  const ir::Node& n = info.node;
  auto given = [&](int i) { return static_cast<size_t>(i) < n.inputs.size() && !n.inputs[i].empty(); };
  auto constant = [&](int i) -> const Tensor* {
    return info.input_is_constant(i) && info.constant_inputs[i].on_host() ? &info.constant_inputs[i] : nullptr;
  };
  // Constant weights (and their zero point): shifted into int8 once, when they fit.
  const int wi = qlinear ? 3 : 1, wzi = qlinear ? 5 : 3;
  Tensor w_s8;
  int w_max = 128;
  if (const Tensor* w = constant(wi)) {
    const Tensor* wz = given(wzi) ? constant(wzi) : nullptr;
    if (w->rank() >= 1 && w->dim(0) > 0 && (!given(wzi) || wz) && (!wz || wz->numel() <= 1 || wz->numel() == w->dim(0))) {
      const int64_t per_m = w->numel() / w->dim(0);
      shift_to_int8(*w, wz, per_m, &w_s8, &w_max);
    }
  }
  // QLinearConv with constant scales and y zero point: the requantisation fused.
  std::optional<IntConvKernel::Fixed> fixed;
  if (qlinear && w_s8.defined()) {
    const Tensor *xs = constant(1), *ws = constant(4), *ys = constant(6);
    const Tensor* yz = given(7) ? constant(7) : nullptr;
    const Tensor* xz = given(2) ? constant(2) : nullptr;
    auto f32 = [](const Tensor* t) { return t && t->dtype() == DataType::kFloat32 && t->numel() >= 1; };
    const int64_t M = w_s8.dim(0);
    if (f32(xs) && f32(ws) && f32(ys) && xs->numel() == 1 && ys->numel() == 1 && (ws->numel() == 1 || ws->numel() == M) &&
        (!given(7) || (yz && yz->numel() == 1 && (yz->dtype() == DataType::kUInt8 || yz->dtype() == DataType::kInt8))) &&
        (!given(2) || xz)) {
      IntConvKernel::Fixed f;
      f.yt = yz ? yz->dtype() : (xz ? xz->dtype() : DataType::kUndefined);
      f.zy = yz ? static_cast<int32_t>(int_at(*yz, 0)) : 0;
      bool finite = true;
      for (int64_t m = 0; m < ws->numel(); ++m) {
        f.mult.push_back(float_at(*xs, 0) * float_at(*ws, m) / float_at(*ys, 0));
        finite = finite && std::isfinite(f.mult.back());
      }
      // Without a y zero point, y takes x's type, known here only from x's zero point.
      if (finite && f.yt != DataType::kUndefined) fixed = std::move(f);
    }
  }
  // The int8 weights, like the initializer they come from, are held once per Env.
  if (info.shared && w_s8.defined()) w_s8 = info.shared->intern(w_s8);
  try {
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    Tensor w_f32 = float_weights(w_s8, w_max, info.shared.get());
    auto k = std::make_unique<IntConvKernel>(std::move(a), qlinear, std::move(w_s8), w_max, std::move(fixed), std::move(eng));
    k->set_float_weights(std::move(w_f32));
    k->share_with(info.shared);
    k->set_layouts(xn, yn);
    k->prepare(info);
    return std::unique_ptr<Kernel>(std::move(k));
  } catch (const dnnl::error& e) {
    return internal_error(info.where() + "cannot create a oneDNN CPU engine: " + e.what());
  }
}

}  // namespace

void register_dnnl_kernels(KernelTable& t) {
  t.add("Conv", 1, [](const KernelInfo& info) { return make_conv(info, false); });
  t.add("ConvTranspose", 1, [](const KernelInfo& info) { return make_conv(info, true); });
  t.add("ConvInteger", 10, [](const KernelInfo& info) { return make_int_conv(info, false); });
  t.add("QLinearConv", 10, [](const KernelInfo& info) { return make_int_conv(info, true); });
  t.add("DeformConv", 19, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    ConvAttrs a = parse_conv_attrs(info.node);
    BH_RETURN_IF_ERROR(check_conv_attrs(a, info.where()));
    const int64_t og = info.node.attr_int("offset_group", 1);
    if (og < 1 || og > kMaxGeometry) return invalid_argument(info.where() + "offset_group must be >= 1, got " + std::to_string(og));
    return make_kernel([a, og](KernelContext& ctx) { return deform_conv_compute(ctx, a, og); });
  });
  register_dnnl_pool_kernels(t);
  register_dnnl_gemm_kernels(t);
  register_dnnl_layout_kernels(t);
}

}  // namespace bulkhead::cpu
