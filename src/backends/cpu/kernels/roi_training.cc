// RoiAlign (opset 10/16/22) and the ai.onnx.preview.training optimisers Adagrad, Adam and
// Momentum (standard and Nesterov) on the CPU, all computed in double and stored in the
// inputs' element types.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_util.h"
#include "backends/cpu/kernels/cast.h"
#include "backends/cpu/kernels/type_check.h"

namespace bulkhead::cpu {
namespace {

// A floating-point tensor's elements as doubles.
Result<std::vector<double>> doubles_of(KernelContext& ctx, const Tensor& x, const std::string& what) {
  if (!dtype_is_float(x.dtype()))
    return unsupported(ctx.where() + what + " must be floating point, got " + dtype_name(x.dtype()));
  Tensor d = Tensor::host(DataType::kFloat64, x.shape());
  BH_RETURN_IF_ERROR(ew::convert_into(x, d, 1, ctx.where()));
  return std::vector<double>(d.data<double>(), d.data<double>() + d.numel());
}

// Writes `v` (y's element count, row-major) into y, converted to y's element type.
Status write_doubles(const std::vector<double>& v, const Tensor& y, const std::string& where) {
  Tensor src = Tensor::host(DataType::kFloat64, y.shape());
  std::copy(v.begin(), v.end(), src.data<double>());
  return ew::convert_into(src, y, 1, where);
}

constexpr TypeSupport kFloatTypes{ew::kFloats, true};
constexpr TypeSupport kIndexTypes{ew::kI64 | ew::kI32, false};

// =====================================================================================
// RoiAlign: X [N, C, H, W], rois [R, 4] as (x1, y1, x2, y2) in X's coordinates times
// spatial_scale, batch_indices [R] -> Y [R, C, output_height, output_width]. Each output
// bin takes a grid of sampling_ratio^2 bilinear samples (adaptive, ceil(roi size / bins)
// per axis, when 0). `avg` averages the samples; `max` takes, as the ONNX reference and
// ONNX Runtime do, the largest of the weighted corner terms w_k * X[corner_k] over all the
// bin's samples (not the largest interpolated value). half_pixel shifts the roi by -0.5
// pixel; output_half_pixel (the only behaviour before opset 16) does not and makes every
// roi at least one pixel wide and high. Samples outside [-1, H] x [-1, W] count as 0.
// =====================================================================================

struct RoiAlignAttrs {
  bool max_mode = false;
  bool half_pixel = true;
  int64_t out_h = 1, out_w = 1, sampling_ratio = 0;
  double spatial_scale = 1.0;
};

// One bilinear sample: the four corners' flat offsets in the H x W plane and their weights
// (all zero, at offset 0, for a sample outside the image: it contributes 0 * X[0]).
struct RoiSample {
  int64_t pos[4] = {0, 0, 0, 0};
  double w[4] = {0, 0, 0, 0};
};

// Samples per bin beyond which an (adaptive) grid is refused rather than computed.
constexpr int64_t kMaxSamplesPerBin = int64_t{1} << 20;

RoiSample bilinear_sample(double y, double x, int64_t H, int64_t W) {
  RoiSample s;
  if (y < -1.0 || y > double(H) || x < -1.0 || x > double(W)) return s;
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  int64_t y_lo = static_cast<int64_t>(y), x_lo = static_cast<int64_t>(x), y_hi, x_hi;
  if (y_lo >= H - 1) {
    y_hi = y_lo = H - 1;
    y = double(y_lo);
  } else {
    y_hi = y_lo + 1;
  }
  if (x_lo >= W - 1) {
    x_hi = x_lo = W - 1;
    x = double(x_lo);
  } else {
    x_hi = x_lo + 1;
  }
  const double ly = y - double(y_lo), lx = x - double(x_lo), hy = 1 - ly, hx = 1 - lx;
  s.pos[0] = y_lo * W + x_lo, s.pos[1] = y_lo * W + x_hi, s.pos[2] = y_hi * W + x_lo, s.pos[3] = y_hi * W + x_hi;
  s.w[0] = hy * hx, s.w[1] = hy * lx, s.w[2] = ly * hx, s.w[3] = ly * lx;
  return s;
}

Status roi_align_compute(KernelContext& ctx, const RoiAlignAttrs& a) {
  BH_ASSIGN_OR_RETURN(const Tensor* xp, required_input(ctx, 0, "X"));
  BH_ASSIGN_OR_RETURN(const Tensor* rp, required_input(ctx, 1, "rois"));
  BH_ASSIGN_OR_RETURN(const Tensor* bp, required_input(ctx, 2, "batch_indices"));
  const Tensor &x = *xp, &rois = *rp, &bi = *bp;
  if (x.rank() != 4) return invalid_argument(ctx.where() + "X must be [N, C, H, W], got " + x.describe());
  if (rois.rank() != 2 || rois.dim(1) != 4)
    return invalid_argument(ctx.where() + "rois must be [num_rois, 4], got " + rois.describe());
  if (bi.dtype() != DataType::kInt64 && bi.dtype() != DataType::kInt32)
    return unsupported(ctx.where() + "batch_indices must be int64 or int32, got " + dtype_name(bi.dtype()));
  const int64_t R = rois.dim(0);
  if (bi.rank() != 1 || bi.dim(0) != R)
    return invalid_argument(ctx.where() + "batch_indices must be [" + std::to_string(R) + "] (one per roi), got " + bi.describe());
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  const std::vector<int64_t> batch = read_int_tensor(bi);
  for (int64_t r = 0; r < R; ++r)
    if (batch[r] < 0 || batch[r] >= N)
      return invalid_argument(ctx.where() + "batch_indices[" + std::to_string(r) + "] = " + std::to_string(batch[r]) +
                              " is out of range for X's batch of " + std::to_string(N));
  BH_ASSIGN_OR_RETURN(const std::vector<double> xd, doubles_of(ctx, x, "X"));
  BH_ASSIGN_OR_RETURN(const std::vector<double> rd, doubles_of(ctx, rois, "rois"));
  const Shape out_shape{R, C, a.out_h, a.out_w};
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, x.dtype(), out_shape));
  if (y.numel() == 0) return Status::ok();
  if (H == 0 || W == 0)
    return invalid_argument(ctx.where() + "X has no pixels to sample, got " + x.describe());

