// Layout kernels on Vulkan: the views (Reshape, Flatten, Squeeze, Unsqueeze, Identity),
// which hand the input's buffer on with a new shape and record nothing, and the copies
// (Transpose, Concat, Slice, Pad, Gather, Resize). The copies move 32-bit words, so any
// 4-byte type moves bitwise and 8-byte types move as two words (float32, float64, int32,
// uint32, int64, uint64); views take every fixed-size type. Resize takes 4-D inputs:
// nearest as an exact gather over any axis, linear for float32 over H and W (NCHW).
//
// Shape-like inputs (Reshape's shape, Squeeze/Unsqueeze axes, Slice's starts/ends/axes/
// steps, Pad's pads/value/axes, Resize's scales/sizes) must be constants: they are read
// here, when the session is built, since on the device they are device-local.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>

#include "backends/vulkan/kernels/kernels.h"
#include "ir/graph.h"

namespace bulkhead::vulkan {
namespace {

constexpr int kMaxRank = 6;
using Ints = std::vector<int64_t>;

// Types the copy shaders move bitwise (32-bit words per element: 1 or 2).
const std::initializer_list<DataType> kMoved = {DataType::kFloat32, DataType::kInt32,  DataType::kUInt32,
                                                DataType::kInt64,   DataType::kUInt64, DataType::kFloat64};
// Types a view passes on: every fixed-size type (the bytes are not touched).
const std::initializer_list<DataType> kViewed = {
    DataType::kFloat32, DataType::kInt32,   DataType::kUInt32,  DataType::kInt64,  DataType::kUInt64,
    DataType::kFloat64, DataType::kUInt8,   DataType::kInt8,    DataType::kUInt16, DataType::kInt16,
    DataType::kBool,    DataType::kFloat16, DataType::kBFloat16};
uint32_t words_of(DataType t) { return dtype_size(t) == 8 ? 2 : 1; }

using Factory = Result<std::unique_ptr<Kernel>>;

// Input `i` as int64 values from a constant int64/int32 tensor; `absent` when
// omitted.
Result<Ints> constant_ints(const KernelInfo& info, size_t i, const char* what, bool* absent = nullptr) {
  if (absent) *absent = i >= info.node.inputs.size() || info.node.inputs[i].empty();
  if (absent && *absent) return Ints{};
  if (!info.input_is_constant(i))
    return unsupported(info.where() + "the Vulkan kernel takes " + what + " only as a constant");
  const Tensor& t = info.constant_inputs[i];
  if (t.numel() > 0 && !t.raw()) return unsupported(info.where() + what + " is not in host memory");
  Ints v(static_cast<size_t>(t.numel()));
  if (t.dtype() == DataType::kInt64)
    std::copy_n(t.data<int64_t>(), v.size(), v.begin());
  else if (t.dtype() == DataType::kInt32)
    std::copy_n(t.data<int32_t>(), v.size(), v.begin());
  else
    return unsupported(info.where() + what + " must be int64 or int32, got " + dtype_name(t.dtype()));
  return v;
}

Result<int> axis_in(int64_t a, int rank, const std::string& where) {
  if (a < -rank || a >= rank)
    return invalid_argument(where + "axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
  return static_cast<int>(a < 0 ? a + rank : a);
}

Ints contiguous_strides(const Shape& s) {
  Ints st(s.size(), 1);
  for (int d = static_cast<int>(s.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * s[d + 1];
  return st;
}

Status check_size(int64_t elements, uint32_t words, const std::string& where) {
  if (elements * words >= std::numeric_limits<int32_t>::max())
    return unsupported(where + "tensor too large for the Vulkan kernel");
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// Views

using ShapeFn = std::function<Result<Shape>(const Shape& in, const std::string& where)>;

class ViewKernel final : public Kernel {
 public:
  explicit ViewKernel(ShapeFn fn) : fn_(std::move(fn)) {}
  Status compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.input(0);
    if (!x) return invalid_argument(ctx.where() + "missing input");
    BH_ASSIGN_OR_RETURN(Shape s, fn_(x->shape(), ctx.where()));
    if (shape_numel(s) != x->numel())
      return invalid_argument(ctx.where() + "cannot view " + x->describe() + " as " + shape_to_string(s));
    return ctx.set_output(0, Value(Tensor(x->dtype(), std::move(s), x->buffer(), x->offset())));
  }

 private:
  ShapeFn fn_;
};

Factory view(const KernelInfo& info, ShapeFn fn) {
  BH_RETURN_IF_ERROR(require_types(info, kViewed, {0}));
  return std::unique_ptr<Kernel>(std::make_unique<ViewKernel>(std::move(fn)));
}

Result<Shape> reshape_target(const Shape& in, const Ints& spec, bool allowzero, const std::string& where) {
  Shape out(spec.size());
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t s = spec[i];
    if (s == -1 && infer < 0) {
      infer = static_cast<int>(i);
      continue;
    }
    if (s < 0) return invalid_argument(where + "shape " + shape_to_string(spec) + " is invalid");
    if (s == 0 && !allowzero) {
      if (i >= in.size())
        return invalid_argument(where + "shape " + shape_to_string(spec) + " copies a missing dimension");
      s = in[i];
    }
    out[i] = s;
    known *= s;
  }
  const int64_t total = shape_numel(in);
  if (infer >= 0) {
    if (known == 0 || total % known != 0)
      return invalid_argument(where + "cannot reshape " + shape_to_string(in) + " to " + shape_to_string(spec));
    out[infer] = total / known;
  }
  return out;
}

Factory make_reshape(const KernelInfo& info) {
  Ints spec = info.node.attr_ints("shape");
  if (info.node.opset >= 5) {
    BH_ASSIGN_OR_RETURN(spec, constant_ints(info, 1, "shape"));
  }
  const bool allowzero = info.node.attr_int("allowzero", 0) != 0;
  return view(info, [spec, allowzero](const Shape& in, const std::string& where) {
    return reshape_target(in, spec, allowzero, where);
  });
}

Factory make_flatten(const KernelInfo& info) {
  const int64_t axis = info.node.attr_int("axis", 1);
  return view(info, [axis](const Shape& in, const std::string& where) -> Result<Shape> {
    const int r = static_cast<int>(in.size());
    if (axis < -r || axis > r) return invalid_argument(where + "axis " + std::to_string(axis) + " is out of range");
    const int64_t a = axis < 0 ? axis + r : axis;
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < r; ++d) (d < a ? outer : inner) *= in[d];
    return Shape{outer, inner};
  });
}

Factory make_squeeze(const KernelInfo& info) {
  Ints axes = info.node.attr_ints("axes");
  bool absent = false;  // an omitted axes input squeezes every dimension of size 1
  if (info.node.opset >= 13) {
    BH_ASSIGN_OR_RETURN(axes, constant_ints(info, 1, "axes", &absent));
  }
  return view(info, [axes](const Shape& in, const std::string& where) -> Result<Shape> {
    const int r = static_cast<int>(in.size());
    std::vector<bool> drop(r, axes.empty());
    for (int d = 0; d < r && axes.empty(); ++d) drop[d] = in[d] == 1;
    for (int64_t a0 : axes) {
      BH_ASSIGN_OR_RETURN(int a, axis_in(a0, r, where));
      if (in[a] != 1)
        return invalid_argument(where + "cannot squeeze axis " + std::to_string(a0) + " of " + shape_to_string(in));
      drop[a] = true;
    }
    Shape out;
    for (int d = 0; d < r; ++d)
      if (!drop[d]) out.push_back(in[d]);
    return out;
  });
}

Factory make_unsqueeze(const KernelInfo& info) {
  Ints axes = info.node.attr_ints("axes");
  if (info.node.opset >= 13) {
    BH_ASSIGN_OR_RETURN(axes, constant_ints(info, 1, "axes"));
  }
  return view(info, [axes](const Shape& in, const std::string& where) -> Result<Shape> {
    const int r = static_cast<int>(in.size() + axes.size());
    std::vector<bool> added(r, false);
    for (int64_t a0 : axes) {
      BH_ASSIGN_OR_RETURN(int a, axis_in(a0, r, where));
      if (added[a]) return invalid_argument(where + "axes repeat axis " + std::to_string(a));
      added[a] = true;
    }
    Shape out(r);
    for (int d = 0, j = 0; d < r; ++d) out[d] = added[d] ? 1 : in[j++];
    return out;
  });
}

// Identity passes its input through whatever it is: a tensor (the same buffer, no
// dispatch), a sequence or an optional.
class IdentityKernel final : public Kernel {
 public:
  Status compute(KernelContext& ctx) const override {
    const Value* v = ctx.input_value(0);
    if (!v) return invalid_argument(ctx.where() + "missing input");
    return ctx.set_output(0, *v);
  }
};

Factory make_identity(const KernelInfo& info) {
  BH_RETURN_IF_ERROR(require_types(info, kViewed, {0}));
  return std::unique_ptr<Kernel>(std::make_unique<IdentityKernel>());
}

// ---------------------------------------------------------------------------------------
// Strided copies (shaders/layout_strided.comp): Transpose, Slice, Concat

struct StridedPush {
  uint32_t n, rank, words, src_base, dst_base;
  uint32_t dims[kMaxRank];
  int32_t src_stride[kMaxRank];
  uint32_t dst_stride[kMaxRank];
};

// A box of `dims` elements read at src_base + c . src_stride and written at
// dst_base + c . dst_stride (elements).
struct Box {
  Shape dims;
  Ints src_stride, dst_stride;
  int64_t src_base = 0, dst_base = 0;
};

// Drops axes of size 1 and merges axes contiguous in both tensors, so that
// boxes of rank above 6 still fit the shader when their layout allows.
Box simplified(const Box& b) {
  Box o;
  o.src_base = b.src_base;
  o.dst_base = b.dst_base;
  for (size_t d = 0; d < b.dims.size(); ++d) {
    const int64_t n = b.dims[d], ss = b.src_stride[d], ds = b.dst_stride[d];
    if (n == 1) continue;
    if (!o.dims.empty() && o.src_stride.back() == ss * n && o.dst_stride.back() == ds * n) {
      o.dims.back() *= n;
      o.src_stride.back() = ss;
      o.dst_stride.back() = ds;
      continue;
    }
    o.dims.push_back(n);
    o.src_stride.push_back(ss);
    o.dst_stride.push_back(ds);
  }
  return o;
}

Status copy_box(KernelContext& ctx, const Tensor& src, const Tensor& dst, const Box& box) {
  const int64_t n = shape_numel(box.dims);
  if (n == 0) return Status::ok();
  BH_ASSIGN_OR_RETURN(RunState * rs, run_state(ctx));
  const uint32_t words = words_of(src.dtype());
  BH_RETURN_IF_ERROR(check_size(src.numel(), words, ctx.where()));
  BH_RETURN_IF_ERROR(check_size(dst.numel(), words, ctx.where()));
  const Box b = simplified(box);
  if (b.dims.size() > kMaxRank)
    return unsupported(ctx.where() + "the copy needs " + std::to_string(b.dims.size()) +
                       " dimensions, above the Vulkan kernel's 6");
  StridedPush p{};
  p.n = static_cast<uint32_t>(n);
  p.rank = static_cast<uint32_t>(std::max<size_t>(b.dims.size(), 1));
  p.words = words;
  p.src_base = static_cast<uint32_t>(b.src_base);
  p.dst_base = static_cast<uint32_t>(b.dst_base);
  p.dims[0] = 1;
  for (size_t d = 0; d < b.dims.size(); ++d) {
    p.dims[d] = static_cast<uint32_t>(b.dims[d]);
    p.src_stride[d] = static_cast<int32_t>(b.src_stride[d]);
    p.dst_stride[d] = static_cast<uint32_t>(b.dst_stride[d]);
  }
  Groups g = groups_for(static_cast<uint64_t>(n));
  return rs->dispatch("layout_strided", {{&src, false}, {&dst, true}}, &p, sizeof p, g.x, g.y);
}

// Copies `src` seen through `box` into a new contiguous output 0 of shape
// box.dims.
Status box_to_output(KernelContext& ctx, const Tensor& src, Box box) {
  BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, src.dtype(), box.dims));
  box.dst_stride = contiguous_strides(box.dims);
  box.dst_base = 0;
  return copy_box(ctx, src, out, box);
}

Result<Ints> permutation(const Ints& attr, bool has, int r, const std::string& where) {
  Ints perm(r);
  if (!has) {
    for (int i = 0; i < r; ++i) perm[i] = r - 1 - i;
    return perm;
  }
  if (static_cast<int>(attr.size()) != r)
    return invalid_argument(where + "perm has " + std::to_string(attr.size()) + " entries for rank " +
                            std::to_string(r));
  std::vector<bool> seen(r, false);
  for (int i = 0; i < r; ++i) {
    BH_ASSIGN_OR_RETURN(int a, axis_in(attr[i], r, where));
    if (seen[a]) return invalid_argument(where + "perm is not a permutation");
    seen[a] = true;
    perm[i] = a;
  }
  return perm;
}

Factory make_transpose(const KernelInfo& info) {
  BH_RETURN_IF_ERROR(require_types(info, kMoved, {0}));
  const Ints attr = info.node.attr_ints("perm");
  const bool has = info.node.has_attr("perm");
  if (attr.size() > kMaxRank) return unsupported(info.where() + "the Vulkan Transpose takes rank 6 at most");
  return make_kernel([attr, has](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.input(0);
    if (!x) return invalid_argument(ctx.where() + "missing input");
    const int r = x->rank();
    BH_ASSIGN_OR_RETURN(Ints perm, permutation(attr, has, r, ctx.where()));
    const Ints in_st = contiguous_strides(x->shape());
    Box box;
    for (int i = 0; i < r; ++i) {
      box.dims.push_back(x->shape()[perm[i]]);
      box.src_stride.push_back(in_st[perm[i]]);
    }
    return box_to_output(ctx, *x, box);
  });
}

struct SliceSpec {
  Ints starts, ends, axes, steps;  // axes and steps may be empty (defaults)
};

// The box a slice of `in` reads.
Result<Box> slice_box(const Shape& in, const SliceSpec& s, const std::string& where) {
  const int r = static_cast<int>(in.size());
  const size_t n = s.starts.size();
  if (s.ends.size() != n || (!s.axes.empty() && s.axes.size() != n) || (!s.steps.empty() && s.steps.size() != n))
    return invalid_argument(where + "starts, ends, axes and steps differ in length");
  if (s.axes.empty() && static_cast<int>(n) > r) return invalid_argument(where + "more starts than input dimensions");
  Box box{in, contiguous_strides(in), {}, 0, 0};
  std::vector<bool> seen(r, false);
  for (size_t i = 0; i < n; ++i) {
    BH_ASSIGN_OR_RETURN(int a, axis_in(s.axes.empty() ? static_cast<int64_t>(i) : s.axes[i], r, where));
    if (seen[a]) return invalid_argument(where + "axis " + std::to_string(a) + " repeated");
    seen[a] = true;
    const int64_t dim = in[a], step = s.steps.empty() ? 1 : s.steps[i];
    if (step == 0) return invalid_argument(where + "step cannot be 0");
    int64_t b = s.starts[i] < 0 ? s.starts[i] + dim : s.starts[i];
    int64_t e = s.ends[i] < 0 ? s.ends[i] + dim : s.ends[i];
    b = step > 0 ? std::clamp<int64_t>(b, 0, dim) : std::clamp<int64_t>(b, 0, dim - 1);
    e = step > 0 ? std::clamp<int64_t>(e, 0, dim) : std::clamp<int64_t>(e, -1, dim - 1);
    int64_t len = 0;
    if (step > 0 && e > b) len = (e - b + step - 1) / step;
    if (step < 0 && b > e) len = (b - e - step - 1) / -step;
    box.src_base += len > 0 ? b * box.src_stride[a] : 0;
    box.src_stride[a] *= step;
    box.dims[a] = len;
  }
  return box;
}

Factory make_slice(const KernelInfo& info) {
  BH_RETURN_IF_ERROR(require_types(info, kMoved, {0}));
  SliceSpec spec;
  if (info.node.opset < 10) {
    spec.starts = info.node.attr_ints("starts");
    spec.ends = info.node.attr_ints("ends");
    spec.axes = info.node.attr_ints("axes");
  } else {
    BH_ASSIGN_OR_RETURN(spec.starts, constant_ints(info, 1, "starts"));
    BH_ASSIGN_OR_RETURN(spec.ends, constant_ints(info, 2, "ends"));
    bool absent = false;
    BH_ASSIGN_OR_RETURN(spec.axes, constant_ints(info, 3, "axes", &absent));
    BH_ASSIGN_OR_RETURN(spec.steps, constant_ints(info, 4, "steps", &absent));
  }
  return make_kernel([spec](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.input(0);
    if (!x) return invalid_argument(ctx.where() + "missing input");
    BH_ASSIGN_OR_RETURN(Box box, slice_box(x->shape(), spec, ctx.where()));
    return box_to_output(ctx, *x, box);
  });
}

// The output shape of a Concat of `ins` along `axis`, after checking they
// agree.
Result<Shape> concat_shape(const std::vector<const Tensor*>& ins, int axis, const std::string& where) {
  const Tensor& a = *ins[0];
  Shape out = a.shape();
  out[axis] = 0;
  for (size_t k = 0; k < ins.size(); ++k) {
    const Tensor& t = *ins[k];
    bool ok = t.dtype() == a.dtype() && t.rank() == a.rank();
    for (int d = 0; ok && d < a.rank(); ++d) ok = d == axis || t.shape()[d] == a.shape()[d];
    if (!ok)
      return invalid_argument(where + "input " + std::to_string(k) + " " + t.describe() +
                              " does not concatenate with " + a.describe());
    out[axis] += t.shape()[axis];
  }
  return out;
}

Status concat_compute(KernelContext& ctx, int64_t axis_attr) {
  std::vector<const Tensor*> ins;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.input(i)) return invalid_argument(ctx.where() + "input " + std::to_string(i) + " is missing");
    ins.push_back(ctx.input(i));
  }
  if (ins.empty() || ins[0]->rank() == 0) return invalid_argument(ctx.where() + "needs inputs of rank >= 1");
  BH_ASSIGN_OR_RETURN(int axis, axis_in(axis_attr, ins[0]->rank(), ctx.where()));
  BH_ASSIGN_OR_RETURN(Shape shape, concat_shape(ins, axis, ctx.where()));
  BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, ins[0]->dtype(), shape));
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= shape[d];
  for (int d = axis + 1; d < static_cast<int>(shape.size()); ++d) inner *= shape[d];
  const int64_t row = shape[axis] * inner;
  int64_t at = 0;
  for (const Tensor* t : ins) {
    const int64_t run = t->shape()[axis] * inner;
    Box box{{outer, run}, {run, 1}, {row, 1}, 0, at};
    BH_RETURN_IF_ERROR(copy_box(ctx, *t, out, box));
    at += run;
  }
  return Status::ok();
}

