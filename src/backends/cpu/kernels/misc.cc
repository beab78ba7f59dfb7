// Miscellaneous CPU kernels: CumSum and CumProd, Det, the window functions (Hann, Hamming,
// Blackman), BitCast, TopK, Einsum, SwiGLU, RotaryEmbedding, Attention.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/kernels/dnnl_int8.h"
#include "backends/cpu/cpu_util.h"
#include "backends/cpu/kernels/reduction_util.h"

namespace bulkhead::cpu {
namespace ew {
Status convert_into(const Tensor& src, const Tensor& dst, int threads, const std::string& where);  // elementwise_cast.cc
}  // namespace ew
namespace {

using redutil::from_float32;
using redutil::is_half;
using redutil::to_float32;

int64_t prod_range(const Shape& s, int b, int e) {
  int64_t p = 1;
  for (int i = b; i < e; ++i) p *= s[i];
  return p;
}

// Reads a one-element integer tensor (axis, k).
Result<int64_t> read_scalar_int(KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.dtype() != DataType::kInt64 && t.dtype() != DataType::kInt32)
    return invalid_argument(ctx.where() + what + " must be int32 or int64, got " + dtype_name(t.dtype()));
  if (t.numel() != 1)
    return invalid_argument(ctx.where() + what + " must hold exactly one value, got shape " + shape_to_string(t.shape()));
  return read_int_tensor(t)[0];
}

// Writes `v` (row-major, y's element count) into y, converted to y's element type: the
// last step of the kernels below that compute in double.
Status write_doubles(const std::vector<double>& v, const Tensor& y, const std::string& where) {
  Tensor src = Tensor::host(DataType::kFloat64, y.shape());
  std::copy(v.begin(), v.end(), src.data<double>());
  return ew::convert_into(src, y, 1, where);
}

Result<std::vector<double>> as_doubles(KernelContext& ctx, const Tensor& x) {
  if (!dtype_is_float(x.dtype())) return unsupported(ctx.where() + "takes floating-point scores, not " + dtype_name(x.dtype()));
  Tensor d = Tensor::host(DataType::kFloat64, x.shape());
  BH_RETURN_IF_ERROR(ew::convert_into(x, d, 1, ctx.where()));
  return std::vector<double>(d.data<double>(), d.data<double>() + d.numel());
}

// =====================================================================================
// CumSum, CumProd
// =====================================================================================

template <typename T>
void cumulate(const T* x, T* y, int64_t outer, int64_t K, int64_t inner, bool exclusive, bool reverse, bool product) {
  std::vector<T> acc(static_cast<size_t>(inner));
  for (int64_t o = 0; o < outer; ++o) {
    std::fill(acc.begin(), acc.end(), T(product ? 1 : 0));
    for (int64_t kk = 0; kk < K; ++kk) {
      int64_t k = reverse ? K - 1 - kk : kk;
      const T* xr = x + (o * K + k) * inner;
      T* yr = y + (o * K + k) * inner;
      for (int64_t i = 0; i < inner; ++i) {
        if (exclusive) yr[i] = acc[i];
        acc[i] = product ? T(acc[i] * xr[i]) : T(acc[i] + xr[i]);
        if (!exclusive) yr[i] = acc[i];
      }
    }
  }
}

class CumulativeKernel final : public Kernel {
 public:
  CumulativeKernel(bool exclusive, bool reverse, bool product) : exclusive_(exclusive), reverse_(reverse), product_(product) {}

  Status compute(KernelContext& ctx) const override {
    BH_ASSIGN_OR_RETURN(const Tensor* xp, required_input(ctx, 0, "x"));
    BH_ASSIGN_OR_RETURN(const Tensor* ap, required_input(ctx, 1, "axis"));
    const Tensor& x = *xp;
    BH_ASSIGN_OR_RETURN(int64_t a, read_scalar_int(ctx, *ap, "axis"));
    int r = x.rank();
    if (r == 0) return invalid_argument(ctx.where() + "input must have rank >= 1");
    BH_ASSIGN_OR_RETURN(int axis, normalize_axis(a, r, ctx.where()));
    int64_t outer = prod_range(x.shape(), 0, axis), K = x.shape()[axis], inner = prod_range(x.shape(), axis + 1, r);
    DataType dt = x.dtype();
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, dt, x.shape()));
    if (x.numel() == 0) return Status::ok();
    bool ex = exclusive_, rv = reverse_, pr = product_;
    switch (dt) {
      case DataType::kFloat32: cumulate<float>(x.data<float>(), y.data<float>(), outer, K, inner, ex, rv, pr); break;
      case DataType::kFloat64: cumulate<double>(x.data<double>(), y.data<double>(), outer, K, inner, ex, rv, pr); break;
      case DataType::kInt32: cumulate<int32_t>(x.data<int32_t>(), y.data<int32_t>(), outer, K, inner, ex, rv, pr); break;
      case DataType::kInt64: cumulate<int64_t>(x.data<int64_t>(), y.data<int64_t>(), outer, K, inner, ex, rv, pr); break;
      case DataType::kUInt32: cumulate<uint32_t>(x.data<uint32_t>(), y.data<uint32_t>(), outer, K, inner, ex, rv, pr); break;
      case DataType::kUInt64: cumulate<uint64_t>(x.data<uint64_t>(), y.data<uint64_t>(), outer, K, inner, ex, rv, pr); break;
      case DataType::kFloat16:
      case DataType::kBFloat16: {
        Tensor f = to_float32(x);
        std::vector<float> out(static_cast<size_t>(x.numel()));
        cumulate<float>(f.data<float>(), out.data(), outer, K, inner, ex, rv, pr);
        from_float32(out.data(), y);
        break;
      }
      default:
        BH_UNSUPPORTED_DTYPE(ctx.where(), dt);
    }
    return Status::ok();
  }

 private:
  bool exclusive_, reverse_, product_;
};

// =====================================================================================
// Det: the determinant of each square matrix in the last two dimensions, by LU
// factorisation with partial pivoting, in double.
// =====================================================================================

template <typename T>
void determinants(const T* x, T* y, int64_t batch, int64_t n) {
  std::vector<double> a(static_cast<size_t>(n * n));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < n * n; ++i) a[i] = static_cast<double>(x[b * n * n + i]);
    double det = 1;
    for (int64_t c = 0; c < n && det != 0; ++c) {
      int64_t p = c;
      for (int64_t r = c + 1; r < n; ++r)
        if (std::fabs(a[r * n + c]) > std::fabs(a[p * n + c])) p = r;
      if (a[p * n + c] == 0) {
        det = 0;
        break;
      }
      if (p != c) {
        for (int64_t k = 0; k < n; ++k) std::swap(a[p * n + k], a[c * n + k]);
        det = -det;
      }
      det *= a[c * n + c];
      for (int64_t r = c + 1; r < n; ++r) {
        double f = a[r * n + c] / a[c * n + c];
        for (int64_t k = c; k < n; ++k) a[r * n + k] -= f * a[c * n + k];
      }
    }
    y[b] = static_cast<T>(det);
  }
}

Status det_compute(KernelContext& ctx) {
  BH_ASSIGN_OR_RETURN(const Tensor* xp, required_input(ctx, 0, "X"));
  const Tensor& x = *xp;
  if (x.rank() < 2 || x.dim(-1) != x.dim(-2))
    return invalid_argument(ctx.where() + "input must be square matrices [*, M, M], got " + shape_to_string(x.shape()));
  Shape out(x.shape().begin(), x.shape().end() - 2);
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, x.dtype(), out));
  const int64_t n = x.dim(-1), batch = shape_numel(out);
  switch (x.dtype()) {
    case DataType::kFloat32: determinants<float>(x.data<float>(), y.data<float>(), batch, n); break;
    case DataType::kFloat64: determinants<double>(x.data<double>(), y.data<double>(), batch, n); break;
    case DataType::kFloat16:
    case DataType::kBFloat16: {
      Tensor f = to_float32(x);
      std::vector<float> d(static_cast<size_t>(batch));
      determinants<float>(f.data<float>(), d.data(), batch, n);
      from_float32(d.data(), y);
      break;
    }
    default:
      BH_UNSUPPORTED_DTYPE(ctx.where(), x.dtype());
  }
  return Status::ok();
}

// =====================================================================================
// HannWindow, HammingWindow, BlackmanWindow (opset 17): w[n] = sum_k (-1)^k a_k
// cos(2 pi k n / D), D = size (periodic) or size - 1 (symmetric), in double, then cast.
// =====================================================================================

enum class Window { kHann, kHamming, kBlackman };

Status window_compute(KernelContext& ctx, Window w, bool periodic, DataType out_type) {
  BH_ASSIGN_OR_RETURN(const Tensor* sp, required_input(ctx, 0, "size"));
  BH_ASSIGN_OR_RETURN(int64_t size, read_scalar_int(ctx, *sp, "size"));
  if (size < 0) return invalid_argument(ctx.where() + "size must be >= 0, got " + std::to_string(size));
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, out_type, Shape{size}));
  const double a0 = w == Window::kHann ? 0.5 : w == Window::kHamming ? 25.0 / 46.0 : 0.42;
  const double a1 = w == Window::kBlackman ? 0.5 : 1 - a0, a2 = w == Window::kBlackman ? 0.08 : 0;
  const double d = static_cast<double>(periodic ? size : size - 1);
  std::vector<double> v(static_cast<size_t>(size));
  for (int64_t n = 0; n < size; ++n) {
    const double t = 2 * M_PI * static_cast<double>(n) / d;
    // One sample is 1, as in NumPy and SciPy (the formula would divide 0 by 0).
    v[n] = size == 1 ? 1.0 : a0 - a1 * std::cos(t) + a2 * std::cos(2 * t);
  }
  return write_doubles(v, y, ctx.where());
}

// =====================================================================================
// MelWeightMatrix (opset 17): [dft_length / 2 + 1, num_mel_bins] triangular filters, their
// edges num_mel_bins + 2 points spaced evenly on the mel scale (2595 log10(1 + f / 700))
// between the two edge frequencies and snapped down to DFT bins, as the ONNX reference does.
// =====================================================================================

Result<double> read_scalar_double(KernelContext& ctx, int i, const char* what) {
  BH_ASSIGN_OR_RETURN(const Tensor* t, required_input(ctx, i, what));
  if (t->numel() != 1) return invalid_argument(ctx.where() + what + " must hold exactly one value, got " + t->describe());
  if (dtype_is_integer(t->dtype())) return static_cast<double>(read_int_tensor(*t)[0]);
  if (!dtype_is_float(t->dtype())) return invalid_argument(ctx.where() + what + " must be a number, got " + dtype_name(t->dtype()));
  Tensor d = Tensor::host(DataType::kFloat64, {});
  BH_RETURN_IF_ERROR(ew::convert_into(*t, d, 1, ctx.where()));
  return d.data<double>()[0];
}

Status mel_weight_matrix_compute(KernelContext& ctx, DataType out_type) {
  BH_ASSIGN_OR_RETURN(const Tensor* mp, required_input(ctx, 0, "num_mel_bins"));
  BH_ASSIGN_OR_RETURN(const Tensor* dp, required_input(ctx, 1, "dft_length"));
  BH_ASSIGN_OR_RETURN(const Tensor* rp, required_input(ctx, 2, "sample_rate"));
  BH_ASSIGN_OR_RETURN(int64_t mels, read_scalar_int(ctx, *mp, "num_mel_bins"));
  BH_ASSIGN_OR_RETURN(int64_t dft, read_scalar_int(ctx, *dp, "dft_length"));
  BH_ASSIGN_OR_RETURN(int64_t rate, read_scalar_int(ctx, *rp, "sample_rate"));
  BH_ASSIGN_OR_RETURN(double lo, read_scalar_double(ctx, 3, "lower_edge_hertz"));
  BH_ASSIGN_OR_RETURN(double hi, read_scalar_double(ctx, 4, "upper_edge_hertz"));
  if (mels < 1 || dft < 1 || rate < 1 || mels > (int64_t{1} << 20) || dft > (int64_t{1} << 30))
    return invalid_argument(ctx.where() + "num_mel_bins, dft_length and sample_rate must be positive (and num_mel_bins <= 2^20, "
                            "dft_length <= 2^30), got " + std::to_string(mels) + ", " + std::to_string(dft) + ", " + std::to_string(rate));
  if (!(lo >= 0) || !(hi > lo))
    return invalid_argument(ctx.where() + "needs 0 <= lower_edge_hertz < upper_edge_hertz");
  const int64_t bins = dft / 2 + 1;
  auto mel = [](double f) { return 2595.0 * std::log10(1.0 + f / 700.0); };
  const double lm = mel(lo), step = (mel(hi) - lm) / static_cast<double>(mels + 2);
  std::vector<int64_t> edge(static_cast<size_t>(mels + 2));
  for (int64_t i = 0; i < mels + 2; ++i) {
    const double f = 700.0 * (std::pow(10.0, (static_cast<double>(i) * step + lm) / 2595.0) - 1.0);
    edge[i] = static_cast<int64_t>(std::floor(static_cast<double>(dft + 1) * f / static_cast<double>(rate)));
  }
  std::vector<double> w(static_cast<size_t>(bins * mels), 0.0);
  auto at = [&](int64_t j, int64_t i) -> double* { return j >= 0 && j < bins ? &w[j * mels + i] : nullptr; };
  for (int64_t i = 0; i < mels; ++i) {
    const int64_t l = edge[i], c = edge[i + 1], r = edge[i + 2];
    if (c == l) {
      if (double* p = at(c, i)) *p = 1.0;
    } else {
      for (int64_t j = l; j <= c; ++j)
        if (double* p = at(j, i)) *p = static_cast<double>(j - l) / static_cast<double>(c - l);
    }
    if (r > c)
      for (int64_t j = c; j < r; ++j)
        if (double* p = at(j, i)) *p = static_cast<double>(r - j) / static_cast<double>(r - c);
  }
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, out_type, Shape{bins, mels}));
  return write_doubles(w, y, ctx.where());
}

