// Copies of any fixed-size element type (kernels/layout.cl, by element size): Transpose,
// Slice and Concat as strided boxes, Pad, and Gather. Shape-like inputs (Slice's starts,
// ends, axes and steps, Pad's pads, value and axes) must be constants, read here when the
// kernel is made; Gather takes constant or run-time indices.
#include <algorithm>
#include <cstring>
#include <limits>

#include "ops/families.h"

namespace bulkhead::opencl {
namespace {

std::string sized(const char* kernel, const Tensor& t) {
  return std::string(kernel) + "_" + std::to_string(dtype_size(t.dtype));
}

// A box of `dims` elements read at src_base + c . src and written at dst_base + c . dst.
struct BoxSpec {
  Dims dims, src, dst;
  int64_t src_base = 0, dst_base = 0;
};

Status copy_box(Call& call, const Tensor& from, const Tensor& to, BoxSpec b) {
  const int64_t n = numel(b.dims);
  if (n == 0) return Status::ok();
  OCL_TRY(call.check_size({&from, &to}));
  simplify(b.dims, {&b.src, &b.dst});
  if (b.dims.size() > OCL_MAX_RANK)
    return unsupported(call.where() + "the copy needs " + std::to_string(b.dims.size()) +
                       " dimensions, above the kernel's 8");
  Box p{};
  p.rank = static_cast<int>(b.dims.size());
  for (size_t d = 0; d < b.dims.size(); ++d) {
    p.dims[d] = static_cast<int>(b.dims[d]);
    p.src[d] = static_cast<int>(b.src[d]);
    p.dst[d] = static_cast<int>(b.dst[d]);
  }
  Buf src = from.buf(), dst = to.buf();
  src.offset += b.src_base;
  dst.offset += b.dst_base;
  return call.stream().dispatch(sized("copy_strided", from), items(n), n * dtype_size(from.dtype), src, dst, p);
}

// Copies `from` seen through `b` into a new output 0 of shape b.dims.
Status box_to_output(Call& call, const Tensor& from, BoxSpec b) {
  OCL_ASSIGN(Tensor out, call.output(0, from.dtype, b.dims));
  b.dst = strides_of(b.dims);
  b.dst_base = 0;
  return copy_box(call, from, out, std::move(b));
}

// ---------------------------------------------------------------------------------------
// Transpose

Status transpose(const Dims& attr, bool has_perm, Call& call) {
  const Tensor* x = call.input(0);
  if (!x) return invalid_argument(call.where() + "missing input");
  const int r = x->rank();
  Dims perm(r);
  if (!has_perm) {
    for (int i = 0; i < r; ++i) perm[i] = r - 1 - i;
  } else {
    if (static_cast<int>(attr.size()) != r)
      return invalid_argument(call.where() + "perm has " + std::to_string(attr.size()) + " entries for rank " +
                              std::to_string(r));
    std::vector<bool> seen(r, false);
    for (int i = 0; i < r; ++i) {
      OCL_ASSIGN(int a, normalize_axis(attr[i], r, call.where()));
      if (seen[a]) return invalid_argument(call.where() + "perm " + dims_text(attr) + " is not a permutation");
      seen[a] = true;
      perm[i] = a;
    }
  }
  const Dims st = strides_of(x->dims);
  BoxSpec b;
  for (int i = 0; i < r; ++i) {
    b.dims.push_back(x->dims[perm[i]]);
    b.src.push_back(st[perm[i]]);
  }
  return box_to_output(call, *x, std::move(b));
}

// ---------------------------------------------------------------------------------------
// Slice

struct SliceSpec {
  Dims starts, ends, axes, steps;  // axes and steps may be empty (defaults)
};

Result<BoxSpec> slice_box(const Dims& in, const SliceSpec& s, const std::string& where) {
  const int r = static_cast<int>(in.size());
  const size_t n = s.starts.size();
  if (s.ends.size() != n || (!s.axes.empty() && s.axes.size() != n) || (!s.steps.empty() && s.steps.size() != n))
    return invalid_argument(where + "starts, ends, axes and steps differ in length");
  if (s.axes.empty() && static_cast<int>(n) > r) return invalid_argument(where + "more starts than input dimensions");
  BoxSpec box{in, strides_of(in), {}, 0, 0};
  std::vector<bool> seen(r, false);
  for (size_t i = 0; i < n; ++i) {
    OCL_ASSIGN(int a, normalize_axis(s.axes.empty() ? static_cast<int64_t>(i) : s.axes[i], r, where));
    if (seen[a]) return invalid_argument(where + "axis " + std::to_string(a) + " repeated");
    seen[a] = true;
    const int64_t dim = in[a], step = s.steps.empty() ? 1 : s.steps[i];
    if (step == 0) return invalid_argument(where + "step cannot be 0");
    // Clamped in int64 so that INT64_MIN/MAX sentinels mean "from the end" / "to the end".
    int64_t b = s.starts[i] < 0 ? std::max(s.starts[i], -dim) + dim : s.starts[i];
    int64_t e = s.ends[i] < 0 ? std::max(s.ends[i], -dim - 1) + dim : s.ends[i];
    b = step > 0 ? std::clamp<int64_t>(b, 0, dim) : std::clamp<int64_t>(b, 0, dim - 1);
    e = step > 0 ? std::clamp<int64_t>(e, 0, dim) : std::clamp<int64_t>(e, -1, dim - 1);
    int64_t len = 0;
    if (step > 0 && e > b) len = (e - b - 1) / step + 1;
    if (step < 0 && b > e) len = (b - e - 1) / -step + 1;
    if (len > 0) box.src_base += b * box.src[a];
    box.src[a] *= step;
    box.dims[a] = len;
  }
  return box;
}

// ---------------------------------------------------------------------------------------
// Concat

Status concat(int64_t axis_attr, Call& call) {
  std::vector<const Tensor*> ins;
  for (size_t i = 0; i < call.num_inputs(); ++i) {
    if (!call.input(i)) return invalid_argument(call.where() + "input " + std::to_string(i) + " is missing");
    ins.push_back(call.input(i));
  }
  if (ins.empty() || ins[0]->rank() == 0) return invalid_argument(call.where() + "needs inputs of rank >= 1");
  const Tensor& first = *ins[0];
  OCL_ASSIGN(int axis, normalize_axis(axis_attr, first.rank(), call.where()));
  Dims shape = first.dims;
  shape[axis] = 0;
  for (size_t k = 0; k < ins.size(); ++k) {
    const Tensor& t = *ins[k];
    bool ok = t.dtype == first.dtype && t.rank() == first.rank();
    for (int d = 0; ok && d < first.rank(); ++d) ok = d == axis || t.dims[d] == first.dims[d];
    if (!ok)
      return invalid_argument(call.where() + "input " + std::to_string(k) + " " + t.describe() +
                              " does not concatenate with " + first.describe() + " on axis " + std::to_string(axis));
    shape[axis] += t.dims[axis];
  }
  OCL_ASSIGN(Tensor out, call.output(0, first.dtype, shape));
  const int64_t outer = numel(Dims(shape.begin(), shape.begin() + axis));
  const int64_t inner = numel(Dims(shape.begin() + axis + 1, shape.end())), row = shape[axis] * inner;
  int64_t at = 0;
  for (const Tensor* t : ins) {
    const int64_t run = t->dims[axis] * inner;
    OCL_TRY(copy_box(call, *t, out, BoxSpec{{outer, run}, {run, 1}, {row, 1}, 0, at}));
    at += run;
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// Pad

struct PadSpec {
  int mode = 0;        // constant, reflect, edge, wrap
  Dims pads, axes;     // axes empty: every axis
  uint64_t value = 0;  // the constant's bits (low bytes for narrow types)
};

Status pad(const PadSpec& s, Call& call) {
  const Tensor* x = call.input(0);
  if (!x) return invalid_argument(call.where() + "missing input");
  const int r = x->rank();
  if (r > OCL_MAX_RANK) return unsupported(call.where() + "rank " + std::to_string(r) + " is above the kernel's 8");
  Dims before(r, 0), after(r, 0);
  const size_t na = s.axes.empty() ? static_cast<size_t>(r) : s.axes.size();
  if (s.pads.size() != 2 * na)
    return invalid_argument(call.where() + "pads has " + std::to_string(s.pads.size()) + " entries for " +
                            std::to_string(na) + " axes");
  for (size_t i = 0; i < na; ++i) {
    OCL_ASSIGN(int a, normalize_axis(s.axes.empty() ? static_cast<int64_t>(i) : s.axes[i], r, call.where()));
    before[a] = s.pads[i];
    after[a] = s.pads[na + i];
  }
  // Negative pads crop the input first; the mode then pads the cropped region.
  const Dims st = strides_of(x->dims);
  Dims shape(r);
  Pad p{};
  int64_t base = 0;
  for (int d = 0; d < r; ++d) {
    const int64_t crop = x->dims[d] - std::max<int64_t>(-before[d], 0) - std::max<int64_t>(-after[d], 0);
    if (crop < 0)
      return invalid_argument(call.where() + "negative pads remove more than axis " + std::to_string(d) + " of " +
                              x->describe() + " holds");
    shape[d] = crop + std::max<int64_t>(before[d], 0) + std::max<int64_t>(after[d], 0);
    if (s.mode != 0 && crop == 0 && shape[d] > 0)
      return invalid_argument(call.where() + "cannot pad an empty axis in this mode");
    if (shape[d] > std::numeric_limits<int32_t>::max())
      return unsupported(call.where() + "the padded axis is too large");
    base += std::max<int64_t>(-before[d], 0) * st[d];
    p.dims[d] = static_cast<int>(shape[d]);
    p.crop[d] = static_cast<int>(crop);
    p.before[d] = static_cast<int>(std::max<int64_t>(before[d], 0));
    p.stride[d] = static_cast<int>(st[d]);
  }
  p.rank = r;
  p.mode = s.mode;
  OCL_ASSIGN(Tensor out, call.output(0, x->dtype, shape));
  if (out.numel() == 0) return Status::ok();
  OCL_TRY(call.check_size({x, &out}));
  Buf src = x->buf();
  src.offset += base;
  const cl_ulong value = s.value;
  return call.stream().dispatch(sized("pad", *x), items(out.numel()), out.nbytes(), src, out.buf(), p, value);
}

// The bits of `v` in element type `t` (the float `value` attribute before opset 11).
uint64_t value_bits(float v, int32_t t) {
  uint64_t bits = 0;
  const double d = v;
  switch (t) {
    case BH_TYPE_FLOAT32:
      std::memcpy(&bits, &v, 4);
      break;
    case BH_TYPE_FLOAT64:
      std::memcpy(&bits, &d, 8);
      break;
    case BH_TYPE_FLOAT16:
    case BH_TYPE_BFLOAT16:
    case BH_TYPE_BOOL:
      break;  // refused where it matters
    default:
      bits = static_cast<uint64_t>(static_cast<int64_t>(v));
      break;  // integers: two's complement, low bytes
  }
  return bits;
}

// ---------------------------------------------------------------------------------------
// Gather

// Every index is checked against the gathered axis on the host, as the CPU checks it, so
// that one out of range is the same error on both. Constant indices were read when the
// kernel was made; indices computed at run time are read back (a sync point only for such
// Gathers). The checked, non-negative indices are uploaded as int32 for the kernel.
Status gather(int64_t axis_attr, const Dims* constant, Call& call) {
  const Tensor* x = call.input(0);
  const Tensor* ind = call.input(1);
  if (!x || !ind) return invalid_argument(call.where() + "missing data or indices");
  if (ind->dtype != BH_TYPE_INT64 && ind->dtype != BH_TYPE_INT32)
    return invalid_argument(call.where() + "indices must be int64 or int32, got " + dtype_name(ind->dtype));
  if (x->rank() == 0) return invalid_argument(call.where() + "data must have rank >= 1");
  OCL_ASSIGN(int axis, normalize_axis(axis_attr, x->rank(), call.where()));
  Dims shape(x->dims.begin(), x->dims.begin() + axis);
  shape.insert(shape.end(), ind->dims.begin(), ind->dims.end());
  shape.insert(shape.end(), x->dims.begin() + axis + 1, x->dims.end());
  const int64_t dim = x->dims[axis], count = ind->numel();
  Dims read_back;
  if (!constant && count > 0) {
    read_back.resize(count);
    if (ind->dtype == BH_TYPE_INT64) {
      OCL_TRY(call.stream().read(ind->mem, ind->offset, read_back.data(), ind->nbytes()));
    } else {
      std::vector<int32_t> v(count);
      OCL_TRY(call.stream().read(ind->mem, ind->offset, v.data(), ind->nbytes()));
      std::copy(v.begin(), v.end(), read_back.begin());
    }
    constant = &read_back;
  }
  if (constant && static_cast<int64_t>(constant->size()) != count)
    return internal_error(call.where() + "the indices changed shape since the kernel was made");
  std::vector<int32_t> idx(count);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t k = (*constant)[i];
    if (k < -dim || k >= dim)
      return invalid_argument(call.where() + "index " + std::to_string(k) +
                              " is out of range for a dimension of size " + std::to_string(dim));
    idx[i] = static_cast<int32_t>(k < 0 ? k + dim : k);
  }
  OCL_ASSIGN(Tensor y, call.output(0, x->dtype, shape));
  if (y.numel() == 0) return Status::ok();
  OCL_TRY(call.check_size({x, &y}));
  OCL_ASSIGN(Tensor table, call.scratch(BH_TYPE_INT32, count));
  OCL_TRY(call.stream().upload(table.mem, table.offset, idx.data(), idx.size() * sizeof(int32_t)));
  const int inner = static_cast<int>(numel(Dims(x->dims.begin() + axis + 1, x->dims.end())));
  return call.stream().dispatch(sized("gather", *x), items(y.numel()), y.nbytes(), x->buf(), table.buf(), y.buf(),
                                static_cast<int>(count), static_cast<int>(dim), inner);
}

}  // namespace

Result<OpPtr> make_transpose(const Node& n) {
  OCL_TRY(n.require_types(kAnyFixed, {0}));
  const Dims perm = n.attr_ints("perm");
  const bool has = n.has_attr("perm");
  return make_op([perm, has](Call& call) { return transpose(perm, has, call); });
}

Result<OpPtr> make_slice(const Node& n) {
  OCL_TRY(n.require_types(kAnyFixed, {0}));
  SliceSpec spec;
  if (n.opset() < 10) {
    spec.starts = n.attr_ints("starts");
    spec.ends = n.attr_ints("ends");
    spec.axes = n.attr_ints("axes");
  } else {
    OCL_ASSIGN(spec.starts, n.constant_ints(1, "starts"));
    OCL_ASSIGN(spec.ends, n.constant_ints(2, "ends"));
    if (n.has_input(3)) {
      OCL_ASSIGN(spec.axes, n.constant_ints(3, "axes"));
    }
    if (n.has_input(4)) {
      OCL_ASSIGN(spec.steps, n.constant_ints(4, "steps"));
    }
  }
  return make_op([spec](Call& call) -> Status {
    const Tensor* x = call.input(0);
    if (!x) return invalid_argument(call.where() + "missing input");
    OCL_ASSIGN(BoxSpec box, slice_box(x->dims, spec, call.where()));
    return box_to_output(call, *x, std::move(box));
  });
}

Result<OpPtr> make_concat(const Node& n) {
  OCL_TRY(n.require_types(kAnyFixed));
  if (!n.has_attr("axis") && n.opset() >= 4) return invalid_argument(n.where() + "missing required attribute 'axis'");
  const int64_t axis = n.attr_int("axis", 1);
  return make_op([axis](Call& call) { return concat(axis, call); });
}

Result<OpPtr> make_pad(const Node& n) {
  OCL_TRY(n.require_types(kAnyFixed, {0}));
  PadSpec s;
  const std::string mode = n.attr_string("mode", "constant");
  const char* modes[] = {"constant", "reflect", "edge", "wrap"};
  s.mode = static_cast<int>(std::find(std::begin(modes), std::end(modes), mode) - std::begin(modes));
  if (s.mode == 4) return invalid_argument(n.where() + "unknown pad mode '" + mode + "'");
  const int32_t type = n.input_type(0);
  if (n.opset() < 11) {
    const char* name = n.opset() < 2 ? "paddings" : "pads";
    if (!n.has_attr(name)) return invalid_argument(n.where() + "missing attribute '" + name + "'");
    s.pads = n.attr_ints(name);
    const float v = n.attr_float("value", 0.f);
    if (v != 0.f && (type == BH_TYPE_FLOAT16 || type == BH_TYPE_BFLOAT16 || type == BH_TYPE_BOOL))
      return unsupported(n.where() + "the OpenCL Pad takes a nonzero value only for float32/64 and integers");
    s.value = value_bits(v, type);
  } else {
    OCL_ASSIGN(s.pads, n.constant_ints(1, "pads"));
    if (n.has_input(3)) {
      OCL_ASSIGN(s.axes, n.constant_ints(3, "axes"));
    }
    if (n.has_input(2)) {
      const BhpValueInfo& v = n.input(2);
      if (!n.is_constant(2)) return unsupported(n.where() + "the OpenCL Pad takes constant_value only as a constant");
      if (v.constant_data && v.constant_size > 0) {
        if (v.dtype != type || v.constant_size != dtype_size(type))
          return unsupported(n.where() + "constant_value must be one " + dtype_name(type));
        std::memcpy(&s.value, v.constant_data, v.constant_size);
      }
    }
  }
  return make_op([s](Call& call) { return pad(s, call); });
}

Result<OpPtr> make_gather(const Node& n) {
  OCL_TRY(n.require_types(kAnyFixed, {0}));
  OCL_TRY(n.require_types({BH_TYPE_INT64, BH_TYPE_INT32}, {1}));
  const int64_t axis = n.attr_int("axis", 0);
  if (!n.is_constant(1)) return make_op([axis](Call& call) { return gather(axis, nullptr, call); });
  OCL_ASSIGN(Dims indices, n.constant_ints(1, "indices"));
  return make_op([axis, indices](Call& call) { return gather(axis, &indices, call); });
}

}  // namespace bulkhead::opencl
