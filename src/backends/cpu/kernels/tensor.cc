// Tensor family: shape, layout and indexing operators.
//
// This file holds the views (Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout),
// the shape queries (Shape, Size), the generators (ConstantOfShape, Range, EyeLike) and
// the small indexing ops (Trilu, OneHot, NonZero, Compress, ReverseSequence). The
// copy-heavy ops live in tensor_copy.cc and Resize/Upsample in tensor_resize.cc.
//
// Views never copy: they hand the input's buffer on with a new shape.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_util.h"

namespace bulkhead::cpu {

void register_tensor_copy_kernels(KernelTable& t);
void register_tensor_resize_kernels(KernelTable& t);

namespace {





Result<std::vector<int64_t>> read_ints(const Tensor* t, const std::string& where, const char* what) {
  if (!t) return std::vector<int64_t>{};
  if (t->dtype() != DataType::kInt64 && t->dtype() != DataType::kInt32)
    return invalid_argument(where + what + " must be int64 or int32, got " + dtype_name(t->dtype()));
  if (t->numel() > 0 && !t->raw()) return invalid_argument(where + what + " is not in host memory");
  return read_int_tensor(*t);
}

// Element `i` of a numeric tensor as double.
Result<double> element_as_double(const Tensor& t, int64_t i, const std::string& where, const char* what) {
  if (i >= t.numel()) return invalid_argument(where + what + " is empty");
  if (!t.raw()) return invalid_argument(where + what + " is not in host memory");
  switch (t.dtype()) {
    case DataType::kFloat32: return static_cast<double>(t.data<float>()[i]);
    case DataType::kFloat64: return t.data<double>()[i];
    case DataType::kFloat16: return static_cast<double>(half_to_float(t.data<uint16_t>()[i]));
    case DataType::kBFloat16: return static_cast<double>(bfloat16_to_float(t.data<uint16_t>()[i]));
    case DataType::kInt8: return static_cast<double>(t.data<int8_t>()[i]);
    case DataType::kUInt8: return static_cast<double>(t.data<uint8_t>()[i]);
    case DataType::kBool: return static_cast<double>(t.data<uint8_t>()[i] != 0);
    case DataType::kInt16: return static_cast<double>(t.data<int16_t>()[i]);
    case DataType::kUInt16: return static_cast<double>(t.data<uint16_t>()[i]);
    case DataType::kInt32: return static_cast<double>(t.data<int32_t>()[i]);
    case DataType::kUInt32: return static_cast<double>(t.data<uint32_t>()[i]);
    case DataType::kInt64: return static_cast<double>(t.data<int64_t>()[i]);
    case DataType::kUInt64: return static_cast<double>(t.data<uint64_t>()[i]);
    default: return invalid_argument(where + what + " has unsupported type " + dtype_name(t.dtype()));
  }
}

// All elements of a numeric tensor as int64 (floats truncate toward zero).
Result<std::vector<int64_t>> read_any_ints(const Tensor& t, const std::string& where, const char* what) {
  if (t.dtype() == DataType::kInt64 || t.dtype() == DataType::kInt32) {
    if (t.numel() > 0 && !t.raw()) return invalid_argument(where + what + " is not in host memory");
    return read_int_tensor(t);
  }
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    BH_ASSIGN_OR_RETURN(double d, element_as_double(t, i, where, what));
    if (!std::isfinite(d)) return invalid_argument(where + what + " holds a non-finite value");
    v[i] = static_cast<int64_t>(d);
  }
  return v;
}

// The bits of `v` converted to `dt` (little-endian, low bytes used).
Status scalar_bits(double v, DataType dt, uint64_t& bits, const std::string& where) {
  bits = 0;
  auto put = [&](auto x) { std::memcpy(&bits, &x, sizeof(x)); };
  switch (dt) {
    case DataType::kFloat32: put(static_cast<float>(v)); break;
    case DataType::kFloat64: put(v); break;
    case DataType::kFloat16: put(float_to_half(static_cast<float>(v))); break;
    case DataType::kBFloat16: put(float_to_bfloat16(static_cast<float>(v))); break;
    case DataType::kInt8: put(static_cast<int8_t>(v)); break;
    case DataType::kUInt8: put(static_cast<uint8_t>(v)); break;
    case DataType::kBool: put(static_cast<uint8_t>(v != 0)); break;
    case DataType::kInt16: put(static_cast<int16_t>(v)); break;
    case DataType::kUInt16: put(static_cast<uint16_t>(v)); break;
    case DataType::kInt32: put(static_cast<int32_t>(v)); break;
    case DataType::kUInt32: put(static_cast<uint32_t>(v)); break;
    case DataType::kInt64: put(static_cast<int64_t>(v)); break;
    case DataType::kUInt64: put(static_cast<uint64_t>(v)); break;
    default: return unsupported(where + "unsupported element type " + dtype_name(dt));
  }
  return Status::ok();
}

// Fills `n` elements of `out` (numeric) with the value whose bits are `bits`.
Status fill_bits(Tensor& out, uint64_t bits, const std::string& where) {
  if (out.numel() == 0) return Status::ok();
  return by_elem_size(out.dtype(), where, [&](auto tag) -> Status {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, std::string>) {
      std::fill_n(out.strings(), out.numel(), std::string());
    } else {
      T v;
      std::memcpy(&v, &bits, sizeof(T));
      std::fill_n(out.data<T>(), out.numel(), v);
    }
    return Status::ok();
  });
}