// =====================================================================================
// BitCast (opset 26): the same bytes seen as another element type of the same size.
// =====================================================================================

Status bitcast_compute(KernelContext& ctx, DataType to) {
  BH_ASSIGN_OR_RETURN(const Tensor* xp, required_input(ctx, 0, "input"));
  const Tensor& x = *xp;
  if (x.dtype() == DataType::kString || dtype_size(x.dtype()) != dtype_size(to))
    return unsupported(ctx.where() + "BitCast from " + dtype_name(x.dtype()) + " to " + dtype_name(to) +
                       ": only between element types of the same size");
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, to, x.shape()));
  if (x.nbytes()) std::memcpy(y.raw(), x.raw(), x.nbytes());
  return Status::ok();
}

// =====================================================================================
// NonMaxSuppression (opset 10/11): per batch and class, boxes by descending score (ties
// by index), each kept unless its IoU with a kept one exceeds iou_threshold; only
// scores above score_threshold; at most max_output_boxes_per_class.
// =====================================================================================

struct Box {
  float y1, x1, y2, x2;
};

Box box_at(const float* b, bool center) {
  if (center) {  // [x_center, y_center, width, height]
    return {b[1] - b[3] / 2, b[0] - b[2] / 2, b[1] + b[3] / 2, b[0] + b[2] / 2};
  }
  return {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3])};
}

bool overlaps_more_than(const Box& a, const Box& b, float threshold) {
  const float area_a = (a.y2 - a.y1) * (a.x2 - a.x1), area_b = (b.y2 - b.y1) * (b.x2 - b.x1);
  if (area_a <= 0 || area_b <= 0) return false;
  const float h = std::max(0.0f, std::min(a.y2, b.y2) - std::max(a.y1, b.y1));
  const float w = std::max(0.0f, std::min(a.x2, b.x2) - std::max(a.x1, b.x1));
  const float inter = h * w;
  return inter / (area_a + area_b - inter) > threshold;
}

Status nms_compute(KernelContext& ctx, bool center) {
  BH_ASSIGN_OR_RETURN(const Tensor* bp, required_input(ctx, 0, "boxes"));
  BH_ASSIGN_OR_RETURN(const Tensor* sp, required_input(ctx, 1, "scores"));
  const Tensor &boxes = *bp, &scores = *sp;
  if (boxes.dtype() != DataType::kFloat32 || scores.dtype() != DataType::kFloat32)
    return unsupported(ctx.where() + "boxes and scores must be float32, got " + dtype_name(boxes.dtype()) + " and " +
                       dtype_name(scores.dtype()));
  if (boxes.rank() != 3 || boxes.dim(2) != 4 || scores.rank() != 3 || scores.dim(0) != boxes.dim(0) ||
      scores.dim(2) != boxes.dim(1))
    return invalid_argument(ctx.where() + "expected boxes [batches, boxes, 4] and scores [batches, classes, boxes], got " +
                            shape_to_string(boxes.shape()) + " and " + shape_to_string(scores.shape()));
  int64_t max_out = 0;
  float iou = 0, min_score = -std::numeric_limits<float>::infinity();
  if (ctx.input(2) && ctx.input(2)->numel()) { BH_ASSIGN_OR_RETURN(max_out, read_scalar_int(ctx, *ctx.input(2), "max_output_boxes_per_class")); }
  for (int i : {3, 4}) {
    const Tensor* t = ctx.input(i);
    if (!t || !t->numel()) continue;
    if (t->dtype() != DataType::kFloat32 || t->numel() != 1)
      return invalid_argument(ctx.where() + (i == 3 ? "iou_threshold" : "score_threshold") + " must be one float32");
    (i == 3 ? iou : min_score) = t->data<float>()[0];
  }
  const int64_t batches = boxes.dim(0), n = boxes.dim(1), classes = scores.dim(1);
  std::vector<int64_t> picked;  // (batch, class, box) triples
  std::vector<int64_t> order;
  std::vector<Box> kept;
  for (int64_t b = 0; b < batches && max_out > 0; ++b)
    for (int64_t c = 0; c < classes; ++c) {
      const float* sc = scores.data<float>() + (b * classes + c) * n;
      order.clear();
      for (int64_t i = 0; i < n; ++i)
        if (sc[i] > min_score) order.push_back(i);
      std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return sc[x] > sc[y]; });
      kept.clear();
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        Box box = box_at(boxes.data<float>() + (b * n + i) * 4, center);
        bool suppressed = false;
        for (const Box& k : kept) suppressed = suppressed || overlaps_more_than(box, k, iou);
        if (suppressed) continue;
        kept.push_back(box);
        picked.insert(picked.end(), {b, c, i});
      }
    }
  const int64_t count = static_cast<int64_t>(picked.size() / 3);
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kInt64, Shape{count, 3}));
  std::copy(picked.begin(), picked.end(), y.data<int64_t>());
  return Status::ok();
}

// =====================================================================================
// CenterCropPad (opset 18): each listed axis cropped or zero-padded to its target size,
// centred (the extra element, if any, at the end).
// =====================================================================================

Status center_crop_pad_compute(KernelContext& ctx, const std::vector<int64_t>& axes_attr) {
  BH_ASSIGN_OR_RETURN(const Tensor* xp, required_input(ctx, 0, "input_data"));
  BH_ASSIGN_OR_RETURN(const Tensor* sp, required_input(ctx, 1, "shape"));
  const Tensor& x = *xp;
  if (x.dtype() == DataType::kString) return unsupported(ctx.where() + "string tensors are not supported");
  std::vector<int64_t> target = read_int_tensor(*sp);
  const int r = x.rank();
  std::vector<int64_t> axes = axes_attr;
  if (axes.empty())
    for (int i = 0; i < r; ++i) axes.push_back(i);
  if (axes.size() != target.size())
    return invalid_argument(ctx.where() + "shape has " + std::to_string(target.size()) + " values for " +
                            std::to_string(axes.size()) + " axes");
  Shape out = x.shape();
  std::vector<int64_t> shift(r, 0);  // source index = output index + shift
  std::vector<bool> seen(r, false);
  for (size_t k = 0; k < axes.size(); ++k) {
    BH_ASSIGN_OR_RETURN(int a, normalize_axis(axes[k], r, ctx.where()));
    if (seen[a]) return invalid_argument(ctx.where() + "axis " + std::to_string(axes[k]) + " is listed twice");
    seen[a] = true;
    if (target[k] < 0) return invalid_argument(ctx.where() + "shape values must be >= 0, got " + std::to_string(target[k]));
    const int64_t in = x.shape()[a];
    shift[a] = in >= target[k] ? (in - target[k]) / 2 : -((target[k] - in) / 2);
    out[a] = target[k];
  }
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, x.dtype(), out));
  const int64_t n = y.numel();
  if (!n) return Status::ok();
  const size_t es = dtype_size(x.dtype());
  const auto in_strides = strides_of(x.shape());
  std::vector<int64_t> idx(r, 0);
  const auto* src = static_cast<const unsigned char*>(x.raw());
  auto* dst = static_cast<unsigned char*>(y.raw());
  for (int64_t o = 0; o < n; ++o) {
    int64_t off = 0;
    bool inside = true;
    for (int d = 0; d < r && inside; ++d) {
      const int64_t s = idx[d] + shift[d];
      inside = s >= 0 && s < x.shape()[d];
      off += s * in_strides[d];
    }
    if (inside) std::memcpy(dst + o * es, src + off * es, es);
    else std::memset(dst + o * es, 0, es);
    for (int d = r - 1; d >= 0 && ++idx[d] == out[d]; --d) idx[d] = 0;
  }
  return Status::ok();
}

// =====================================================================================
// MaxUnpool (opset 9/11): zeros, with each X value written where its index (into the
// whole flattened unpooled tensor, as MaxPool's Indices) points. The unpooled shape is
// (in - 1) * stride + kernel - pads per spatial axis. With `output_shape` (as the ONNX
// reference defines it) the pads are ignored, the unpooled tensor keeps its own index
// space and sits at the origin of the larger output, which is zero elsewhere: the
// indices never address the padding.
// =====================================================================================

struct UnpoolAttrs {
  std::vector<int64_t> kernel, pads, strides;
};

Status max_unpool_compute(KernelContext& ctx, const UnpoolAttrs& a) {
  BH_ASSIGN_OR_RETURN(const Tensor* xp, required_input(ctx, 0, "X"));
  BH_ASSIGN_OR_RETURN(const Tensor* ip, required_input(ctx, 1, "I"));
  const Tensor &x = *xp, &ind = *ip;
  const int nsp = static_cast<int>(a.kernel.size());
  if (x.rank() != nsp + 2) return invalid_argument(ctx.where() + "X must have rank " + std::to_string(nsp + 2) + " for kernel_shape of " + std::to_string(nsp) + " values, got " + shape_to_string(x.shape()));
  if (ind.dtype() != DataType::kInt64 || ind.shape() != x.shape())
    return invalid_argument(ctx.where() + "I must be int64 of X's shape " + shape_to_string(x.shape()) + ", got " + ind.describe());
  if (x.dtype() != DataType::kFloat32 && x.dtype() != DataType::kFloat64 && x.dtype() != DataType::kFloat16)
    BH_UNSUPPORTED_DTYPE(ctx.where(), x.dtype());
  const Tensor* os = ctx.input(2);
  const bool explicit_shape = os && os->numel();
  Shape unpooled = x.shape();
  for (int d = 0; d < nsp; ++d) {
    const int64_t stride = d < static_cast<int>(a.strides.size()) ? a.strides[d] : 1;
    const int64_t pb = !explicit_shape && d < static_cast<int>(a.pads.size()) ? a.pads[d] : 0;
    const int64_t pe = !explicit_shape && d + nsp < static_cast<int>(a.pads.size()) ? a.pads[d + nsp] : 0;
    int64_t span = 0;
    if (__builtin_mul_overflow(x.dim(d + 2) - 1, stride, &span) || span > (int64_t{1} << 50))
      return invalid_argument(ctx.where() + "the output of MaxUnpool would be too large");
    unpooled[d + 2] = span + a.kernel[d] - pb - pe;
    if (unpooled[d + 2] < 0)
      return invalid_argument(ctx.where() + "the pads leave a negative unpooled size " + shape_to_string(unpooled));
  }
  Shape out = unpooled;
  if (explicit_shape) {
    if (os->rank() != 1 || (os->dtype() != DataType::kInt64 && os->dtype() != DataType::kInt32))
      return invalid_argument(ctx.where() + "output_shape must be a 1-D int64 tensor, got " + os->describe());
    std::vector<int64_t> want = read_int_tensor(*os);
    if (static_cast<int>(want.size()) != x.rank())
      return invalid_argument(ctx.where() + "output_shape must have " + std::to_string(x.rank()) + " values");
    for (int d = 0; d < x.rank(); ++d)
      if (want[d] < unpooled[d])
        return invalid_argument(ctx.where() + "output_shape " + shape_to_string(Shape(want.begin(), want.end())) +
                                " is smaller than the unpooled shape " + shape_to_string(unpooled));
    out = Shape(want.begin(), want.end());
  }
  int64_t total = 0, inner = 0;
  if (!checked_numel(out, &total) || (total <= 0 && x.numel() > 0) || !checked_numel(unpooled, &inner))
    return invalid_argument(ctx.where() + "the output shape " + shape_to_string(out) + " is invalid");
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, x.dtype(), out));
  const size_t es = dtype_size(x.dtype());
  std::memset(y.raw(), 0, y.nbytes());
  const int64_t* I = ind.data<int64_t>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (I[i] < 0 || I[i] >= inner)
      return invalid_argument(ctx.where() + "index " + std::to_string(I[i]) + " is outside the unpooled tensor of " +
                              std::to_string(inner) + " elements");
    // The index in the unpooled tensor's coordinates, re-laid in the output's.
    int64_t rest = I[i], at = 0, step = 1;
    for (int d = x.rank() - 1; d >= 0; --d) {
      at += (rest % unpooled[d]) * step;
      rest /= unpooled[d];
      step *= out[d];
    }
    std::memcpy(static_cast<unsigned char*>(y.raw()) + at * es, static_cast<const unsigned char*>(x.raw()) + i * es, es);
  }
  return Status::ok();
}

// =====================================================================================
// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opset 12/13): input [N, C,
// d...], target [N, d...]; loss = -input[n, t, d] * weight[t] (0 where t is
// ignore_index), then none / sum / mean (the sum over the weights of the targets).
// SoftmaxCrossEntropyLoss takes the log-softmax over C first (its optional 2nd output).
// =====================================================================================

