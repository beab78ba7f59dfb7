// Shape and type inference rules for shape, layout and indexing operators: Reshape,
// Flatten, Squeeze/Unsqueeze, Transpose, Concat, Split, Slice, the Gather and Scatter
// families, Expand, Tile, Pad, Resize/Upsample, DepthToSpace/SpaceToDepth, OneHot, TopK,
// NonZero, Compress, Unique and friends. Target shapes given as inputs are read from the
// integer values infer_values.cc follows. See infer.h.
#include <algorithm>
#include <climits>
#include <cmath>
#include <set>

#include "ir/infer_rules.h"

namespace bulkhead::ir::infer {
namespace {

// Integer values given either as an attribute (older opsets) or as input `input`.
// False when they are given but not known.
bool attr_or_input_ints(const Ctx& c, bool from_input, const char* attr, int input, std::vector<int64_t>* v,
                        bool* given) {
  if (!from_input) {
    *given = c.node.has_attr(attr);
    *v = c.node.attr_ints(attr);
    return true;
  }
  *given = c.has_input(input);
  if (!*given) {
    v->clear();
    return true;
  }
  return c.in_ints(input, v);
}

// ---------------------------------------------------------------------------------------
// Reshape, Flatten, Squeeze, Unsqueeze, Transpose.

// The size -1 stands for in Reshape: the input's element count over the others', with
// symbolic factors cancelled.
Dim reshape_remainder(const Dims& in, const Dims& others) {
  int64_t num = 1, den = 1;
  std::multiset<std::string> syms;
  for (const Dim& d : in) {
    if (d.fixed()) {
      if (__builtin_mul_overflow(num, d.value, &num)) return Dim{};
    } else if (!d.param.empty()) syms.insert(d.param);
    else return Dim{};
  }
  for (const Dim& d : others) {
    if (d.fixed()) {
      if (__builtin_mul_overflow(den, d.value, &den)) return Dim{};
    } else if (!d.param.empty()) {
      auto it = syms.find(d.param);
      if (it == syms.end()) return Dim{};
      syms.erase(it);
    } else {
      return Dim{};
    }
  }
  if (num == 0 || den == 0) return Dim{};
  if (syms.empty()) return num % den == 0 ? fixed_dim(num / den) : Dim{};
  if (syms.size() == 1 && num == den) return sym_dim(*syms.begin());
  return Dim{};
}

Status rule_reshape(Ctx& c) {
  c.set_type(0, c.in_type(0));
  const Dims* in = c.in_shape(0);
  std::vector<Elem> target;
  if (c.opset() > 0 && c.opset() < 5) {
    for (int64_t v : c.node.attr_ints("shape")) target.push_back(Elem::of(v));
  } else if (const Data* d = c.in_data(1)) {
    target = d->v;
  } else if (const Dims* s = c.in_shape(1); s && s->size() == 1 && (*s)[0].fixed()) {
    c.set_rank(0, (*s)[0].value);
    return Status::ok();
  } else {
    return Status::ok();
  }
  const bool allowzero = c.opset() >= 14 && c.node.attr_int("allowzero", 0) != 0;
  Dims out(target.size());
  int minus_one = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    const Elem& t = target[i];
    if (!t.known) {
      out[i] = t.dim();
    } else if (t.value == 0 && !allowzero) {
      if (in && i < in->size()) out[i] = (*in)[i];
    } else if (t.value == -1) {
      if (minus_one >= 0) return Status::ok();  // invalid; leave it to the kernel
      minus_one = static_cast<int>(i);
    } else {
      out[i] = t.dim();
    }
  }
  if (minus_one >= 0 && in) {
    Dims others;
    for (size_t i = 0; i < out.size(); ++i)
      if (static_cast<int>(i) != minus_one) others.push_back(out[i]);
    out[minus_one] = reshape_remainder(*in, others);
  }
  c.set_shape(0, out);
  if (const Data* d = c.in_data(0); d && out.size() <= 1) {
    auto n = fixed_product(out);
    if (n && *n == static_cast<int64_t>(d->v.size())) {
      Data r = *d;
      r.scalar = out.empty();
      c.set_data(0, std::move(r));
    }
  }
  return Status::ok();
}

Status rule_flatten(Ctx& c) {
  c.set_type(0, c.in_type(0));
  const Dims* in = c.in_shape(0);
  if (!in) {
    c.set_rank(0, 2);
    return Status::ok();
  }
  const int r = static_cast<int>(in->size());
  int64_t axis = c.node.attr_int("axis", 1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r) return Status::ok();
  c.set_shape(0, {product_dim(in->begin(), in->begin() + axis), product_dim(in->begin() + axis, in->end())});
  return Status::ok();
}

Status rule_squeeze(Ctx& c) {
  c.set_type(0, c.in_type(0));
  std::vector<int64_t> axes;
  bool given = false;
  if (!attr_or_input_ints(c, c.opset() >= 13, "axes", 1, &axes, &given)) return Status::ok();
  const Dims* in = c.in_shape(0);
  if (!in) return Status::ok();
  const int r = static_cast<int>(in->size());
  std::vector<bool> drop(r, false);
  if (given && !axes.empty()) {
    for (int64_t a : axes) {
      int ax = norm_axis(a, r);
      if (ax < 0) return Status::ok();
      drop[ax] = true;
    }
  } else {
    for (int i = 0; i < r; ++i) {
      if (!(*in)[i].fixed()) return Status::ok();  // might be 1
      drop[i] = (*in)[i].value == 1;
    }
  }
  Dims out;
  for (int i = 0; i < r; ++i)
    if (!drop[i]) out.push_back((*in)[i]);
  c.set_shape(0, out);
  if (const Data* d = c.in_data(0); d && out.empty() && d->v.size() == 1) {
    Data s = *d;
    s.scalar = true;
    c.set_data(0, std::move(s));
  }
  return Status::ok();
}

Status rule_unsqueeze(Ctx& c) {
  c.set_type(0, c.in_type(0));
  std::vector<int64_t> axes;
  bool given = false;
  const bool from_input = c.opset() >= 13;
  if (!attr_or_input_ints(c, from_input, "axes", 1, &axes, &given)) {
    // Unknown axes: the rank is still known when the axes' count is.
    const Dims* s = c.in_shape(1);
    if (c.in_rank(0) >= 0 && s && s->size() == 1 && (*s)[0].fixed() && (*s)[0].value <= kMaxInferredRank)
      c.set_rank(0, c.in_rank(0) + (*s)[0].value);
    return Status::ok();
  }
  const Dims* in = c.in_shape(0);
  if (!in) return Status::ok();
  const int r = static_cast<int>(in->size()) + static_cast<int>(axes.size());
  std::vector<bool> ins(r, false);
  for (int64_t a : axes) {
    int ax = norm_axis(a, r);
    if (ax < 0 || ins[ax]) return Status::ok();
    ins[ax] = true;
  }
  Dims out;
  size_t k = 0;
  for (int i = 0; i < r; ++i) out.push_back(ins[i] ? fixed_dim(1) : (*in)[k++]);
  c.set_shape(0, out);
  if (const Data* d = c.in_data(0); d && r <= 1) {
    Data v = *d;
    v.scalar = r == 0;
    c.set_data(0, std::move(v));
  }
  return Status::ok();
}

Status rule_transpose(Ctx& c) {
  c.set_type(0, c.in_type(0));
  const Dims* in = c.in_shape(0);
  if (!in) return Status::ok();
  const int r = static_cast<int>(in->size());
  std::vector<int64_t> perm = c.node.attr_ints("perm");
  if (!c.node.has_attr("perm"))
    for (int i = r - 1; i >= 0; --i) perm.push_back(i);
  if (static_cast<int>(perm.size()) != r) return Status::ok();
  Dims out;
  for (int64_t p : perm) {
    int ax = norm_axis(p, r);
    if (ax < 0) return Status::ok();
    out.push_back((*in)[ax]);
  }
  c.set_shape(0, out);
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// Concat, Split, Slice.

Status rule_concat(Ctx& c) {
  std::vector<int> all;
  for (int i = 0; i < c.num_inputs(); ++i) all.push_back(i);
  BH_RETURN_IF_ERROR(c.require_same_types(all));
  DataType t = DataType::kUndefined;
  int rank = -1;
  for (int i = 0; i < c.num_inputs(); ++i) {
    if (t == DataType::kUndefined) t = c.in_type(i);
    if (rank < 0) rank = c.in_rank(i);
  }
  c.set_type(0, t);
  if (rank < 0 || !c.node.has_attr("axis")) return Status::ok();
  const int axis = norm_axis(c.node.attr_int("axis", 0), rank);
  if (axis < 0) return Status::ok();
  Dims out(rank);
  Dim sum = fixed_dim(0);
  bool all_shapes = true, all_data = true;
  Data data;
  for (int i = 0; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    const Dims* s = c.in_shape(i);
    if (!s || static_cast<int>(s->size()) != rank) {
      all_shapes = false;
      all_data = false;
      continue;
    }
    for (int k = 0; k < rank; ++k)
      if (k != axis) out[k] = meet_dim(out[k], (*s)[k]);
    sum = add_dim(sum, (*s)[axis]);
    const Data* d = c.in_data(i);
    if (d && !d->scalar) data.v.insert(data.v.end(), d->v.begin(), d->v.end());
    else all_data = false;
  }
  out[axis] = all_shapes ? sum : Dim{};
  c.set_shape(0, out);
  if (all_data && rank == 1) c.set_data(0, std::move(data));
  return Status::ok();
}

Status rule_split(Ctx& c) {
  const DataType t = c.in_type(0);
  const int n = c.num_outputs();
  for (int o = 0; o < n; ++o) c.set_type(o, t);
  const Dims* in = c.in_shape(0);
  if (!in) return Status::ok();
  const int r = static_cast<int>(in->size());
  const int axis = norm_axis(c.node.attr_int("axis", 0), r);
  if (axis < 0) return Status::ok();
  std::vector<int64_t> split;
  bool given = false;
  const bool known = attr_or_input_ints(c, c.opset() >= 13, "split", 1, &split, &given);
  Dims sizes(n);
  const Dim& d = (*in)[axis];
  if (given && known && static_cast<int>(split.size()) == n) {
    for (int o = 0; o < n; ++o) sizes[o] = fixed_dim(split[o]);
  } else if (!given && d.fixed() && n > 0) {
    if (c.opset() >= 18 && c.node.has_attr("num_outputs")) {
      const int64_t chunk = d.value / n + (d.value % n != 0 ? 1 : 0);
      for (int o = 0; o < n; ++o) sizes[o] = wide_dim(std::min<__int128>(chunk, d.value - static_cast<__int128>(chunk) * o));
    } else if (d.value % n == 0) {
      for (int o = 0; o < n; ++o) sizes[o] = fixed_dim(d.value / n);
    }
  } else if (!given && n == 1) {
    sizes[0] = d;
  }
  for (int o = 0; o < n; ++o) {
    Dims s = *in;
    s[axis] = sizes[o];
    c.set_shape(o, s);
  }
  return Status::ok();
}

// Elements a Slice keeps of a fixed-size axis.
// The positions a Slice of one axis of size `dim` visits, clamped as ONNX says.
struct SliceRange {
  __int128 start, end, step;
  int64_t count() const {
    if (step > 0) return end > start ? static_cast<int64_t>((end - start + step - 1) / step) : 0;
    return start > end ? static_cast<int64_t>((start - end - step - 1) / -step) : 0;
  }
};

SliceRange slice_range(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (dim <= 0) return {0, 0, 1};
  __int128 s = start, e = end;
  if (s < 0) s += dim;
  if (e < 0) e += dim;
  if (step > 0) return {std::clamp<__int128>(s, 0, dim), std::clamp<__int128>(e, 0, dim), step};
  return {std::clamp<__int128>(s, 0, dim - 1), std::clamp<__int128>(e, -1, dim - 1), step};
}

Status rule_slice(Ctx& c) {
  c.set_type(0, c.in_type(0));
  const Dims* in = c.in_shape(0);
  if (!in) return Status::ok();
  const int r = static_cast<int>(in->size());
  std::vector<int64_t> starts, ends, axes, steps;
  bool given_s = false, given_e = false, given_a = false, given_st = false;
  const bool from_input = c.opset() >= 10;
  const bool ks = attr_or_input_ints(c, from_input, "starts", 1, &starts, &given_s);
  const bool ke = attr_or_input_ints(c, from_input, "ends", 2, &ends, &given_e);
  const bool ka = attr_or_input_ints(c, from_input, "axes", 3, &axes, &given_a);
  const bool kst = from_input ? attr_or_input_ints(c, true, "steps", 4, &steps, &given_st) : true;
  if (!ka) {
    c.set_rank(0, r);
    return Status::ok();
  }
  if (!given_a) {
    // Default axes 0..n-1, n from the starts' length.
    int64_t n = -1;
    if (ks && given_s) n = static_cast<int64_t>(starts.size());
    else if (const Dims* s = c.in_shape(1); from_input && s && s->size() == 1 && (*s)[0].fixed()) n = (*s)[0].value;
    if (n < 0 || n > r) {
      c.set_rank(0, r);
      return Status::ok();
    }
    axes.clear();
    for (int64_t i = 0; i < n; ++i) axes.push_back(i);
  }
  Dims out = *in;
  const bool values_known = ks && ke && kst && starts.size() == axes.size() && ends.size() == axes.size() &&
                            (!given_st || steps.size() == axes.size());
  for (size_t k = 0; k < axes.size(); ++k) {
    const int ax = norm_axis(axes[k], r);
    if (ax < 0) {
      c.set_rank(0, r);
      return Status::ok();
    }
    if (!values_known) {
      out[ax] = Dim{};
      continue;
    }
    const int64_t step = given_st ? steps[k] : 1;
    const Dim& d = (*in)[ax];
    if (step == 0) {
      out[ax] = Dim{};
    } else if (d.fixed()) {
      out[ax] = fixed_dim(slice_range(d.value, starts[k], ends[k], step).count());
    } else if (step == 1 && starts[k] == 0 && ends[k] >= INT32_MAX) {
      out[ax] = d;  // the whole axis
    } else if (step == -1 && starts[k] == -1 && ends[k] <= INT32_MIN) {
      out[ax] = d;  // the whole axis reversed
    } else {
      out[ax] = Dim{};
    }
  }
  c.set_shape(0, out);
  // Values of a sliced 1-D shape tensor.
  const Data* d = c.in_data(0);
  if (d && !d->scalar && values_known && axes.size() == 1 && norm_axis(axes[0], 1) == 0) {
    const int64_t n = static_cast<int64_t>(d->v.size());
    const int64_t step = given_st ? steps[0] : 1;
    if (step != 0) {
      const SliceRange sr = slice_range(n, starts[0], ends[0], step);
      Data r2;
      for (int64_t k = 0, cnt = sr.count(); k < cnt; ++k) r2.v.push_back(d->v[static_cast<size_t>(sr.start + k * sr.step)]);
      c.set_data(0, std::move(r2));
    }
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// Gather family, Expand, Tile, Pad.

Status rule_gather(Ctx& c) {
  c.set_type(0, c.in_type(0));
  const Dims* data = c.in_shape(0);
  const Dims* idx = c.in_shape(1);
  if (!data || !idx) return Status::ok();
  const int r = static_cast<int>(data->size());
  const int axis = norm_axis(c.node.attr_int("axis", 0), r);
  if (axis < 0) return Status::ok();
  Dims out(data->begin(), data->begin() + axis);
  out.insert(out.end(), idx->begin(), idx->end());
  out.insert(out.end(), data->begin() + axis + 1, data->end());
  c.set_shape(0, out);
  const Data* d = c.in_data(0);
  std::vector<int64_t> ind;
  if (d && !d->scalar && r == 1 && idx->size() <= 1 && c.in_ints(1, &ind)) {
    Data g;
    g.scalar = idx->empty();
    const int64_t n = static_cast<int64_t>(d->v.size());
    for (int64_t i : ind) {
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Status::ok();
      g.v.push_back(d->v[i]);
    }
    c.set_data(0, std::move(g));
  }
  return Status::ok();
}

Status rule_gather_elements(Ctx& c) {
  c.set_type(0, c.in_type(0));
  if (const Dims* s = c.in_shape(1)) c.set_shape(0, *s);
  return Status::ok();
}

Status rule_gather_nd(Ctx& c) {
  c.set_type(0, c.in_type(0));
  const Dims* data = c.in_shape(0);
  const Dims* idx = c.in_shape(1);
  if (!data || !idx || idx->empty() || !idx->back().fixed()) return Status::ok();
  const int64_t b = c.node.attr_int("batch_dims", 0);
  const int64_t last = idx->back().value;
  const int64_t rank = static_cast<int64_t>(data->size());
  if (b < 0 || last < 0 || b > rank || last > rank - b) return Status::ok();  // (b + last may overflow)
  Dims out(idx->begin(), idx->end() - 1);
  out.insert(out.end(), data->begin() + b + last, data->end());
  c.set_shape(0, out);
  return Status::ok();
}

Status rule_expand(Ctx& c) {
  c.set_type(0, c.in_type(0));
  const Dims* in = c.in_shape(0);
  Dims target;
  if (const Data* d = c.in_data(1)) {
    target = d->dims();
  } else if (const Dims* s = c.in_shape(1); s && s->size() == 1 && (*s)[0].fixed() && (*s)[0].value <= kMaxInferredRank) {
    target.resize(static_cast<size_t>((*s)[0].value));
  } else {
    return Status::ok();
  }
  if (in) c.set_shape(0, broadcast_dims(*in, target));
  return Status::ok();
}

Status rule_tile(Ctx& c) {
  c.set_type(0, c.in_type(0));
  const Dims* in = c.in_shape(0);
  if (!in) return Status::ok();
  std::vector<int64_t> rep;
  if (!c.in_ints(1, &rep) || rep.size() != in->size()) {
    c.set_rank(0, static_cast<int>(in->size()));
    return Status::ok();
  }
  Dims out(in->size());
  for (size_t i = 0; i < in->size(); ++i) out[i] = mul_dim((*in)[i], fixed_dim(rep[i]));
  c.set_shape(0, out);
  return Status::ok();
}

Status rule_pad(Ctx& c) {
  c.set_type(0, c.in_type(0));
  const Dims* in = c.in_shape(0);
  if (!in) return Status::ok();
  const int r = static_cast<int>(in->size());
  std::vector<int64_t> pads, axes;
  bool given = false, given_axes = false;
  bool known;
  if (c.opset() < 2 && c.opset() > 0) known = attr_or_input_ints(c, false, "paddings", 0, &pads, &given);
  else known = attr_or_input_ints(c, c.opset() >= 11, "pads", 1, &pads, &given);
  const bool axes_known = c.opset() >= 18 ? attr_or_input_ints(c, true, "axes", 3, &axes, &given_axes) : true;
  if (!given_axes)
    for (int i = 0; i < r; ++i) axes.push_back(i);
  if (!known || !axes_known || pads.size() != 2 * axes.size()) {
    Dims out = *in;
    if (!axes_known) out.assign(r, Dim{});
    for (int64_t a : axes)
      if (int ax = norm_axis(a, r); ax >= 0) out[ax] = Dim{};
    c.set_shape(0, out);
    return Status::ok();
  }
  Dims out = *in;
  const size_t n = axes.size();
  for (size_t k = 0; k < n; ++k) {
    int ax = norm_axis(axes[k], r);
    if (ax < 0) {
      c.set_rank(0, r);
      return Status::ok();
    }
    out[ax] = add_dim(add_dim(out[ax], fixed_dim(pads[k])), fixed_dim(pads[k + n]));
  }
  c.set_shape(0, out);
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// Resize, Upsample, DepthToSpace, SpaceToDepth, CenterCropPad.

Dim scaled_dim(const Dim& d, double s) {
  if (s == 1.0) return d;
  if (!d.fixed() || !(s > 0) || !std::isfinite(s)) return Dim{};
  return double_dim(std::floor(s * static_cast<double>(d.value)));
}

Status rule_resize(Ctx& c) {
  c.set_type(0, c.in_type(0));
  const Dims* in = c.in_shape(0);
  if (!in) return Status::ok();
  const int r = static_cast<int>(in->size());
  std::vector<int> axes;
  const bool has_axes = c.opset() >= 18 && c.node.has_attr("axes");
  if (has_axes) {
    for (int64_t a : c.node.attr_ints("axes")) {
      int ax = norm_axis(a, r);
      if (ax < 0) return Status::ok();
      axes.push_back(ax);
    }
  } else {
    for (int i = 0; i < r; ++i) axes.push_back(i);
  }
  Dims out = *in;
  std::vector<int64_t> sizes;
  std::vector<double> scales;
  const bool opset10 = c.opset() < 11;
  const int scales_input = opset10 ? 1 : 2;
  const bool sizes_given = !opset10 && c.has_input(3) && !(c.in_shape(3) && c.in_shape(3)->size() == 1 &&
                                                            (*c.in_shape(3))[0].fixed() && (*c.in_shape(3))[0].value == 0);
  const std::string mode = c.node.attr_string("coordinate_transformation_mode", "half_pixel");
  if (sizes_given && c.in_ints(3, &sizes) && sizes.size() == axes.size()) {
    const std::string policy = c.opset() >= 18 ? c.node.attr_string("keep_aspect_ratio_policy", "stretch") : "stretch";
    if (policy == "stretch") {
      for (size_t k = 0; k < axes.size(); ++k) out[axes[k]] = fixed_dim(sizes[k]);
    } else {
      double s = policy == "not_larger" ? INFINITY : 0.0;
      for (size_t k = 0; k < axes.size(); ++k) {
        const Dim& d = (*in)[axes[k]];
        if (!d.fixed() || d.value <= 0) {
          c.set_rank(0, r);
          return Status::ok();
        }
        double sk = static_cast<double>(sizes[k]) / static_cast<double>(d.value);
        s = policy == "not_larger" ? std::min(s, sk) : std::max(s, sk);
      }
      for (int ax : axes) out[ax] = double_dim(s * static_cast<double>((*in)[ax].value) + 0.5);
    }
  } else if (!sizes_given && mode != "tf_crop_and_resize" && c.in_floats(scales_input, &scales) &&
             scales.size() == axes.size() && !scales.empty()) {
    for (size_t k = 0; k < axes.size(); ++k) out[axes[k]] = scaled_dim((*in)[axes[k]], scales[k]);
  } else {
    for (int ax : axes) out[ax] = Dim{};
  }
  c.set_shape(0, out);
  return Status::ok();
}

Status rule_upsample(Ctx& c) {
  c.set_type(0, c.in_type(0));
  const Dims* in = c.in_shape(0);
  if (!in) return Status::ok();
  std::vector<double> scales;
  if (c.opset() < 9) {
    for (float f : c.node.attr_floats("scales")) scales.push_back(f);
  } else if (!c.in_floats(1, &scales)) {
    c.set_rank(0, static_cast<int>(in->size()));
    return Status::ok();
  }
  if (scales.size() != in->size()) return Status::ok();
  Dims out(in->size());
  for (size_t i = 0; i < in->size(); ++i) out[i] = scaled_dim((*in)[i], scales[i]);
  c.set_shape(0, out);
  return Status::ok();
}

Status rule_depth_to_space(Ctx& c) {
  c.set_type(0, c.in_type(0));
  const Dims* in = c.in_shape(0);
  const int64_t b = c.node.attr_int("blocksize", 0);
  if (!in || in->size() != 4 || b <= 0 || b > (int64_t{1} << 31)) return Status::ok();
  const bool to_space = c.node.op_type == "DepthToSpace";
  Dims out = *in;
  const Dim& ch = (*in)[1];
  if (to_space) {
    out[1] = ch.fixed() && ch.value % (b * b) == 0 ? fixed_dim(ch.value / (b * b)) : Dim{};
    out[2] = mul_dim((*in)[2], fixed_dim(b));
    out[3] = mul_dim((*in)[3], fixed_dim(b));
  } else {
    out[1] = mul_dim(ch, fixed_dim(b * b));
    for (int k = 2; k < 4; ++k) {
      const Dim& d = (*in)[k];
      out[k] = d.fixed() && d.value % b == 0 ? fixed_dim(d.value / b) : b == 1 ? d : Dim{};
    }
  }
  c.set_shape(0, out);
  return Status::ok();
}

Status rule_center_crop_pad(Ctx& c) {
  c.set_type(0, c.in_type(0));
  const Dims* in = c.in_shape(0);
  if (!in) return Status::ok();
  const int r = static_cast<int>(in->size());
  std::vector<int64_t> axes = c.node.attr_ints("axes");
  if (!c.node.has_attr("axes"))
    for (int i = 0; i < r; ++i) axes.push_back(i);
  Dims out = *in;
  std::vector<int64_t> shape;
  const bool known = c.in_ints(1, &shape) && shape.size() == axes.size();
  for (size_t k = 0; k < axes.size(); ++k) {
    int ax = norm_axis(axes[k], r);
    if (ax < 0) return Status::ok();
    out[ax] = known ? fixed_dim(shape[k]) : Dim{};
  }
  c.set_shape(0, out);
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// OneHot, Range, TopK, NonZero, Compress, Unique, EyeLike, Trilu-likes.

Status rule_one_hot(Ctx& c) {
  c.set_type(0, c.in_type(2));
  const Dims* in = c.in_shape(0);
  if (!in) return Status::ok();
  const int r = static_cast<int>(in->size()) + 1;
  const int axis = norm_axis(c.node.attr_int("axis", -1), r);
  if (axis < 0) return Status::ok();
  std::vector<double> depth;
  Dim d;
  if (c.in_floats(1, &depth) && depth.size() == 1) d = double_dim(depth[0]);
  Dims out = *in;
  out.insert(out.begin() + axis, d);
  c.set_shape(0, out);
  return Status::ok();
}

Status rule_top_k(Ctx& c) {
  c.set_type(0, c.in_type(0));
  c.set_type(1, DataType::kInt64);
  const Dims* in = c.in_shape(0);
  if (!in) return Status::ok();
  const int r = static_cast<int>(in->size());
  const int axis = norm_axis(c.node.attr_int("axis", -1), r);
  if (axis < 0) return Status::ok();
  Dim k;
  std::vector<int64_t> kv;
  if (c.opset() > 0 && c.opset() < 10) k = fixed_dim(c.node.attr_int("k", 0));
  else if (c.in_ints(1, &kv) && kv.size() == 1 && kv[0] >= 0) k = fixed_dim(kv[0]);
  Dims out = *in;
  out[axis] = k;
  c.set_shape(0, out);
  c.set_shape(1, out);
  return Status::ok();
}

Status rule_non_zero(Ctx& c) {
  c.set_type(0, DataType::kInt64);
  const int r = c.in_rank(0);
  c.set_shape(0, {r >= 0 ? fixed_dim(r) : Dim{}, Dim{}});
  return Status::ok();
}

Status rule_compress(Ctx& c) {
  c.set_type(0, c.in_type(0));
  const Dims* in = c.in_shape(0);
  if (!c.node.has_attr("axis")) {
    c.set_rank(0, 1);
    return Status::ok();
  }
  if (!in) return Status::ok();
  const int axis = norm_axis(c.node.attr_int("axis", 0), static_cast<int>(in->size()));
  if (axis < 0) return Status::ok();
  Dims out = *in;
  out[axis] = Dim{};
  c.set_shape(0, out);
  return Status::ok();
}

Status rule_unique(Ctx& c) {
  c.set_type(0, c.in_type(0));
  for (int o = 1; o < 4; ++o) c.set(o, DataType::kInt64, {Dim{}});
  const Dims* in = c.in_shape(0);
  if (!c.node.has_attr("axis")) {
    c.set_rank(0, 1);
    if (in) c.set_shape(2, {product_dim(in->begin(), in->end())});
    return Status::ok();
  }
  if (!in) return Status::ok();
  const int axis = norm_axis(c.node.attr_int("axis", 0), static_cast<int>(in->size()));
  if (axis < 0) return Status::ok();
  Dims out = *in;
  out[axis] = Dim{};
  c.set_shape(0, out);
  c.set_shape(2, {(*in)[axis]});
  return Status::ok();
}

// Output 0 with a `dtype` attribute (when set) or input 0's type; input 0's shape.
Status rule_dtype_attr_like(Ctx& c) {
  const int64_t dt = c.node.attr_int("dtype", 0);
  c.set_type(0, dt != 0 ? static_cast<DataType>(dt) : c.in_type(0));
  if (const Dims* s = c.in_shape(0)) c.set_shape(0, *s);
  return Status::ok();
}

Status rule_scatter(Ctx& c) {
  BH_RETURN_IF_ERROR(c.require_same_types({0, 2}));
  return same_as_input0(c);
}

}  // namespace

void add_tensor_rules(RuleTable& t) {
  t["Reshape"] = rule_reshape;
  t["Flatten"] = rule_flatten;
  t["Squeeze"] = rule_squeeze;
  t["Unsqueeze"] = rule_unsqueeze;
  t["Transpose"] = rule_transpose;
  t["Concat"] = rule_concat;
  t["Split"] = rule_split;
  t["Slice"] = rule_slice;
  t["Gather"] = rule_gather;
  t["GatherElements"] = rule_gather_elements;
  t["GatherND"] = rule_gather_nd;
  t["Expand"] = rule_expand;
  t["Tile"] = rule_tile;
  t["Pad"] = rule_pad;
  t["Resize"] = rule_resize;
  t["Upsample"] = rule_upsample;
  t["DepthToSpace"] = rule_depth_to_space;
  t["SpaceToDepth"] = rule_depth_to_space;
  t["CenterCropPad"] = rule_center_crop_pad;
  t["OneHot"] = rule_one_hot;
  t["TopK"] = rule_top_k;
  t["NonZero"] = rule_non_zero;
  t["Compress"] = rule_compress;
  t["Unique"] = rule_unique;
  t["EyeLike"] = rule_dtype_attr_like;
  t["Scatter"] = rule_scatter;
  t["ScatterElements"] = rule_scatter;
  t["ScatterND"] = rule_scatter;
  t["TensorScatter"] = same_as_input0;  // opset 24: `update` written into a copy of `past_cache`
  for (const char* op : {"Trilu", "ReverseSequence", "CumSum", "CumProd"}) t[op] = same_as_input0;
}

}  // namespace bulkhead::ir::infer