Factory make_concat(const KernelInfo& info) {
  BH_RETURN_IF_ERROR(require_types(info, kMoved));
  if (!info.node.has_attr("axis") && info.node.opset >= 4)
    return invalid_argument(info.where() + "missing required attribute 'axis'");
  const int64_t axis = info.node.attr_int("axis", 1);
  return make_kernel([axis](KernelContext& ctx) { return concat_compute(ctx, axis); });
}

// ---------------------------------------------------------------------------------------
// Gather (shaders/layout_gather.comp)

struct GatherPush {
  uint32_t n, words, idx_words, count, dim, inner;
};

// Every index is checked on the host against the gathered axis, as the CPU kernel checks
// it, so that an index out of range is the same error on both backends (the shader itself
// can only write zeros for one). Constant indices (`host_indices`) were read once when the
// kernel was made; indices computed at run time are read back from the device — the run's
// work so far is submitted first — a small copy, and a sync point only for such Gathers.
Status gather_compute(KernelContext& ctx, int64_t axis_attr, const std::vector<int64_t>* host_indices) {
  const Tensor* x = ctx.input(0);
  const Tensor* ind = ctx.input(1);
  if (!x || !ind) return invalid_argument(ctx.where() + "missing data or indices");
  if (x->rank() == 0) return invalid_argument(ctx.where() + "data must have rank >= 1");
  BH_ASSIGN_OR_RETURN(int axis, axis_in(axis_attr, x->rank(), ctx.where()));
  const Shape& in = x->shape();
  std::vector<int64_t> read_back;
  if (!host_indices && ind->numel() > 0) {
    BH_ASSIGN_OR_RETURN(RunState * rs0, run_state(ctx));
    BH_RETURN_IF_ERROR(rs0->flush());
    Tensor h = Tensor::host(ind->dtype(), ind->shape());
    BH_RETURN_IF_ERROR(rs0->device().copy(*ind, h).with_context(ctx.where() + "reading the indices back: "));
    read_back.resize(static_cast<size_t>(h.numel()));
    for (int64_t i = 0; i < h.numel(); ++i)
      read_back[i] = h.dtype() == DataType::kInt64 ? h.data<int64_t>()[i] : h.data<int32_t>()[i];
    host_indices = &read_back;
  }
  if (host_indices)
    for (int64_t i : *host_indices)
      if (i < -in[axis] || i >= in[axis])
        return invalid_argument(ctx.where() + "index " + std::to_string(i) + " is out of range for a dimension of size " +
                                std::to_string(in[axis]));
  Shape shape(in.begin(), in.begin() + axis);
  shape.insert(shape.end(), ind->shape().begin(), ind->shape().end());
  shape.insert(shape.end(), in.begin() + axis + 1, in.end());
  BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, x->dtype(), shape));
  if (out.numel() == 0) return Status::ok();
  if (in[axis] == 0) return invalid_argument(ctx.where() + "cannot gather from an empty axis");
  const uint32_t words = words_of(x->dtype());
  BH_RETURN_IF_ERROR(check_size(out.numel(), words, ctx.where()));
  BH_RETURN_IF_ERROR(check_size(x->numel(), words, ctx.where()));
  int64_t inner = 1;
  for (int d = axis + 1; d < x->rank(); ++d) inner *= in[d];
  BH_ASSIGN_OR_RETURN(RunState * rs, run_state(ctx));
  GatherPush p{static_cast<uint32_t>(out.numel()),
               words,
               words_of(ind->dtype()),
               static_cast<uint32_t>(ind->numel()),
               static_cast<uint32_t>(in[axis]),
               static_cast<uint32_t>(inner)};
  Groups g = groups_for(out.numel());
  return rs->dispatch("layout_gather", {{x, false}, {ind, false}, {&out, true}}, &p, sizeof p, g.x, g.y);
}