struct LossAttrs {
  enum class Reduction { kNone, kSum, kMean } reduction = Reduction::kMean;
  bool has_ignore = false;
  int64_t ignore_index = 0;
};

Result<LossAttrs> loss_attrs(const KernelInfo& info) {
  LossAttrs a;
  std::string r = info.node.attr_string("reduction", "mean");
  if (r == "none") a.reduction = LossAttrs::Reduction::kNone;
  else if (r == "sum") a.reduction = LossAttrs::Reduction::kSum;
  else if (r != "mean") return invalid_argument(info.where() + "reduction must be none, sum or mean, got '" + r + "'");
  a.has_ignore = info.node.has_attr("ignore_index");
  a.ignore_index = info.node.attr_int("ignore_index", 0);
  return a;
}

// `logp` holds log-probabilities [N, C, D] (D the product of the trailing dims) as double.
Status nll(KernelContext& ctx, const LossAttrs& a, const std::vector<double>& logp, const Tensor& target,
           const Tensor* weight, int64_t N, int64_t C, int64_t D, const Shape& target_shape, DataType dt) {
  if (target.dtype() != DataType::kInt32 && target.dtype() != DataType::kInt64)
    return invalid_argument(ctx.where() + "target must be int32 or int64, got " + dtype_name(target.dtype()));
  if (target.shape() != target_shape)
    return invalid_argument(ctx.where() + "target must have shape " + shape_to_string(target_shape) + ", got " +
                            shape_to_string(target.shape()));
  std::vector<double> w;
  if (weight) {
    if (weight->rank() != 1 || weight->dim(0) != C || weight->dtype() != dt)
      return invalid_argument(ctx.where() + "weight must be " + dtype_name(dt) + "[" + std::to_string(C) + "], got " + weight->describe());
    Tensor wf = weight->dtype() == DataType::kFloat64 ? *weight : to_float32(*weight);
    for (int64_t c = 0; c < C; ++c)
      w.push_back(wf.dtype() == DataType::kFloat64 ? wf.data<double>()[c] : wf.data<float>()[c]);
  }
  std::vector<int64_t> t = read_int_tensor(target);
  std::vector<double> loss(static_cast<size_t>(N * D));
  double total = 0, weights = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < D; ++d) {
      const int64_t k = t[n * D + d];
      if (a.has_ignore && k == a.ignore_index) continue;
      if (k < 0 || k >= C)
        return invalid_argument(ctx.where() + "target " + std::to_string(k) + " is outside [0, " + std::to_string(C) + ")");
      const double wk = weight ? w[k] : 1.0;
      loss[n * D + d] = -logp[(n * C + k) * D + d] * wk;
      total += loss[n * D + d];
      weights += wk;
    }
  Shape out = a.reduction == LossAttrs::Reduction::kNone ? target_shape : Shape{};
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, dt, out));
  std::vector<double> v = a.reduction == LossAttrs::Reduction::kNone ? loss
                          : std::vector<double>{a.reduction == LossAttrs::Reduction::kSum ? total : total / weights};
  return write_doubles(v, y, ctx.where());
}


Status loss_compute(KernelContext& ctx, const LossAttrs& a, bool softmax) {
  BH_ASSIGN_OR_RETURN(const Tensor* xp, required_input(ctx, 0, softmax ? "scores" : "input"));
  BH_ASSIGN_OR_RETURN(const Tensor* tp, required_input(ctx, 1, softmax ? "labels" : "target"));
  const Tensor& x = *xp;
  if (x.rank() < 2) return invalid_argument(ctx.where() + "input must be [N, C, ...], got " + shape_to_string(x.shape()));
  const int64_t N = x.dim(0), C = x.dim(1), D = prod_range(x.shape(), 2, x.rank());
  Shape target_shape = {N};
  for (int i = 2; i < x.rank(); ++i) target_shape.push_back(x.dim(i));
  BH_ASSIGN_OR_RETURN(std::vector<double> v, as_doubles(ctx, x));
  if (softmax) {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t d = 0; d < D; ++d) {
        double m = -std::numeric_limits<double>::infinity(), sum = 0;
        for (int64_t c = 0; c < C; ++c) m = std::max(m, v[(n * C + c) * D + d]);
        for (int64_t c = 0; c < C; ++c) sum += std::exp(v[(n * C + c) * D + d] - m);
        const double lse = m + std::log(sum);
        for (int64_t c = 0; c < C; ++c) v[(n * C + c) * D + d] -= lse;
      }
    if (ctx.output_wanted(1)) {
      BH_ASSIGN_OR_RETURN(Tensor lp, ctx.allocate_output(1, x.dtype(), x.shape()));
      BH_RETURN_IF_ERROR(write_doubles(v, lp, ctx.where()));
    }
  }
  return nll(ctx, a, v, *tp, ctx.input(2), N, C, D, target_shape, x.dtype());
}

// =====================================================================================
// Unique (opset 11): the distinct elements (or slices along `axis`), sorted or in order
// of first appearance, with the first index of each, the inverse map and the counts.
// =====================================================================================

template <typename T>
Status unique_typed(KernelContext& ctx, const Tensor& x, bool has_axis, int axis, bool sorted) {
  const int r = x.rank();
  const int64_t outer = has_axis ? prod_range(x.shape(), 0, axis) : 1;
  const int64_t K = has_axis ? x.shape()[axis] : x.numel();
  const int64_t inner = has_axis ? prod_range(x.shape(), axis + 1, r) : 1;
  const T* p = x.data<T>();
  // Slice k: elements (o, k, i) for every o, i.
  auto at = [&](int64_t k, int64_t j) { return p[((j / inner) * K + k) * inner + j % inner]; };
  const int64_t width = outer * inner;
  // A strict weak order for the sort: NaN after every number, and equal to NaN.
  auto lt = [](T u, T v) {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(u)) return false;
      if (std::isnan(v)) return true;
    }
    return u < v;
  };
  auto less = [&](int64_t a, int64_t b) {
    for (int64_t j = 0; j < width; ++j) {
      T u = at(a, j), v = at(b, j);
      if (lt(u, v)) return true;
      if (lt(v, u)) return false;
    }
    return false;
  };
  auto equal = [&](int64_t a, int64_t b) { return !less(a, b) && !less(b, a); };
  std::vector<int64_t> order(static_cast<size_t>(K));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), less);
  // Groups of equal slices; each group's first index (the smallest, as the sort is stable).
  std::vector<int64_t> group_of(static_cast<size_t>(K)), first, count;
  for (size_t i = 0; i < order.size(); ++i) {
    if (i == 0 || !equal(order[i - 1], order[i])) {
      first.push_back(order[i]);
      count.push_back(0);
    }
    group_of[order[i]] = static_cast<int64_t>(first.size()) - 1;
    count.back()++;
  }
  const int64_t U = static_cast<int64_t>(first.size());
  std::vector<int64_t> rank(static_cast<size_t>(U));  // output position of each group
  std::iota(rank.begin(), rank.end(), int64_t{0});
  if (!sorted) {
    std::vector<int64_t> by_first(rank);
    std::sort(by_first.begin(), by_first.end(), [&](int64_t a, int64_t b) { return first[a] < first[b]; });
    for (int64_t i = 0; i < U; ++i) rank[by_first[i]] = i;
  }
  Shape ys = has_axis ? x.shape() : Shape{U};
  if (has_axis) ys[axis] = U;
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, x.dtype(), ys));
  T* yp = y.data<T>();
  for (int64_t g = 0; g < U; ++g)
    for (int64_t j = 0; j < width; ++j) yp[((j / inner) * U + rank[g]) * inner + j % inner] = at(first[g], j);
  auto emit = [&](int o, int64_t n, auto&& value) -> Status {
    if (!ctx.output_wanted(o)) return Status::ok();
    BH_ASSIGN_OR_RETURN(Tensor t, ctx.allocate_output(o, DataType::kInt64, Shape{n}));
    for (int64_t i = 0; i < n; ++i) t.data<int64_t>()[i] = value(i);
    return Status::ok();
  };
  std::vector<int64_t> at_rank(static_cast<size_t>(U));
  for (int64_t g = 0; g < U; ++g) at_rank[rank[g]] = g;
  BH_RETURN_IF_ERROR(emit(1, U, [&](int64_t i) { return first[at_rank[i]]; }));
  BH_RETURN_IF_ERROR(emit(2, K, [&](int64_t k) { return rank[group_of[k]]; }));
  return emit(3, U, [&](int64_t i) { return count[at_rank[i]]; });
}

Status unique_compute(KernelContext& ctx, bool has_axis, int64_t axis_attr, bool sorted) {
  BH_ASSIGN_OR_RETURN(const Tensor* xp, required_input(ctx, 0, "X"));
  const Tensor& x = *xp;
  int axis = 0;
  if (has_axis) { BH_ASSIGN_OR_RETURN(axis, normalize_axis(axis_attr, x.rank(), ctx.where())); }
  switch (x.dtype()) {
    case DataType::kFloat32: return unique_typed<float>(ctx, x, has_axis, axis, sorted);
    case DataType::kFloat64: return unique_typed<double>(ctx, x, has_axis, axis, sorted);
    case DataType::kInt8: return unique_typed<int8_t>(ctx, x, has_axis, axis, sorted);
    case DataType::kUInt8: return unique_typed<uint8_t>(ctx, x, has_axis, axis, sorted);
    case DataType::kInt32: return unique_typed<int32_t>(ctx, x, has_axis, axis, sorted);
    case DataType::kInt64: return unique_typed<int64_t>(ctx, x, has_axis, axis, sorted);
    default: BH_UNSUPPORTED_DTYPE(ctx.where(), x.dtype());
  }
}

// =====================================================================================
// Col2Im (opset 18): sums the columns of sliding blocks [N, C * prod(block), L] back into
// images [N, C, *image_shape].
// =====================================================================================

struct Col2ImAttrs {
  std::vector<int64_t> dilations, pads, strides;
};

Status col2im_compute(KernelContext& ctx, const Col2ImAttrs& a) {
  BH_ASSIGN_OR_RETURN(const Tensor* xp, required_input(ctx, 0, "input"));
  BH_ASSIGN_OR_RETURN(const Tensor* ip, required_input(ctx, 1, "image_shape"));
  BH_ASSIGN_OR_RETURN(const Tensor* bp, required_input(ctx, 2, "block_shape"));
  const Tensor& x = *xp;
  std::vector<int64_t> image = read_int_tensor(*ip), block = read_int_tensor(*bp);
  const size_t nd = image.size();
  if (x.dtype() != DataType::kFloat32 && x.dtype() != DataType::kFloat64) BH_UNSUPPORTED_DTYPE(ctx.where(), x.dtype());
  if (x.rank() != 3 || block.size() != nd || nd == 0)
    return invalid_argument(ctx.where() + "expected input [N, C*prod(block), L] and image_shape and block_shape of one size");
  auto attr = [&](const std::vector<int64_t>& v, size_t i, int64_t def) { return i < v.size() ? v[i] : def; };
  int64_t block_size = 1, blocks = 1;
  std::vector<int64_t> per_dim(nd);
  for (size_t d = 0; d < nd; ++d) {
    const int64_t dil = attr(a.dilations, d, 1), st = attr(a.strides, d, 1);
    const int64_t span = image[d] + attr(a.pads, d, 0) + attr(a.pads, d + nd, 0) - dil * (block[d] - 1) - 1;
    if (image[d] <= 0 || block[d] <= 0 || dil <= 0 || st <= 0 || span < 0 || image[d] > (int64_t{1} << 31) ||
        block[d] > (int64_t{1} << 31))
      return invalid_argument(ctx.where() + "image_shape, block_shape, dilations and strides do not make any block");
    per_dim[d] = span / st + 1;
    block_size *= block[d];
    blocks *= per_dim[d];
  }
  if (x.dim(1) % block_size != 0 || x.dim(2) != blocks)
    return invalid_argument(ctx.where() + "input " + shape_to_string(x.shape()) + " does not hold " +
                            std::to_string(blocks) + " blocks of " + std::to_string(block_size) + " values per channel");
  const int64_t N = x.dim(0), C = x.dim(1) / block_size;
  Shape out = {N, C};
  out.insert(out.end(), image.begin(), image.end());
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, x.dtype(), out));
  const int64_t plane = shape_numel(Shape(image.begin(), image.end()));
  BH_ASSIGN_OR_RETURN(const std::vector<double> xd, as_doubles(ctx, x));
  std::vector<double> acc(static_cast<size_t>(N * C * plane), 0.0);
  std::vector<int64_t> k(nd), b(nd);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t ki = 0; ki < block_size; ++ki) {
        for (int64_t r = ki, d = static_cast<int64_t>(nd) - 1; d >= 0; --d) k[d] = r % block[d], r /= block[d];
        for (int64_t bi = 0; bi < blocks; ++bi) {
          for (int64_t r = bi, d = static_cast<int64_t>(nd) - 1; d >= 0; --d) b[d] = r % per_dim[d], r /= per_dim[d];
          int64_t off = 0;
          bool inside = true;
          for (size_t d = 0; d < nd && inside; ++d) {
            const int64_t pos = b[d] * attr(a.strides, d, 1) - attr(a.pads, d, 0) + k[d] * attr(a.dilations, d, 1);
            inside = pos >= 0 && pos < image[d];
            off = off * image[d] + pos;
          }
          if (inside)
            acc[(n * C + c) * plane + off] += xd[((n * C + c) * block_size + ki) * blocks + bi];
        }
      }
  return write_doubles(acc, y, ctx.where());
}