Status set_view(KernelContext& ctx, const Tensor& x, Shape shape) {
  if (shape_numel(shape) != x.numel())
    return invalid_argument(ctx.where() + "cannot view " + x.describe() + " as " + shape_to_string(shape));
  return ctx.set_output(0, Value(x.reshaped(std::move(shape))));
}

// ---------------------------------------------------------------------------------------
// Reshape (shape attribute in opset 1, input from 5; allowzero from 14)

Result<Shape> reshape_target(const Shape& in, const std::vector<int64_t>& spec, bool allowzero, const std::string& where) {
  Shape out(spec.size());
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t s = spec[i];
    if (s == -1) {
      if (infer >= 0) return invalid_argument(where + "shape " + shape_to_string(spec) + " has more than one -1");
      infer = static_cast<int>(i);
      continue;
    }
    if (s < -1) return invalid_argument(where + "shape " + shape_to_string(spec) + " has an invalid dimension");
    if (s == 0 && !allowzero) {
      if (i >= in.size())
        return invalid_argument(where + "shape " + shape_to_string(spec) + " copies dimension " + std::to_string(i) +
                                " of an input of rank " + std::to_string(in.size()));
      s = in[i];
    }
    out[i] = s;
    known *= s;
  }
  int64_t total = shape_numel(in);
  if (infer >= 0) {
    if (known == 0 || total % known != 0)
      return invalid_argument(where + "cannot reshape " + shape_to_string(in) + " to " + shape_to_string(spec));
    out[infer] = total / known;
  } else if (known != total) {
    return invalid_argument(where + "cannot reshape " + shape_to_string(in) + " to " + shape_to_string(spec));
  }
  return out;
}

Result<std::unique_ptr<Kernel>> make_reshape(const KernelInfo& info) {
  if (info.node.opset < 5) {
    std::vector<int64_t> spec = info.node.attr_ints("shape");
    return make_kernel([spec](KernelContext& ctx) -> Status {
      const Tensor* x = ctx.input(0);
      if (!x) return invalid_argument(ctx.where() + "missing input");
      BH_ASSIGN_OR_RETURN(Shape s, reshape_target(x->shape(), spec, false, ctx.where()));
      return set_view(ctx, *x, s);
    });
  }
  bool allowzero = info.node.attr_int("allowzero", 0) != 0;
  return make_kernel([allowzero](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.input(0);
    const Tensor* s = ctx.input(1);
    if (!x || !s) return invalid_argument(ctx.where() + "missing data or shape");
    if (s->rank() != 1) return invalid_argument(ctx.where() + "shape must be 1-D");
    BH_ASSIGN_OR_RETURN(auto spec, read_ints(s, ctx.where(), "shape"));
    BH_ASSIGN_OR_RETURN(Shape out, reshape_target(x->shape(), spec, allowzero, ctx.where()));
    return set_view(ctx, *x, out);
  });
}

Result<std::unique_ptr<Kernel>> make_flatten(const KernelInfo& info) {
  int64_t axis_attr = info.node.attr_int("axis", 1);
  return make_kernel([axis_attr](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.input(0);
    if (!x) return invalid_argument(ctx.where() + "missing input");
    int r = x->rank();
    int64_t a = axis_attr;
    if (a < -r || a > r) return invalid_argument(ctx.where() + "axis " + std::to_string(a) + " out of range for rank " + std::to_string(r));
    if (a < 0) a += r;
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < r; ++d) (d < a ? outer : inner) *= x->shape()[d];
    return set_view(ctx, *x, Shape{outer, inner});
  });
}

Status squeeze_compute(KernelContext& ctx, const Tensor& x, const std::vector<int64_t>* axes) {
  int r = x.rank();
  std::vector<bool> drop(r, false);
  if (axes) {
    for (int64_t a0 : *axes) {
      BH_ASSIGN_OR_RETURN(int a, normalize_axis(a0, r, ctx.where()));
      if (r == 0) return invalid_argument(ctx.where() + "cannot squeeze a scalar");
      if (x.shape()[a] != 1)
        return invalid_argument(ctx.where() + "cannot squeeze axis " + std::to_string(a0) + " of shape " +
                                shape_to_string(x.shape()));
      drop[a] = true;
    }
  } else {
    for (int d = 0; d < r; ++d) drop[d] = x.shape()[d] == 1;
  }
  Shape out;
  for (int d = 0; d < r; ++d)
    if (!drop[d]) out.push_back(x.shape()[d]);
  return set_view(ctx, x, out);
}