Factory make_gather(const KernelInfo& info) {
  BH_RETURN_IF_ERROR(require_types(info, kMoved, {0}));
  BH_RETURN_IF_ERROR(require_types(info, {DataType::kInt64, DataType::kInt32}, {1}));
  const int64_t axis = info.node.attr_int("axis", 0);
  if (!info.input_is_constant(1) || !info.constant_inputs[1].on_host())
    return make_kernel([axis](KernelContext& ctx) { return gather_compute(ctx, axis, nullptr); });
  const Tensor& c = info.constant_inputs[1];
  std::vector<int64_t> indices(static_cast<size_t>(c.numel()));
  for (int64_t i = 0; i < c.numel(); ++i)
    indices[i] = c.dtype() == DataType::kInt64 ? c.data<int64_t>()[i] : c.data<int32_t>()[i];
  return make_kernel([axis, indices](KernelContext& ctx) { return gather_compute(ctx, axis, &indices); });
}

// ---------------------------------------------------------------------------------------
// Pad (shaders/layout_pad.comp)

struct PadPush {
  uint32_t n, rank, words, mode;
  uint32_t value[2];
  uint32_t base;
  uint32_t dims[kMaxRank];
  int32_t crop[kMaxRank];
  int32_t before[kMaxRank];
  uint32_t stride[kMaxRank];
};
static_assert(sizeof(PadPush) <= kPushBytes);