// =====================================================================================
// AffineGrid (opset 20): the sampling grid [N, (D,) H, W, 2|3] of affine matrices theta
// [N, 2, 3] | [N, 3, 4] over normalised coordinates in [-1, 1].
// =====================================================================================

Status affine_grid_compute(KernelContext& ctx, bool align_corners) {
  BH_ASSIGN_OR_RETURN(const Tensor* tp, required_input(ctx, 0, "theta"));
  BH_ASSIGN_OR_RETURN(const Tensor* sp, required_input(ctx, 1, "size"));
  const Tensor& theta = *tp;
  std::vector<int64_t> size = read_int_tensor(*sp);
  if (size.size() != 4 && size.size() != 5)
    return invalid_argument(ctx.where() + "size must be [N, C, H, W] or [N, C, D, H, W]");
  const int nd = static_cast<int>(size.size()) - 2;
  if (theta.dtype() != DataType::kFloat32 && theta.dtype() != DataType::kFloat64) BH_UNSUPPORTED_DTYPE(ctx.where(), theta.dtype());
  if (theta.shape() != Shape{size[0], nd, nd + 1})
    return invalid_argument(ctx.where() + "theta must be [" + std::to_string(size[0]) + "," + std::to_string(nd) + "," +
                            std::to_string(nd + 1) + "], got " + shape_to_string(theta.shape()));
  Shape out = {size[0]};
  for (int d = 0; d < nd; ++d) out.push_back(size[2 + d]);
  out.push_back(nd);
  int64_t total = 0;
  if (!checked_numel(out, &total)) return invalid_argument(ctx.where() + "size " + shape_to_string(size) + " is invalid");
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, theta.dtype(), out));
  BH_ASSIGN_OR_RETURN(const std::vector<double> td, as_doubles(ctx, theta));
  auto coord = [&](int64_t i, int64_t n) {
    if (n <= 1) return 0.0;
    return align_corners ? -1.0 + 2.0 * i / (n - 1) : (2.0 * i + 1) / n - 1;
  };
  std::vector<double> g(static_cast<size_t>(total));
  const int64_t points = total / (size[0] * nd);
  for (int64_t n = 0; n < size[0]; ++n) {
    const double* T = td.data() + n * nd * (nd + 1);
    for (int64_t p = 0; p < points; ++p) {
      // Spatial dims in output order (D,) H, W; the base point is (x, y(, z)): x along W.
      double base[4] = {0, 0, 0, 1};
      for (int64_t r = p, d = nd - 1; d >= 0; --d) {
        const int64_t len = size[2 + d];
        base[nd - 1 - d] = coord(r % len, len);
        r /= len;
      }
      base[nd] = 1;
      for (int i = 0; i < nd; ++i) {
        double v = 0;
        for (int j = 0; j <= nd; ++j) v += T[i * (nd + 1) + j] * base[j];
        g[(n * points + p) * nd + i] = v;
      }
    }
  }
  return write_doubles(g, y, ctx.where());
}

// =====================================================================================
// GridSample (opset 16/20): X [N, C, *in] sampled at grid [N, *out, nd] (x first), by
// nearest, (multi)linear or (2-D) cubic interpolation, with zeros, border or reflection
// padding, in double.
// =====================================================================================

struct GridSampleAttrs {
  enum class Mode { kNearest, kLinear, kCubic } mode = Mode::kLinear;
  enum class Pad { kZeros, kBorder, kReflection } pad = Pad::kZeros;
  bool align_corners = false;
};

double reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    const double dx = lo - x;
    const int64_t n = static_cast<int64_t>(dx / range);
    const double r = dx - static_cast<double>(n) * range;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const double dx = x - hi;
    const int64_t n = static_cast<int64_t>(dx / range);
    const double r = dx - static_cast<double>(n) * range;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

Status grid_sample_compute(KernelContext& ctx, const GridSampleAttrs& a) {
  BH_ASSIGN_OR_RETURN(const Tensor* xp, required_input(ctx, 0, "X"));
  BH_ASSIGN_OR_RETURN(const Tensor* gp, required_input(ctx, 1, "grid"));
  const Tensor &x = *xp, &grid = *gp;
  const int nd = x.rank() - 2;
  if (nd < 1 || nd > 3 || grid.rank() != x.rank() || grid.dim(0) != x.dim(0) || grid.dim(-1) != nd)
    return invalid_argument(ctx.where() + "expected X [N, C, ...] of 1 to 3 spatial dims and grid [N, ..., " +
                            std::to_string(std::max(nd, 1)) + "], got " + shape_to_string(x.shape()) + " and " +
                            shape_to_string(grid.shape()));
  if (a.mode == GridSampleAttrs::Mode::kCubic && nd != 2)
    return unsupported(ctx.where() + "cubic GridSample is implemented for 2 spatial dims, not " + std::to_string(nd));
  if (!dtype_is_float(x.dtype()) || !dtype_is_float(grid.dtype()))
    return unsupported(ctx.where() + "X and grid must be floating point, got " + dtype_name(x.dtype()) + " and " + dtype_name(grid.dtype()));
  const int64_t N = x.dim(0), C = x.dim(1);
  Shape out = {N, C};
  for (int d = 0; d < nd; ++d) out.push_back(grid.dim(1 + d));
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, x.dtype(), out));
  BH_ASSIGN_OR_RETURN(const std::vector<double> xd, as_doubles(ctx, x));
  BH_ASSIGN_OR_RETURN(const std::vector<double> gd, as_doubles(ctx, grid));
  // in[d]: size of spatial dim d in X's order (D, H, W); the grid's component 0 is W.
  std::vector<int64_t> in(nd);
  for (int d = 0; d < nd; ++d) in[d] = x.dim(2 + d);
  int64_t in_plane = 1, out_plane = 1;
  for (int d = 0; d < nd; ++d) in_plane *= in[d], out_plane *= out[2 + d];
  auto lo = [&](int d) { return a.align_corners ? 0.0 : -0.5; };
  auto hi = [&](int d) { return a.align_corners ? double(in[d] - 1) : in[d] - 0.5; };
  // The value at integer position p (spatial, X order) of plane `src`, after padding.
  auto pixel = [&](const double* src, std::vector<int64_t> p) -> double {
    for (int d = 0; d < nd; ++d) {
      if (p[d] >= 0 && p[d] < in[d]) continue;
      if (a.pad == GridSampleAttrs::Pad::kZeros) return 0.0;
      if (a.pad == GridSampleAttrs::Pad::kReflection) p[d] = static_cast<int64_t>(reflect(double(p[d]), lo(d), hi(d)));
      p[d] = std::clamp<int64_t>(p[d], 0, in[d] - 1);
    }
    int64_t off = 0;
    for (int d = 0; d < nd; ++d) off = off * in[d] + p[d];
    return src[off];
  };
  auto cubic = [](double t, double w[4]) {
    const double A = -0.75;
    auto near = [&](double v) { return ((A + 2) * v - (A + 3)) * v * v + 1; };
    auto far = [&](double v) { return ((A * v - 5 * A) * v + 8 * A) * v - 4 * A; };
    w[0] = far(t + 1), w[1] = near(t), w[2] = near(1 - t), w[3] = far(2 - t);
  };
  std::vector<double> acc(static_cast<size_t>(N * C * out_plane));
  std::vector<double> pos(nd);
  std::vector<int64_t> base(nd), p(nd);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < out_plane; ++o) {
      const double* g = gd.data() + (n * out_plane + o) * nd;
      for (int d = 0; d < nd; ++d) {
        const double c = g[nd - 1 - d];  // component 0 is the last spatial dim
        double v = a.align_corners ? (c + 1) / 2 * double(in[d] - 1) : ((c + 1) * double(in[d]) - 1) / 2;
        if (a.pad == GridSampleAttrs::Pad::kBorder) v = std::clamp(v, 0.0, double(in[d] - 1));
        else if (a.pad == GridSampleAttrs::Pad::kReflection) v = std::clamp(reflect(v, lo(d), hi(d)), 0.0, double(in[d] - 1));
        pos[d] = v;
      }
      for (int64_t c = 0; c < C; ++c) {
        const double* src = xd.data() + (n * C + c) * in_plane;
        double v = 0;
        if (!std::all_of(pos.begin(), pos.end(), [](double q) { return std::isfinite(q); })) {
          v = a.pad == GridSampleAttrs::Pad::kZeros ? 0.0 : std::numeric_limits<double>::quiet_NaN();
        } else if (a.mode == GridSampleAttrs::Mode::kNearest) {
          for (int d = 0; d < nd; ++d) p[d] = static_cast<int64_t>(std::nearbyint(pos[d]));
          v = pixel(src, p);
        } else if (a.mode == GridSampleAttrs::Mode::kLinear) {
          for (int d = 0; d < nd; ++d) base[d] = static_cast<int64_t>(std::floor(pos[d]));
          for (int corner = 0; corner < (1 << nd); ++corner) {
            double w = 1;
            for (int d = 0; d < nd; ++d) {
              const bool up = (corner >> d) & 1;
              p[d] = base[d] + up;
              const double f = pos[d] - double(base[d]);
              w *= up ? f : 1 - f;
            }
            if (w != 0) v += w * pixel(src, p);
          }
        } else {
          double wy[4], wx[4];
          const int64_t y0 = static_cast<int64_t>(std::floor(pos[0])) - 1, x0 = static_cast<int64_t>(std::floor(pos[1])) - 1;
          cubic(pos[0] - std::floor(pos[0]), wy);
          cubic(pos[1] - std::floor(pos[1]), wx);
          for (int i = 0; i < 4; ++i)
            for (int j = 0; j < 4; ++j) v += wy[i] * wx[j] * pixel(src, {y0 + i, x0 + j});
        }
        acc[(n * C + c) * out_plane + o] = v;
      }
    }
  return write_doubles(acc, y, ctx.where());
}

// =====================================================================================
// TensorScatter (opset 24): a KV cache [B, ..., max_seq, ...] with each batch's update
// [B, ..., seq, ...] written along `axis` from write_indices[b] (0 when absent), wrapping
// around in `circular` mode.
// =====================================================================================

Status tensor_scatter_compute(KernelContext& ctx, int64_t axis_attr, bool circular) {
  BH_ASSIGN_OR_RETURN(const Tensor* cp, required_input(ctx, 0, "past_cache"));
  BH_ASSIGN_OR_RETURN(const Tensor* up, required_input(ctx, 1, "update"));
  const Tensor &cache = *cp, &update = *up;
  const int r = cache.rank();
  BH_ASSIGN_OR_RETURN(int axis, normalize_axis(axis_attr, r, ctx.where()));
  if (axis == 0) return invalid_argument(ctx.where() + "axis may not be the batch axis 0");
  bool same = update.rank() == r && update.dtype() == cache.dtype() && cache.dtype() != DataType::kString;
  for (int d = 0; same && d < r; ++d) same = d == axis ? update.dim(d) <= cache.dim(d) : update.dim(d) == cache.dim(d);
  if (!same)
    return invalid_argument(ctx.where() + "update " + update.describe() + " does not fit past_cache " + cache.describe() +
                            " along axis " + std::to_string(axis));
  const int64_t B = cache.dim(0), max_seq = cache.dim(axis), seq = update.dim(axis);
  std::vector<int64_t> start(static_cast<size_t>(B), 0);
  if (const Tensor* w = ctx.input(2); w && w->numel()) {
    if (w->numel() != B) return invalid_argument(ctx.where() + "write_indices must have one value per batch (" + std::to_string(B) + ")");
    start = read_int_tensor(*w);
  }
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, cache.dtype(), cache.shape()));
  if (cache.nbytes()) std::memcpy(y.raw(), cache.raw(), cache.nbytes());
  const size_t es = dtype_size(cache.dtype());
  const int64_t mid = prod_range(cache.shape(), 1, axis), inner = prod_range(cache.shape(), axis + 1, r);
  for (int64_t b = 0; b < B; ++b) {
    if (start[b] < 0 || (!circular && start[b] + seq > max_seq) || (circular && start[b] >= max_seq && max_seq > 0))
      return invalid_argument(ctx.where() + "write index " + std::to_string(start[b]) + " of batch " + std::to_string(b) +
                              " does not fit " + std::to_string(seq) + " positions in " + std::to_string(max_seq));
    for (int64_t m = 0; m < mid; ++m)
      for (int64_t i = 0; i < seq; ++i) {
        const int64_t at = circular ? (start[b] + i) % max_seq : start[b] + i;
        std::memcpy(static_cast<unsigned char*>(y.raw()) + (((b * mid + m) * max_seq + at) * inner) * es,
                    static_cast<const unsigned char*>(update.raw()) + (((b * mid + m) * seq + i) * inner) * es, inner * es);
      }
  }
  return Status::ok();
}

// =====================================================================================
// ai.onnx.ml Binarizer (x > threshold → 1, else 0) and ArrayFeatureExtractor (the
// elements at the given indices of the last axis; a 1-D input gives [1, n]).
// =====================================================================================

