// Resize (opsets 10, 11, 13, 18, 19) and Upsample (7, 9).
//
// Every resized axis gets a table: for each output coordinate, a fixed number of input
// indices and weights (1 for nearest, 2 for linear, 4 for cubic, more for antialiased
// downsampling), following the ONNX reference implementation's coordinate transforms and
// neighbour selection. Nearest mode is an exact gather for every dtype; linear and cubic
// run separable passes (innermost axis first) in float, or double for float64. 4-D NCHW
// float32 nearest/linear resizing of H and W takes a direct single-pass path.
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_util.h"

namespace bulkhead::cpu {

void register_tensor_resize_kernels(KernelTable& t);

namespace {



enum class Mode { kNearest, kLinear, kCubic };
enum class Coord { kHalfPixel, kHalfPixelSymmetric, kPytorchHalfPixel, kAlignCorners, kAsymmetric, kTfHalfPixelForNN, kTfCropAndResize };
enum class Nearest { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kSimple };
enum class Aspect { kStretch, kNotLarger, kNotSmaller };
// How scales/sizes arrive: Upsample-7 attribute, Upsample-9/Resize-10 input 1, Resize-11+ inputs 1..3.
enum class Signature { kScalesAttr, kScalesInput, kRoiScalesSizes };

struct ResizeConfig {
  Mode mode = Mode::kNearest;
  Coord coord = Coord::kHalfPixel;
  Nearest nearest = Nearest::kRoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  float extrapolation = 0.f;
  bool antialias = false;
  bool has_axes = false;
  std::vector<int64_t> axes;
  Aspect aspect = Aspect::kStretch;
  Signature sig = Signature::kRoiScalesSizes;
  std::vector<float> scales_attr;
  // `_layout` = "nChw16c" (the layout pass, exec/layout.h): X and Y are float32
  // [N, ceil(C/16), H, W, 16] of a logical [N, C, H, W] (C = `channels`), nearest mode;
  // scales and sizes are the logical tensor's and must keep C.
  bool blocked = false;
  int64_t channels = 0;
};

// Per-axis interpolation table.
struct AxisTable {
  int taps = 1;
  std::vector<int64_t> idx;     // out * taps, clamped into [0, in)
  std::vector<float> w;         // out * taps
  std::vector<uint8_t> extrap;  // per output coordinate: use the extrapolation value
  bool any_extrap = false;
  bool identity = false;
};

double cubic_weight(double x, double a) {
  x = std::fabs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

AxisTable build_axis(const ResizeConfig& cfg, int64_t in, int64_t out, double scale, double roi_b, double roi_e) {
  AxisTable t;
  const double len_f = scale * static_cast<double>(in);  // output length before flooring, as the reference uses
  // Taps per mode.
  int start = 0;  // offset of the first tap relative to the base index
  double aa = 1.0;
  if (cfg.mode == Mode::kNearest) {
    t.taps = 1;
  } else if (cfg.mode == Mode::kLinear) {
    if (cfg.antialias && scale < 1) {
      aa = scale;
      start = static_cast<int>(std::floor(-1.0 / aa)) + 1;
      t.taps = 2 - 2 * start;
    } else {
      t.taps = 2;
    }
  } else {
    if (cfg.antialias && scale < 1) {
      aa = scale;
      start = static_cast<int>(std::floor(-2.0 / aa)) + 1;
      t.taps = 2 - 2 * start;
    } else {
      start = -1;
      t.taps = 4;
    }
  }
  const int K = t.taps;
  t.idx.assign(out * K, 0);
  t.w.assign(out * K, 0.f);
  t.extrap.assign(out, 0);
  std::vector<double> cw(K);
  bool identity = out == in;
  for (int64_t x = 0; x < out; ++x) {
    const double xr = static_cast<double>(x);
    double xo = 0;
    switch (cfg.coord) {
      case Coord::kHalfPixel: xo = (xr + 0.5) / scale - 0.5; break;
      case Coord::kHalfPixelSymmetric: {
        double adj = static_cast<double>(out) / len_f;
        double center = static_cast<double>(in) / 2;
        xo = center * (1 - adj) + (xr + 0.5) / scale - 0.5;
        break;
      }
      case Coord::kPytorchHalfPixel: xo = out > 1 ? (xr + 0.5) / scale - 0.5 : 0.0; break;
      case Coord::kAlignCorners: xo = len_f == 1 ? 0.0 : xr * static_cast<double>(in - 1) / (len_f - 1); break;
      case Coord::kAsymmetric: xo = xr / scale; break;
      case Coord::kTfHalfPixelForNN: xo = (xr + 0.5) / scale; break;
      case Coord::kTfCropAndResize: {
        double span = (roi_e - roi_b) * static_cast<double>(in - 1);
        xo = len_f == 1 ? span / 2 : xr * span / (len_f - 1);
        xo += roi_b * static_cast<double>(in - 1);
        if (xo < 0 || xo > static_cast<double>(in - 1)) {
          t.extrap[x] = 1;
          t.any_extrap = true;
          identity = false;
          continue;  // weights stay 0
        }
        break;
      }
    }
    int64_t* ip = &t.idx[x * K];
    float* wp = &t.w[x * K];
    if (cfg.mode == Mode::kNearest) {
      double r;
      switch (cfg.nearest) {
        case Nearest::kRoundPreferFloor: r = std::ceil(xo - 0.5); break;
        case Nearest::kRoundPreferCeil: r = std::floor(xo + 0.5); break;
        case Nearest::kFloor: r = std::floor(xo); break;
        case Nearest::kCeil: r = std::ceil(xo); break;
        default: r = scale < 1 ? std::ceil(xo) : std::floor(xo); break;
      }
      int64_t i = static_cast<int64_t>(std::clamp<double>(r, 0, static_cast<double>(in - 1)));
      ip[0] = i;
      wp[0] = 1.f;
      if (i != x) identity = false;
      continue;
    }
    // Like the reference: the fractional position is in (0, 1], so an exact integer
    // position uses the pixel on its left as base with ratio 1.
    double fl = std::floor(xo);
    int64_t base;
    double ratio;
    if (xo == fl) {
      base = static_cast<int64_t>(fl) - 1;
      ratio = 1.0;
    } else {
      base = static_cast<int64_t>(fl);
      ratio = xo - fl;
    }
    if (cfg.mode == Mode::kLinear && !(cfg.antialias && scale < 1)) {
      cw[0] = 1 - ratio;
      cw[1] = ratio;
    } else if (cfg.mode == Mode::kLinear) {
      double sum = 0;
      for (int k = 0; k < K; ++k) {
        cw[k] = std::clamp(1 - std::fabs((start + k - ratio) * aa), 0.0, 1.0);
        sum += cw[k];
      }
      for (int k = 0; k < K; ++k) cw[k] /= sum;
    } else if (!(cfg.antialias && scale < 1)) {
      const double a = cfg.cubic_a;
      cw[0] = cubic_weight(ratio + 1, a);
      cw[1] = cubic_weight(ratio, a);
      cw[2] = cubic_weight(1 - ratio, a);
      cw[3] = cubic_weight(2 - ratio, a);
    } else {
      double sum = 0;
      for (int k = 0; k < K; ++k) {
        cw[k] = cubic_weight(aa * (start + k - ratio), cfg.cubic_a);
        sum += cw[k];
      }
      for (int k = 0; k < K; ++k) cw[k] /= sum;
    }
    // Linear taps start at the base itself; cubic/antialias taps start at base + start.
    const int64_t first = base + (cfg.mode == Mode::kLinear && !(cfg.antialias && scale < 1) ? 0 : start);
    if (cfg.exclude_outside) {
      double sum = 0;
      for (int k = 0; k < K; ++k) {
        int64_t i = first + k;
        if (i < 0 || i >= in) cw[k] = 0;
        sum += cw[k];
      }
      if (sum != 0)
        for (int k = 0; k < K; ++k) cw[k] /= sum;
    }
    for (int k = 0; k < K; ++k) {
      int64_t i = std::clamp<int64_t>(first + k, 0, in - 1);
      ip[k] = i;
      wp[k] = static_cast<float>(cw[k]);
      if (cw[k] != 0 && (i != x || cw[k] != 1.0)) identity = false;
    }
  }
  t.identity = identity;
  return t;
}

// One separable pass along an axis: src [outer, in_d, inner] -> dst [outer, out_d, inner].
template <class C>
void resize_pass(const C* src, C* dst, int64_t outer, int64_t in_d, int64_t out_d, int64_t inner, const AxisTable& t,
                 C extrap, int threads) {
  const int K = t.taps;
  const int64_t work = outer * out_d;
  parallel_for(threads, work, std::max<int64_t>(1, 8192 / std::max<int64_t>(inner * K, 1)), [&](int64_t b, int64_t e) {
    for (int64_t w = b; w < e; ++w) {
      const int64_t o = w / out_d, x = w % out_d;
      C* dp = dst + w * inner;
      if (t.extrap[x]) {
        std::fill_n(dp, inner, extrap);
        continue;
      }
      const C* sp = src + o * in_d * inner;
      const int64_t* ip = &t.idx[x * K];
      const float* wp = &t.w[x * K];
      if (inner == 1) {
        C acc = 0;
        for (int k = 0; k < K; ++k) acc += static_cast<C>(wp[k]) * sp[ip[k]];
        dp[0] = acc;
        continue;
      }
      std::fill_n(dp, inner, C(0));
      for (int k = 0; k < K; ++k) {
        const C wk = static_cast<C>(wp[k]);
        if (wk == 0) continue;
        const C* row = sp + ip[k] * inner;
        for (int64_t j = 0; j < inner; ++j) dp[j] += wk * row[j];
      }
    }
  });
}

// Direct 2-D pass for float32 when only the last two axes change and taps <= 2:
// each needed input row is interpolated horizontally once into a small row cache, then
// output rows blend two cached rows (a contiguous, vectorised loop).
void resize_2d_f32(const float* src, float* dst, int64_t planes, int64_t ih, int64_t iw, int64_t oh, int64_t ow,
                   const AxisTable& ty, const AxisTable& tx, int threads) {
  const int KY = ty.taps, KX = tx.taps;
  std::vector<int32_t> x0(ow), x1(ow);
  std::vector<float> w0(ow), w1(ow);
  for (int64_t x = 0; x < ow; ++x) {
    x0[x] = static_cast<int32_t>(tx.idx[x * KX]);
    w0[x] = tx.w[x * KX];
    x1[x] = static_cast<int32_t>(KX > 1 ? tx.idx[x * KX + 1] : x0[x]);
    w1[x] = KX > 1 ? tx.w[x * KX + 1] : 0.f;
  }
  const int32_t* X0 = x0.data();
  const int32_t* X1 = x1.data();
  const float* W0 = w0.data();
  const float* W1 = w1.data();
  parallel_for(threads, planes * oh, std::max<int64_t>(1, 4096 / std::max<int64_t>(ow, 1)), [&](int64_t b, int64_t e) {
    std::vector<float> cache(2 * static_cast<size_t>(ow));
    int64_t key[2] = {-1, -1};
    // Horizontally interpolated input row `row` of plane `p`, from the 2-slot cache.
    auto hrow = [&](int64_t p, int64_t row, int64_t keep) -> const float* {
      const int64_t k = p * ih + row;
      if (key[0] == k) return cache.data();
      if (key[1] == k) return cache.data() + ow;
      const int slot = key[0] == keep ? 1 : 0;
      float* out = cache.data() + slot * ow;
      const float* r = src + k * iw;
      for (int64_t x = 0; x < ow; ++x) out[x] = W0[x] * r[X0[x]] + W1[x] * r[X1[x]];
      key[slot] = k;
      return out;
    };
    for (int64_t w = b; w < e; ++w) {
      const int64_t p = w / oh, y = w % oh;
      float* dp = dst + w * ow;
      const int64_t i0 = ty.idx[y * KY];
      const float wy0 = ty.w[y * KY];
      const int64_t i1 = KY > 1 ? ty.idx[y * KY + 1] : i0;
      const float wy1 = KY > 1 ? ty.w[y * KY + 1] : 0.f;
      if (wy1 == 0.f || i1 == i0) {
        const float* a = hrow(p, i0, -1);
        const float wa = i1 == i0 ? wy0 + wy1 : wy0;
        if (wa == 1.f) std::memcpy(dp, a, static_cast<size_t>(ow) * sizeof(float));
        else for (int64_t x = 0; x < ow; ++x) dp[x] = wa * a[x];
        continue;
      }
      if (wy0 == 0.f) {
        const float* c = hrow(p, i1, -1);
        if (wy1 == 1.f) std::memcpy(dp, c, static_cast<size_t>(ow) * sizeof(float));
        else for (int64_t x = 0; x < ow; ++x) dp[x] = wy1 * c[x];
        continue;
      }
      const float* a = hrow(p, i0, p * ih + i1);
      const float* c = hrow(p, i1, p * ih + i0);
      for (int64_t x = 0; x < ow; ++x) dp[x] = wy0 * a[x] + wy1 * c[x];
    }
  });
}

// f when the table repeats each of the `in` input positions f times in a row (integer
// upsampling, no extrapolation), else 0.
int64_t repeat_factor(const AxisTable& t, int64_t in, int64_t out) {
  if (in <= 0 || out % in != 0 || t.any_extrap) return 0;
  const int64_t f = out / in;
  for (int64_t x = 0; x < out; ++x)
    if (t.idx[x] != x / f) return 0;
  return f;
}

// Exact gather for nearest mode, any dtype.
template <class T>
void nearest_gather(const T* src, T* dst, const Shape& in_shape, const Shape& out_shape,
                    const std::vector<AxisTable>& tabs, const T& extrap, int threads) {
  const int r = static_cast<int>(in_shape.size());
  const auto is = strides_of(in_shape);
  const int64_t ow = out_shape[r - 1];
  const int64_t rows = shape_numel(out_shape) / std::max<int64_t>(ow, 1);
  const AxisTable& tx = tabs[r - 1];
  // 32-bit indices let the inner gather vectorise.
  const bool small = in_shape[r - 1] < (int64_t{1} << 31);
  std::vector<int32_t> ix32(small ? ow : 0);
  for (int64_t x = 0; small && x < ow; ++x) ix32[x] = static_cast<int32_t>(tx.idx[x]);
  // Integer upsampling (each input element repeated f times) needs no gather.
  int64_t f = repeat_factor(tx, in_shape[r - 1], ow);
  if (f < 2 || f > 8) f = 0;
  const int64_t iw = in_shape[r - 1];
  parallel_for(threads, rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(ow, 1)), [&](int64_t b, int64_t e) {
    int64_t prev_base = -2;
    for (int64_t row = b; row < e; ++row) {
      int64_t lin = row, base = 0;
      for (int d = r - 2; d >= 0; --d) {
        int64_t o = lin % out_shape[d];
        lin /= out_shape[d];
        if (tabs[d].extrap[o]) {
          base = -1;
          break;
        }
        base += tabs[d].idx[o] * is[d];
      }
      T* dp = dst + row * ow;
      if (base == prev_base && row > b) {
        std::copy_n(dp - ow, ow, dp);
        continue;
      }
      prev_base = base;
      if (base < 0) {
        std::fill_n(dp, ow, extrap);
        continue;
      }
      const T* sp = src + base;
      if (tx.any_extrap) {
        for (int64_t x = 0; x < ow; ++x) dp[x] = tx.extrap[x] ? extrap : sp[tx.idx[x]];
      } else if (f == 2) {
        for (int64_t i = 0; i < iw; ++i) dp[2 * i] = dp[2 * i + 1] = sp[i];
      } else if (f) {
        for (int64_t i = 0; i < iw; ++i)
          for (int64_t k = 0; k < f; ++k) dp[i * f + k] = sp[i];
      } else if (small) {
        const int32_t* ix = ix32.data();
        for (int64_t x = 0; x < ow; ++x) dp[x] = sp[ix[x]];
      } else {
        for (int64_t x = 0; x < ow; ++x) dp[x] = sp[tx.idx[x]];
      }
    }
  });
}

// Nearest mode on nChw16c: each output pixel's 16 channels are one 64-byte copy of the
// input pixel the tables name (axes 0, 2 and 3 of the logical tensor; C is kept).
void nearest_gather_blocked(const float* src, float* dst, const Shape& in, const Shape& out, int64_t cb,
                            const std::vector<AxisTable>& tabs, float extrap, int threads) {
  constexpr int64_t B = 16;
  const int64_t IH = in[2], IW = in[3], ON = out[0], OH = out[2], OW = out[3];
  const AxisTable &tn = tabs[0], &th = tabs[2], &tw = tabs[3];
  // Integer upsampling along W: each input pixel repeated f times.
  const int64_t f = repeat_factor(tw, IW, OW);
  parallel_for(threads, ON * cb * OH, std::max<int64_t>(1, 4096 / std::max<int64_t>(OW * B, 1)), [&](int64_t b, int64_t e) {
    int64_t prev_base = -2;
    for (int64_t row = b; row < e; ++row) {
      const int64_t oh = row % OH, c = (row / OH) % cb, on = row / (OH * cb);
      float* dp = dst + row * OW * B;
      int64_t base = -1;
      if (!tn.extrap[on] && !th.extrap[oh]) base = ((tn.idx[on] * cb + c) * IH + th.idx[oh]) * IW * B;
      if (base == prev_base && row > b) {
        std::copy_n(dp - OW * B, OW * B, dp);
        continue;
      }
      prev_base = base;
      if (base < 0) {
        std::fill_n(dp, OW * B, extrap);
        continue;
      }
      const float* sp = src + base;
      if (f) {
        // Each input pixel repeated f times along the row.
        for (int64_t i = 0; i < IW; ++i) {
#if defined(__AVX2__)
          const __m256 lo = _mm256_loadu_ps(sp + i * B), hi = _mm256_loadu_ps(sp + i * B + 8);
          for (int64_t k = 0; k < f; ++k) {
            _mm256_storeu_ps(dp + (i * f + k) * B, lo);
            _mm256_storeu_ps(dp + (i * f + k) * B + 8, hi);
          }
#else
          for (int64_t k = 0; k < f; ++k) std::memcpy(dp + (i * f + k) * B, sp + i * B, B * sizeof(float));
#endif
        }
        continue;
      }
      for (int64_t x = 0; x < OW; ++x) {
        if (tw.any_extrap && tw.extrap[x]) std::fill_n(dp + x * B, B, extrap);
        else std::memcpy(dp + x * B, sp + tw.idx[x] * B, B * sizeof(float));
      }
    }
  });
}

// Element conversions between a tensor's dtype and the compute type.
template <class C>
Status to_compute(const Tensor& x, std::vector<C>& v, const std::string& where) {
  const int64_t n = x.numel();
  v.resize(static_cast<size_t>(n));
  switch (x.dtype()) {
#define BH_CONV_CASE(E, CT) \
  case DataType::E: { const CT* p = x.data<CT>(); for (int64_t i = 0; i < n; ++i) v[i] = static_cast<C>(p[i]); break; }
    BH_CONV_CASE(kFloat32, float)
    BH_CONV_CASE(kFloat64, double)
    BH_CONV_CASE(kInt8, int8_t)
    BH_CONV_CASE(kUInt8, uint8_t)
    BH_CONV_CASE(kInt16, int16_t)
    BH_CONV_CASE(kUInt16, uint16_t)
    BH_CONV_CASE(kInt32, int32_t)
    BH_CONV_CASE(kUInt32, uint32_t)
    BH_CONV_CASE(kInt64, int64_t)
    BH_CONV_CASE(kUInt64, uint64_t)
#undef BH_CONV_CASE
    case DataType::kFloat16: { const uint16_t* p = x.data<uint16_t>(); for (int64_t i = 0; i < n; ++i) v[i] = half_to_float(p[i]); break; }
    case DataType::kBFloat16: { const uint16_t* p = x.data<uint16_t>(); for (int64_t i = 0; i < n; ++i) v[i] = bfloat16_to_float(p[i]); break; }
    default: return unsupported(where + "unsupported element type " + dtype_name(x.dtype()) + " for this mode");
  }
  return Status::ok();
}

template <class I, class C>
void store_int(const C* v, I* o, int64_t n) {
  const double lo = static_cast<double>(std::numeric_limits<I>::lowest());
  const double hi = static_cast<double>(std::numeric_limits<I>::max());
  for (int64_t i = 0; i < n; ++i) {
    double d = std::nearbyint(static_cast<double>(v[i]));
    o[i] = static_cast<I>(std::clamp(d, lo, hi));
  }
}

template <class C>
void from_compute(const C* v, Tensor& out) {
  const int64_t n = out.numel();
  switch (out.dtype()) {
    case DataType::kFloat32: for (int64_t i = 0; i < n; ++i) out.data<float>()[i] = static_cast<float>(v[i]); break;
    case DataType::kFloat64: for (int64_t i = 0; i < n; ++i) out.data<double>()[i] = static_cast<double>(v[i]); break;
    case DataType::kFloat16: for (int64_t i = 0; i < n; ++i) out.data<uint16_t>()[i] = float_to_half(static_cast<float>(v[i])); break;
    case DataType::kBFloat16: for (int64_t i = 0; i < n; ++i) out.data<uint16_t>()[i] = float_to_bfloat16(static_cast<float>(v[i])); break;
    case DataType::kInt8: store_int(v, out.data<int8_t>(), n); break;
    case DataType::kUInt8: store_int(v, out.data<uint8_t>(), n); break;
    case DataType::kInt16: store_int(v, out.data<int16_t>(), n); break;
    case DataType::kUInt16: store_int(v, out.data<uint16_t>(), n); break;
    case DataType::kInt32: store_int(v, out.data<int32_t>(), n); break;
    case DataType::kUInt32: store_int(v, out.data<uint32_t>(), n); break;
    case DataType::kInt64: store_int(v, out.data<int64_t>(), n); break;
    case DataType::kUInt64: store_int(v, out.data<uint64_t>(), n); break;
    default: break;
  }
}

// Separable passes over the active axes, innermost first.
template <class C>
Status interpolate(KernelContext& ctx, const Tensor& x, Tensor& out, const std::vector<AxisTable>& tabs,
                   const std::vector<int>& active, C extrap) {
  const int r = x.rank();
  std::vector<C> in_buf, a, b;
  const C* cur = nullptr;
  const bool native = std::is_same_v<C, float> ? x.dtype() == DataType::kFloat32 : x.dtype() == DataType::kFloat64;
  if (native) {
    cur = x.data<C>();
  } else {
    BH_RETURN_IF_ERROR(to_compute<C>(x, in_buf, ctx.where()));
    cur = in_buf.data();
  }
  Shape shape = x.shape();
  const bool out_native = native;
  for (size_t ai = 0; ai < active.size(); ++ai) {
    const int d = active[ai];
    const bool last = ai + 1 == active.size();
    int64_t outer = 1, inner = 1;
    for (int k = 0; k < d; ++k) outer *= shape[k];
    for (int k = d + 1; k < r; ++k) inner *= shape[k];
    const int64_t in_d = shape[d], out_d = out.shape()[d];
    shape[d] = out_d;
    C* dst;
    std::vector<C>& buf = (ai % 2 == 0) ? a : b;
    if (last && out_native) {
      dst = out.data<C>();
    } else {
      buf.resize(static_cast<size_t>(shape_numel(shape)));
      dst = buf.data();
    }
    resize_pass<C>(cur, dst, outer, in_d, out_d, inner, tabs[d], extrap, ctx.threads());
    cur = dst;
  }
  if (active.empty()) {
    if (out_native) std::memcpy(out.raw(), cur, out.nbytes());
    else from_compute<C>(cur, out);
  } else if (!out_native) {
    from_compute<C>(cur, out);
  }
  return Status::ok();
}

Status resize_compute(KernelContext& ctx, const ResizeConfig& cfg) {
  const Tensor* x = ctx.input(0);
  if (!x) return invalid_argument(ctx.where() + "missing input");
  if (x->numel() > 0 && !x->raw() && x->dtype() != DataType::kString)
    return invalid_argument(ctx.where() + "input is not in host memory");
  if (cfg.blocked && (x->dtype() != DataType::kFloat32 || x->rank() != 5 || x->dim(4) != 16 ||
                     x->dim(1) != (cfg.channels + 15) / 16))
    return invalid_argument(ctx.where() + "X must be float32 [N, " + std::to_string((cfg.channels + 15) / 16) +
                            ", H, W, 16] (nChw16c of " + std::to_string(cfg.channels) + " channels), got " + x->describe());
  // A blocked X is resized as its logical [N, C, H, W].
  const Shape in = cfg.blocked ? Shape{x->dim(0), cfg.channels, x->dim(2), x->dim(3)} : x->shape();
  const int r = static_cast<int>(in.size());
  if (r == 0) return invalid_argument(ctx.where() + "cannot resize a scalar");

  // Axes the scales/sizes/roi refer to.
  std::vector<int> axes;
  if (cfg.has_axes) {
    std::vector<bool> seen(r, false);
    for (int64_t a0 : cfg.axes) {
      BH_ASSIGN_OR_RETURN(int a, normalize_axis(a0, r, ctx.where()));
      if (seen[a]) return invalid_argument(ctx.where() + "axes repeat axis " + std::to_string(a));
      seen[a] = true;
      axes.push_back(a);
    }
  } else {
    for (int d = 0; d < r; ++d) axes.push_back(d);
  }
  const size_t na = axes.size();

  std::vector<double> scale(r, 1.0);
  Shape out_shape = in;
  std::vector<double> roi_b(r, 0.0), roi_e(r, 1.0);
  std::vector<float> scales_v;
  std::vector<int64_t> sizes_v;
  bool have_sizes = false;
  if (cfg.sig == Signature::kScalesAttr) {
    scales_v = cfg.scales_attr;
  } else {
    const Tensor* st = ctx.input(cfg.sig == Signature::kScalesInput ? 1 : 2);
    if (st && st->numel() > 0) {
      if (st->dtype() != DataType::kFloat32) return invalid_argument(ctx.where() + "scales must be float32");
      if (!st->raw()) return invalid_argument(ctx.where() + "scales are not in host memory");
      scales_v.assign(st->data<float>(), st->data<float>() + st->numel());
    }
    if (cfg.sig == Signature::kRoiScalesSizes) {
      const Tensor* sz = ctx.input(3);
      if (sz && sz->numel() > 0) {
        if (sz->dtype() != DataType::kInt64) return invalid_argument(ctx.where() + "sizes must be int64");
        if (!sz->raw()) return invalid_argument(ctx.where() + "sizes are not in host memory");
        sizes_v = read_int_tensor(*sz);
        have_sizes = true;
      }
      const Tensor* roi = ctx.input(1);
      if (cfg.coord == Coord::kTfCropAndResize) {
        if (!roi || roi->numel() == 0)
          return invalid_argument(ctx.where() + "roi is required with coordinate_transformation_mode tf_crop_and_resize");
        if (static_cast<size_t>(roi->numel()) != 2 * na)
          return invalid_argument(ctx.where() + "roi has " + std::to_string(roi->numel()) + " values, expected " +
                                  std::to_string(2 * na));
        if (!roi->raw()) return invalid_argument(ctx.where() + "roi is not in host memory");
        for (size_t i = 0; i < na; ++i) {
          double b = 0, e = 0;
          if (roi->dtype() == DataType::kFloat32) {
            b = roi->data<float>()[i];
            e = roi->data<float>()[na + i];
          } else if (roi->dtype() == DataType::kFloat64) {
            b = roi->data<double>()[i];
            e = roi->data<double>()[na + i];
          } else if (roi->dtype() == DataType::kFloat16) {
            b = half_to_float(roi->data<uint16_t>()[i]);
            e = half_to_float(roi->data<uint16_t>()[na + i]);
          } else {
            return invalid_argument(ctx.where() + "roi must be a float tensor");
          }
          roi_b[axes[i]] = b;
          roi_e[axes[i]] = e;
        }
      }
    }
  }
  if (have_sizes && !scales_v.empty())
    return invalid_argument(ctx.where() + "only one of scales and sizes may be given");
  if (have_sizes) {
    if (sizes_v.size() != na)
      return invalid_argument(ctx.where() + "sizes has " + std::to_string(sizes_v.size()) + " entries, expected " +
                              std::to_string(na));
    for (size_t i = 0; i < na; ++i) {
      if (sizes_v[i] < 0) return invalid_argument(ctx.where() + "sizes must be non-negative");
      int d = axes[i];
      out_shape[d] = sizes_v[i];
      scale[d] = in[d] > 0 ? static_cast<double>(sizes_v[i]) / static_cast<double>(in[d]) : 1.0;
    }
    if (cfg.aspect != Aspect::kStretch) {
      double s = cfg.aspect == Aspect::kNotLarger ? std::numeric_limits<double>::infinity() : 0.0;
      for (int d : axes) s = cfg.aspect == Aspect::kNotLarger ? std::min(s, scale[d]) : std::max(s, scale[d]);
      for (int d : axes) {
        scale[d] = s;
        out_shape[d] = static_cast<int64_t>(s * static_cast<double>(in[d]) + 0.5);
      }
    }
  } else {
    if (scales_v.empty()) return invalid_argument(ctx.where() + "one of scales and sizes must be given");
    if (scales_v.size() != na)
      return invalid_argument(ctx.where() + "scales has " + std::to_string(scales_v.size()) + " entries, expected " +
                              std::to_string(na));
    for (size_t i = 0; i < na; ++i) {
      double s = scales_v[i];
      if (!(s > 0) || !std::isfinite(s)) return invalid_argument(ctx.where() + "scales must be positive");
      int d = axes[i];
      scale[d] = s;
      double od = s * static_cast<double>(in[d]);
      if (od > 1e12) return invalid_argument(ctx.where() + "output is too large");
      out_shape[d] = static_cast<int64_t>(std::floor(od));
    }
  }
  for (int d = 0; d < r; ++d)
    if (out_shape[d] > 0 && in[d] == 0)
      return invalid_argument(ctx.where() + "cannot resize an empty axis to a non-empty one");

  if (cfg.blocked && out_shape[1] != in[1])
    return invalid_argument(ctx.where() + "an nChw16c resize must keep the channels, asked for " +
                            std::to_string(out_shape[1]) + " of " + std::to_string(in[1]));
  const Shape y_shape = cfg.blocked ? Shape{out_shape[0], x->dim(1), out_shape[2], out_shape[3], 16} : out_shape;
  BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, x->dtype(), y_shape));
  if (out.numel() == 0) return Status::ok();