struct PadSpec {
  uint32_t mode = 0;   // constant, reflect, edge, wrap
  Ints pads, axes;     // axes empty: every axis
  uint64_t value = 0;  // the constant's bits
};

// Per-axis pads before and after for an input of rank `r`.
Status expand_pads(const PadSpec& s, int r, Ints& before, Ints& after, const std::string& where) {
  before.assign(r, 0);
  after.assign(r, 0);
  const size_t na = s.axes.empty() ? static_cast<size_t>(r) : s.axes.size();
  if (s.pads.size() != 2 * na)
    return invalid_argument(where + "pads has " + std::to_string(s.pads.size()) + " entries for " + std::to_string(na) +
                            " axes");
  for (size_t i = 0; i < na; ++i) {
    BH_ASSIGN_OR_RETURN(int a, axis_in(s.axes.empty() ? static_cast<int64_t>(i) : s.axes[i], r, where));
    before[a] = s.pads[i];
    after[a] = s.pads[na + i];
  }
  return Status::ok();
}

// The output shape of padding `x`, filling the geometry of `p` (negative pads crop the
// input first; the mode then pads the cropped region).
Result<Shape> pad_geometry(const Tensor& x, const PadSpec& s, PadPush& p, const std::string& where) {
  const int r = x.rank();
  if (r > kMaxRank) return unsupported(where + "rank " + std::to_string(r) + " is above the Vulkan kernel's 6");
  Ints before, after;
  BH_RETURN_IF_ERROR(expand_pads(s, r, before, after, where));
  const Ints st = contiguous_strides(x.shape());
  Shape shape(r);
  for (int d = 0; d < r; ++d) {
    const int64_t cb = std::max<int64_t>(-before[d], 0), ce = std::max<int64_t>(-after[d], 0);
    const int64_t crop = x.shape()[d] - cb - ce;
    if (crop < 0)
      return invalid_argument(where + "negative pads remove more than axis " + std::to_string(d) + " holds");
    shape[d] = crop + std::max<int64_t>(before[d], 0) + std::max<int64_t>(after[d], 0);
    if (s.mode != 0 && crop == 0 && shape[d] > 0)
      return invalid_argument(where + "cannot pad an empty axis in this mode");
    p.base += static_cast<uint32_t>(cb * st[d]);
    p.dims[d] = static_cast<uint32_t>(shape[d]);
    p.crop[d] = static_cast<int32_t>(crop);
    p.before[d] = static_cast<int32_t>(std::max<int64_t>(before[d], 0));
    p.stride[d] = static_cast<uint32_t>(st[d]);
  }
  p.rank = static_cast<uint32_t>(std::max(r, 1));
  if (r == 0) {
    p.dims[0] = 1;
    p.crop[0] = 1;
  }
  return shape;
}