Status binarizer_compute(KernelContext& ctx, float threshold) {
  BH_ASSIGN_OR_RETURN(const Tensor* xp, required_input(ctx, 0, "X"));
  const Tensor& x = *xp;
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, x.dtype(), x.shape()));
  auto run = [&](auto* in, auto* out) {
    for (int64_t i = 0; i < x.numel(); ++i) out[i] = in[i] > threshold ? 1 : 0;
  };
  switch (x.dtype()) {
    case DataType::kFloat32: run(x.data<float>(), y.data<float>()); break;
    case DataType::kFloat64: run(x.data<double>(), y.data<double>()); break;
    case DataType::kInt32: run(x.data<int32_t>(), y.data<int32_t>()); break;
    case DataType::kInt64: run(x.data<int64_t>(), y.data<int64_t>()); break;
    default: BH_UNSUPPORTED_DTYPE(ctx.where(), x.dtype());
  }
  return Status::ok();
}

Status array_feature_extractor_compute(KernelContext& ctx) {
  BH_ASSIGN_OR_RETURN(const Tensor* xp, required_input(ctx, 0, "X"));
  BH_ASSIGN_OR_RETURN(const Tensor* ip, required_input(ctx, 1, "Y"));
  const Tensor& x = *xp;
  if (x.rank() < 1) return invalid_argument(ctx.where() + "X must have rank >= 1");
  if (ip->dtype() != DataType::kInt64) return invalid_argument(ctx.where() + "Y must be int64, got " + dtype_name(ip->dtype()));
  const int64_t last = x.dim(-1), k = ip->numel(), rows = x.numel() / std::max<int64_t>(last, 1);
  const int64_t* idx = ip->data<int64_t>();
  for (int64_t j = 0; j < k; ++j)
    if (idx[j] < 0 || idx[j] >= last)
      return invalid_argument(ctx.where() + "index " + std::to_string(idx[j]) + " is outside the last axis of " +
                              std::to_string(last));
  Shape out = x.rank() == 1 ? Shape{1, k} : x.shape();
  if (x.rank() > 1) out.back() = k;
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, x.dtype(), out));
  if (x.dtype() == DataType::kString) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < k; ++j) y.strings()[r * k + j] = x.strings()[r * last + idx[j]];
    return Status::ok();
  }
  const size_t es = dtype_size(x.dtype());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < k; ++j)
      std::memcpy(static_cast<unsigned char*>(y.raw()) + (r * k + j) * es,
                  static_cast<const unsigned char*>(x.raw()) + (r * last + idx[j]) * es, es);
  return Status::ok();
}

// =====================================================================================
// MatMulInteger (opset 10): (A - a_zero_point) x (B - b_zero_point) in int32, for 8-bit
// A and B; A [..., M, K] with B [K, N] or of the same batch; zero points scalar, or per
// row of A ([M]) and per column of B ([N]).
// =====================================================================================

Status matmul_integer_compute(KernelContext& ctx) {
  BH_ASSIGN_OR_RETURN(const Tensor* ap, required_input(ctx, 0, "A"));
  BH_ASSIGN_OR_RETURN(const Tensor* bp, required_input(ctx, 1, "B"));
  const Tensor &A = *ap, &B = *bp;
  auto eight_bit = [](DataType t) { return t == DataType::kUInt8 || t == DataType::kInt8; };
  if (!eight_bit(A.dtype()) || !eight_bit(B.dtype()))
    return unsupported(ctx.where() + "MatMulInteger takes int8/uint8 A and B, got " + dtype_name(A.dtype()) + " and " + dtype_name(B.dtype()));
  if (A.rank() < 2 || B.rank() < 2 || A.dim(-1) != B.dim(-2) ||
      (B.rank() > 2 && Shape(B.shape().begin(), B.shape().end() - 2) != Shape(A.shape().begin(), A.shape().end() - 2)))
    return invalid_argument(ctx.where() + "cannot multiply " + shape_to_string(A.shape()) + " by " + shape_to_string(B.shape()) +
                            " (A [..., M, K] by B [K, N] or of A's batch)");
  const int64_t M = A.dim(-2), K = A.dim(-1), N = B.dim(-1), batch = A.numel() / std::max<int64_t>(M * K, 1);
  auto value = [](const Tensor& t, int64_t i) -> int32_t {
    return t.dtype() == DataType::kUInt8 ? t.data<uint8_t>()[i] : t.data<int8_t>()[i];
  };
  auto zero_points = [&](int i, int64_t n, const char* what) -> Result<std::vector<int32_t>> {
    std::vector<int32_t> z(static_cast<size_t>(n), 0);
    const Tensor* t = ctx.input(i);
    if (!t || !t->numel()) return z;
    if (!eight_bit(t->dtype()) || (t->numel() != 1 && t->numel() != n))
      return invalid_argument(ctx.where() + what + " must be one 8-bit value or " + std::to_string(n) + ", got " + t->describe());
    for (int64_t j = 0; j < n; ++j) z[j] = value(*t, t->numel() == 1 ? 0 : j);
    return z;
  };
  BH_ASSIGN_OR_RETURN(auto za, zero_points(2, M, "a_zero_point"));
  BH_ASSIGN_OR_RETURN(auto zb, zero_points(3, N, "b_zero_point"));
  Shape out(A.shape().begin(), A.shape().end() - 1);
  out.push_back(N);
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kInt32, out));
  int32_t* yp = y.data<int32_t>();
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t ao = b * M * K, bo = B.rank() > 2 ? b * K * N : 0;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        // In int64, then wrapped to int32 as an int32 accumulator would (no signed overflow).
        int64_t acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += int64_t{value(A, ao + m * K + k) - za[m]} * (value(B, bo + k * N + n) - zb[n]);
        yp[(b * M + m) * N + n] = static_cast<int32_t>(static_cast<uint32_t>(acc));
      }
  }
  return Status::ok();
}

// =====================================================================================
// TopK
// =====================================================================================

template <typename T>
void topk(const T* x, T* vals, int64_t* idx, int64_t outer, int64_t K, int64_t inner, int64_t k, bool largest,
          int threads) {
  parallel_for(threads, outer * inner, std::max<int64_t>(1, 4096 / std::max<int64_t>(K, 1)), [&](int64_t b, int64_t e) {
    std::vector<int64_t> order(static_cast<size_t>(K));
    for (int64_t s = b; s < e; ++s) {
      int64_t o = s / inner, i = s % inner;
      const T* xs = x + o * K * inner + i;
      std::iota(order.begin(), order.end(), int64_t{0});
      // Ties keep the lower index first; NaN sorts as the largest value.
      auto before = [&](int64_t a, int64_t c) {
        T va = xs[a * inner], vc = xs[c * inner];
        if constexpr (std::is_floating_point_v<T>) {
          bool na = va != va, nc = vc != vc;
          if (na || nc) {
            if (na && nc) return a < c;
            return largest ? na : nc;
          }
        }
        if (va != vc) return largest ? va > vc : va < vc;
        return a < c;
      };
      std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
      for (int64_t j = 0; j < k; ++j) {
        vals[(o * k + j) * inner + i] = xs[order[j] * inner];
        idx[(o * k + j) * inner + i] = order[j];
      }
    }
  });
}

class TopKKernel final : public Kernel {
 public:
  TopKKernel(int64_t axis, int64_t attr_k, bool k_input, bool largest)
      : axis_(axis), attr_k_(attr_k), k_input_(k_input), largest_(largest) {}

  Status compute(KernelContext& ctx) const override {
    BH_ASSIGN_OR_RETURN(const Tensor* xp, required_input(ctx, 0, "X"));
    const Tensor& x = *xp;
    int64_t k = attr_k_;
    if (k_input_) {
      BH_ASSIGN_OR_RETURN(const Tensor* kp, required_input(ctx, 1, "K"));
      BH_ASSIGN_OR_RETURN(k, read_scalar_int(ctx, *kp, "K"));
    }
    int r = x.rank();
    if (r == 0) return invalid_argument(ctx.where() + "input must have rank >= 1");
    BH_ASSIGN_OR_RETURN(int axis, normalize_axis(axis_, r, ctx.where()));
    int64_t K = x.shape()[axis];
    if (k < 0 || k > K)
      return invalid_argument(ctx.where() + "k = " + std::to_string(k) + " is out of range for axis of size " + std::to_string(K));
    int64_t outer = prod_range(x.shape(), 0, axis), inner = prod_range(x.shape(), axis + 1, r);
    Shape os = x.shape();
    os[axis] = k;
    DataType dt = x.dtype();
    BH_ASSIGN_OR_RETURN(Tensor v, ctx.allocate_output(0, dt, os));
    BH_ASSIGN_OR_RETURN(Tensor ix, ctx.allocate_output(1, DataType::kInt64, os));
    if (shape_numel(os) == 0) return Status::ok();
    int64_t* ip = ix.data<int64_t>();
    int th = ctx.threads();
    switch (dt) {
      case DataType::kFloat32: topk<float>(x.data<float>(), v.data<float>(), ip, outer, K, inner, k, largest_, th); break;
      case DataType::kFloat64: topk<double>(x.data<double>(), v.data<double>(), ip, outer, K, inner, k, largest_, th); break;
      case DataType::kInt8: topk<int8_t>(x.data<int8_t>(), v.data<int8_t>(), ip, outer, K, inner, k, largest_, th); break;
      case DataType::kUInt8: topk<uint8_t>(x.data<uint8_t>(), v.data<uint8_t>(), ip, outer, K, inner, k, largest_, th); break;
      case DataType::kInt16: topk<int16_t>(x.data<int16_t>(), v.data<int16_t>(), ip, outer, K, inner, k, largest_, th); break;
      case DataType::kUInt16: topk<uint16_t>(x.data<uint16_t>(), v.data<uint16_t>(), ip, outer, K, inner, k, largest_, th); break;
      case DataType::kInt32: topk<int32_t>(x.data<int32_t>(), v.data<int32_t>(), ip, outer, K, inner, k, largest_, th); break;
      case DataType::kUInt32: topk<uint32_t>(x.data<uint32_t>(), v.data<uint32_t>(), ip, outer, K, inner, k, largest_, th); break;
      case DataType::kInt64: topk<int64_t>(x.data<int64_t>(), v.data<int64_t>(), ip, outer, K, inner, k, largest_, th); break;
      case DataType::kUInt64: topk<uint64_t>(x.data<uint64_t>(), v.data<uint64_t>(), ip, outer, K, inner, k, largest_, th); break;
      case DataType::kFloat16:
      case DataType::kBFloat16: {
        Tensor f = to_float32(x);
        std::vector<float> out(static_cast<size_t>(shape_numel(os)));
        topk<float>(f.data<float>(), out.data(), ip, outer, K, inner, k, largest_, th);
        from_float32(out.data(), v);
        break;
      }
      default:
        BH_UNSUPPORTED_DTYPE(ctx.where(), dt);
    }
    return Status::ok();
  }

 private:
  int64_t axis_;
  int64_t attr_k_;
  bool k_input_;
  bool largest_;
};

// =====================================================================================
// Einsum
// =====================================================================================

// Labels: letters map to 0..51; ellipsis dims to kEll + position (right-aligned).
constexpr int kEll = 64;

struct EinsumPlan {
  std::vector<std::vector<int>> in_labels;  // per operand, per dim
  std::vector<int> out_labels;
};