  std::vector<AxisTable> tabs(r);
  std::vector<int> active;
  for (int d = r - 1; d >= 0; --d) {
    tabs[d] = build_axis(cfg, in[d], out_shape[d], scale[d], roi_b[d], roi_e[d]);
    if (!tabs[d].identity) active.push_back(d);
  }

  if (cfg.blocked) {
    nearest_gather_blocked(x->data<float>(), out.data<float>(), in, out_shape, x->dim(1), tabs, cfg.extrapolation,
                           ctx.threads());
    return Status::ok();
  }
  if (cfg.mode == Mode::kNearest) {
    uint64_t ebits = 0;
    switch (x->dtype()) {
      case DataType::kFloat32: { float f = cfg.extrapolation; std::memcpy(&ebits, &f, 4); break; }
      case DataType::kFloat64: { double f = cfg.extrapolation; std::memcpy(&ebits, &f, 8); break; }
      case DataType::kFloat16: { uint16_t h = float_to_half(cfg.extrapolation); std::memcpy(&ebits, &h, 2); break; }
      case DataType::kBFloat16: { uint16_t h = float_to_bfloat16(cfg.extrapolation); std::memcpy(&ebits, &h, 2); break; }
      default: break;  // integers: truncated below by the by-size copy of an int-converted value
    }
    if (dtype_is_integer(x->dtype())) {
      int64_t iv = static_cast<int64_t>(cfg.extrapolation);
      std::memcpy(&ebits, &iv, 8);  // little-endian: low bytes hold the narrower value
    }
    return by_elem_size(x->dtype(), ctx.where(), [&](auto tag) -> Status {
      using T = decltype(tag);
      T ev{};
      if constexpr (!std::is_same_v<T, std::string>) std::memcpy(&ev, &ebits, sizeof(T));
      nearest_gather<T>(elems<T>(*x), elems<T>(out), in, out_shape, tabs, ev, ctx.threads());
      return Status::ok();
    });
  }