Status pad_compute(KernelContext& ctx, const PadSpec& s) {
  const Tensor* x = ctx.input(0);
  if (!x) return invalid_argument(ctx.where() + "missing input");
  PadPush p{};
  BH_ASSIGN_OR_RETURN(Shape shape, pad_geometry(*x, s, p, ctx.where()));
  BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, x->dtype(), shape));
  if (out.numel() == 0) return Status::ok();
  p.words = words_of(x->dtype());
  BH_RETURN_IF_ERROR(check_size(out.numel(), p.words, ctx.where()));
  BH_RETURN_IF_ERROR(check_size(x->numel(), p.words, ctx.where()));
  p.n = static_cast<uint32_t>(out.numel());
  p.mode = s.mode;
  std::memcpy(p.value, &s.value, sizeof p.value);
  BH_ASSIGN_OR_RETURN(RunState * rs, run_state(ctx));
  Groups g = groups_for(out.numel());
  return rs->dispatch("layout_pad", {{x, false}, {&out, true}}, &p, sizeof p, g.x, g.y);
}

// The bits of `v` in the element type `t` (the legacy float `value` attribute).
uint64_t value_bits(float v, DataType t) {
  uint64_t bits = 0;
  const double d = v;
  switch (t) {
    case DataType::kFloat32:
      std::memcpy(&bits, &v, 4);
      break;
    case DataType::kFloat64:
      std::memcpy(&bits, &d, 8);
      break;
    case DataType::kInt32:
      bits = static_cast<uint32_t>(static_cast<int32_t>(v));
      break;
    case DataType::kUInt32:
      bits = static_cast<uint32_t>(v);
      break;
    case DataType::kInt64:
      bits = static_cast<uint64_t>(static_cast<int64_t>(v));
      break;
    case DataType::kUInt64:
      bits = static_cast<uint64_t>(v);
      break;
    default:
      break;
  }
  return bits;
}