Result<EinsumPlan> parse_einsum(const std::string& eq_raw, const std::vector<int>& ranks, const std::string& where) {
  std::string eq;
  for (char c : eq_raw)
    if (c != ' ' && c != '\t') eq.push_back(c);
  std::string lhs = eq, rhs;
  bool explicit_out = false;
  if (auto p = eq.find("->"); p != std::string::npos) {
    lhs = eq.substr(0, p);
    rhs = eq.substr(p + 2);
    explicit_out = true;
  }
  std::vector<std::string> terms;
  {
    size_t b = 0;
    while (true) {
      size_t c = lhs.find(',', b);
      terms.push_back(lhs.substr(b, c == std::string::npos ? std::string::npos : c - b));
      if (c == std::string::npos) break;
      b = c + 1;
    }
  }
  if (terms.size() != ranks.size())
    return invalid_argument(where + "equation '" + eq_raw + "' names " + std::to_string(terms.size()) + " operands but " +
                            std::to_string(ranks.size()) + " inputs were given");
  auto letter = [](char c) -> int {
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= 'A' && c <= 'Z') return c - 'A';
    return -1;
  };
  EinsumPlan plan;
  int max_ell = 0;
  std::vector<int> counts(52, 0);
  for (size_t t = 0; t < terms.size(); ++t) {
    const std::string& s = terms[t];
    std::vector<int> letters_before, letters_after;
    bool has_ell = false;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s.compare(i, 3, "...") == 0) {
        if (has_ell) return invalid_argument(where + "equation '" + eq_raw + "' has two ellipses in one operand");
        has_ell = true;
        i += 2;
        continue;
      }
      int l = letter(s[i]);
      if (l < 0) return invalid_argument(where + "equation '" + eq_raw + "' has invalid character '" + s[i] + "'");
      (has_ell ? letters_after : letters_before).push_back(l);
      counts[l]++;
    }
    int nl = static_cast<int>(letters_before.size() + letters_after.size());
    int ell = ranks[t] - nl;
    if (ell < 0 || (!has_ell && ell != 0))
      return invalid_argument(where + "operand " + std::to_string(t) + " has rank " + std::to_string(ranks[t]) +
                              " but equation term '" + s + "' names " + std::to_string(nl) + " dimensions");
    max_ell = std::max(max_ell, ell);
    std::vector<int> labels = letters_before;
    for (int e = 0; e < ell; ++e) labels.push_back(-1 - e);  // placeholder: fixed below
    labels.insert(labels.end(), letters_after.begin(), letters_after.end());
    plan.in_labels.push_back(labels);
  }
  // Right-align ellipsis dims: operand with `ell` dims gets kEll + (max_ell - ell) ...
  for (size_t t = 0; t < terms.size(); ++t) {
    int ell = 0;
    for (int l : plan.in_labels[t])
      if (l < 0) ++ell;
    for (int& l : plan.in_labels[t])
      if (l < 0) l = kEll + (max_ell - ell) + (-1 - l);
  }
  if (explicit_out) {
    bool has_ell = false;
    for (size_t i = 0; i < rhs.size(); ++i) {
      if (rhs.compare(i, 3, "...") == 0) {
        has_ell = true;
        for (int e = 0; e < max_ell; ++e) plan.out_labels.push_back(kEll + e);
        i += 2;
        continue;
      }
      int l = letter(rhs[i]);
      if (l < 0) return invalid_argument(where + "equation '" + eq_raw + "' has invalid output character '" + rhs[i] + "'");
      if (counts[l] == 0) return invalid_argument(where + "output label '" + rhs[i] + "' does not appear in any input");
      if (std::find(plan.out_labels.begin(), plan.out_labels.end(), l) != plan.out_labels.end())
        return invalid_argument(where + "output label '" + rhs[i] + "' appears twice");
      plan.out_labels.push_back(l);
    }
    (void)has_ell;  // ellipsis dims left out of an explicit output are summed over
  } else {
    for (int e = 0; e < max_ell; ++e) plan.out_labels.push_back(kEll + e);
    for (int l = 0; l < 52; ++l)
      if (counts[l] == 1) plan.out_labels.push_back(l);
  }
  return plan;
}

template <typename T>
void einsum_run(const std::vector<const T*>& ops, const std::vector<std::vector<int64_t>>& out_strides,
                const std::vector<std::vector<int64_t>>& sum_strides, const Shape& out_dims, const Shape& sum_dims, T* y,
                int threads) {
  int64_t nout = shape_numel(out_dims), nsum = shape_numel(sum_dims);
  size_t nops = ops.size();
  int ro = static_cast<int>(out_dims.size()), rs = static_cast<int>(sum_dims.size());
  int64_t inner = rs ? sum_dims[rs - 1] : 1;
  int64_t nsum_outer = inner ? nsum / inner : 0;
  parallel_for(threads, nout, std::max<int64_t>(1, 4096 / std::max<int64_t>(nsum, 1)), [&](int64_t b, int64_t e) {
    std::vector<int64_t> oidx(ro), sidx(rs), base(nops), off(nops);
    for (int64_t o = b; o < e; ++o) {
      int64_t rem = o;
      for (int d = ro - 1; d >= 0; --d) {
        oidx[d] = rem % out_dims[d];
        rem /= out_dims[d];
      }
      for (size_t k = 0; k < nops; ++k) {
        base[k] = 0;
        for (int d = 0; d < ro; ++d) base[k] += oidx[d] * out_strides[k][d];
      }
      T acc = 0;
      if (nsum == 0) {
        y[o] = acc;
        continue;
      }
      std::fill(sidx.begin(), sidx.end(), 0);
      for (int64_t so = 0; so < nsum_outer; ++so) {
        for (size_t k = 0; k < nops; ++k) {
          off[k] = base[k];
          for (int d = 0; d < rs - 1; ++d) off[k] += sidx[d] * sum_strides[k][d];
        }
        if (nops == 1) {
          int64_t st = rs ? sum_strides[0][rs - 1] : 0;
          for (int64_t i = 0; i < inner; ++i) acc += ops[0][off[0] + i * st];
        } else if (nops == 2) {
          int64_t s0 = rs ? sum_strides[0][rs - 1] : 0, s1 = rs ? sum_strides[1][rs - 1] : 0;
          for (int64_t i = 0; i < inner; ++i) acc += ops[0][off[0] + i * s0] * ops[1][off[1] + i * s1];
        } else {
          for (int64_t i = 0; i < inner; ++i) {
            T p = 1;
            for (size_t k = 0; k < nops; ++k) p *= ops[k][off[k] + i * (rs ? sum_strides[k][rs - 1] : 0)];
            acc += p;
          }
        }
        for (int d = rs - 2; d >= 0; --d) {
          if (++sidx[d] < sum_dims[d]) break;
          sidx[d] = 0;
        }
      }
      y[o] = acc;
    }
  });
}

class EinsumKernel final : public Kernel {
 public:
  explicit EinsumKernel(std::string eq) : eq_(std::move(eq)) {}

  Status compute(KernelContext& ctx) const override {
    int n = ctx.num_inputs();
    if (n < 1) return invalid_argument(ctx.where() + "needs at least one input");
    std::vector<const Tensor*> ins;
    std::vector<int> ranks;
    for (int i = 0; i < n; ++i) {
      BH_ASSIGN_OR_RETURN(const Tensor* t, required_input(ctx, i, "Inputs"));
      if (!ins.empty() && t->dtype() != ins[0]->dtype())
        return invalid_argument(ctx.where() + "inputs have different element types");
      ins.push_back(t);
      ranks.push_back(t->rank());
    }
    BH_ASSIGN_OR_RETURN(EinsumPlan plan, parse_einsum(eq_, ranks, ctx.where()));
    // Sizes per label.
    std::vector<int64_t> size(kEll + 64, -1);
    for (int k = 0; k < n; ++k)
      for (int d = 0; d < ranks[k]; ++d) {
        int l = plan.in_labels[k][d];
        int64_t s = ins[k]->shape()[d];
        if (size[l] < 0 || size[l] == 1) size[l] = s;
        else if (s != size[l] && !(l >= kEll && s == 1))
          return invalid_argument(ctx.where() + "dimension " + std::to_string(d) + " of input " + std::to_string(k) +
                                  " has size " + std::to_string(s) + " but the same label elsewhere has " +
                                  std::to_string(size[l]));
      }
    std::vector<int> sum_labels;
    for (int l = 0; l < kEll + 64; ++l) {
      if (size[l] < 0) continue;
      if (std::find(plan.out_labels.begin(), plan.out_labels.end(), l) == plan.out_labels.end()) sum_labels.push_back(l);
    }
    Shape out_dims, sum_dims;
    for (int l : plan.out_labels) out_dims.push_back(size[l] < 0 ? 1 : size[l]);
    for (int l : sum_labels) sum_dims.push_back(size[l]);
    auto strides_for = [&](int k, const std::vector<int>& labels) {
      auto st = strides_of(ins[k]->shape());
      std::vector<int64_t> r(labels.size(), 0);
      for (size_t j = 0; j < labels.size(); ++j)
        for (int d = 0; d < ranks[k]; ++d)
          if (plan.in_labels[k][d] == labels[j] && ins[k]->shape()[d] != 1) r[j] += st[d];
      return r;
    };
    std::vector<std::vector<int64_t>> ost, sst;
    for (int k = 0; k < n; ++k) {
      ost.push_back(strides_for(k, plan.out_labels));
      sst.push_back(strides_for(k, sum_labels));
    }
    DataType dt = ins[0]->dtype();
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, dt, out_dims));
    if (y.numel() == 0) return Status::ok();
    int th = ctx.threads();
    auto go = [&](auto tag, const std::vector<Tensor>& srcs, void* out) {
      using T = decltype(tag);
      std::vector<const T*> ops;
      for (const Tensor& s : srcs) ops.push_back(s.data<T>());
      einsum_run<T>(ops, ost, sst, out_dims, sum_dims, static_cast<T*>(out), th);
    };
    std::vector<Tensor> srcs;
    for (const Tensor* t : ins) srcs.push_back(*t);
    switch (dt) {
      case DataType::kFloat32: go(float{}, srcs, y.raw()); break;
      case DataType::kFloat64: go(double{}, srcs, y.raw()); break;
      case DataType::kInt32: go(int32_t{}, srcs, y.raw()); break;
      case DataType::kInt64: go(int64_t{}, srcs, y.raw()); break;
      case DataType::kUInt32: go(uint32_t{}, srcs, y.raw()); break;
      case DataType::kUInt64: go(uint64_t{}, srcs, y.raw()); break;
      case DataType::kFloat16:
      case DataType::kBFloat16: {
        std::vector<Tensor> fs;
        for (const Tensor* t : ins) fs.push_back(to_float32(*t));
        std::vector<float> out(static_cast<size_t>(y.numel()));
        go(float{}, fs, out.data());
        from_float32(out.data(), y);
        break;
      }
      default:
        BH_UNSUPPORTED_DTYPE(ctx.where(), dt);
    }
    return Status::ok();
  }

 private:
  std::string eq_;
};

// =====================================================================================
// SwiGLU: Y = A * sigmoid(alpha * A) * B
// =====================================================================================

class SwiGluKernel final : public Kernel {
 public:
  explicit SwiGluKernel(float alpha) : alpha_(alpha) {}

  template <typename T>
  void run(const T* a, const T* b, T* y, int64_t n, int threads) const {
    T al = static_cast<T>(alpha_);
    parallel_for(threads, n, 16384, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) y[i] = a[i] / (T(1) + redutil::exp_ps(-al * a[i])) * b[i];
    });
  }

  Status compute(KernelContext& ctx) const override {
    BH_ASSIGN_OR_RETURN(const Tensor* ap, required_input(ctx, 0, "A"));
    BH_ASSIGN_OR_RETURN(const Tensor* bp, required_input(ctx, 1, "B"));
    if (ap->shape() != bp->shape() || ap->dtype() != bp->dtype())
      return invalid_argument(ctx.where() + "A " + ap->describe() + " and B " + bp->describe() +
                              " must have the same shape and element type");
    DataType dt = ap->dtype();
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, dt, ap->shape()));
    int64_t n = ap->numel();
    if (n == 0) return Status::ok();
    switch (dt) {
      case DataType::kFloat32: run<float>(ap->data<float>(), bp->data<float>(), y.data<float>(), n, ctx.threads()); break;
      case DataType::kFloat64: run<double>(ap->data<double>(), bp->data<double>(), y.data<double>(), n, ctx.threads()); break;
      case DataType::kFloat16:
      case DataType::kBFloat16: {
        Tensor a = to_float32(*ap), b = to_float32(*bp);
        std::vector<float> out(static_cast<size_t>(n));
        run<float>(a.data<float>(), b.data<float>(), out.data(), n, ctx.threads());
        from_float32(out.data(), y);
        break;
      }
      default:
        BH_UNSUPPORTED_DTYPE(ctx.where(), dt);
    }
    return Status::ok();
  }

 private:
  float alpha_;
};

// =====================================================================================
// RotaryEmbedding (opset 23)
// =====================================================================================

class RotaryKernel final : public Kernel {
 public:
  RotaryKernel(bool interleaved, int64_t rot_dim, int64_t num_heads)
      : interleaved_(interleaved), rot_dim_(rot_dim), num_heads_(num_heads) {}