  if (x->dtype() == DataType::kString || x->dtype() == DataType::kBool)
    return unsupported(ctx.where() + "linear and cubic modes need a numeric input, got " + dtype_name(x->dtype()));

  // Direct 2-D path: float32, only the last two axes change, 1-2 taps, no extrapolation.
  if (x->dtype() == DataType::kFloat32 && r >= 2 && cfg.mode == Mode::kLinear) {
    bool ok = in[r - 1] < (int64_t{1} << 31) && tabs[r - 1].taps <= 2 && tabs[r - 2].taps <= 2 && !tabs[r - 1].any_extrap && !tabs[r - 2].any_extrap;
    for (int d : active) ok = ok && d >= r - 2;
    if (ok) {
      int64_t planes = 1;
      for (int d = 0; d < r - 2; ++d) planes *= in[d];
      resize_2d_f32(x->data<float>(), out.data<float>(), planes, in[r - 2], in[r - 1], out_shape[r - 2],
                    out_shape[r - 1], tabs[r - 2], tabs[r - 1], ctx.threads());
      return Status::ok();
    }
  }
  if (x->dtype() == DataType::kFloat64)
    return interpolate<double>(ctx, *x, out, tabs, active, static_cast<double>(cfg.extrapolation));
  return interpolate<float>(ctx, *x, out, tabs, active, cfg.extrapolation);
}