  // Each roi's geometry, checked before any sampling.
  struct RoiGeom {
    double start_h, start_w, bin_h, bin_w;
    int64_t grid_h, grid_w;
  };
  std::vector<RoiGeom> geom(static_cast<size_t>(R));
  const double off = a.half_pixel ? 0.5 : 0.0;
  for (int64_t r = 0; r < R; ++r) {
    const double* b = rd.data() + r * 4;
    const double sw = b[0] * a.spatial_scale - off, sh = b[1] * a.spatial_scale - off;
    const double ew = b[2] * a.spatial_scale - off, eh = b[3] * a.spatial_scale - off;
    double rw = ew - sw, rh = eh - sh;
    if (!std::isfinite(sw) || !std::isfinite(sh) || !std::isfinite(rw) || !std::isfinite(rh))
      return invalid_argument(ctx.where() + "roi " + std::to_string(r) + " has a non-finite coordinate (after spatial_scale)");
    if (!a.half_pixel) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
    const double bh = rh / double(a.out_h), bw = rw / double(a.out_w);
    // A negative roi size (x2 < x1 under half_pixel) samples nothing, as in the reference.
    const double gh = a.sampling_ratio > 0 ? double(a.sampling_ratio) : std::max(0.0, std::ceil(bh));
    const double gw = a.sampling_ratio > 0 ? double(a.sampling_ratio) : std::max(0.0, std::ceil(bw));
    const double most = double(kMaxSamplesPerBin);
    if (gh > most || gw > most || gh * gw > most) {
      char grid[96];
      std::snprintf(grid, sizeof grid, "%.0f x %.0f", gh, gw);
      return unsupported(ctx.where() + "roi " + std::to_string(r) + " needs a sampling grid of " + grid +
                         " per bin; at most 2^20 samples per bin are supported");
    }
    geom[r] = {sh, sw, bh, bw, static_cast<int64_t>(gh), static_cast<int64_t>(gw)};
  }