  Status compute(KernelContext& ctx) const override {
    BH_ASSIGN_OR_RETURN(const Tensor* xp, required_input(ctx, 0, "X"));
    BH_ASSIGN_OR_RETURN(const Tensor* cp, required_input(ctx, 1, "cos_cache"));
    BH_ASSIGN_OR_RETURN(const Tensor* sp, required_input(ctx, 2, "sin_cache"));
    const Tensor* pp = ctx.input(3);
    const Tensor& x = *xp;
    DataType dt = x.dtype();
    if (!dtype_is_float(dt)) BH_UNSUPPORTED_DTYPE(ctx.where(), dt);
    if (cp->dtype() != dt || sp->dtype() != dt)
      return invalid_argument(ctx.where() + "cos_cache and sin_cache must have the input's element type");
    int64_t B, S, H, D;
    bool four = x.rank() == 4;
    if (four) {
      B = x.shape()[0];
      H = x.shape()[1];
      S = x.shape()[2];
      D = x.shape()[3];
    } else if (x.rank() == 3) {
      if (num_heads_ <= 0) return invalid_argument(ctx.where() + "num_heads is required for 3-D input");
      B = x.shape()[0];
      S = x.shape()[1];
      H = num_heads_;
      if (x.shape()[2] % H != 0)
        return invalid_argument(ctx.where() + "hidden size " + std::to_string(x.shape()[2]) + " is not divisible by num_heads " +
                                std::to_string(H));
      D = x.shape()[2] / H;
    } else {
      return invalid_argument(ctx.where() + "input must be 3-D or 4-D, got " + shape_to_string(x.shape()));
    }
    int64_t rot = rot_dim_ > 0 ? rot_dim_ : D;
    if (rot > D || rot % 2 != 0)
      return invalid_argument(ctx.where() + "rotary_embedding_dim " + std::to_string(rot) + " is invalid for head size " +
                              std::to_string(D));
    int64_t half = rot / 2;
    std::vector<int64_t> pos;
    int64_t max_pos = 0;
    if (pp) {
      if (pp->rank() != 2 || pp->shape()[0] != B || pp->shape()[1] != S)
        return invalid_argument(ctx.where() + "position_ids must have shape [" + std::to_string(B) + "," + std::to_string(S) +
                                "], got " + shape_to_string(pp->shape()));
      if (pp->dtype() != DataType::kInt64 && pp->dtype() != DataType::kInt32)
        return invalid_argument(ctx.where() + "position_ids must be int64");
      pos = read_int_tensor(*pp);
      if (cp->rank() != 2 || sp->shape() != cp->shape() || cp->shape()[1] != half)
        return invalid_argument(ctx.where() + "cos_cache/sin_cache must have shape [max_position, " + std::to_string(half) +
                                "], got " + shape_to_string(cp->shape()) + " and " + shape_to_string(sp->shape()));
      max_pos = cp->shape()[0];
      for (int64_t p : pos)
        if (p < 0 || p >= max_pos)
          return invalid_argument(ctx.where() + "position id " + std::to_string(p) + " is out of range [0, " +
                                  std::to_string(max_pos) + ")");
    } else {
      if (cp->rank() != 3 || sp->shape() != cp->shape() || cp->shape()[0] != B || cp->shape()[1] != S ||
          cp->shape()[2] != half)
        return invalid_argument(ctx.where() + "without position_ids, cos_cache/sin_cache must have shape [" +
                                std::to_string(B) + "," + std::to_string(S) + "," + std::to_string(half) + "], got " +
                                shape_to_string(cp->shape()));
    }
    Tensor xf = to_float32(x), cf = to_float32(*cp), sf = to_float32(*sp);
    const float* xd = xf.data<float>();
    const float* cd = cf.data<float>();
    const float* sd = sf.data<float>();
    std::vector<float> out(static_cast<size_t>(x.numel()));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s) {
        int64_t crow = pp ? pos[b * S + s] : b * S + s;
        const float* c = cd + crow * half;
        const float* sn = sd + crow * half;
        for (int64_t h = 0; h < H; ++h) {
          int64_t off = four ? ((b * H + h) * S + s) * D : (b * S + s) * H * D + h * D;
          const float* xi = xd + off;
          float* yo = out.data() + off;
          if (interleaved_) {
            for (int64_t j = 0; j < half; ++j) {
              float x1 = xi[2 * j], x2 = xi[2 * j + 1];
              yo[2 * j] = c[j] * x1 - sn[j] * x2;
              yo[2 * j + 1] = sn[j] * x1 + c[j] * x2;
            }
          } else {
            for (int64_t j = 0; j < half; ++j) {
              float x1 = xi[j], x2 = xi[half + j];
              yo[j] = c[j] * x1 - sn[j] * x2;
              yo[half + j] = sn[j] * x1 + c[j] * x2;
            }
          }
          for (int64_t j = rot; j < D; ++j) yo[j] = xi[j];
        }
      }
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, dt, x.shape()));
    from_float32(out.data(), y);
    return Status::ok();
  }

 private:
  bool interleaved_;
  int64_t rot_dim_;
  int64_t num_heads_;
};

// =====================================================================================
// Attention (opset 23, 24)
// =====================================================================================

class AttentionKernel final : public Kernel {
 public:
  struct Attrs {
    bool is_causal = false;
    int64_t q_heads = 0, kv_heads = 0;
    int64_t qk_mode = 0;
    bool has_scale = false;
    float scale = 1;
    float softcap = 0;
  };
  explicit AttentionKernel(Attrs a) : a_(a) {}

  Status compute(KernelContext& ctx) const override {
    const std::string w = ctx.where();
    BH_ASSIGN_OR_RETURN(const Tensor* qp, required_input(ctx, 0, "Q"));
    BH_ASSIGN_OR_RETURN(const Tensor* kp, required_input(ctx, 1, "K"));
    BH_ASSIGN_OR_RETURN(const Tensor* vp, required_input(ctx, 2, "V"));
    const Tensor* mp = ctx.input(3);
    const Tensor* pkp = ctx.input(4);
    const Tensor* pvp = ctx.input(5);
    const Tensor* nzp = ctx.input(6);
    DataType dt = qp->dtype();
    if (!dtype_is_float(dt)) BH_UNSUPPORTED_DTYPE(w, dt);
    if (kp->dtype() != dt || vp->dtype() != dt) return invalid_argument(w + "Q, K and V must have the same element type");
    int r = qp->rank();
    if ((r != 3 && r != 4) || kp->rank() != r || vp->rank() != r)
      return invalid_argument(w + "Q, K and V must all be 3-D or all 4-D, got " + shape_to_string(qp->shape()) + ", " +
                              shape_to_string(kp->shape()) + ", " + shape_to_string(vp->shape()));
    int64_t B = qp->shape()[0], Hq, Hkv, Sq, Skv, Dh, Dv;
    if (r == 4) {
      Hq = qp->shape()[1];
      Sq = qp->shape()[2];
      Dh = qp->shape()[3];
      Hkv = kp->shape()[1];
      Skv = kp->shape()[2];
      Dv = vp->shape()[3];
      if (kp->shape()[3] != Dh || vp->shape()[1] != Hkv || vp->shape()[2] != Skv)
        return invalid_argument(w + "K " + shape_to_string(kp->shape()) + " and V " + shape_to_string(vp->shape()) +
                                " do not match Q " + shape_to_string(qp->shape()));
    } else {
      if (a_.q_heads <= 0 || a_.kv_heads <= 0)
        return invalid_argument(w + "q_num_heads and kv_num_heads are required for 3-D inputs");
      Hq = a_.q_heads;
      Hkv = a_.kv_heads;
      Sq = qp->shape()[1];
      Skv = kp->shape()[1];
      if (qp->shape()[2] % Hq || kp->shape()[2] % Hkv || vp->shape()[2] % Hkv)
        return invalid_argument(w + "hidden sizes are not divisible by the head counts");
      Dh = qp->shape()[2] / Hq;
      Dv = vp->shape()[2] / Hkv;
      if (kp->shape()[2] / Hkv != Dh || vp->shape()[1] != Skv)
        return invalid_argument(w + "K " + shape_to_string(kp->shape()) + " and V " + shape_to_string(vp->shape()) +
                                " do not match Q " + shape_to_string(qp->shape()));
    }
    if (kp->shape()[0] != B || vp->shape()[0] != B) return invalid_argument(w + "Q, K and V batch sizes differ");
    if (Hkv <= 0 || Hq % Hkv != 0)
      return invalid_argument(w + "q_num_heads " + std::to_string(Hq) + " is not a multiple of kv_num_heads " +
                              std::to_string(Hkv));
    int64_t P = 0;
    if ((pkp == nullptr) != (pvp == nullptr)) return invalid_argument(w + "past_key and past_value must be given together");
    if (pkp) {
      if (pkp->rank() != 4 || pkp->shape()[0] != B || pkp->shape()[1] != Hkv || pkp->shape()[3] != Dh)
        return invalid_argument(w + "past_key must have shape [" + std::to_string(B) + "," + std::to_string(Hkv) + ",P," +
                                std::to_string(Dh) + "], got " + shape_to_string(pkp->shape()));
      P = pkp->shape()[2];
      if (pvp->rank() != 4 || pvp->shape()[0] != B || pvp->shape()[1] != Hkv || pvp->shape()[2] != P ||
          pvp->shape()[3] != Dv)
        return invalid_argument(w + "past_value " + shape_to_string(pvp->shape()) + " does not match past_key " +
                                shape_to_string(pkp->shape()));
      if (pkp->dtype() != dt || pvp->dtype() != dt) return invalid_argument(w + "past_key/past_value element type differs from Q");
    }
    int64_t T = P + Skv;
    std::vector<int64_t> nonpad;
    if (nzp) {
      if (nzp->dtype() != DataType::kInt64 && nzp->dtype() != DataType::kInt32)
        return invalid_argument(w + "nonpad_kv_seqlen must be int64");
      if (nzp->numel() != B)
        return invalid_argument(w + "nonpad_kv_seqlen must have " + std::to_string(B) + " entries, got " +
                                shape_to_string(nzp->shape()));
      nonpad = read_int_tensor(*nzp);
    }
    // Mask broadcast to [B, Hq, Sq, Tm] with Tm <= T (padded with -inf past Tm).
    std::vector<int64_t> mst(4, 0);
    int64_t Tm = 0;
    bool mask_bool = false;
    Tensor mf;
    if (mp) {
      int mr = mp->rank();
      if (mr < 1 || mr > 4) return invalid_argument(w + "attn_mask must have rank 1 to 4, got " + shape_to_string(mp->shape()));
      Shape ms(4 - mr, 1);
      ms.insert(ms.end(), mp->shape().begin(), mp->shape().end());
      const int64_t want[3] = {B, Hq, Sq};
      for (int d = 0; d < 3; ++d)
        if (ms[d] != 1 && ms[d] != want[d])
          return invalid_argument(w + "attn_mask " + shape_to_string(mp->shape()) + " does not broadcast to [" +
                                  std::to_string(B) + "," + std::to_string(Hq) + "," + std::to_string(Sq) + "," +
                                  std::to_string(T) + "]");
      Tm = ms[3];
      if (Tm > T) return invalid_argument(w + "attn_mask last dimension " + std::to_string(Tm) + " exceeds total sequence length " + std::to_string(T));
      auto st = strides_of(ms);
      for (int d = 0; d < 4; ++d) mst[d] = ms[d] == 1 ? 0 : st[d];
      if (mp->dtype() == DataType::kBool) {
        mask_bool = true;
        mf = *mp;
      } else if (dtype_is_float(mp->dtype())) {
        mf = to_float32(*mp);
      } else {
        return invalid_argument(w + "attn_mask must be bool or the type of Q, got " + dtype_name(mp->dtype()));
      }
    }
    Tensor qf = to_float32(*qp), kf = to_float32(*kp), vf = to_float32(*vp);
    Tensor pkf, pvf;
    if (pkp) {
      pkf = to_float32(*pkp);
      pvf = to_float32(*pvp);
    }
    // present K/V in [B, Hkv, T, D] layout.
    std::vector<float> Kp(static_cast<size_t>(B * Hkv * T * Dh)), Vp(static_cast<size_t>(B * Hkv * T * Dv));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < Hkv; ++h) {
        for (int64_t t = 0; t < T; ++t) {
          float* kd = Kp.data() + ((b * Hkv + h) * T + t) * Dh;
          float* vd = Vp.data() + ((b * Hkv + h) * T + t) * Dv;
          const float *ks, *vs;
          if (t < P) {
            ks = pkf.data<float>() + ((b * Hkv + h) * P + t) * Dh;
            vs = pvf.data<float>() + ((b * Hkv + h) * P + t) * Dv;
          } else {
            int64_t s = t - P;
            ks = kf.data<float>() + (r == 4 ? ((b * Hkv + h) * Skv + s) * Dh : (b * Skv + s) * Hkv * Dh + h * Dh);
            vs = vf.data<float>() + (r == 4 ? ((b * Hkv + h) * Skv + s) * Dv : (b * Skv + s) * Hkv * Dv + h * Dv);
          }
          std::copy(ks, ks + Dh, kd);
          std::copy(vs, vs + Dv, vd);
        }
      }
    float scale = a_.has_scale ? a_.scale : 1.0f / std::sqrt(static_cast<float>(Dh));
    int64_t group = Hq / Hkv;
    bool want_qk = ctx.output_wanted(3);
    std::vector<float> Y(static_cast<size_t>(B * Hq * Sq * Dv));
    std::vector<float> QK(want_qk ? static_cast<size_t>(B * Hq * Sq * T) : 0);
    const float* qd = qf.data<float>();
    const float ninf = -std::numeric_limits<float>::infinity();
    parallel_for(ctx.threads(), B * Hq, 1, [&](int64_t bb, int64_t be) {
      std::vector<float> s(static_cast<size_t>(T)), raw(static_cast<size_t>(T));
      for (int64_t bh = bb; bh < be; ++bh) {
        int64_t b = bh / Hq, h = bh % Hq, hk = h / group;
        const float* Kb = Kp.data() + (b * Hkv + hk) * T * Dh;
        const float* Vb = Vp.data() + (b * Hkv + hk) * T * Dv;
        for (int64_t i = 0; i < Sq; ++i) {
          const float* q = qd + (r == 4 ? ((b * Hq + h) * Sq + i) * Dh : (b * Sq + i) * Hq * Dh + h * Dh);
          for (int64_t j = 0; j < T; ++j) {
            const float* k = Kb + j * Dh;
            float acc = 0;
            for (int64_t d = 0; d < Dh; ++d) acc += q[d] * k[d];
            acc *= scale;
            raw[j] = acc;
            if (a_.softcap > 0) acc = a_.softcap * std::tanh(acc / a_.softcap);
            s[j] = acc;
          }
          float* qk = want_qk ? QK.data() + ((b * Hq + h) * Sq + i) * T : nullptr;
          if (qk && a_.qk_mode == 0) std::copy(raw.begin(), raw.end(), qk);
          if (qk && a_.qk_mode == 1) std::copy(s.begin(), s.end(), qk);
          // Bias: mask, causal, padding.
          int64_t causal_off = 0;
          if (a_.is_causal) causal_off = pkp ? P : (nzp ? nonpad[b] - Sq : 0);
          for (int64_t j = 0; j < T; ++j) {
            float bias = 0;
            if (mp) {
              if (j >= Tm) {
                bias = ninf;
              } else {
                int64_t mo = b * mst[0] + h * mst[1] + i * mst[2] + j * mst[3];
                if (mask_bool) bias = mf.data<uint8_t>()[mo] ? 0.0f : ninf;
                else bias = mf.data<float>()[mo];
              }
            }
            if (a_.is_causal && j > i + causal_off) bias = ninf;
            if (nzp && j >= nonpad[b]) bias = ninf;
            s[j] += bias;
          }
          if (qk && a_.qk_mode == 2) std::copy(s.begin(), s.end(), qk);
          float m = ninf;
          for (int64_t j = 0; j < T; ++j) m = std::max(m, s[j]);
          float sum = 0;
          if (m == ninf) {
            std::fill(s.begin(), s.end(), 0.0f);
          } else {
            sum = redutil::exp_sub_sum(s.data(), m, s.data(), T);
            float inv = 1.0f / sum;
            for (int64_t j = 0; j < T; ++j) s[j] *= inv;
          }
          if (qk && a_.qk_mode == 3) std::copy(s.begin(), s.end(), qk);
          float* y = Y.data() + ((b * Hq + h) * Sq + i) * Dv;
          std::fill(y, y + Dv, 0.0f);
          for (int64_t j = 0; j < T; ++j) {
            float p = s[j];
            if (p == 0.0f) continue;
            const float* v = Vb + j * Dv;
            for (int64_t d = 0; d < Dv; ++d) y[d] += p * v[d];
          }
        }
      }
    });
    // Outputs.
    if (r == 4) {
      BH_ASSIGN_OR_RETURN(Tensor yt, ctx.allocate_output(0, dt, Shape{B, Hq, Sq, Dv}));
      from_float32(Y.data(), yt);
    } else {
      std::vector<float> y3(Y.size());
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < Hq; ++h)
          for (int64_t i = 0; i < Sq; ++i)
            std::copy(Y.data() + ((b * Hq + h) * Sq + i) * Dv, Y.data() + ((b * Hq + h) * Sq + i + 1) * Dv,
                      y3.data() + (b * Sq + i) * Hq * Dv + h * Dv);
      BH_ASSIGN_OR_RETURN(Tensor yt, ctx.allocate_output(0, dt, Shape{B, Sq, Hq * Dv}));
      from_float32(y3.data(), yt);
    }
    if (ctx.output_wanted(1)) {
      BH_ASSIGN_OR_RETURN(Tensor t, ctx.allocate_output(1, dt, Shape{B, Hkv, T, Dh}));
      from_float32(Kp.data(), t);
    }
    if (ctx.output_wanted(2)) {
      BH_ASSIGN_OR_RETURN(Tensor t, ctx.allocate_output(2, dt, Shape{B, Hkv, T, Dv}));
      from_float32(Vp.data(), t);
    }
    if (want_qk) {
      BH_ASSIGN_OR_RETURN(Tensor t, ctx.allocate_output(3, dt, Shape{B, Hq, Sq, T}));
      from_float32(QK.data(), t);
    }
    return Status::ok();
  }

 private:
  Attrs a_;
};

}  // namespace