Result<std::unique_ptr<Kernel>> make_squeeze(const KernelInfo& info) {
  if (info.node.opset < 13) {
    bool has = info.node.has_attr("axes");
    std::vector<int64_t> axes = info.node.attr_ints("axes");
    return make_kernel([has, axes](KernelContext& ctx) -> Status {
      const Tensor* x = ctx.input(0);
      if (!x) return invalid_argument(ctx.where() + "missing input");
      return squeeze_compute(ctx, *x, has && !axes.empty() ? &axes : nullptr);
    });
  }
  return make_kernel([](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.input(0);
    if (!x) return invalid_argument(ctx.where() + "missing input");
    // An omitted or empty axes input squeezes every dimension of size 1.
    if (!ctx.input(1) || ctx.input(1)->numel() == 0) return squeeze_compute(ctx, *x, nullptr);
    BH_ASSIGN_OR_RETURN(auto axes, read_ints(ctx.input(1), ctx.where(), "axes"));
    return squeeze_compute(ctx, *x, &axes);
  });
}

Status unsqueeze_compute(KernelContext& ctx, const Tensor& x, const std::vector<int64_t>& axes) {
  int out_r = x.rank() + static_cast<int>(axes.size());
  std::vector<bool> ins(out_r, false);
  for (int64_t a0 : axes) {
    if (a0 < -out_r || a0 >= out_r)
      return invalid_argument(ctx.where() + "axis " + std::to_string(a0) + " out of range for output rank " +
                              std::to_string(out_r));
    int64_t a = a0 < 0 ? a0 + out_r : a0;
    if (ins[a]) return invalid_argument(ctx.where() + "axes repeat axis " + std::to_string(a));
    ins[a] = true;
  }
  Shape out(out_r);
  int j = 0;
  for (int d = 0; d < out_r; ++d) out[d] = ins[d] ? 1 : x.shape()[j++];
  return set_view(ctx, x, out);
}

Result<std::unique_ptr<Kernel>> make_unsqueeze(const KernelInfo& info) {
  if (info.node.opset < 13) {
    if (!info.node.has_attr("axes")) return invalid_argument(info.where() + "missing attribute 'axes'");
    std::vector<int64_t> axes = info.node.attr_ints("axes");
    return make_kernel([axes](KernelContext& ctx) -> Status {
      const Tensor* x = ctx.input(0);
      if (!x) return invalid_argument(ctx.where() + "missing input");
      return unsqueeze_compute(ctx, *x, axes);
    });
  }
  return make_kernel([](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.input(0);
    if (!x || !ctx.input(1)) return invalid_argument(ctx.where() + "missing data or axes");
    BH_ASSIGN_OR_RETURN(auto axes, read_ints(ctx.input(1), ctx.where(), "axes"));
    return unsqueeze_compute(ctx, *x, axes);
  });
}

Result<std::unique_ptr<Kernel>> make_identity(const KernelInfo&) {
  return make_kernel([](KernelContext& ctx) -> Status {
    const Value* v = ctx.input_value(0);
    if (!v) return invalid_argument(ctx.where() + "missing input");
    return ctx.set_output(0, *v);
  });
}

// ---------------------------------------------------------------------------------------
// Dropout. Inference (and ratio 0) is a view; training mode drops with the mask drawn
// like NumPy's legacy RandomState (MT19937, 53-bit doubles), so a given seed gives the
// same mask as the ONNX reference implementation.

template <class T>
Status dropout_apply(const Tensor& x, Tensor& y, const std::vector<uint8_t>& keep, double scale) {
  const int64_t n = x.numel();
  if constexpr (std::is_same_v<T, uint16_t>) {
    bool bf = x.dtype() == DataType::kBFloat16;
    const uint16_t* s = x.data<uint16_t>();
    uint16_t* d = y.data<uint16_t>();
    for (int64_t i = 0; i < n; ++i) {
      float v = bf ? bfloat16_to_float(s[i]) : half_to_float(s[i]);
      float o = keep[i] ? static_cast<float>(v * scale) : 0.f;
      d[i] = bf ? float_to_bfloat16(o) : float_to_half(o);
    }
  } else {
    const T* s = x.data<T>();
    T* d = y.data<T>();
    for (int64_t i = 0; i < n; ++i) d[i] = keep[i] ? static_cast<T>(s[i] * scale) : T(0);
  }
  return Status::ok();
}