  std::vector<double> out(static_cast<size_t>(y.numel()));
  const int64_t bins = a.out_h * a.out_w, plane = H * W;
  parallel_for(ctx.threads(), R, 1, [&](int64_t rb, int64_t re) {
    std::vector<RoiSample> s;
    for (int64_t r = rb; r < re; ++r) {
      const RoiGeom& g = geom[r];
      const int64_t per_bin = g.grid_h * g.grid_w;
      const double count = double(std::max<int64_t>(per_bin, 1));
      s.resize(static_cast<size_t>(per_bin));
      for (int64_t ph = 0; ph < a.out_h; ++ph)
        for (int64_t pw = 0; pw < a.out_w; ++pw) {
          // The bin's samples, shared by all channels.
          size_t k = 0;
          for (int64_t iy = 0; iy < g.grid_h; ++iy) {
            const double yy = g.start_h + double(ph) * g.bin_h + (double(iy) + 0.5) * g.bin_h / double(g.grid_h);
            for (int64_t ix = 0; ix < g.grid_w; ++ix) {
              const double xx = g.start_w + double(pw) * g.bin_w + (double(ix) + 0.5) * g.bin_w / double(g.grid_w);
              s[k++] = bilinear_sample(yy, xx, H, W);
            }
          }
          for (int64_t c = 0; c < C; ++c) {
            const double* img = xd.data() + (batch[r] * C + c) * plane;
            double v = 0;
            if (!a.max_mode) {
              for (int64_t i = 0; i < per_bin; ++i)
                for (int q = 0; q < 4; ++q)
                  v += s[i].w[q] * img[s[i].pos[q]];
              v /= count;
            } else {
              for (int64_t i = 0; i < per_bin; ++i) {
                double m = s[i].w[0] * img[s[i].pos[0]];
                for (int q = 1; q < 4; ++q) m = std::max(m, s[i].w[q] * img[s[i].pos[q]]);
                v = i == 0 ? m : std::max(v, m);
              }
            }
            out[static_cast<size_t>((r * C + c) * bins + ph * a.out_w + pw)] = v;
          }
        }
    }
  });
  return write_doubles(out, y, ctx.where());
}

Result<std::unique_ptr<Kernel>> make_roi_align(const KernelInfo& info) {
  const ir::Node& n = info.node;
  RoiAlignAttrs a;
  const std::string mode = n.attr_string("mode", "avg");
  if (mode == "max") a.max_mode = true;
  else if (mode != "avg") return invalid_argument(info.where() + "mode must be avg or max, got '" + mode + "'");
  // Before opset 16 there is no attribute and the behaviour is output_half_pixel's.
  const std::string ctm = n.attr_string("coordinate_transformation_mode", n.opset >= 16 ? "half_pixel" : "output_half_pixel");
  if (ctm == "output_half_pixel") a.half_pixel = false;
  else if (ctm != "half_pixel")
    return invalid_argument(info.where() + "coordinate_transformation_mode must be half_pixel or output_half_pixel, got '" + ctm + "'");
  a.out_h = n.attr_int("output_height", 1);
  a.out_w = n.attr_int("output_width", 1);
  if (a.out_h < 1 || a.out_w < 1 || a.out_h > (int64_t{1} << 31) || a.out_w > (int64_t{1} << 31))
    return invalid_argument(info.where() + "output_height and output_width must be in [1, 2^31], got " + std::to_string(a.out_h) +
                            " and " + std::to_string(a.out_w));
  a.sampling_ratio = n.attr_int("sampling_ratio", 0);
  if (a.sampling_ratio < 0 || a.sampling_ratio > 4096)
    return invalid_argument(info.where() + "sampling_ratio must be in [0, 4096] (0: adaptive), got " + std::to_string(a.sampling_ratio));
  a.spatial_scale = n.attr_float("spatial_scale", 1.0f);
  if (!std::isfinite(a.spatial_scale))
    return invalid_argument(info.where() + "spatial_scale must be finite, got " + std::to_string(a.spatial_scale));
  BH_RETURN_IF_ERROR(check_input_types(info, {0, 1}, kFloatTypes));
  BH_RETURN_IF_ERROR(check_input_type(info, 2, kIndexTypes));
  return make_kernel([a](KernelContext& ctx) { return roi_align_compute(ctx, a); });
}

// =====================================================================================
// ai.onnx.preview.training optimisers. Inputs: R (learning rate, scalar), T (update count,
// scalar int64), then n tensors X, n gradients G and n of each state (Adagrad: H;
// Momentum: V; Adam: V then H). Outputs: n X_new, then n of each new state, in the same
// order; trailing outputs may be left out. With g = norm_coefficient * X + G:
//   Adagrad: H' = H + g^2; X' = X - R / (1 + T * decay_factor) * g / (sqrt(H') + epsilon)
//   Momentum: V' = alpha * V + (T > 0 ? beta : 1) * g; X' = X - R * V' (standard) or
//             X - R * (g + alpha * V') (nesterov)
//   Adam: V' = alpha * V + (1 - alpha) * g; H' = beta * H + (1 - beta) * g^2;
//         R' = T > 0 ? R * sqrt(1 - beta^T) / (1 - alpha^T) : R;
//         X' = (1 - norm_coefficient_post) * (X - R' * V' / (sqrt(H') + epsilon))
// =====================================================================================