// Pad-11 and later: pads, constant_value and axes from constant inputs.
Status pad_inputs(const KernelInfo& info, PadSpec& s) {
  BH_ASSIGN_OR_RETURN(s.pads, constant_ints(info, 1, "pads"));
  bool absent = false;
  BH_ASSIGN_OR_RETURN(s.axes, constant_ints(info, 3, "axes", &absent));
  if (info.node.inputs.size() <= 2 || info.node.inputs[2].empty()) return Status::ok();
  if (!info.input_is_constant(2))
    return unsupported(info.where() + "the Vulkan Pad takes constant_value only as a constant");
  const Tensor& v = info.constant_inputs[2];
  if (v.numel() == 0) return Status::ok();
  if (v.dtype() != info.input_types[0] || !v.raw())
    return unsupported(info.where() + "constant_value must be a host " + dtype_name(info.input_types[0]));
  std::memcpy(&s.value, v.raw(), dtype_size(v.dtype()));
  return Status::ok();
}

Factory make_pad(const KernelInfo& info) {
  BH_RETURN_IF_ERROR(require_types(info, kMoved, {0}));
  PadSpec s;
  const std::string mode = info.node.attr_string("mode", "constant");
  const char* modes[] = {"constant", "reflect", "edge", "wrap"};
  s.mode = static_cast<uint32_t>(std::find(std::begin(modes), std::end(modes), mode) - std::begin(modes));
  if (s.mode == 4) return invalid_argument(info.where() + "unknown pad mode '" + mode + "'");
  if (info.node.opset < 11) {
    const char* name = info.node.opset < 2 ? "paddings" : "pads";
    if (!info.node.has_attr(name)) return invalid_argument(info.where() + "missing attribute '" + name + "'");
    s.pads = info.node.attr_ints(name);
    s.value = value_bits(info.node.attr_float("value", 0.f), info.input_types[0]);
  } else {
    BH_RETURN_IF_ERROR(pad_inputs(info, s));
  }
  if (s.axes.empty() && s.pads.size() > 2 * kMaxRank)
    return unsupported(info.where() + "the Vulkan Pad takes rank 6 at most");
  return make_kernel([s](KernelContext& ctx) { return pad_compute(ctx, s); });
}

// ---------------------------------------------------------------------------------------
// Resize of 4-D data: nearest over any axis, linear over H and W of NCHW float32
// (shaders/layout_resize_*.comp)