Result<std::unique_ptr<Kernel>> make_dropout(const KernelInfo& info) {
  const int opset = info.node.opset;
  const float ratio_attr = info.node.attr_float("ratio", 0.5f);
  const bool has_seed = info.node.has_attr("seed");
  const int64_t seed = info.node.attr_int("seed", 0);
  return make_kernel([=](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.input(0);
    if (!x) return invalid_argument(ctx.where() + "missing input");
    double ratio = ratio_attr;
    bool training = false;
    if (opset >= 12) {
      if (const Tensor* r = ctx.input(1)) {
        BH_ASSIGN_OR_RETURN(ratio, element_as_double(*r, 0, ctx.where(), "ratio"));
      }
      if (const Tensor* t = ctx.input(2)) {
        BH_ASSIGN_OR_RETURN(double tv, element_as_double(*t, 0, ctx.where(), "training_mode"));
        training = tv != 0;
      }
    }
    if (training && (ratio < 0 || ratio >= 1))
      return invalid_argument(ctx.where() + "ratio " + std::to_string(ratio) + " must be in [0, 1)");
    const bool want_mask = ctx.num_outputs() > 1 && ctx.output_wanted(1);
    std::vector<uint8_t> keep;
    if (!training || ratio == 0) {
      BH_RETURN_IF_ERROR(ctx.set_output(0, Value(*x)));
    } else {
      BH_RETURN_IF_ERROR(need_host(*x, ctx.where(), "input"));
      std::mt19937 gen(has_seed ? static_cast<uint32_t>(seed) : std::random_device{}());
      const int64_t n = x->numel();
      keep.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        uint32_t a = gen() >> 5, b = gen() >> 6;
        double u = (a * 67108864.0 + b) / 9007199254740992.0;
        keep[i] = u >= ratio;
      }
      BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, x->dtype(), x->shape()));
      double scale = 1.0 / (1.0 - ratio);
      switch (x->dtype()) {
        case DataType::kFloat32: BH_RETURN_IF_ERROR(dropout_apply<float>(*x, y, keep, scale)); break;
        case DataType::kFloat64: BH_RETURN_IF_ERROR(dropout_apply<double>(*x, y, keep, scale)); break;
        case DataType::kFloat16:
        case DataType::kBFloat16: BH_RETURN_IF_ERROR(dropout_apply<uint16_t>(*x, y, keep, scale)); break;
        default: return unsupported(ctx.where() + "unsupported element type " + dtype_name(x->dtype()));
      }
    }
    if (want_mask) {
      // Before opset 10 the mask has the input's type; from 10 on it is bool.
      DataType mt = opset >= 10 ? DataType::kBool : x->dtype();
      BH_ASSIGN_OR_RETURN(Tensor m, ctx.allocate_output(1, mt, x->shape()));
      if (mt == DataType::kBool) {
        uint8_t* p = m.data<uint8_t>();
        for (int64_t i = 0; i < m.numel(); ++i) p[i] = keep.empty() ? 1 : keep[i];
      } else {
        uint64_t one = 0, zero = 0;
        BH_RETURN_IF_ERROR(scalar_bits(1.0, mt, one, ctx.where()));
        BH_RETURN_IF_ERROR(by_elem_size(mt, ctx.where(), [&](auto tag) -> Status {
          using T = decltype(tag);
          if constexpr (!std::is_same_v<T, std::string>) {
            T o, z;
            std::memcpy(&o, &one, sizeof(T));
            std::memcpy(&z, &zero, sizeof(T));
            T* p = m.data<T>();
            for (int64_t i = 0; i < m.numel(); ++i) p[i] = (keep.empty() || keep[i]) ? o : z;
          }
          return Status::ok();
        }));
      }
    }
    return Status::ok();
  });
}

// ---------------------------------------------------------------------------------------
// Shape, Size

Result<std::unique_ptr<Kernel>> make_shape(const KernelInfo& info) {
  int64_t start_attr = info.node.attr_int("start", 0);
  bool has_end = info.node.has_attr("end");
  int64_t end_attr = info.node.attr_int("end", 0);
  return make_kernel([=](KernelContext& ctx) -> Status {
    const Value* v = ctx.input_value(0);
    if (!v || !v->is_tensor()) return invalid_argument(ctx.where() + "input must be a tensor");
    const Shape& s = v->tensor.shape();
    const int64_t r = static_cast<int64_t>(s.size());
    int64_t b = start_attr, e = has_end ? end_attr : r;
    if (b < 0) b += r;
    if (e < 0) e += r;
    b = std::clamp<int64_t>(b, 0, r);
    e = std::clamp<int64_t>(e, 0, r);
    int64_t n = std::max<int64_t>(0, e - b);
    BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, DataType::kInt64, Shape{n}));
    for (int64_t i = 0; i < n; ++i) out.data<int64_t>()[i] = s[b + i];
    return Status::ok();
  });
}

Result<std::unique_ptr<Kernel>> make_size(const KernelInfo&) {
  return make_kernel([](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.input(0);
    if (!x) return invalid_argument(ctx.where() + "missing input");
    BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, DataType::kInt64, Shape{}));
    out.data<int64_t>()[0] = x->numel();
    return Status::ok();
  });
}

// ---------------------------------------------------------------------------------------
// ConstantOfShape, Range, EyeLike