enum class Optimizer { kAdagrad, kMomentum, kNesterov, kAdam };

struct OptimizerAttrs {
  Optimizer kind = Optimizer::kAdagrad;
  double alpha = 0, beta = 0, epsilon = 0, norm = 0, norm_post = 0, decay = 0;
  int64_t n = 0;                      // tensors optimised
  std::vector<std::string> per_tensor;  // the input names of one tensor's group: X, G, states
};

Result<double> read_scalar_double(KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.numel() != 1)
    return invalid_argument(ctx.where() + what + " must hold exactly one value, got " + t.describe());
  BH_ASSIGN_OR_RETURN(std::vector<double> v, doubles_of(ctx, t, what));
  return v[0];
}

Status optimizer_compute(KernelContext& ctx, const OptimizerAttrs& a) {
  BH_ASSIGN_OR_RETURN(const Tensor* rp, required_input(ctx, 0, "R"));
  BH_ASSIGN_OR_RETURN(const Tensor* tp, required_input(ctx, 1, "T"));
  BH_ASSIGN_OR_RETURN(const double r, read_scalar_double(ctx, *rp, "R"));
  if (tp->dtype() != DataType::kInt64 && tp->dtype() != DataType::kInt32)
    return unsupported(ctx.where() + "T must be int64, got " + dtype_name(tp->dtype()));
  if (tp->numel() != 1) return invalid_argument(ctx.where() + "T must hold exactly one value, got " + tp->describe());
  const int64_t t = read_int_tensor(*tp)[0];
  if (t < 0) return invalid_argument(ctx.where() + "T (the update count) must be >= 0, got " + std::to_string(t));
  const int groups = static_cast<int>(a.per_tensor.size());  // X, G and the states
  const int64_t n = a.n;
  const double td = static_cast<double>(t);
  const double r_adagrad = r / (1 + td * a.decay);
  const double beta_momentum = t > 0 ? a.beta : 1.0;
  const double r_adam = t > 0 ? r * std::sqrt(1 - std::pow(a.beta, td)) / (1 - std::pow(a.alpha, td)) : r;
  for (int64_t i = 0; i < n; ++i) {
    // in[0] = X, in[1] = G, in[2..] = states.
    std::vector<const Tensor*> in(groups);
    std::vector<std::vector<double>> v(groups);
    for (int k = 0; k < groups; ++k) {
      const std::string what = a.per_tensor[k] + " of tensor " + std::to_string(i + 1);
      BH_ASSIGN_OR_RETURN(in[k], required_input(ctx, static_cast<int>(2 + k * n + i), what));
      if (k > 0 && (in[k]->shape() != in[0]->shape() || in[k]->dtype() != in[0]->dtype()))
        return invalid_argument(ctx.where() + what + " is " + in[k]->describe() + ", its " + a.per_tensor[0] + " is " +
                                in[0]->describe() + " (they must match)");
      BH_ASSIGN_OR_RETURN(v[k], doubles_of(ctx, *in[k], what));
    }
    const size_t m = v[0].size();
    // outs[0] = X_new, outs[1..] = the new states.
    std::vector<std::vector<double>> outs(groups - 1, std::vector<double>(m));
    const std::vector<double>&x = v[0], &gr = v[1];
    for (size_t e = 0; e < m; ++e) {
      const double g = a.norm * x[e] + gr[e];
      switch (a.kind) {
        case Optimizer::kAdagrad: {
          const double h = v[2][e] + g * g;
          outs[1][e] = h;
          outs[0][e] = x[e] - r_adagrad * g / (std::sqrt(h) + a.epsilon);
          break;
        }
        case Optimizer::kMomentum:
        case Optimizer::kNesterov: {
          const double vel = a.alpha * v[2][e] + beta_momentum * g;
          outs[1][e] = vel;
          outs[0][e] = a.kind == Optimizer::kMomentum ? x[e] - r * vel : x[e] - r * (g + a.alpha * vel);
          break;
        }
        case Optimizer::kAdam: {
          const double vel = a.alpha * v[2][e] + (1 - a.alpha) * g;
          const double h = a.beta * v[3][e] + (1 - a.beta) * g * g;
          outs[1][e] = vel;
          outs[2][e] = h;
          outs[0][e] = (1 - a.norm_post) * (x[e] - r_adam * vel / (std::sqrt(h) + a.epsilon));
          break;
        }
      }
    }
    for (int k = 0; k < groups - 1; ++k) {
      const int o = static_cast<int>(k * n + i);
      if (!ctx.output_wanted(o)) continue;
      const Tensor& like = *in[k == 0 ? 0 : k + 1];
      BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(o, like.dtype(), like.shape()));
      BH_RETURN_IF_ERROR(write_doubles(outs[k], y, ctx.where()));
    }
  }
  return Status::ok();
}

