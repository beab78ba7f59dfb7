// Resize (opsets 10 to 19): nearest over any axes of any fixed-size type, and linear over
// the last two axes of float32 data (kernels/layout.cl resize_nearest_*, kernels/resize.cl).
// Scales or sizes must be constants. The per-axis tables (source index, and weights for
// linear) are built on the host exactly as the CPU builds them, in double, so that the
// choice of neighbour and the weights agree; the kernels only gather and blend. Cubic
// mode, antialiasing and tf_crop_and_resize stay on the CPU.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/families.h"

namespace bulkhead::opencl {
namespace {

enum class Coord { kHalfPixel, kHalfPixelSymmetric, kPytorchHalfPixel, kAlignCorners, kAsymmetric, kTfHalfPixelForNN };
enum class Nearest { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kSimple };
enum class Aspect { kStretch, kNotLarger, kNotSmaller };

struct ResizeSpec {
  bool linear = false;
  Coord coord = Coord::kHalfPixel;
  Nearest nearest = Nearest::kRoundPreferFloor;
  Aspect aspect = Aspect::kStretch;
  Dims axes;                  // the axes scales/sizes refer to; empty: all
  std::vector<float> scales;  // or
  Dims sizes;
};

// The input position of output coordinate x on an axis (the CPU's order of operations).
double source_position(Coord coord, int64_t in, int64_t out, double scale, int64_t x) {
  const double xr = static_cast<double>(x), len = scale * static_cast<double>(in);
  switch (coord) {
    case Coord::kHalfPixel:
      return (xr + 0.5) / scale - 0.5;
    case Coord::kHalfPixelSymmetric: {
      const double adj = static_cast<double>(out) / len, center = static_cast<double>(in) / 2;
      return center * (1 - adj) + (xr + 0.5) / scale - 0.5;
    }
    case Coord::kPytorchHalfPixel:
      return out > 1 ? (xr + 0.5) / scale - 0.5 : 0.0;
    case Coord::kAlignCorners:
      return len == 1 ? 0.0 : xr * static_cast<double>(in - 1) / (len - 1);
    case Coord::kAsymmetric:
      return xr / scale;
    case Coord::kTfHalfPixelForNN:
      return (xr + 0.5) / scale;
  }
  return 0;
}

int32_t nearest_index(const ResizeSpec& s, int64_t in, int64_t out, double scale, int64_t x) {
  const double pos = source_position(s.coord, in, out, scale, x);
  double r = 0;
  switch (s.nearest) {
    case Nearest::kRoundPreferFloor:
      r = std::ceil(pos - 0.5);
      break;
    case Nearest::kRoundPreferCeil:
      r = std::floor(pos + 0.5);
      break;
    case Nearest::kFloor:
      r = std::floor(pos);
      break;
    case Nearest::kCeil:
      r = std::ceil(pos);
      break;
    case Nearest::kSimple:
      r = scale < 1 ? std::ceil(pos) : std::floor(pos);
      break;
  }
  return static_cast<int32_t>(std::clamp<double>(r, 0, static_cast<double>(in - 1)));
}

// The two taps of output coordinate x: like the CPU, an exact integer position uses the
// pixel on its left as base with weight 1 on the right one.
void linear_taps(const ResizeSpec& s, int64_t in, int64_t out, double scale, int64_t x, int32_t* idx, float* w) {
  const double pos = source_position(s.coord, in, out, scale, x), fl = std::floor(pos);
  const int64_t base = pos == fl ? static_cast<int64_t>(fl) - 1 : static_cast<int64_t>(fl);
  const double ratio = pos == fl ? 1.0 : pos - fl;
  idx[0] = static_cast<int32_t>(std::clamp<int64_t>(base, 0, in - 1));
  idx[1] = static_cast<int32_t>(std::clamp<int64_t>(base + 1, 0, in - 1));
  w[0] = static_cast<float>(1 - ratio);
  w[1] = static_cast<float>(ratio);
}

// Output dims and per-axis scales of resizing `in`, as the CPU derives them.
Status resize_geometry(const ResizeSpec& s, const Dims& in, const std::string& where, Dims* out,
                       std::vector<double>* scale) {
  const int r = static_cast<int>(in.size());
  std::vector<int> axes;
  if (s.axes.empty()) {
    for (int d = 0; d < r; ++d) axes.push_back(d);
  } else {
    std::vector<bool> seen(r, false);
    for (int64_t a0 : s.axes) {
      OCL_ASSIGN(int a, normalize_axis(a0, r, where));
      if (seen[a]) return invalid_argument(where + "axes repeat axis " + std::to_string(a));
      seen[a] = true;
      axes.push_back(a);
    }
  }
  *out = in;
  scale->assign(r, 1.0);
  const size_t given = s.sizes.empty() ? s.scales.size() : s.sizes.size();
  if (given != axes.size())
    return invalid_argument(where + (s.sizes.empty() ? "scales" : "sizes") + " has " + std::to_string(given) +
                            " entries for " + std::to_string(axes.size()) + " axes of " + dims_text(in));
  for (size_t i = 0; i < axes.size(); ++i) {
    const int d = axes[i];
    if (!s.sizes.empty()) {
      (*out)[d] = s.sizes[i];
      (*scale)[d] = in[d] > 0 ? static_cast<double>(s.sizes[i]) / static_cast<double>(in[d]) : 1.0;
    } else {
      (*scale)[d] = s.scales[i];
      const double od = s.scales[i] * static_cast<double>(in[d]);
      if (od > 1e12) return invalid_argument(where + "the output is too large");
      (*out)[d] = static_cast<int64_t>(std::floor(od));
    }
  }
  if (!s.sizes.empty() && s.aspect != Aspect::kStretch) {
    double k = s.aspect == Aspect::kNotLarger ? std::numeric_limits<double>::infinity() : 0.0;
    for (int d : axes) k = s.aspect == Aspect::kNotLarger ? std::min(k, (*scale)[d]) : std::max(k, (*scale)[d]);
    for (int d : axes) {
      (*scale)[d] = k;
      (*out)[d] = static_cast<int64_t>(k * static_cast<double>(in[d]) + 0.5);
    }
  }
  for (int d = 0; d < r; ++d)
    if ((*out)[d] > 0 && in[d] == 0) return invalid_argument(where + "cannot resize an empty axis to a non-empty one");
  return Status::ok();
}

Status resize(const ResizeSpec& s, Call& call) {
  const Tensor* x = call.input(0);
  if (!x) return invalid_argument(call.where() + "missing input");
  const int r = x->rank();
  if (r == 0) return invalid_argument(call.where() + "cannot resize a scalar");
  if (r > OCL_MAX_RANK) return unsupported(call.where() + "rank " + std::to_string(r) + " is above the kernel's 8");
  Dims out;
  std::vector<double> scale;
  OCL_TRY(resize_geometry(s, x->dims, call.where(), &out, &scale));
  if (s.linear) {
    if (r < 2 || x->dtype != BH_TYPE_FLOAT32)
      return invalid_argument(call.where() + "linear Resize takes float32 of rank >= 2");
    for (int d = 0; d < r - 2; ++d)
      if (out[d] != x->dims[d] || scale[d] != 1.0)
        return unsupported(call.where() + "the OpenCL linear Resize resizes the last two axes only, not " +
                           x->describe() + " to " + dims_text(out));
  }
  OCL_ASSIGN(Tensor y, call.output(0, x->dtype, out));
  if (y.numel() == 0) return Status::ok();
  OCL_TRY(call.check_size({x, &y}));
  if (s.linear) {
    const int64_t ih = x->dims[r - 2], iw = x->dims[r - 1], oh = out[r - 2], ow = out[r - 1];
    std::vector<int32_t> idx(2 * (oh + ow));
    std::vector<float> w(2 * (oh + ow));
    for (int64_t i = 0; i < oh; ++i) linear_taps(s, ih, oh, scale[r - 2], i, &idx[2 * i], &w[2 * i]);
    for (int64_t i = 0; i < ow; ++i) linear_taps(s, iw, ow, scale[r - 1], i, &idx[2 * (oh + i)], &w[2 * (oh + i)]);
    OCL_ASSIGN(Tensor ti, call.scratch(BH_TYPE_INT32, static_cast<int64_t>(idx.size())));
    OCL_ASSIGN(Tensor tw, call.scratch(BH_TYPE_FLOAT32, static_cast<int64_t>(w.size())));
    OCL_TRY(call.stream().upload(ti.mem, ti.offset, idx.data(), idx.size() * sizeof(int32_t)));
    OCL_TRY(call.stream().upload(tw.mem, tw.offset, w.data(), w.size() * sizeof(float)));
    auto i32 = [](int64_t v) { return static_cast<int>(v); };
    return call.stream().dispatch("resize_linear", items(y.numel()), y.nbytes(), x->buf(), ti.buf(), tw.buf(), y.buf(),
                                  i32(ih), i32(iw), i32(oh), i32(ow));
  }
  NearestMap p{};
  p.rank = r;
  std::vector<int32_t> table;
  const Dims st = strides_of(x->dims);
  for (int d = 0; d < r; ++d) {
    p.dims[d] = static_cast<int>(out[d]);
    p.in[d] = static_cast<int>(st[d]);
    p.at[d] = static_cast<int>(table.size());
    for (int64_t c = 0; c < out[d]; ++c) table.push_back(nearest_index(s, x->dims[d], out[d], scale[d], c));
  }
  OCL_ASSIGN(Tensor t, call.scratch(BH_TYPE_INT32, static_cast<int64_t>(table.size())));
  OCL_TRY(call.stream().upload(t.mem, t.offset, table.data(), table.size() * sizeof(int32_t)));
  return call.stream().dispatch("resize_nearest_" + std::to_string(dtype_size(x->dtype)), items(y.numel()), y.nbytes(),
                                x->buf(), t.buf(), y.buf(), p);
}

// Attribute `name` as the index of its value in `values`, or an error.
Result<int> pick(const Node& n, const char* name, const char* fallback, std::initializer_list<const char*> values) {
  const std::string v = n.attr_string(name, fallback);
  int i = 0;
  for (const char* c : values) {
    if (v == c) return i;
    ++i;
  }
  return unsupported(n.where() + "the OpenCL Resize has no " + name + " '" + v + "'");
}

}  // namespace

Result<OpPtr> make_resize(const Node& n) {
  ResizeSpec s;
  OCL_ASSIGN(int mode, pick(n, "mode", "nearest", {"nearest", "linear", "bilinear"}));
  s.linear = mode != 0;
  OCL_TRY(n.require_types(s.linear ? kFloat : kAnyFixed, {0}));
  if (n.attr_int("antialias", 0) != 0) return unsupported(n.where() + "the OpenCL Resize has no antialiasing");
  if (s.linear && n.attr_int("exclude_outside", 0) != 0)
    return unsupported(n.where() + "the OpenCL Resize has no exclude_outside");
  if (n.opset() < 11) {
    // Resize-10: asymmetric coordinates, nearest floors when upsampling; scales are input 1.
    s.coord = Coord::kAsymmetric;
    s.nearest = Nearest::kSimple;
    OCL_ASSIGN(s.scales, n.constant_floats(1, "scales"));
  } else {
    OCL_ASSIGN(int coord, pick(n, "coordinate_transformation_mode", "half_pixel",
                               {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                                "asymmetric", "tf_half_pixel_for_nn"}));
    s.coord = static_cast<Coord>(coord);
    OCL_ASSIGN(int nearest, pick(n, "nearest_mode", "round_prefer_floor",
                                 {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}));
    s.nearest = static_cast<Nearest>(nearest);
    OCL_ASSIGN(int aspect, pick(n, "keep_aspect_ratio_policy", "stretch", {"stretch", "not_larger", "not_smaller"}));
    s.aspect = static_cast<Aspect>(aspect);
    s.axes = n.attr_ints("axes");
    const bool has_sizes = n.has_input(3) && n.input(3).constant_size > 0;
    if (has_sizes) {
      OCL_ASSIGN(s.sizes, n.constant_ints(3, "sizes"));
    } else if (n.has_input(2)) {
      OCL_ASSIGN(s.scales, n.constant_floats(2, "scales"));
    }
    if (has_sizes && n.has_input(2) && n.input(2).constant_size > 0)
      return invalid_argument(n.where() + "only one of scales and sizes may be given");
  }
  if (s.sizes.empty() && s.scales.empty())
    return unsupported(n.where() + "the OpenCL Resize needs constant scales or sizes");
  for (float v : s.scales)
    if (!(v > 0) || !std::isfinite(v)) return invalid_argument(n.where() + "scales must be positive");
  for (int64_t v : s.sizes)
    if (v < 0) return invalid_argument(n.where() + "sizes must be non-negative");
  return make_op([s](Call& call) { return resize(s, call); });
}

}  // namespace bulkhead::opencl