void register_misc_kernels(KernelTable& t) {
  auto cumulative = [](bool product) {
    return [product](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
      return std::unique_ptr<Kernel>(std::make_unique<CumulativeKernel>(
          info.node.attr_int("exclusive", 0) != 0, info.node.attr_int("reverse", 0) != 0, product));
    };
  };
  t.add("CumSum", 11, cumulative(false));
  t.add("CumProd", 26, cumulative(true));
  t.add("Det", 11, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    if (!info.input_types.empty() && info.input_types[0] != DataType::kUndefined && !dtype_is_float(info.input_types[0]))
      return unsupported(info.where() + "Det takes floating-point matrices, not " + dtype_name(info.input_types[0]));
    return make_kernel(det_compute);
  });
  for (auto [op, w] : {std::pair{"HannWindow", Window::kHann}, std::pair{"HammingWindow", Window::kHamming},
                       std::pair{"BlackmanWindow", Window::kBlackman}}) {
    Window kind = w;
    t.add(op, 17, [kind](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
      auto out = static_cast<DataType>(info.node.attr_int("output_datatype", 1));
      if (!dtype_is_known(static_cast<int32_t>(out)) || out == DataType::kString || out == DataType::kBool)
        return unsupported(info.where() + "output_datatype " + std::to_string(static_cast<int>(out)) + " is not supported");
      bool periodic = info.node.attr_int("periodic", 1) != 0;
      return make_kernel([kind, periodic, out](KernelContext& ctx) { return window_compute(ctx, kind, periodic, out); });
    });
  }
  t.add("MelWeightMatrix", 17, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    auto out = static_cast<DataType>(info.node.attr_int("output_datatype", 1));
    if (!dtype_is_known(static_cast<int32_t>(out)) || out == DataType::kString || out == DataType::kBool)
      return unsupported(info.where() + "output_datatype " + std::to_string(static_cast<int>(out)) + " is not supported");
    return make_kernel([out](KernelContext& ctx) { return mel_weight_matrix_compute(ctx, out); });
  });
  for (bool softmax : {false, true})
    t.add(softmax ? "SoftmaxCrossEntropyLoss" : "NegativeLogLikelihoodLoss", 12,
          [softmax](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
            BH_ASSIGN_OR_RETURN(LossAttrs a, loss_attrs(info));
            return make_kernel([a, softmax](KernelContext& ctx) { return loss_compute(ctx, a, softmax); });
          });
  t.add("MatMulInteger", 10, [](const KernelInfo& info) { return make_int8_matmul(info, Int8MatMulKind::kInteger, matmul_integer_compute); });
  t.add("Binarizer", 1, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    float threshold = info.node.attr_float("threshold", 0.0f);
    return make_kernel([threshold](KernelContext& ctx) { return binarizer_compute(ctx, threshold); });
  }, "ai.onnx.ml");
  t.add("ArrayFeatureExtractor", 1, [](const KernelInfo&) -> Result<std::unique_ptr<Kernel>> {
    return make_kernel(array_feature_extractor_compute);
  }, "ai.onnx.ml");
  t.add("TensorScatter", 24, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    std::string mode = info.node.attr_string("mode", "linear");
    if (mode != "linear" && mode != "circular")
      return invalid_argument(info.where() + "mode must be linear or circular, got '" + mode + "'");
    int64_t axis = info.node.attr_int("axis", -2);
    return make_kernel([axis, mode](KernelContext& ctx) { return tensor_scatter_compute(ctx, axis, mode == "circular"); });
  });
  t.add("GridSample", 16, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    GridSampleAttrs a;
    const bool v20 = info.node.opset >= 20;
    std::string mode = info.node.attr_string("mode", v20 ? "linear" : "bilinear");
    if (mode == "nearest") a.mode = GridSampleAttrs::Mode::kNearest;
    else if (mode == (v20 ? "linear" : "bilinear")) a.mode = GridSampleAttrs::Mode::kLinear;
    else if (mode == (v20 ? "cubic" : "bicubic")) a.mode = GridSampleAttrs::Mode::kCubic;
    else return invalid_argument(info.where() + "unknown mode '" + mode + "'");
    std::string pad = info.node.attr_string("padding_mode", "zeros");
    if (pad == "border") a.pad = GridSampleAttrs::Pad::kBorder;
    else if (pad == "reflection") a.pad = GridSampleAttrs::Pad::kReflection;
    else if (pad != "zeros") return invalid_argument(info.where() + "unknown padding_mode '" + pad + "'");
    a.align_corners = info.node.attr_int("align_corners", 0) != 0;
    return make_kernel([a](KernelContext& ctx) { return grid_sample_compute(ctx, a); });
  });
  t.add("Col2Im", 18, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    Col2ImAttrs a{info.node.attr_ints("dilations"), info.node.attr_ints("pads"), info.node.attr_ints("strides")};
    for (auto* v : {&a.dilations, &a.pads, &a.strides})
      for (int64_t e : *v)
        if (e < 0 || e > (int64_t{1} << 31)) return invalid_argument(info.where() + "dilations, pads and strides must be in [0, 2^31]");
    return make_kernel([a](KernelContext& ctx) { return col2im_compute(ctx, a); });
  });
  t.add("AffineGrid", 20, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    bool align = info.node.attr_int("align_corners", 0) != 0;
    return make_kernel([align](KernelContext& ctx) { return affine_grid_compute(ctx, align); });
  });
  t.add("Unique", 11, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    bool has_axis = info.node.has_attr("axis"), sorted = info.node.attr_int("sorted", 1) != 0;
    int64_t axis = info.node.attr_int("axis", 0);
    return make_kernel([=](KernelContext& ctx) { return unique_compute(ctx, has_axis, axis, sorted); });
  });
  t.add("MaxUnpool", 9, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    UnpoolAttrs a{info.node.attr_ints("kernel_shape"), info.node.attr_ints("pads"), info.node.attr_ints("strides")};
    if (a.kernel.empty()) return invalid_model(info.where() + "missing required attribute kernel_shape");
    for (auto* v : {&a.kernel, &a.pads, &a.strides})
      for (int64_t e : *v)
        if (e < 0 || e > (int64_t{1} << 31)) return invalid_argument(info.where() + "kernel_shape, pads and strides must be in [0, 2^31]");
    if (a.pads.size() != 0 && a.pads.size() != 2 * a.kernel.size())
      return invalid_argument(info.where() + "pads must have " + std::to_string(2 * a.kernel.size()) + " values");
    return make_kernel([a](KernelContext& ctx) { return max_unpool_compute(ctx, a); });
  });
  t.add("CenterCropPad", 18, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    std::vector<int64_t> axes = info.node.attr_ints("axes");
    return make_kernel([axes](KernelContext& ctx) { return center_crop_pad_compute(ctx, axes); });
  });
  t.add("NonMaxSuppression", 10, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    int64_t center = info.node.attr_int("center_point_box", 0);
    if (center != 0 && center != 1)
      return invalid_argument(info.where() + "center_point_box must be 0 or 1, got " + std::to_string(center));
    return make_kernel([center](KernelContext& ctx) { return nms_compute(ctx, center == 1); });
  });
  t.add("BitCast", 26, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    const ir::Attribute* a = info.node.attr("to");
    if (!a || a->type != ir::AttrType::kInt) return invalid_model(info.where() + "missing required int attribute 'to'");
    auto to = static_cast<DataType>(a->i);
    if (!dtype_is_known(static_cast<int32_t>(a->i)) || to == DataType::kString || dtype_size(to) == 0)
      return unsupported(info.where() + "BitCast to element type " + std::to_string(a->i) + " is not supported");
    DataType from = info.input_types.empty() ? DataType::kUndefined : info.input_types[0];
    if (from != DataType::kUndefined && dtype_size(from) != dtype_size(to))
      return unsupported(info.where() + "BitCast from " + dtype_name(from) + " to " + dtype_name(to) +
                         ": only between element types of the same size");
    return make_kernel([to](KernelContext& ctx) { return bitcast_compute(ctx, to); });
  });

  auto topk_factory = [](bool k_input) {
    return [k_input](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
      const ir::Node& n = info.node;
      if (!k_input && !n.has_attr("k")) return invalid_argument(info.where() + "missing required attribute k");
      return std::unique_ptr<Kernel>(std::make_unique<TopKKernel>(n.attr_int("axis", -1), n.attr_int("k", 0), k_input,
                                                                  n.attr_int("largest", 1) != 0));
    };
  };
  t.add("TopK", 1, topk_factory(false));
  t.add("TopK", 10, topk_factory(true));

  t.add("Einsum", 12, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    if (!info.node.has_attr("equation")) return invalid_argument(info.where() + "missing required attribute equation");
    return std::unique_ptr<Kernel>(std::make_unique<EinsumKernel>(info.node.attr_string("equation", "")));
  });

  t.add("SwiGLU", 1, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(std::make_unique<SwiGluKernel>(info.node.attr_float("alpha", 1.0f)));
  });

  t.add("RotaryEmbedding", 23, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    const ir::Node& n = info.node;
    return std::unique_ptr<Kernel>(std::make_unique<RotaryKernel>(
        n.attr_int("interleaved", 0) != 0, n.attr_int("rotary_embedding_dim", 0), n.attr_int("num_heads", 0)));
  });

  t.add("Attention", 23, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    const ir::Node& n = info.node;
    AttentionKernel::Attrs a;
    a.is_causal = n.attr_int("is_causal", 0) != 0;
    a.q_heads = n.attr_int("q_num_heads", 0);
    a.kv_heads = n.attr_int("kv_num_heads", 0);
    a.qk_mode = n.attr_int("qk_matmul_output_mode", 0);
    if (a.qk_mode < 0 || a.qk_mode > 3)
      return invalid_argument(info.where() + "qk_matmul_output_mode must be 0..3, got " + std::to_string(a.qk_mode));
    a.has_scale = n.has_attr("scale");
    a.scale = n.attr_float("scale", 1.0f);
    a.softcap = n.attr_float("softcap", 0.0f);
    return std::unique_ptr<Kernel>(std::make_unique<AttentionKernel>(a));
  });
}

}  // namespace bulkhead::cpu