Result<std::unique_ptr<Kernel>> make_constant_of_shape(const KernelInfo& info) {
  DataType dt = DataType::kFloat32;
  uint64_t bits = 0;
  if (const ir::Attribute* a = info.node.attr("value")) {
    if (a->type != ir::AttrType::kTensor || !a->t.defined())
      return invalid_argument(info.where() + "attribute 'value' must be a tensor");
    const Tensor& v = a->t;
    if (v.numel() != 1) return invalid_argument(info.where() + "attribute 'value' must hold exactly one element");
    dt = v.dtype();
    if (dt == DataType::kString || dtype_size(dt) == 0 || dtype_size(dt) > 8)
      return unsupported(info.where() + "unsupported value type " + dtype_name(dt));
    if (!v.raw()) return invalid_argument(info.where() + "attribute 'value' is not in host memory");
    std::memcpy(&bits, v.raw(), dtype_size(dt));
  }
  return make_kernel([dt, bits](KernelContext& ctx) -> Status {
    const Tensor* s = ctx.input(0);
    if (!s) return invalid_argument(ctx.where() + "missing shape");
    if (s->rank() > 1) return invalid_argument(ctx.where() + "shape must be 1-D");
    BH_ASSIGN_OR_RETURN(auto dims, read_ints(s, ctx.where(), "shape"));
    for (int64_t d : dims)
      if (d < 0) return invalid_argument(ctx.where() + "shape " + shape_to_string(dims) + " has a negative dimension");
    BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, dt, dims));
    return fill_bits(out, bits, ctx.where());
  });
}

template <class T>
Status range_int(KernelContext& ctx, const Tensor& s, const Tensor& l, const Tensor& d, DataType dt) {
  T start = s.data<T>()[0], limit = l.data<T>()[0], delta = d.data<T>()[0];
  if (delta == 0) return invalid_argument(ctx.where() + "delta cannot be 0");
  // 128-bit arithmetic: limit - start overflows int64 at the extremes.
  using Wide = __int128;
  const Wide diff = static_cast<Wide>(limit) - static_cast<Wide>(start), dl = delta;
  Wide nw = 0;
  if (dl > 0 && diff > 0) nw = (diff + dl - 1) / dl;
  else if (dl < 0 && diff < 0) nw = (-diff + (-dl) - 1) / (-dl);
  if (nw > (Wide{1} << 40)) return invalid_argument(ctx.where() + "range is too long");
  const int64_t n = static_cast<int64_t>(nw);
  BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, dt, Shape{n}));
  T* o = out.data<T>();
  for (int64_t i = 0; i < n; ++i) o[i] = static_cast<T>(static_cast<Wide>(start) + static_cast<Wide>(i) * dl);
  return Status::ok();
}

Result<std::unique_ptr<Kernel>> make_range(const KernelInfo&) {
  return make_kernel([](KernelContext& ctx) -> Status {
    const Tensor *s = ctx.input(0), *l = ctx.input(1), *d = ctx.input(2);
    if (!s || !l || !d) return invalid_argument(ctx.where() + "missing start, limit or delta");
    if (s->numel() != 1 || l->numel() != 1 || d->numel() != 1)
      return invalid_argument(ctx.where() + "start, limit and delta must be scalars");
    DataType dt = s->dtype();
    if (l->dtype() != dt || d->dtype() != dt) return invalid_argument(ctx.where() + "start, limit and delta types differ");
    BH_RETURN_IF_ERROR(need_host(*s, ctx.where(), "start"));
    BH_RETURN_IF_ERROR(need_host(*l, ctx.where(), "limit"));
    BH_RETURN_IF_ERROR(need_host(*d, ctx.where(), "delta"));
    switch (dt) {
      case DataType::kInt16: return range_int<int16_t>(ctx, *s, *l, *d, dt);
      case DataType::kInt32: return range_int<int32_t>(ctx, *s, *l, *d, dt);
      case DataType::kInt64: return range_int<int64_t>(ctx, *s, *l, *d, dt);
      case DataType::kFloat32:
      case DataType::kFloat64:
      case DataType::kFloat16:
      case DataType::kBFloat16: {
        BH_ASSIGN_OR_RETURN(double start, element_as_double(*s, 0, ctx.where(), "start"));
        BH_ASSIGN_OR_RETURN(double limit, element_as_double(*l, 0, ctx.where(), "limit"));
        BH_ASSIGN_OR_RETURN(double delta, element_as_double(*d, 0, ctx.where(), "delta"));
        if (delta == 0) return invalid_argument(ctx.where() + "delta cannot be 0");
        double diff = dt == DataType::kFloat64 ? limit - start : static_cast<double>(static_cast<float>(limit - start));
        double nd = std::ceil(diff / delta);
        if (!std::isfinite(nd)) return invalid_argument(ctx.where() + "range length is not finite");
        if (nd > 1e12) return invalid_argument(ctx.where() + "range is too long");
        int64_t n = std::max<int64_t>(0, static_cast<int64_t>(nd));
        BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, dt, Shape{n}));
        for (int64_t i = 0; i < n; ++i) {
          double v = start + static_cast<double>(i) * delta;
          switch (dt) {
            case DataType::kFloat32: out.data<float>()[i] = static_cast<float>(v); break;
            case DataType::kFloat64: out.data<double>()[i] = v; break;
            case DataType::kFloat16: out.data<uint16_t>()[i] = float_to_half(static_cast<float>(v)); break;
            default: out.data<uint16_t>()[i] = float_to_bfloat16(static_cast<float>(v)); break;
          }
        }
        return Status::ok();
      }
      default: return unsupported(ctx.where() + "unsupported element type " + dtype_name(dt));
    }
  });
}