Result<std::unique_ptr<Kernel>> make_resize_like(const KernelInfo& info, bool upsample) {
  const ir::Node& n = info.node;
  ResizeConfig cfg;
  // The layout pass's nChw16c form (exec/layout.h), for every signature.
  auto finish = [&](ResizeConfig c) -> Result<std::unique_ptr<Kernel>> {
    const std::string layout = n.attr_string("_layout", "");
    if (!layout.empty()) {
      c.channels = n.attr_int("channels", 0);
      if (layout != "nChw16c" || c.mode != Mode::kNearest || c.has_axes || c.channels <= 0)
        return invalid_argument(info.where() + "unsupported _layout '" + layout +
                                "' (nChw16c, in nearest mode without axes, with a positive 'channels')");
      c.blocked = true;
    }
    return make_kernel([c](KernelContext& ctx) -> Status { return resize_compute(ctx, c); });
  };
  std::string mode = n.attr_string("mode", "nearest");
  if (mode == "nearest") cfg.mode = Mode::kNearest;
  else if (mode == "linear" || mode == "bilinear") cfg.mode = Mode::kLinear;
  else if (mode == "cubic" && !upsample && n.opset >= 11) cfg.mode = Mode::kCubic;
  else return invalid_argument(info.where() + "unsupported mode '" + mode + "'");
  if (upsample || n.opset < 11) {
    // Upsample and Resize-10: asymmetric coordinates, nearest floors when upsampling.
    cfg.coord = Coord::kAsymmetric;
    cfg.nearest = Nearest::kSimple;
    if (upsample && n.opset < 9) {
      cfg.sig = Signature::kScalesAttr;
      if (!n.has_attr("scales")) return invalid_argument(info.where() + "missing attribute 'scales'");
      cfg.scales_attr = n.attr_floats("scales");
    } else {
      cfg.sig = Signature::kScalesInput;
    }
    return finish(cfg);
  }
  cfg.sig = Signature::kRoiScalesSizes;
  std::string ct = n.attr_string("coordinate_transformation_mode", "half_pixel");
  if (ct == "half_pixel") cfg.coord = Coord::kHalfPixel;
  else if (ct == "half_pixel_symmetric" && n.opset >= 19) cfg.coord = Coord::kHalfPixelSymmetric;
  else if (ct == "pytorch_half_pixel") cfg.coord = Coord::kPytorchHalfPixel;
  else if (ct == "align_corners") cfg.coord = Coord::kAlignCorners;
  else if (ct == "asymmetric") cfg.coord = Coord::kAsymmetric;
  else if (ct == "tf_half_pixel_for_nn") cfg.coord = Coord::kTfHalfPixelForNN;
  else if (ct == "tf_crop_and_resize") cfg.coord = Coord::kTfCropAndResize;
  else return invalid_argument(info.where() + "unsupported coordinate_transformation_mode '" + ct + "'");
  std::string nm = n.attr_string("nearest_mode", "round_prefer_floor");
  if (nm == "round_prefer_floor") cfg.nearest = Nearest::kRoundPreferFloor;
  else if (nm == "round_prefer_ceil") cfg.nearest = Nearest::kRoundPreferCeil;
  else if (nm == "floor") cfg.nearest = Nearest::kFloor;
  else if (nm == "ceil") cfg.nearest = Nearest::kCeil;
  else return invalid_argument(info.where() + "unsupported nearest_mode '" + nm + "'");
  cfg.cubic_a = n.attr_float("cubic_coeff_a", -0.75f);
  cfg.exclude_outside = n.attr_int("exclude_outside", 0) != 0;
  cfg.extrapolation = n.attr_float("extrapolation_value", 0.f);
  if (n.opset >= 18) {
    cfg.antialias = n.attr_int("antialias", 0) != 0;
    cfg.has_axes = n.has_attr("axes");
    cfg.axes = n.attr_ints("axes");
    std::string kp = n.attr_string("keep_aspect_ratio_policy", "stretch");
    if (kp == "stretch") cfg.aspect = Aspect::kStretch;
    else if (kp == "not_larger") cfg.aspect = Aspect::kNotLarger;
    else if (kp == "not_smaller") cfg.aspect = Aspect::kNotSmaller;
    else return invalid_argument(info.where() + "unsupported keep_aspect_ratio_policy '" + kp + "'");
  }
  if (cfg.antialias && cfg.mode == Mode::kNearest)
    return invalid_argument(info.where() + "antialias is not defined for nearest mode");
  return finish(cfg);
}

}  // namespace

void register_tensor_resize_kernels(KernelTable& t) {
  auto resize = [](const KernelInfo& info) { return make_resize_like(info, false); };
  auto upsample = [](const KernelInfo& info) { return make_resize_like(info, true); };
  t.add("Resize", 10, resize);
  t.add("Resize", 11, resize);
  t.add("Resize", 13, resize);
  t.add("Resize", 18, resize);
  t.add("Resize", 19, resize);
  t.add("Upsample", 7, upsample);
  t.add("Upsample", 9, upsample);
}

}  // namespace bulkhead::cpu