Result<double> required_float_attr(const KernelInfo& info, const char* name) {
  if (!info.node.has_attr(name)) return invalid_model(info.where() + "missing required attribute '" + name + "'");
  return static_cast<double>(info.node.attr_float(name, 0.0f));
}

Result<std::unique_ptr<Kernel>> make_optimizer(const KernelInfo& info, Optimizer kind) {
  const ir::Node& node = info.node;
  OptimizerAttrs a;
  a.kind = kind;
  switch (kind) {
    case Optimizer::kAdagrad:
      a.per_tensor = {"X", "G", "H"};
      a.decay = node.attr_float("decay_factor", 0.0f);
      a.epsilon = node.attr_float("epsilon", 0.0f);
      a.norm = node.attr_float("norm_coefficient", 0.0f);
      break;
    case Optimizer::kAdam:
      a.per_tensor = {"X", "G", "V", "H"};
      a.alpha = node.attr_float("alpha", 0.9f);
      a.beta = node.attr_float("beta", 0.999f);
      a.epsilon = node.attr_float("epsilon", 0.0f);
      a.norm = node.attr_float("norm_coefficient", 0.0f);
      a.norm_post = node.attr_float("norm_coefficient_post", 0.0f);
      break;
    default: {
      a.per_tensor = {"X", "G", "V"};
      BH_ASSIGN_OR_RETURN(a.alpha, required_float_attr(info, "alpha"));
      BH_ASSIGN_OR_RETURN(a.beta, required_float_attr(info, "beta"));
      BH_ASSIGN_OR_RETURN(a.norm, required_float_attr(info, "norm_coefficient"));
      if (!node.has_attr("mode")) return invalid_model(info.where() + "missing required attribute 'mode'");
      const std::string mode = node.attr_string("mode", "");
      if (mode == "nesterov") a.kind = Optimizer::kNesterov;
      else if (mode == "standard") a.kind = Optimizer::kMomentum;
      else return invalid_argument(info.where() + "mode must be standard or nesterov, got '" + mode + "'");
      break;
    }
  }
  const int groups = static_cast<int>(a.per_tensor.size());
  std::string group_names;
  for (const std::string& s : a.per_tensor) group_names += (group_names.empty() ? "" : ", ") + s;
  const int64_t rest = static_cast<int64_t>(node.inputs.size()) - 2;
  if (rest < groups || rest % groups != 0)
    return invalid_argument(info.where() + "expects R, T and then n each of " + group_names + " (2 + " + std::to_string(groups) +
                            "n inputs, n >= 1), got " + std::to_string(node.inputs.size()) + " inputs");
  a.n = rest / groups;
  const int64_t outputs = (groups - 1) * a.n;
  if (static_cast<int64_t>(node.outputs.size()) > outputs)
    return invalid_argument(info.where() + "has " + std::to_string(node.outputs.size()) + " outputs, but " + std::to_string(a.n) +
                            " optimised tensor" + (a.n == 1 ? "" : "s") + " give at most " + std::to_string(outputs));
  for (double v : {a.alpha, a.beta, a.epsilon, a.norm, a.norm_post, a.decay})
    if (!std::isfinite(v)) return invalid_argument(info.where() + "attributes must be finite, got " + std::to_string(v));
  BH_RETURN_IF_ERROR(check_input_type(info, 0, kFloatTypes));
  BH_RETURN_IF_ERROR(check_input_type(info, 1, kIndexTypes));
  for (size_t i = 2; i < node.inputs.size(); ++i) BH_RETURN_IF_ERROR(check_input_type(info, i, kFloatTypes));
  return make_kernel([a](KernelContext& ctx) { return optimizer_compute(ctx, a); });
}

}  // namespace

void register_roi_training_kernels(KernelTable& t) {
  t.add("RoiAlign", 10, make_roi_align);
  const std::string training = "ai.onnx.preview.training";
  t.add("Adagrad", 1, [](const KernelInfo& info) { return make_optimizer(info, Optimizer::kAdagrad); }, training);
  t.add("Momentum", 1, [](const KernelInfo& info) { return make_optimizer(info, Optimizer::kMomentum); }, training);
  t.add("Adam", 1, [](const KernelInfo& info) { return make_optimizer(info, Optimizer::kAdam); }, training);
}

}  // namespace bulkhead::cpu