Result<std::unique_ptr<Kernel>> make_eye_like(const KernelInfo& info) {
  const bool has_dtype = info.node.has_attr("dtype");
  const DataType attr_dt = static_cast<DataType>(info.node.attr_int("dtype", 0));
  const int64_t k = info.node.attr_int("k", 0);
  if (has_dtype && (!dtype_is_known(static_cast<int32_t>(attr_dt)) || attr_dt == DataType::kString))
    return unsupported(info.where() + "unsupported dtype " + std::to_string(static_cast<int>(attr_dt)));
  return make_kernel([=](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.input(0);
    if (!x) return invalid_argument(ctx.where() + "missing input");
    if (x->rank() != 2) return invalid_argument(ctx.where() + "input must be 2-D, got " + shape_to_string(x->shape()));
    DataType dt = has_dtype ? attr_dt : x->dtype();
    uint64_t one = 0;
    BH_RETURN_IF_ERROR(scalar_bits(1.0, dt, one, ctx.where()));
    BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, dt, x->shape()));
    BH_RETURN_IF_ERROR(fill_bits(out, 0, ctx.where()));
    const int64_t rows = x->dim(0), cols = x->dim(1);
    const size_t es = dtype_size(dt);
    char* p = static_cast<char*>(out.raw());
    for (int64_t i = 0; i < rows; ++i) {
      int64_t j = i + k;
      if (j >= 0 && j < cols) std::memcpy(p + (i * cols + j) * es, &one, es);
    }
    return Status::ok();
  });
}

// ---------------------------------------------------------------------------------------
// Trilu, OneHot, NonZero, Compress, ReverseSequence

Result<std::unique_ptr<Kernel>> make_trilu(const KernelInfo& info) {
  const bool upper = info.node.attr_int("upper", 1) != 0;
  return make_kernel([upper](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.input(0);
    if (!x) return invalid_argument(ctx.where() + "missing input");
    if (x->rank() < 2) return invalid_argument(ctx.where() + "input must have rank >= 2");
    BH_RETURN_IF_ERROR(need_host(*x, ctx.where(), "input"));
    int64_t k = 0;
    if (const Tensor* kt = ctx.input(1)) {
      BH_ASSIGN_OR_RETURN(auto kv, read_ints(kt, ctx.where(), "k"));
      if (kv.size() != 1) return invalid_argument(ctx.where() + "k must be a scalar");
      k = kv[0];
    }
    const int64_t n = x->dim(-2), m = x->dim(-1);
    k = std::clamp<int64_t>(k, -(n + 1), m + 1);  // beyond these every row is all-kept or all-zero
    BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, x->dtype(), x->shape()));
    if (out.numel() == 0) return Status::ok();
    const int64_t mats = x->numel() / (n * m);
    return by_elem_size(x->dtype(), ctx.where(), [&](auto tag) -> Status {
      using T = decltype(tag);
      const T* s = elems<T>(*x);
      T* d = elems<T>(out);
      parallel_for(ctx.threads(), mats * n, std::max<int64_t>(1, 16384 / m), [&](int64_t b, int64_t e) {
        for (int64_t row = b; row < e; ++row) {
          const int64_t i = row % n;
          const T* sp = s + row * m;
          T* dp = d + row * m;
          // keep j - i >= k (upper) or j - i <= k (lower)
          int64_t split = std::clamp<int64_t>(i + k + (upper ? 0 : 1), 0, m);
          if (upper) {
            std::fill_n(dp, split, T{});
            copy_elems(sp + split, m - split, dp + split);
          } else {
            copy_elems(sp, split, dp);
            std::fill_n(dp + split, m - split, T{});
          }
        }
      });
      return Status::ok();
    });
  });
}