enum class Coord { kHalfPixel, kPytorchHalfPixel, kAlignCorners, kAsymmetric };
enum class Nearest { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

struct ResizeSpec {
  bool linear = false;
  Coord coord = Coord::kHalfPixel;
  Nearest nearest = Nearest::kRoundPreferFloor;
  std::vector<float> scales;  // or
  Ints sizes;
};

// One resized axis: `in` to `out` elements at `scale`, as the CPU derives them.
struct Axis {
  int64_t in, out;
  double scale;
};

// The input position of output coordinate `x` (double, in the CPU's order of
// operations).
double source_position(const ResizeSpec& s, const Axis& a, int64_t x) {
  const double xr = static_cast<double>(x);
  const double len_f = a.scale * static_cast<double>(a.in);
  switch (s.coord) {
    case Coord::kHalfPixel:
      return (xr + 0.5) / a.scale - 0.5;
    case Coord::kPytorchHalfPixel:
      return a.out > 1 ? (xr + 0.5) / a.scale - 0.5 : 0.0;
    case Coord::kAlignCorners:
      return len_f == 1 ? 0.0 : xr * static_cast<double>(a.in - 1) / (len_f - 1);
    case Coord::kAsymmetric:
      return xr / a.scale;
  }
  return 0;
}

uint32_t nearest_index(const ResizeSpec& s, const Axis& a, int64_t x) {
  const double xo = source_position(s, a, x);
  double r = 0;
  switch (s.nearest) {
    case Nearest::kRoundPreferFloor:
      r = std::ceil(xo - 0.5);
      break;
    case Nearest::kRoundPreferCeil:
      r = std::floor(xo + 0.5);
      break;
    case Nearest::kFloor:
      r = std::floor(xo);
      break;
    case Nearest::kCeil:
      r = std::ceil(xo);
      break;
  }
  return static_cast<uint32_t>(std::clamp<double>(r, 0, static_cast<double>(a.in - 1)));
}

// The affine map x -> x * m + c of the linear shader for one axis.
void linear_map(const ResizeSpec& s, const Axis& a, float& m, float& c) {
  const double len_f = a.scale * static_cast<double>(a.in);
  double mm = 1.0 / a.scale, cc = 0;
  if (s.coord == Coord::kHalfPixel || (s.coord == Coord::kPytorchHalfPixel && a.out > 1)) cc = 0.5 / a.scale - 0.5;
  if (s.coord == Coord::kPytorchHalfPixel && a.out <= 1) mm = 0;
  if (s.coord == Coord::kAlignCorners) mm = len_f == 1 ? 0.0 : static_cast<double>(a.in - 1) / (len_f - 1);
  m = static_cast<float>(mm);
  c = static_cast<float>(cc);
}

// The four axes of resizing `in`. Linear resizes only H and W: N and C must keep their size.
Result<std::array<Axis, 4>> resize_axes(const ResizeSpec& s, const Shape& in, const std::string& where) {
  std::array<Axis, 4> ax{};
  for (int d = 0; d < 4; ++d) {
    double scale = 0;
    int64_t out = 0;
    if (!s.sizes.empty()) {
      out = s.sizes[d];
      scale = in[d] > 0 ? static_cast<double>(out) / static_cast<double>(in[d]) : 1.0;
    } else {
      scale = s.scales[d];
      out = static_cast<int64_t>(std::floor(scale * static_cast<double>(in[d])));
    }
    if (s.linear && d < 2 && (out != in[d] || scale != 1.0))
      return unsupported(where + "the Vulkan linear Resize keeps N and C");
    if (out < 0 || (out > 0 && in[d] == 0)) return invalid_argument(where + "cannot resize " + shape_to_string(in));
    ax[d] = {in[d], out, scale};
  }
  return ax;
}

struct LinearPush {
  uint32_t n, ih, iw, oh, ow;
  float my, cy, mx, cx;
};

struct NearestPush {
  uint32_t n, words;
  uint32_t in[4], out[4];
};

struct WordsPush {
  uint32_t count, offset;
  uint32_t words[30];
};

// The nearest source index along each axis for each output coordinate, axis after axis,
// written into a device table by push constants.
Status nearest_table(KernelContext& ctx, RunState* rs, const ResizeSpec& s, const std::array<Axis, 4>& ax,
                     Tensor& table) {
  std::vector<uint32_t> idx;
  for (const Axis& a : ax)
    for (int64_t x = 0; x < a.out; ++x) idx.push_back(nearest_index(s, a, x));
  BH_ASSIGN_OR_RETURN(table, ctx.allocate_scratch(DataType::kInt32, {static_cast<int64_t>(idx.size())}));
  for (size_t at = 0; at < idx.size(); at += 30) {
    WordsPush p{};
    p.count = static_cast<uint32_t>(std::min<size_t>(30, idx.size() - at));
    p.offset = static_cast<uint32_t>(at);
    std::copy_n(idx.begin() + at, p.count, p.words);
    BH_RETURN_IF_ERROR(rs->dispatch("layout_words", {{&table, true}}, &p, sizeof p, 1));
  }
  return Status::ok();
}

Status resize_linear(RunState* rs, const Tensor& x, const Tensor& out, const ResizeSpec& s,
                     const std::array<Axis, 4>& ax) {
  LinearPush p{static_cast<uint32_t>(out.numel()), static_cast<uint32_t>(ax[2].in), static_cast<uint32_t>(ax[3].in),
               static_cast<uint32_t>(ax[2].out), static_cast<uint32_t>(ax[3].out)};
  linear_map(s, ax[2], p.my, p.cy);
  linear_map(s, ax[3], p.mx, p.cx);
  Groups g = groups_for(out.numel());
  return rs->dispatch("layout_resize_linear", {{&x, false}, {&out, true}}, &p, sizeof p, g.x, g.y);
}

Status resize_nearest(KernelContext& ctx, RunState* rs, const Tensor& x, const Tensor& out, const ResizeSpec& s,
                      const std::array<Axis, 4>& ax) {
  Tensor table;
  BH_RETURN_IF_ERROR(nearest_table(ctx, rs, s, ax, table));
  NearestPush p{static_cast<uint32_t>(out.numel()), words_of(x.dtype())};
  for (int d = 0; d < 4; ++d) {
    p.in[d] = static_cast<uint32_t>(ax[d].in);
    p.out[d] = static_cast<uint32_t>(ax[d].out);
  }
  Groups g = groups_for(out.numel());
  return rs->dispatch("layout_resize_nearest", {{&x, false}, {&table, false}, {&out, true}}, &p, sizeof p, g.x, g.y);
}

Status resize_compute(KernelContext& ctx, const ResizeSpec& s) {
  const Tensor* x = ctx.input(0);
  if (!x || x->rank() != 4) return invalid_argument(ctx.where() + "the Vulkan Resize takes a 4-D input");
  BH_ASSIGN_OR_RETURN(auto ax, resize_axes(s, x->shape(), ctx.where()));
  BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, x->dtype(), {ax[0].out, ax[1].out, ax[2].out, ax[3].out}));
  if (out.numel() == 0) return Status::ok();
  const uint32_t words = words_of(x->dtype());
  BH_RETURN_IF_ERROR(check_size(out.numel(), words, ctx.where()));
  BH_RETURN_IF_ERROR(check_size(x->numel(), words, ctx.where()));
  BH_ASSIGN_OR_RETURN(RunState * rs, run_state(ctx));
  return s.linear ? resize_linear(rs, *x, out, s, ax) : resize_nearest(ctx, rs, *x, out, s, ax);
}