Result<std::unique_ptr<Kernel>> make_one_hot(const KernelInfo& info) {
  const int64_t axis_attr = info.node.attr_int("axis", -1);
  return make_kernel([axis_attr](KernelContext& ctx) -> Status {
    const Tensor *ind = ctx.input(0), *dep = ctx.input(1), *vals = ctx.input(2);
    if (!ind || !dep || !vals) return invalid_argument(ctx.where() + "missing indices, depth or values");
    if (dep->numel() != 1) return invalid_argument(ctx.where() + "depth must hold one element");
    if (vals->numel() != 2 || vals->rank() > 1) return invalid_argument(ctx.where() + "values must be [off_value, on_value]");
    BH_RETURN_IF_ERROR(need_host(*vals, ctx.where(), "values"));
    BH_ASSIGN_OR_RETURN(double depth_d, element_as_double(*dep, 0, ctx.where(), "depth"));
    if (!(depth_d >= 1) || depth_d > 1e12) return invalid_argument(ctx.where() + "depth must be positive");
    const int64_t depth = static_cast<int64_t>(depth_d);
    BH_ASSIGN_OR_RETURN(auto idx, read_any_ints(*ind, ctx.where(), "indices"));
    const int r = ind->rank();
    int64_t a = axis_attr;
    if (a < -(r + 1) || a > r) return invalid_argument(ctx.where() + "axis " + std::to_string(a) + " out of range");
    if (a < 0) a += r + 1;
    Shape out_shape = ind->shape();
    out_shape.insert(out_shape.begin() + a, depth);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < r; ++d) (d < a ? outer : inner) *= ind->shape()[d];
    BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, vals->dtype(), out_shape));
    if (out.numel() == 0) return Status::ok();
    return by_elem_size(vals->dtype(), ctx.where(), [&](auto tag) -> Status {
      using T = decltype(tag);
      const T off = elems<T>(*vals)[0], on = elems<T>(*vals)[1];
      T* o = elems<T>(out);
      std::fill_n(o, out.numel(), off);
      for (int64_t p = 0; p < outer; ++p)
        for (int64_t i = 0; i < inner; ++i) {
          int64_t v = idx[p * inner + i];
          if (v < 0) v += depth;
          if (v < 0 || v >= depth) continue;
          o[(p * depth + v) * inner + i] = on;
        }
      return Status::ok();
    });
  });
}

// Whether each element is non-zero (-0.0 counts as zero).
Result<std::vector<uint8_t>> nonzero_mask(const Tensor& x, const std::string& where) {
  const int64_t n = x.numel();
  std::vector<uint8_t> m(static_cast<size_t>(n));
  if (n == 0) return m;
  if (x.dtype() == DataType::kString) {
    for (int64_t i = 0; i < n; ++i) m[i] = !x.strings()[i].empty();
    return m;
  }
  if (!x.raw()) return invalid_argument(where + "input is not in host memory");
  switch (x.dtype()) {
    case DataType::kFloat32: for (int64_t i = 0; i < n; ++i) m[i] = x.data<float>()[i] != 0.f; break;
    case DataType::kFloat64: for (int64_t i = 0; i < n; ++i) m[i] = x.data<double>()[i] != 0.0; break;
    case DataType::kFloat16:
    case DataType::kBFloat16: for (int64_t i = 0; i < n; ++i) m[i] = (x.data<uint16_t>()[i] & 0x7fff) != 0; break;
    default: {
      size_t es = dtype_size(x.dtype());
      if (es == 0) return unsupported(where + "unsupported element type " + dtype_name(x.dtype()));
      const uint8_t* p = static_cast<const uint8_t*>(x.raw());
      for (int64_t i = 0; i < n; ++i) {
        uint8_t any = 0;
        for (size_t b = 0; b < es; ++b) any |= p[i * es + b];
        m[i] = any != 0;
      }
    }
  }
  return m;
}

Result<std::unique_ptr<Kernel>> make_nonzero(const KernelInfo&) {
  return make_kernel([](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.input(0);
    if (!x) return invalid_argument(ctx.where() + "missing input");
    BH_ASSIGN_OR_RETURN(auto m, nonzero_mask(*x, ctx.where()));
    int64_t nnz = 0;
    for (uint8_t v : m) nnz += v;
    // A scalar is treated as a 1-element vector, as NumPy does.
    const Shape shape = x->rank() == 0 ? Shape{1} : x->shape();
    const int r = static_cast<int>(shape.size());
    BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, DataType::kInt64, Shape{r, nnz}));
    if (nnz == 0) return Status::ok();
    int64_t* o = out.data<int64_t>();
    std::vector<int64_t> c(r, 0);
    int64_t j = 0;
    for (size_t i = 0; i < m.size(); ++i) {
      if (m[i]) {
        for (int d = 0; d < r; ++d) o[d * nnz + j] = c[d];
        ++j;
      }
      for (int d = r - 1; d >= 0; --d) {
        if (++c[d] < shape[d]) break;
        c[d] = 0;
      }
    }
    return Status::ok();
  });
}

Result<std::unique_ptr<Kernel>> make_compress(const KernelInfo& info) {
  const bool has_axis = info.node.has_attr("axis");
  const int64_t axis_attr = info.node.attr_int("axis", 0);
  return make_kernel([=](KernelContext& ctx) -> Status {
    const Tensor *x = ctx.input(0), *cond = ctx.input(1);
    if (!x || !cond) return invalid_argument(ctx.where() + "missing input or condition");
    if (cond->rank() != 1) return invalid_argument(ctx.where() + "condition must be 1-D");
    BH_RETURN_IF_ERROR(need_host(*x, ctx.where(), "input"));
    BH_ASSIGN_OR_RETURN(auto cm, nonzero_mask(*cond, ctx.where()));
    Shape shape = x->shape();
    int axis = 0;
    if (has_axis) {
      BH_ASSIGN_OR_RETURN(axis, normalize_axis(axis_attr, x->rank(), ctx.where()));
      if (x->rank() == 0) return invalid_argument(ctx.where() + "cannot compress a scalar along an axis");
    } else {
      shape = Shape{x->numel()};
    }
    const int64_t dim = shape[axis];
    std::vector<int64_t> sel;
    for (size_t i = 0; i < cm.size(); ++i) {
      if (!cm[i]) continue;
      if (static_cast<int64_t>(i) >= dim)
        return invalid_argument(ctx.where() + "condition selects index " + std::to_string(i) + " beyond axis size " +
                                std::to_string(dim));
      sel.push_back(static_cast<int64_t>(i));
    }
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d) outer *= shape[d];
    for (int d = axis + 1; d < static_cast<int>(shape.size()); ++d) inner *= shape[d];
    Shape out_shape = shape;
    out_shape[axis] = static_cast<int64_t>(sel.size());
    BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, x->dtype(), out_shape));
    if (out.numel() == 0) return Status::ok();
    const int64_t ns = static_cast<int64_t>(sel.size());
    return by_elem_size(x->dtype(), ctx.where(), [&](auto tag) -> Status {
      using T = decltype(tag);
      const T* s = elems<T>(*x);
      T* d = elems<T>(out);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < ns; ++i) copy_elems(s + (o * dim + sel[i]) * inner, inner, d + (o * ns + i) * inner);
      return Status::ok();
    });
  });
}

Result<std::unique_ptr<Kernel>> make_reverse_sequence(const KernelInfo& info) {
  const int64_t batch_axis = info.node.attr_int("batch_axis", 1);
  const int64_t time_axis = info.node.attr_int("time_axis", 0);
  if (!((batch_axis == 0 && time_axis == 1) || (batch_axis == 1 && time_axis == 0)))
    return invalid_argument(info.where() + "batch_axis and time_axis must be 0 and 1 in some order");
  return make_kernel([=](KernelContext& ctx) -> Status {
    const Tensor *x = ctx.input(0), *lens_t = ctx.input(1);
    if (!x || !lens_t) return invalid_argument(ctx.where() + "missing input or sequence_lens");
    if (x->rank() < 2) return invalid_argument(ctx.where() + "input must have rank >= 2");
    BH_RETURN_IF_ERROR(need_host(*x, ctx.where(), "input"));
    BH_ASSIGN_OR_RETURN(auto lens, read_ints(lens_t, ctx.where(), "sequence_lens"));
    const int64_t nb = x->dim(static_cast<int>(batch_axis)), nt = x->dim(static_cast<int>(time_axis));
    if (static_cast<int64_t>(lens.size()) != nb)
      return invalid_argument(ctx.where() + "sequence_lens has " + std::to_string(lens.size()) + " entries for batch " +
                              std::to_string(nb));
    for (int64_t l : lens)
      if (l < 0 || l > nt)
        return invalid_argument(ctx.where() + "sequence length " + std::to_string(l) + " out of range [0, " +
                                std::to_string(nt) + "]");
    int64_t inner = 1;
    for (int d = 2; d < x->rank(); ++d) inner *= x->shape()[d];
    BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, x->dtype(), x->shape()));
    if (out.numel() == 0) return Status::ok();
    // element (t, b) lives at row t * nb + b (time-major) or b * nt + t (batch-major)
    auto row = [&](int64_t t, int64_t b) { return time_axis == 0 ? t * nb + b : b * nt + t; };
    return by_elem_size(x->dtype(), ctx.where(), [&](auto tag) -> Status {
      using T = decltype(tag);
      const T* s = elems<T>(*x);
      T* d = elems<T>(out);
      for (int64_t b = 0; b < nb; ++b)
        for (int64_t t = 0; t < nt; ++t) {
          int64_t src_t = t < lens[b] ? lens[b] - 1 - t : t;
          copy_elems(s + row(src_t, b) * inner, inner, d + row(t, b) * inner);
        }
      return Status::ok();
    });
  });
}

}  // namespace

void register_tensor_kernels(KernelTable& t) {
  t.add("Reshape", 1, make_reshape);
  t.add("Reshape", 5, make_reshape);
  t.add("Flatten", 1, make_flatten);
  t.add("Squeeze", 1, make_squeeze);
  t.add("Squeeze", 13, make_squeeze);
  t.add("Unsqueeze", 1, make_unsqueeze);
  t.add("Unsqueeze", 13, make_unsqueeze);
  t.add("Identity", 1, make_identity);
  t.add("Dropout", 1, make_dropout);
  t.add("Dropout", 12, make_dropout);
  t.add("Shape", 1, make_shape);
  t.add("Shape", 15, make_shape);
  t.add("Size", 1, make_size);
  t.add("ConstantOfShape", 9, make_constant_of_shape);
  t.add("Range", 11, make_range);
  t.add("EyeLike", 9, make_eye_like);
  t.add("Trilu", 14, make_trilu);
  t.add("OneHot", 9, make_one_hot);
  t.add("NonZero", 9, make_nonzero);
  t.add("Compress", 9, make_compress);
  t.add("ReverseSequence", 10, make_reverse_sequence);
  register_tensor_copy_kernels(t);
  register_tensor_resize_kernels(t);
}

}  // namespace bulkhead::cpu