// Attribute `name` as the index of its value in `values`, or unsupported.
Result<int> pick(const KernelInfo& info, const char* name, const char* fallback,
                 std::initializer_list<const char*> values) {
  const std::string v = info.node.attr_string(name, fallback);
  int i = 0;
  for (const char* c : values) {
    if (v == c) return i;
    ++i;
  }
  return unsupported(info.where() + "the Vulkan Resize has no " + name + " '" + v + "'");
}

// Resize's scales (input 2, float32) or sizes (input 3), both constants of 4
// entries.
Status resize_inputs(const KernelInfo& info, ResizeSpec& s) {
  const auto& in = info.node.inputs;
  if (in.size() > 3 && !in[3].empty()) {
    BH_ASSIGN_OR_RETURN(s.sizes, constant_ints(info, 3, "sizes"));
  }
  if (s.sizes.empty() && in.size() > 2 && !in[2].empty()) {
    if (!info.input_is_constant(2))
      return unsupported(info.where() + "the Vulkan Resize takes scales only as a constant");
    const Tensor& t = info.constant_inputs[2];
    if (t.dtype() != DataType::kFloat32 || (t.numel() > 0 && !t.raw()))
      return unsupported(info.where() + "scales must be host float32");
    s.scales.assign(t.data<float>(), t.data<float>() + t.numel());
    for (float v : s.scales)
      if (!(v > 0) || !std::isfinite(v)) return unsupported(info.where() + "scales must be positive");
    if (s.linear && s.scales.size() == 4 && (s.scales[0] != 1 || s.scales[1] != 1))
      return unsupported(info.where() + "the Vulkan linear Resize keeps N and C");
  }
  if (s.sizes.size() != 4 && s.scales.size() != 4)
    return unsupported(info.where() + "the Vulkan Resize needs 4 scales or 4 sizes");
  return Status::ok();
}

Factory make_resize(const KernelInfo& info) {
  const ir::Node& n = info.node;
  if (n.attr_int("antialias", 0) != 0 || n.has_attr("axes") ||
      n.attr_string("keep_aspect_ratio_policy", "stretch") != "stretch")
    return unsupported(info.where() + "the Vulkan Resize has no antialias, axes or aspect policy");
  ResizeSpec s;
  BH_ASSIGN_OR_RETURN(int mode, pick(info, "mode", "nearest", {"nearest", "linear"}));
  s.linear = mode == 1;
  if (s.linear) {
    BH_RETURN_IF_ERROR(require_types(info, {DataType::kFloat32}, {0}));
  } else {
    BH_RETURN_IF_ERROR(require_types(info, kMoved, {0}));
  }
  if (s.linear && n.attr_int("exclude_outside", 0) != 0)
    return unsupported(info.where() + "the Vulkan Resize has no exclude_outside");
  BH_ASSIGN_OR_RETURN(int coord, pick(info, "coordinate_transformation_mode", "half_pixel",
                                      {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"}));
  s.coord = static_cast<Coord>(coord);
  BH_ASSIGN_OR_RETURN(int nearest, pick(info, "nearest_mode", "round_prefer_floor",
                                        {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}));
  s.nearest = static_cast<Nearest>(nearest);
  BH_RETURN_IF_ERROR(resize_inputs(info, s));
  return make_kernel([s](KernelContext& ctx) { return resize_compute(ctx, s); });
}

}  // namespace

void add_layout_kernels(KernelTable& t) {
  t.add("Reshape", 1, make_reshape);
  t.add("Flatten", 1, make_flatten);
  t.add("Squeeze", 1, make_squeeze);
  t.add("Unsqueeze", 1, make_unsqueeze);
  t.add("Identity", 1, make_identity);
  t.add("Transpose", 1, make_transpose);
  t.add("Slice", 1, make_slice);
  t.add("Concat", 1, make_concat);
  t.add("Gather", 1, make_gather);
  t.add("Pad", 1, make_pad);
  t.add("Resize", 11, make_resize);
}

}  // namespace bulkhead::vulkan
