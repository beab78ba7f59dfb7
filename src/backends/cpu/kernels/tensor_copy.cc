// Copy-heavy tensor kernels: Transpose, Concat, Split, Slice, Gather, GatherElements,
// GatherND, ScatterND, ScatterElements, Scatter, Expand, Tile, Pad, DepthToSpace,
// SpaceToDepth.
//
// None of these compute on element values (apart from scatter reductions), so they are
// dispatched by element size: every numeric dtype shares one instantiation per size, and
// strings use std::string. Work is split into contiguous runs copied with memcpy and
// parallelised over outer dimensions.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "common/sizes.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_util.h"

namespace bulkhead::cpu {

void register_tensor_copy_kernels(KernelTable& t);

namespace {

// ---------------------------------------------------------------------------------------
// Element-size dispatch and raw copies.



// Calls f(T{}) with T an unsigned integer type of the element size of `dt`, or
// std::string for string tensors.


bool is_int_index(DataType dt) { return dt == DataType::kInt64 || dt == DataType::kInt32; }

Result<std::vector<int64_t>> read_ints(const Tensor* t, const std::string& where, const char* what) {
  if (!t) return std::vector<int64_t>{};
  if (!is_int_index(t->dtype()))
    return invalid_argument(where + what + " must be int64 or int32, got " + dtype_name(t->dtype()));
  if (t->numel() > 0 && !t->raw()) return invalid_argument(where + what + " is not in host memory");
  return read_int_tensor(*t);
}

// ---------------------------------------------------------------------------------------
// Generic strided copy: dst (contiguous, shape `shape`) = src viewed with element strides
// `st` (possibly zero for broadcast, or negative for reversed slices).

void simplify_strided(Shape& shape, std::vector<int64_t>& st) {
  Shape s2;
  std::vector<int64_t> t2;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    if (!s2.empty() && t2.back() == st[i] * shape[i]) {
      s2.back() *= shape[i];
      t2.back() = st[i];
    } else {
      s2.push_back(shape[i]);
      t2.push_back(st[i]);
    }
  }
  shape = std::move(s2);
  st = std::move(t2);
}

// Offset of the linear index `lin` over dims `dims` of `shape` with strides `st`.
inline int64_t offset_of(int64_t lin, const std::vector<int>& dims, const Shape& shape, const std::vector<int64_t>& st) {
  int64_t off = 0;
  for (int k = static_cast<int>(dims.size()) - 1; k >= 0; --k) {
    int d = dims[k];
    off += (lin % shape[d]) * st[d];
    lin /= shape[d];
  }
  return off;
}

template <class T>
void strided_copy(const T* src, T* dst, Shape shape, std::vector<int64_t> st, int threads) {
  int64_t total = shape_numel(shape);
  if (total <= 0) return;
  simplify_strided(shape, st);
  int r = static_cast<int>(shape.size());
  if (r == 0) {
    dst[0] = src[0];
    return;
  }
  const int64_t inner = shape[r - 1];
  const int64_t s = st[r - 1];

  // A transpose-like pattern: the innermost output dim reads with a large stride while
  // some other dim p reads contiguously. Copy in square tiles so both sides stay in cache.
  int p = -1;
  if (s != 1 && s != 0 && inner >= 8) {
    for (int d = r - 2; d >= 0; --d)
      if (st[d] == 1 && shape[d] >= 8) {
        p = d;
        break;
      }
  }
  if (p >= 0) {
    constexpr int64_t B = 32;
    std::vector<int> outer_dims;
    for (int d = 0; d < r - 1; ++d)
      if (d != p) outer_dims.push_back(d);
    auto ost = strides_of(shape);
    const int64_t np = shape[p];
    const int64_t pblocks = (np + B - 1) / B, jblocks = (inner + B - 1) / B;
    const int64_t outer = total / (np * inner);
    const int64_t ostp = ost[p];
    parallel_for(threads, outer * pblocks, 1, [&](int64_t b, int64_t e) {
      for (int64_t w = b; w < e; ++w) {
        int64_t o = w / pblocks, pb = w % pblocks;
        int64_t in_base = offset_of(o, outer_dims, shape, st);
        int64_t out_base = offset_of(o, outer_dims, shape, ost);
        int64_t i0 = pb * B, i1 = std::min(np, i0 + B);
        for (int64_t jb = 0; jb < jblocks; ++jb) {
          int64_t j0 = jb * B, j1 = std::min(inner, j0 + B);
          for (int64_t i = i0; i < i1; ++i) {
            const T* sp = src + in_base + i;
            T* dp = dst + out_base + i * ostp;
            for (int64_t j = j0; j < j1; ++j) dp[j] = sp[j * s];
          }
        }
      }
    });
    return;
  }

  const int64_t outer = total / inner;
  std::vector<int> outer_dims(r - 1);
  std::iota(outer_dims.begin(), outer_dims.end(), 0);
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1));
  parallel_for(threads, outer, grain, [&](int64_t b, int64_t e) {
    std::vector<int64_t> idx(r > 1 ? r - 1 : 1, 0);
    int64_t off = 0;
    {
      int64_t lin = b;
      for (int k = r - 2; k >= 0; --k) {
        idx[k] = lin % shape[k];
        lin /= shape[k];
        off += idx[k] * st[k];
      }
    }
    for (int64_t o = b; o < e; ++o) {
      const T* sp = src + off;
      T* dp = dst + o * inner;
      if (s == 1) copy_elems(sp, inner, dp);
      else if (s == 0) std::fill_n(dp, inner, *sp);
      else
        for (int64_t j = 0; j < inner; ++j) dp[j] = sp[j * s];
      for (int k = r - 2; k >= 0; --k) {
        ++idx[k];
        off += st[k];
        if (idx[k] < shape[k]) break;
        off -= st[k] * shape[k];
        idx[k] = 0;
      }
    }
  });
}

// Copies `src` (any dtype) viewed through `shape`/`st` (with element offset `base`)
// into a freshly allocated output `i`.
Status strided_to_output(KernelContext& ctx, int i, const Tensor& src, int64_t base, const Shape& shape,
                         const std::vector<int64_t>& st) {
  BH_RETURN_IF_ERROR(need_host(src, ctx.where(), "input"));
  BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(i, src.dtype(), shape));
  if (out.numel() == 0) return Status::ok();
  return by_elem_size(src.dtype(), ctx.where(), [&](auto tag) -> Status {
    using T = decltype(tag);
    strided_copy<T>(elems<T>(src) + base, elems<T>(out), shape, st, ctx.threads());
    return Status::ok();
  });
}

// ---------------------------------------------------------------------------------------
// Transpose

Result<std::unique_ptr<Kernel>> make_transpose(const KernelInfo& info) {
  std::vector<int64_t> perm_attr = info.node.attr_ints("perm");
  bool has_perm = info.node.has_attr("perm");
  return make_kernel([perm_attr, has_perm](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.input(0);
    if (!x) return invalid_argument(ctx.where() + "missing input");
    int r = x->rank();
    std::vector<int64_t> perm(r);
    if (has_perm) {
      if (static_cast<int>(perm_attr.size()) != r)
        return invalid_argument(ctx.where() + "perm has " + std::to_string(perm_attr.size()) +
                                " entries for an input of rank " + std::to_string(r));
      std::vector<bool> seen(r, false);
      for (int i = 0; i < r; ++i) {
        int64_t a = perm_attr[i];
        if (a < -r || a >= r) return invalid_argument(ctx.where() + "perm entry " + std::to_string(a) + " out of range");
        if (a < 0) a += r;
        if (seen[a]) return invalid_argument(ctx.where() + "perm is not a permutation");
        seen[a] = true;
        perm[i] = a;
      }
    } else {
      for (int i = 0; i < r; ++i) perm[i] = r - 1 - i;
    }
    auto in_st = strides_of(x->shape());
    Shape out_shape(r);
    std::vector<int64_t> st(r);
    for (int i = 0; i < r; ++i) {
      out_shape[i] = x->shape()[perm[i]];
      st[i] = in_st[perm[i]];
    }
    return strided_to_output(ctx, 0, *x, 0, out_shape, st);
  });
}

// ---------------------------------------------------------------------------------------
// Concat

Result<std::unique_ptr<Kernel>> make_concat(const KernelInfo& info) {
  if (!info.node.has_attr("axis") && info.node.opset >= 4)
    return invalid_argument(info.where() + "missing required attribute 'axis'");
  int64_t axis_attr = info.node.attr_int("axis", 1);
  return make_kernel([axis_attr](KernelContext& ctx) -> Status {
    std::vector<const Tensor*> ins;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor* t = ctx.input(i);
      if (!t) return invalid_argument(ctx.where() + "input " + std::to_string(i) + " is missing");
      BH_RETURN_IF_ERROR(need_host(*t, ctx.where(), "input"));
      ins.push_back(t);
    }
    if (ins.empty()) return invalid_argument(ctx.where() + "needs at least one input");
    const Tensor& a = *ins[0];
    int r = a.rank();
    if (r == 0) return invalid_argument(ctx.where() + "cannot concatenate scalars");
    BH_ASSIGN_OR_RETURN(int axis, normalize_axis(axis_attr, r, ctx.where()));
    Shape out_shape = a.shape();
    out_shape[axis] = 0;
    for (size_t k = 0; k < ins.size(); ++k) {
      const Tensor& t = *ins[k];
      if (t.dtype() != a.dtype())
        return invalid_argument(ctx.where() + "input " + std::to_string(k) + " has type " + dtype_name(t.dtype()) +
                                ", expected " + dtype_name(a.dtype()));
      if (t.rank() != r)
        return invalid_argument(ctx.where() + "input " + std::to_string(k) + " has shape " + shape_to_string(t.shape()) +
                                ", incompatible with " + shape_to_string(a.shape()));
      for (int d = 0; d < r; ++d)
        if (d != axis && t.shape()[d] != a.shape()[d])
          return invalid_argument(ctx.where() + "input " + std::to_string(k) + " has shape " +
                                  shape_to_string(t.shape()) + ", incompatible with " + shape_to_string(a.shape()));
      out_shape[axis] += t.shape()[axis];
    }
    // Inputs that lie side by side in one buffer, in order, where the dimensions before
    // the axis are all 1 (their producers wrote them in place: exec::ConcatGroup): the
    // output is that run of the buffer, and nothing is copied.
    int64_t lead = 1;
    for (int d = 0; d < axis; ++d) lead *= out_shape[d];
    if (lead == 1 && a.buffer() && a.dtype() != DataType::kString) {
      size_t next = a.offset();
      bool adjacent = true;
      for (const Tensor* t : ins) {
        adjacent = adjacent && t->buffer() == a.buffer() && t->offset() == next;
        next += t->nbytes();
      }
      if (adjacent && next <= a.buffer()->size())
        return ctx.set_output(0, Value(Tensor(a.dtype(), out_shape, a.buffer(), a.offset())));
    }
    BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, a.dtype(), out_shape));
    if (out.numel() == 0) return Status::ok();
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d) outer *= out_shape[d];
    for (int d = axis + 1; d < r; ++d) inner *= out_shape[d];
    std::vector<int64_t> run(ins.size()), pre(ins.size());
    int64_t acc = 0;
    for (size_t k = 0; k < ins.size(); ++k) {
      run[k] = ins[k]->shape()[axis] * inner;
      pre[k] = acc;
      acc += run[k];
    }
    const int64_t row = acc;
    const int64_t nk = static_cast<int64_t>(ins.size());
    return by_elem_size(a.dtype(), ctx.where(), [&](auto tag) -> Status {
      using T = decltype(tag);
      T* dst = elems<T>(out);
      std::vector<const T*> srcs(ins.size());
      for (size_t k = 0; k < ins.size(); ++k) srcs[k] = elems<T>(*ins[k]);
      int64_t avg = std::max<int64_t>(1, row / nk);
      parallel_for(ctx.threads(), outer * nk, std::max<int64_t>(1, 32768 / avg), [&](int64_t b, int64_t e) {
        for (int64_t w = b; w < e; ++w) {
          int64_t o = w / nk, k = w % nk;
          copy_elems(srcs[k] + o * run[k], run[k], dst + o * row + pre[k]);
        }
      });
      return Status::ok();
    });
  });
}

// ---------------------------------------------------------------------------------------
// Split (split as attribute before opset 13, as input after; num_outputs from 18)

Result<std::unique_ptr<Kernel>> make_split(const KernelInfo& info) {
  int64_t axis_attr = info.node.attr_int("axis", 0);
  bool has_split_attr = info.node.has_attr("split");
  std::vector<int64_t> split_attr = info.node.attr_ints("split");
  bool has_num = info.node.has_attr("num_outputs");
  int64_t num_outputs = info.node.attr_int("num_outputs", 0);
  if (has_num && num_outputs < 1) return invalid_argument(info.where() + "num_outputs must be positive");
  return make_kernel([=](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.input(0);
    if (!x) return invalid_argument(ctx.where() + "missing input");
    BH_RETURN_IF_ERROR(need_host(*x, ctx.where(), "input"));
    int r = x->rank();
    if (r == 0) return invalid_argument(ctx.where() + "cannot split a scalar");
    BH_ASSIGN_OR_RETURN(int axis, normalize_axis(axis_attr, r, ctx.where()));
    const int64_t dim = x->shape()[axis];
    const int nout = ctx.num_outputs();
    std::vector<int64_t> sizes;
    const Tensor* split_in = ctx.input(1);
    if (split_in) {
      BH_ASSIGN_OR_RETURN(sizes, read_ints(split_in, ctx.where(), "split"));
    } else if (has_split_attr) {
      sizes = split_attr;
    }
    if (!sizes.empty() || split_in) {
      if (static_cast<int>(sizes.size()) != nout)
        return invalid_argument(ctx.where() + "split has " + std::to_string(sizes.size()) + " entries for " +
                                std::to_string(nout) + " outputs");
      int64_t sum = 0;
      for (int64_t s : sizes) {
        if (s < 0) return invalid_argument(ctx.where() + "split sizes must be non-negative");
        sum += s;
      }
      if (sum != dim)
        return invalid_argument(ctx.where() + "split sizes sum to " + std::to_string(sum) + " but axis " +
                                std::to_string(axis) + " has size " + std::to_string(dim));
    } else if (has_num) {
      if (num_outputs != nout)
        return invalid_argument(ctx.where() + "num_outputs is " + std::to_string(num_outputs) + " but the node has " +
                                std::to_string(nout) + " outputs");
      int64_t chunk = (dim + num_outputs - 1) / num_outputs;
      int64_t left = dim;
      for (int i = 0; i < nout; ++i) {
        int64_t s = std::min(chunk, left);
        sizes.push_back(s);
        left -= s;
      }
    } else {
      if (nout <= 0 || dim % nout != 0)
        return invalid_argument(ctx.where() + "axis size " + std::to_string(dim) + " cannot be split evenly into " +
                                std::to_string(nout) + " outputs");
      sizes.assign(nout, dim / nout);
    }
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d) outer *= x->shape()[d];
    for (int d = axis + 1; d < r; ++d) inner *= x->shape()[d];
    const int64_t row = dim * inner;
    std::vector<Tensor> outs(nout);
    std::vector<int64_t> pre(nout);
    int64_t acc = 0;
    for (int i = 0; i < nout; ++i) {
      pre[i] = acc;
      acc += sizes[i] * inner;
      if (!ctx.output_wanted(i)) continue;
      Shape s = x->shape();
      s[axis] = sizes[i];
      BH_ASSIGN_OR_RETURN(outs[i], ctx.allocate_output(i, x->dtype(), s));
    }
    if (x->numel() == 0) return Status::ok();
    return by_elem_size(x->dtype(), ctx.where(), [&](auto tag) -> Status {
      using T = decltype(tag);
      const T* src = elems<T>(*x);
      std::vector<T*> dsts(nout, nullptr);
      for (int i = 0; i < nout; ++i)
        if (outs[i].defined() && outs[i].numel() > 0) dsts[i] = elems<T>(outs[i]);
      const int64_t nk = nout;
      int64_t avg = std::max<int64_t>(1, row / std::max<int64_t>(nk, 1));
      parallel_for(ctx.threads(), outer * nk, std::max<int64_t>(1, 32768 / avg), [&](int64_t b, int64_t e) {
        for (int64_t w = b; w < e; ++w) {
          int64_t o = w / nk, k = w % nk;
          if (!dsts[k]) continue;
          int64_t run = sizes[k] * inner;
          copy_elems(src + o * row + pre[k], run, dsts[k] + o * run);
        }
      });
      return Status::ok();
    });
  });
}

// ---------------------------------------------------------------------------------------
// Slice (attributes before opset 10, inputs after)

Status slice_compute(KernelContext& ctx, const Tensor& x, const std::vector<int64_t>& starts,
                     const std::vector<int64_t>& ends, const std::vector<int64_t>* axes_in,
                     const std::vector<int64_t>* steps_in) {
  int r = x.rank();
  if (starts.size() != ends.size())
    return invalid_argument(ctx.where() + "starts and ends have different lengths");
  size_t n = starts.size();
  std::vector<int64_t> axes(n), steps(n, 1);
  if (axes_in && !axes_in->empty()) {
    if (axes_in->size() != n) return invalid_argument(ctx.where() + "axes and starts have different lengths");
    axes = *axes_in;
  } else {
    if (static_cast<int>(n) > r) return invalid_argument(ctx.where() + "more starts than input dimensions");
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (steps_in && !steps_in->empty()) {
    if (steps_in->size() != n) return invalid_argument(ctx.where() + "steps and starts have different lengths");
    steps = *steps_in;
  }
  Shape out_shape = x.shape();
  std::vector<int64_t> begin(r, 0), step(r, 1);
  std::vector<bool> seen(r, false);
  for (size_t i = 0; i < n; ++i) {
    int64_t a = axes[i];
    if (a < -r || a >= r) return invalid_argument(ctx.where() + "axis " + std::to_string(a) + " out of range for rank " + std::to_string(r));
    if (a < 0) a += r;
    if (seen[a]) return invalid_argument(ctx.where() + "axis " + std::to_string(a) + " repeated");
    seen[a] = true;
    int64_t dim = x.shape()[a];
    int64_t sp = steps[i];
    if (sp == 0) return invalid_argument(ctx.where() + "step cannot be 0");
    int64_t s = starts[i], e = ends[i];
    if (s < 0) s += dim;  // no overflow: dim >= 0
    if (e < 0) e += dim;
    if (sp > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
    }
    int64_t len = 0;
    if (sp > 0 && e > s) len = (e - s + sp - 1) / sp;
    else if (sp < 0 && s > e) len = (s - e + (-sp) - 1) / (-sp);
    out_shape[a] = len;
    begin[a] = s;
    step[a] = sp;
  }
  auto in_st = strides_of(x.shape());
  int64_t base = 0;
  std::vector<int64_t> st(r);
  bool empty = shape_numel(out_shape) == 0;
  for (int d = 0; d < r; ++d) {
    if (!empty) base += begin[d] * in_st[d];
    st[d] = in_st[d] * step[d];
  }
  return strided_to_output(ctx, 0, x, base, out_shape, st);
}

Result<std::unique_ptr<Kernel>> make_slice(const KernelInfo& info) {
  if (info.node.opset < 10) {
    std::vector<int64_t> starts = info.node.attr_ints("starts"), ends = info.node.attr_ints("ends"),
                         axes = info.node.attr_ints("axes");
    if (!info.node.has_attr("starts") || !info.node.has_attr("ends"))
      return invalid_argument(info.where() + "missing attribute 'starts' or 'ends'");
    return make_kernel([=](KernelContext& ctx) -> Status {
      const Tensor* x = ctx.input(0);
      if (!x) return invalid_argument(ctx.where() + "missing input");
      return slice_compute(ctx, *x, starts, ends, &axes, nullptr);
    });
  }
  return make_kernel([](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.input(0);
    if (!x || !ctx.input(1) || !ctx.input(2)) return invalid_argument(ctx.where() + "missing data, starts or ends");
    BH_ASSIGN_OR_RETURN(auto starts, read_ints(ctx.input(1), ctx.where(), "starts"));
    BH_ASSIGN_OR_RETURN(auto ends, read_ints(ctx.input(2), ctx.where(), "ends"));
    BH_ASSIGN_OR_RETURN(auto axes, read_ints(ctx.input(3), ctx.where(), "axes"));
    BH_ASSIGN_OR_RETURN(auto steps, read_ints(ctx.input(4), ctx.where(), "steps"));
    if (ctx.input(3) && axes.size() != starts.size())
      return invalid_argument(ctx.where() + "axes and starts have different lengths");
    if (ctx.input(4) && steps.size() != starts.size())
      return invalid_argument(ctx.where() + "steps and starts have different lengths");
    return slice_compute(ctx, *x, starts, ends, &axes, &steps);
  });
}

// ---------------------------------------------------------------------------------------
// Gather family

// Reads index tensor `t` as int64, normalising negatives against `dim`.
Result<std::vector<int64_t>> read_indices(const Tensor& t, int64_t dim, const std::string& where) {
  if (!is_int_index(t.dtype())) return invalid_argument(where + "indices must be int64 or int32, got " + dtype_name(t.dtype()));
  if (t.numel() > 0 && !t.raw()) return invalid_argument(where + "indices are not in host memory");
  std::vector<int64_t> v = read_int_tensor(t);
  for (auto& i : v) {
    if (i < -dim || i >= dim)
      return invalid_argument(where + "index " + std::to_string(i) + " is out of range for a dimension of size " +
                              std::to_string(dim));
    if (i < 0) i += dim;
  }
  return v;
}

Result<std::unique_ptr<Kernel>> make_gather(const KernelInfo& info) {
  int64_t axis_attr = info.node.attr_int("axis", 0);
  return make_kernel([axis_attr](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.input(0);
    const Tensor* ind = ctx.input(1);
    if (!x || !ind) return invalid_argument(ctx.where() + "missing data or indices");
    BH_RETURN_IF_ERROR(need_host(*x, ctx.where(), "data"));
    int r = x->rank();
    if (r == 0) return invalid_argument(ctx.where() + "data must have rank >= 1");
    BH_ASSIGN_OR_RETURN(int axis, normalize_axis(axis_attr, r, ctx.where()));
    const int64_t dim = x->shape()[axis];
    BH_ASSIGN_OR_RETURN(auto idx, read_indices(*ind, dim, ctx.where()));
    Shape out_shape(x->shape().begin(), x->shape().begin() + axis);
    out_shape.insert(out_shape.end(), ind->shape().begin(), ind->shape().end());
    out_shape.insert(out_shape.end(), x->shape().begin() + axis + 1, x->shape().end());
    BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, x->dtype(), out_shape));
    if (out.numel() == 0) return Status::ok();
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d) outer *= x->shape()[d];
    for (int d = axis + 1; d < r; ++d) inner *= x->shape()[d];
    const int64_t ni = static_cast<int64_t>(idx.size());
    return by_elem_size(x->dtype(), ctx.where(), [&](auto tag) -> Status {
      using T = decltype(tag);
      const T* src = elems<T>(*x);
      T* dst = elems<T>(out);
      if (inner == 1) {
        parallel_for(ctx.threads(), outer * ni, 32768, [&](int64_t b, int64_t e) {
          for (int64_t w = b; w < e; ++w) {
            int64_t o = w / ni, i = w % ni;
            dst[w] = src[o * dim + idx[i]];
          }
        });
      } else {
        parallel_for(ctx.threads(), outer * ni, std::max<int64_t>(1, 32768 / inner), [&](int64_t b, int64_t e) {
          for (int64_t w = b; w < e; ++w) {
            int64_t o = w / ni, i = w % ni;
            copy_elems(src + (o * dim + idx[i]) * inner, inner, dst + w * inner);
          }
        });
      }
      return Status::ok();
    });
  });
}

Result<std::unique_ptr<Kernel>> make_gather_elements(const KernelInfo& info) {
  int64_t axis_attr = info.node.attr_int("axis", 0);
  return make_kernel([axis_attr](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.input(0);
    const Tensor* ind = ctx.input(1);
    if (!x || !ind) return invalid_argument(ctx.where() + "missing data or indices");
    BH_RETURN_IF_ERROR(need_host(*x, ctx.where(), "data"));
    int r = x->rank();
    if (r == 0 || ind->rank() != r)
      return invalid_argument(ctx.where() + "data " + shape_to_string(x->shape()) + " and indices " +
                              shape_to_string(ind->shape()) + " must have the same rank >= 1");
    BH_ASSIGN_OR_RETURN(int axis, normalize_axis(axis_attr, r, ctx.where()));
    for (int d = 0; d < r; ++d)
      if (d != axis && ind->shape()[d] > x->shape()[d])
        return invalid_argument(ctx.where() + "indices " + shape_to_string(ind->shape()) + " exceed data " +
                                shape_to_string(x->shape()));
    const int64_t dim = x->shape()[axis];
    BH_ASSIGN_OR_RETURN(auto idx, read_indices(*ind, dim, ctx.where()));
    BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, x->dtype(), ind->shape()));
    if (out.numel() == 0) return Status::ok();
    const Shape& os = ind->shape();
    auto xs = strides_of(x->shape());
    const int64_t inner = os[r - 1];
    const int64_t rows = out.numel() / inner;
    return by_elem_size(x->dtype(), ctx.where(), [&](auto tag) -> Status {
      using T = decltype(tag);
      const T* src = elems<T>(*x);
      T* dst = elems<T>(out);
      parallel_for(ctx.threads(), rows, std::max<int64_t>(1, 16384 / inner), [&](int64_t b, int64_t e) {
        for (int64_t row = b; row < e; ++row) {
          // offset of the row's start in data, excluding the axis coordinate
          int64_t lin = row, base = 0;
          for (int d = r - 2; d >= 0; --d) {
            int64_t c = lin % os[d];
            lin /= os[d];
            if (d != axis) base += c * xs[d];
          }
          const int64_t* ip = idx.data() + row * inner;
          T* dp = dst + row * inner;
          if (axis == r - 1) {
            for (int64_t j = 0; j < inner; ++j) dp[j] = src[base + ip[j]];
          } else {
            int64_t ax = xs[axis];
            for (int64_t j = 0; j < inner; ++j) dp[j] = src[base + j + ip[j] * ax];
          }
        }
      });
      return Status::ok();
    });
  });
}

Result<std::unique_ptr<Kernel>> make_gather_nd(const KernelInfo& info) {
  int64_t batch_dims = info.node.attr_int("batch_dims", 0);
  return make_kernel([batch_dims](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.input(0);
    const Tensor* ind = ctx.input(1);
    if (!x || !ind) return invalid_argument(ctx.where() + "missing data or indices");
    BH_RETURN_IF_ERROR(need_host(*x, ctx.where(), "data"));
    int r = x->rank(), q = ind->rank();
    if (r < 1 || q < 1) return invalid_argument(ctx.where() + "data and indices must have rank >= 1");
    if (batch_dims < 0 || batch_dims >= std::min(r, q))
      return invalid_argument(ctx.where() + "batch_dims " + std::to_string(batch_dims) + " out of range");
    const int b = static_cast<int>(batch_dims);
    for (int d = 0; d < b; ++d)
      if (x->shape()[d] != ind->shape()[d])
        return invalid_argument(ctx.where() + "batch dimensions of data " + shape_to_string(x->shape()) +
                                " and indices " + shape_to_string(ind->shape()) + " differ");
    const int64_t k = ind->shape()[q - 1];
    if (k < 1 || k > r - b)
      return invalid_argument(ctx.where() + "last dimension of indices (" + std::to_string(k) + ") out of range");
    if (!is_int_index(ind->dtype())) return invalid_argument(ctx.where() + "indices must be int64");
    std::vector<int64_t> idx = read_int_tensor(*ind);
    Shape out_shape(ind->shape().begin(), ind->shape().end() - 1);
    out_shape.insert(out_shape.end(), x->shape().begin() + b + k, x->shape().end());
    int64_t nbatch = 1;
    for (int d = 0; d < b; ++d) nbatch *= x->shape()[d];
    int64_t slice = 1;
    for (int d = b + static_cast<int>(k); d < r; ++d) slice *= x->shape()[d];
    int64_t batch_stride = 1;
    for (int d = b; d < r; ++d) batch_stride *= x->shape()[d];
    const int64_t ntup = static_cast<int64_t>(idx.size()) / k;
    const int64_t per_batch = ntup / std::max<int64_t>(nbatch, 1);
    auto xs = strides_of(x->shape());
    std::vector<int64_t> offs(ntup);
    for (int64_t t = 0; t < ntup; ++t) {
      int64_t off = (t / std::max<int64_t>(per_batch, 1)) * batch_stride;
      for (int64_t j = 0; j < k; ++j) {
        int64_t dim = x->shape()[b + j];
        int64_t v = idx[t * k + j];
        if (v < -dim || v >= dim)
          return invalid_argument(ctx.where() + "index " + std::to_string(v) + " out of range for dimension of size " +
                                  std::to_string(dim));
        if (v < 0) v += dim;
        off += v * xs[b + j];
      }
      offs[t] = off;
    }
    BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, x->dtype(), out_shape));
    if (out.numel() == 0) return Status::ok();
    return by_elem_size(x->dtype(), ctx.where(), [&](auto tag) -> Status {
      using T = decltype(tag);
      const T* src = elems<T>(*x);
      T* dst = elems<T>(out);
      parallel_for(ctx.threads(), ntup, std::max<int64_t>(1, 16384 / slice), [&](int64_t bb, int64_t e) {
        for (int64_t t = bb; t < e; ++t) copy_elems(src + offs[t], slice, dst + t * slice);
      });
      return Status::ok();
    });
  });
}

// ---------------------------------------------------------------------------------------
// Scatter family

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

Result<Reduction> parse_reduction(const std::string& s, const std::string& where) {
  if (s == "none") return Reduction::kNone;
  if (s == "add") return Reduction::kAdd;
  if (s == "mul") return Reduction::kMul;
  if (s == "max") return Reduction::kMax;
  if (s == "min") return Reduction::kMin;
  return invalid_argument(where + "unknown reduction '" + s + "'");
}

template <class T>
inline T reduce_one(T a, T b, Reduction r) {
  switch (r) {
    case Reduction::kAdd: return static_cast<T>(a + b);
    case Reduction::kMul: return static_cast<T>(a * b);
    case Reduction::kMax: return std::max(a, b);
    case Reduction::kMin: return std::min(a, b);
    default: return b;
  }
}

// Calls f(update) where update(T* dst, const T* src, n) combines n elements in place.
// With no reduction the dispatch is by element size; otherwise by arithmetic type.
template <class F>
Status with_updater(DataType dt, Reduction red, const std::string& where, F&& f) {
  if (red == Reduction::kNone) {
    return by_elem_size(dt, where, [&](auto tag) -> Status {
      using T = decltype(tag);
      return f(tag, [](T* d, const T* s, int64_t n) { copy_elems(s, n, d); });
    });
  }
  auto arith = [&](auto tag) -> Status {
    using T = decltype(tag);
    return f(tag, [red](T* d, const T* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) d[i] = reduce_one<T>(d[i], s[i], red);
    });
  };
  auto half = [&](bool bf) -> Status {
    return f(uint16_t{}, [red, bf](uint16_t* d, const uint16_t* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        float a = bf ? bfloat16_to_float(d[i]) : half_to_float(d[i]);
        float b = bf ? bfloat16_to_float(s[i]) : half_to_float(s[i]);
        float c = reduce_one<float>(a, b, red);
        d[i] = bf ? float_to_bfloat16(c) : float_to_half(c);
      }
    });
  };
  switch (dt) {
    case DataType::kFloat32: return arith(float{});
    case DataType::kFloat64: return arith(double{});
    case DataType::kInt8: return arith(int8_t{});
    case DataType::kUInt8: return arith(uint8_t{});
    case DataType::kInt16: return arith(int16_t{});
    case DataType::kUInt16: return arith(uint16_t{});
    case DataType::kInt32: return arith(int32_t{});
    case DataType::kUInt32: return arith(uint32_t{});
    case DataType::kInt64: return arith(int64_t{});
    case DataType::kUInt64: return arith(uint64_t{});
    case DataType::kFloat16: return half(false);
    case DataType::kBFloat16: return half(true);
    default: return unsupported(where + "reduction is not supported for element type " + dtype_name(dt));
  }
}

Result<std::unique_ptr<Kernel>> make_scatter_nd(const KernelInfo& info) {
  BH_ASSIGN_OR_RETURN(Reduction red, parse_reduction(info.node.attr_string("reduction", "none"), info.where()));
  return make_kernel([red](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.input(0);
    const Tensor* ind = ctx.input(1);
    const Tensor* upd = ctx.input(2);
    if (!x || !ind || !upd) return invalid_argument(ctx.where() + "missing data, indices or updates");
    BH_RETURN_IF_ERROR(need_host(*x, ctx.where(), "data"));
    BH_RETURN_IF_ERROR(need_host(*upd, ctx.where(), "updates"));
    if (upd->dtype() != x->dtype()) return invalid_argument(ctx.where() + "updates and data types differ");
    int r = x->rank(), q = ind->rank();
    if (r < 1 || q < 1) return invalid_argument(ctx.where() + "data and indices must have rank >= 1");
    if (!is_int_index(ind->dtype())) return invalid_argument(ctx.where() + "indices must be int64");
    const int64_t k = ind->shape()[q - 1];
    if (k < 1 || k > r) return invalid_argument(ctx.where() + "last dimension of indices out of range");
    Shape want(ind->shape().begin(), ind->shape().end() - 1);
    want.insert(want.end(), x->shape().begin() + k, x->shape().end());
    if (upd->shape() != want)
      return invalid_argument(ctx.where() + "updates have shape " + shape_to_string(upd->shape()) + ", expected " +
                              shape_to_string(want));
    std::vector<int64_t> idx = read_int_tensor(*ind);
    auto xs = strides_of(x->shape());
    const int64_t ntup = static_cast<int64_t>(idx.size()) / k;
    int64_t slice = 1;
    for (int d = static_cast<int>(k); d < r; ++d) slice *= x->shape()[d];
    std::vector<int64_t> offs(ntup);
    for (int64_t t = 0; t < ntup; ++t) {
      int64_t off = 0;
      for (int64_t j = 0; j < k; ++j) {
        int64_t dim = x->shape()[j], v = idx[t * k + j];
        if (v < -dim || v >= dim)
          return invalid_argument(ctx.where() + "index " + std::to_string(v) + " out of range for dimension of size " +
                                  std::to_string(dim));
        if (v < 0) v += dim;
        off += v * xs[j];
      }
      offs[t] = off;
    }
    BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, x->dtype(), x->shape()));
    if (out.numel() == 0) return Status::ok();
    return with_updater(x->dtype(), red, ctx.where(), [&](auto tag, auto update) -> Status {
      using T = decltype(tag);
      T* dst = elems<T>(out);
      copy_elems(elems<T>(*x), x->numel(), dst);
      const T* us = elems<T>(*upd);
      // Sequential: indices may repeat and reductions must see every update.
      for (int64_t t = 0; t < ntup; ++t) update(dst + offs[t], us + t * slice, slice);
      return Status::ok();
    });
  });
}

Result<std::unique_ptr<Kernel>> make_scatter_elements(const KernelInfo& info) {
  int64_t axis_attr = info.node.attr_int("axis", 0);
  BH_ASSIGN_OR_RETURN(Reduction red, parse_reduction(info.node.attr_string("reduction", "none"), info.where()));
  return make_kernel([axis_attr, red](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.input(0);
    const Tensor* ind = ctx.input(1);
    const Tensor* upd = ctx.input(2);
    if (!x || !ind || !upd) return invalid_argument(ctx.where() + "missing data, indices or updates");
    BH_RETURN_IF_ERROR(need_host(*x, ctx.where(), "data"));
    BH_RETURN_IF_ERROR(need_host(*upd, ctx.where(), "updates"));
    if (upd->dtype() != x->dtype()) return invalid_argument(ctx.where() + "updates and data types differ");
    int r = x->rank();
    if (r < 1 || ind->rank() != r || upd->shape() != ind->shape())
      return invalid_argument(ctx.where() + "data " + shape_to_string(x->shape()) + ", indices " +
                              shape_to_string(ind->shape()) + " and updates " + shape_to_string(upd->shape()) +
                              " do not match");
    BH_ASSIGN_OR_RETURN(int axis, normalize_axis(axis_attr, r, ctx.where()));
    for (int d = 0; d < r; ++d)
      if (d != axis && ind->shape()[d] > x->shape()[d])
        return invalid_argument(ctx.where() + "indices " + shape_to_string(ind->shape()) + " exceed data " +
                                shape_to_string(x->shape()));
    BH_ASSIGN_OR_RETURN(auto idx, read_indices(*ind, x->shape()[axis], ctx.where()));
    BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, x->dtype(), x->shape()));
    if (out.numel() == 0) return Status::ok();
    const Shape& is = ind->shape();
    auto xs = strides_of(x->shape());
    const int64_t n = static_cast<int64_t>(idx.size());
    return with_updater(x->dtype(), red, ctx.where(), [&](auto tag, auto update) -> Status {
      using T = decltype(tag);
      T* dst = elems<T>(out);
      copy_elems(elems<T>(*x), x->numel(), dst);
      const T* us = elems<T>(*upd);
      std::vector<int64_t> c(r, 0);
      for (int64_t i = 0; i < n; ++i) {
        int64_t off = 0;
        for (int d = 0; d < r; ++d) off += (d == axis ? idx[i] : c[d]) * xs[d];
        update(dst + off, us + i, 1);
        for (int d = r - 1; d >= 0; --d) {
          if (++c[d] < is[d]) break;
          c[d] = 0;
        }
      }
      return Status::ok();
    });
  });
}

// ---------------------------------------------------------------------------------------
// Expand, Tile

Result<std::unique_ptr<Kernel>> make_expand(const KernelInfo&) {
  return make_kernel([](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.input(0);
    const Tensor* s = ctx.input(1);
    if (!x || !s) return invalid_argument(ctx.where() + "missing input or shape");
    if (s->rank() > 1) return invalid_argument(ctx.where() + "shape must be 1-D");
    BH_ASSIGN_OR_RETURN(auto dims, read_ints(s, ctx.where(), "shape"));
    for (int64_t d : dims)
      if (d < 0) return invalid_argument(ctx.where() + "shape " + shape_to_string(dims) + " has a negative dimension");
    BH_ASSIGN_OR_RETURN(Shape out_shape, broadcast_shapes(x->shape(), dims, ctx.where()));
    auto st = broadcast_strides(x->shape(), out_shape);
    return strided_to_output(ctx, 0, *x, 0, out_shape, st);
  });
}

Result<std::unique_ptr<Kernel>> make_tile(const KernelInfo& info) {
  bool legacy = info.node.opset < 6;
  return make_kernel([legacy](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.input(0);
    const Tensor* rep = ctx.input(1);
    if (!x || !rep) return invalid_argument(ctx.where() + "missing input or repeats");
    int r = x->rank();
    std::vector<int64_t> reps;
    if (legacy) {
      // Tile-1: a scalar `tiles` count along a scalar `axis`.
      const Tensor* ax = ctx.input(2);
      if (!ax) return invalid_argument(ctx.where() + "missing axis");
      BH_ASSIGN_OR_RETURN(auto tv, read_ints(rep, ctx.where(), "tiles"));
      BH_ASSIGN_OR_RETURN(auto av, read_ints(ax, ctx.where(), "axis"));
      if (tv.size() != 1 || av.size() != 1) return invalid_argument(ctx.where() + "tiles and axis must be scalars");
      BH_ASSIGN_OR_RETURN(int a, normalize_axis(av[0], r, ctx.where()));
      reps.assign(r, 1);
      reps[a] = tv[0];
    } else {
      BH_ASSIGN_OR_RETURN(reps, read_ints(rep, ctx.where(), "repeats"));
    }
    if (static_cast<int>(reps.size()) != r)
      return invalid_argument(ctx.where() + "repeats has " + std::to_string(reps.size()) + " entries for rank " +
                              std::to_string(r));
    for (int64_t v : reps)
      if (v < 0) return invalid_argument(ctx.where() + "repeats must be non-negative");
    // out viewed as [rep0, d0, rep1, d1, ...] reading the input with stride 0 on repeats.
    auto in_st = strides_of(x->shape());
    Shape view, out_shape(r);
    std::vector<int64_t> st;
    for (int d = 0; d < r; ++d) {
      view.push_back(reps[d]);
      st.push_back(0);
      view.push_back(x->shape()[d]);
      st.push_back(in_st[d]);
      if (!checked_mul(reps[d], x->shape()[d], &out_shape[d]))
        return invalid_argument(ctx.where() + "repeats " + std::to_string(reps[d]) + " of a dimension of size " +
                                std::to_string(x->shape()[d]) + " overflow the output's size");
    }
    BH_RETURN_IF_ERROR(need_host(*x, ctx.where(), "input"));
    BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, x->dtype(), out_shape));
    if (out.numel() == 0) return Status::ok();
    return by_elem_size(x->dtype(), ctx.where(), [&](auto tag) -> Status {
      using T = decltype(tag);
      strided_copy<T>(elems<T>(*x), elems<T>(out), view, st, ctx.threads());
      return Status::ok();
    });
  });
}

// ---------------------------------------------------------------------------------------
// Pad (pads attribute before opset 11, inputs after; axes input from 18; wrap from 19)

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

// The bytes of a float `v` converted to `dt`.
Status scalar_bytes(double v, DataType dt, uint64_t& bits, const std::string& where) {
  bits = 0;
  switch (dt) {
    case DataType::kFloat32: { float f = static_cast<float>(v); std::memcpy(&bits, &f, 4); break; }
    case DataType::kFloat64: std::memcpy(&bits, &v, 8); break;
    case DataType::kFloat16: { uint16_t h = float_to_half(static_cast<float>(v)); std::memcpy(&bits, &h, 2); break; }
    case DataType::kBFloat16: { uint16_t h = float_to_bfloat16(static_cast<float>(v)); std::memcpy(&bits, &h, 2); break; }
    case DataType::kInt8: { int8_t x = static_cast<int8_t>(v); std::memcpy(&bits, &x, 1); break; }
    case DataType::kUInt8: { uint8_t x = static_cast<uint8_t>(v); std::memcpy(&bits, &x, 1); break; }
    case DataType::kBool: { uint8_t x = v != 0; std::memcpy(&bits, &x, 1); break; }
    case DataType::kInt16: { int16_t x = static_cast<int16_t>(v); std::memcpy(&bits, &x, 2); break; }
    case DataType::kUInt16: { uint16_t x = static_cast<uint16_t>(v); std::memcpy(&bits, &x, 2); break; }
    case DataType::kInt32: { int32_t x = static_cast<int32_t>(v); std::memcpy(&bits, &x, 4); break; }
    case DataType::kUInt32: { uint32_t x = static_cast<uint32_t>(v); std::memcpy(&bits, &x, 4); break; }
    case DataType::kInt64: { int64_t x = static_cast<int64_t>(v); std::memcpy(&bits, &x, 8); break; }
    case DataType::kUInt64: { uint64_t x = static_cast<uint64_t>(v); std::memcpy(&bits, &x, 8); break; }
    case DataType::kString: break;
    default: return unsupported(where + "unsupported element type " + dtype_name(dt));
  }
  return Status::ok();
}

struct PadConfig {
  PadMode mode = PadMode::kConstant;
  bool legacy = false;              // pads/value from attributes
  std::vector<int64_t> pads_attr;
  float value_attr = 0;
};

Status pad_compute(KernelContext& ctx, const PadConfig& cfg) {
  const Tensor* x = ctx.input(0);
  if (!x) return invalid_argument(ctx.where() + "missing input");
  BH_RETURN_IF_ERROR(need_host(*x, ctx.where(), "input"));
  const int r = x->rank();
  std::vector<int64_t> pads;
  uint64_t cbits = 0;
  std::string cstr;
  if (cfg.legacy) {
    pads = cfg.pads_attr;
    BH_RETURN_IF_ERROR(scalar_bytes(cfg.value_attr, x->dtype(), cbits, ctx.where()));
  } else {
    if (!ctx.input(1)) return invalid_argument(ctx.where() + "missing pads");
    BH_ASSIGN_OR_RETURN(pads, read_ints(ctx.input(1), ctx.where(), "pads"));
    const Tensor* cv = ctx.input(2);
    if (cv && cv->numel() > 0) {
      if (cv->dtype() != x->dtype())
        return invalid_argument(ctx.where() + "constant_value has type " + dtype_name(cv->dtype()) + ", expected " +
                                dtype_name(x->dtype()));
      if (cv->dtype() == DataType::kString) cstr = cv->strings()[0];
      else {
        BH_RETURN_IF_ERROR(need_host(*cv, ctx.where(), "constant_value"));
        std::memcpy(&cbits, cv->raw(), dtype_size(cv->dtype()));
      }
    }
  }
  // Expand pads to every axis.
  std::vector<int64_t> pb(r, 0), pe(r, 0);
  const Tensor* axes_t = cfg.legacy ? nullptr : ctx.input(3);
  if (axes_t) {
    BH_ASSIGN_OR_RETURN(auto axes, read_ints(axes_t, ctx.where(), "axes"));
    size_t na = axes.size();
    if (pads.size() != 2 * na)
      return invalid_argument(ctx.where() + "pads has " + std::to_string(pads.size()) + " entries for " +
                              std::to_string(na) + " axes");
    std::vector<bool> seen(r, false);
    for (size_t i = 0; i < na; ++i) {
      BH_ASSIGN_OR_RETURN(int a, normalize_axis(axes[i], r, ctx.where()));
      if (seen[a]) return invalid_argument(ctx.where() + "axes repeat axis " + std::to_string(a));
      seen[a] = true;
      pb[a] = pads[i];
      pe[a] = pads[na + i];
    }
  } else {
    if (static_cast<int>(pads.size()) != 2 * r)
      return invalid_argument(ctx.where() + "pads has " + std::to_string(pads.size()) + " entries for rank " +
                              std::to_string(r));
    for (int d = 0; d < r; ++d) {
      pb[d] = pads[d];
      pe[d] = pads[r + d];
    }
  }
  // Negative pads crop the input first; the mode then pads the cropped region.
  Shape crop(r), out_shape(r);
  std::vector<int64_t> crop_begin(r);
  for (int d = 0; d < r; ++d) {
    int64_t dim = x->shape()[d];
    int64_t cb = pb[d] < 0 ? -pb[d] : 0, ce = pe[d] < 0 ? -pe[d] : 0;
    if (cb + ce > dim) return invalid_argument(ctx.where() + "negative pads remove more than axis " + std::to_string(d) + " holds");
    crop_begin[d] = cb;
    crop[d] = dim - cb - ce;
    pb[d] = std::max<int64_t>(pb[d], 0);
    pe[d] = std::max<int64_t>(pe[d], 0);
    out_shape[d] = crop[d] + pb[d] + pe[d];
    if (cfg.mode != PadMode::kConstant && crop[d] == 0 && out_shape[d] > 0)
      return invalid_argument(ctx.where() + "cannot pad an empty axis in this mode");
  }
  BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, x->dtype(), out_shape));
  if (out.numel() == 0) return Status::ok();
  // Per-axis map from output coordinate to input coordinate (-1 = constant).
  std::vector<std::vector<int64_t>> map(r);
  for (int d = 0; d < r; ++d) {
    const int64_t n = crop[d];
    map[d].resize(out_shape[d]);
    for (int64_t o = 0; o < out_shape[d]; ++o) {
      int64_t i = o - pb[d];
      if (i < 0 || i >= n) {
        switch (cfg.mode) {
          case PadMode::kConstant: i = -1; break;
          case PadMode::kEdge: i = std::clamp<int64_t>(i, 0, n - 1); break;
          case PadMode::kWrap: i = ((i % n) + n) % n; break;
          case PadMode::kReflect: {
            if (n == 1) {
              i = 0;
            } else {
              int64_t period = 2 * (n - 1);
              i = ((i % period) + period) % period;
              if (i >= n) i = period - i;
            }
            break;
          }
        }
      }
      map[d][o] = i < 0 ? -1 : i + crop_begin[d];
    }
  }
  auto xs = strides_of(x->shape());
  if (r == 0) {
    return by_elem_size(x->dtype(), ctx.where(), [&](auto tag) -> Status {
      using T = decltype(tag);
      elems<T>(out)[0] = elems<T>(*x)[0];
      return Status::ok();
    });
  }
  const int64_t inner = out_shape[r - 1];
  const int64_t rows = out.numel() / inner;
  const std::vector<int64_t>& lm = map[r - 1];
  // The contiguous middle of each row: output [pb, pb + crop) reads input contiguously.
  const int64_t mid_b = pb[r - 1], mid_n = crop[r - 1];
  return by_elem_size(x->dtype(), ctx.where(), [&](auto tag) -> Status {
    using T = decltype(tag);
    T cval{};
    if constexpr (std::is_same_v<T, std::string>) cval = cstr;
    else std::memcpy(&cval, &cbits, sizeof(T));
    const T* src = elems<T>(*x);
    T* dst = elems<T>(out);
    parallel_for(ctx.threads(), rows, std::max<int64_t>(1, 16384 / inner), [&](int64_t b, int64_t e) {
      for (int64_t row = b; row < e; ++row) {
        T* dp = dst + row * inner;
        int64_t lin = row, base = 0;
        bool constant_row = false;
        for (int d = r - 2; d >= 0; --d) {
          int64_t o = lin % out_shape[d];
          lin /= out_shape[d];
          int64_t i = map[d][o];
          if (i < 0) {
            constant_row = true;
            break;
          }
          base += i * xs[d];
        }
        if (constant_row) {
          std::fill_n(dp, inner, cval);
          continue;
        }
        const T* sp = src + base;
        for (int64_t j = 0; j < mid_b; ++j) dp[j] = lm[j] < 0 ? cval : sp[lm[j]];
        copy_elems(sp + crop_begin[r - 1], mid_n, dp + mid_b);
        for (int64_t j = mid_b + mid_n; j < inner; ++j) dp[j] = lm[j] < 0 ? cval : sp[lm[j]];
      }
    });
    return Status::ok();
  });
}

Result<std::unique_ptr<Kernel>> make_pad(const KernelInfo& info) {
  PadConfig cfg;
  std::string mode = info.node.attr_string("mode", "constant");
  if (mode == "constant") cfg.mode = PadMode::kConstant;
  else if (mode == "reflect") cfg.mode = PadMode::kReflect;
  else if (mode == "edge") cfg.mode = PadMode::kEdge;
  else if (mode == "wrap") cfg.mode = PadMode::kWrap;
  else return invalid_argument(info.where() + "unknown pad mode '" + mode + "'");
  if (info.node.opset < 11) {
    cfg.legacy = true;
    const char* name = info.node.opset < 2 ? "paddings" : "pads";
    if (!info.node.has_attr(name)) return invalid_argument(info.where() + "missing attribute '" + name + "'");
    cfg.pads_attr = info.node.attr_ints(name);
    cfg.value_attr = info.node.attr_float("value", 0.f);
  }
  return make_kernel([cfg](KernelContext& ctx) -> Status { return pad_compute(ctx, cfg); });
}

// ---------------------------------------------------------------------------------------
// DepthToSpace, SpaceToDepth: a reshape to 6-D followed by a transpose.

Result<std::unique_ptr<Kernel>> make_depth_to_space(const KernelInfo& info) {
  int64_t bs = info.node.attr_int("blocksize", 0);
  std::string mode = info.node.attr_string("mode", "DCR");
  if (bs <= 0) return invalid_argument(info.where() + "blocksize must be positive");
  if (mode != "DCR" && mode != "CRD") return invalid_argument(info.where() + "unknown mode '" + mode + "'");
  bool crd = mode == "CRD";
  return make_kernel([bs, crd](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.input(0);
    if (!x) return invalid_argument(ctx.where() + "missing input");
    if (x->rank() != 4) return invalid_argument(ctx.where() + "input must be 4-D, got " + shape_to_string(x->shape()));
    int64_t n = x->dim(0), c = x->dim(1), h = x->dim(2), w = x->dim(3);
    int64_t bb = 0, ho = 0, wo = 0;  // blocksize^2 and the output's H and W: a hostile blocksize overflows them
    if (!checked_mul(bs, bs, &bb) || c % bb != 0)
      return invalid_argument(ctx.where() + "channels " + std::to_string(c) + " not divisible by blocksize^2 (blocksize " +
                              std::to_string(bs) + ")");
    if (!checked_mul(h, bs, &ho) || !checked_mul(w, bs, &wo))
      return invalid_argument(ctx.where() + "output size of " + shape_to_string(x->shape()) + " with blocksize " +
                              std::to_string(bs) + " overflows");
    int64_t co = c / bb;
    // Input as 6-D [N, a, b, c, H, W]; output order [N, C', H, b1, W, b2].
    Shape in6 = crd ? Shape{n, co, bs, bs, h, w} : Shape{n, bs, bs, co, h, w};
    auto s6 = strides_of(in6);
    std::vector<int> perm = crd ? std::vector<int>{0, 1, 4, 2, 5, 3} : std::vector<int>{0, 3, 4, 1, 5, 2};
    Shape view(6);
    std::vector<int64_t> st(6);
    for (int i = 0; i < 6; ++i) {
      view[i] = in6[perm[i]];
      st[i] = s6[perm[i]];
    }
    BH_RETURN_IF_ERROR(need_host(*x, ctx.where(), "input"));
    BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, x->dtype(), Shape{n, co, ho, wo}));
    if (out.numel() == 0) return Status::ok();
    return by_elem_size(x->dtype(), ctx.where(), [&](auto tag) -> Status {
      using T = decltype(tag);
      strided_copy<T>(elems<T>(*x), elems<T>(out), view, st, ctx.threads());
      return Status::ok();
    });
  });
}

Result<std::unique_ptr<Kernel>> make_space_to_depth(const KernelInfo& info) {
  int64_t bs = info.node.attr_int("blocksize", 0);
  if (bs <= 0) return invalid_argument(info.where() + "blocksize must be positive");
  return make_kernel([bs](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.input(0);
    if (!x) return invalid_argument(ctx.where() + "missing input");
    if (x->rank() != 4) return invalid_argument(ctx.where() + "input must be 4-D, got " + shape_to_string(x->shape()));
    int64_t n = x->dim(0), c = x->dim(1), h = x->dim(2), w = x->dim(3);
    int64_t co = 0;  // C * blocksize^2: a hostile blocksize overflows it
    if (h % bs != 0 || w % bs != 0)
      return invalid_argument(ctx.where() + "spatial size " + shape_to_string(x->shape()) + " not divisible by blocksize");
    if (!checked_mul(bs, bs, &co) || !checked_mul(c, co, &co))
      return invalid_argument(ctx.where() + "output channels of " + shape_to_string(x->shape()) + " with blocksize " +
                              std::to_string(bs) + " overflow");
    Shape in6{n, c, h / bs, bs, w / bs, bs};
    auto s6 = strides_of(in6);
    const int perm[6] = {0, 3, 5, 1, 2, 4};
    Shape view(6);
    std::vector<int64_t> st(6);
    for (int i = 0; i < 6; ++i) {
      view[i] = in6[perm[i]];
      st[i] = s6[perm[i]];
    }
    BH_RETURN_IF_ERROR(need_host(*x, ctx.where(), "input"));
    BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, x->dtype(), Shape{n, co, h / bs, w / bs}));
    if (out.numel() == 0) return Status::ok();
    return by_elem_size(x->dtype(), ctx.where(), [&](auto tag) -> Status {
      using T = decltype(tag);
      strided_copy<T>(elems<T>(*x), elems<T>(out), view, st, ctx.threads());
      return Status::ok();
    });
  });
}

}  // namespace

void register_tensor_copy_kernels(KernelTable& t) {
  t.add("Transpose", 1, make_transpose);
  t.add("Concat", 1, make_concat);
  t.add("Split", 1, make_split);
  t.add("Slice", 1, make_slice);
  t.add("Slice", 10, make_slice);
  t.add("Gather", 1, make_gather);
  t.add("GatherElements", 11, make_gather_elements);
  t.add("GatherND", 11, make_gather_nd);
  t.add("ScatterND", 11, make_scatter_nd);
  t.add("ScatterElements", 11, make_scatter_elements);
  t.add("Scatter", 9, make_scatter_elements);
  t.add("Expand", 8, make_expand);
  t.add("Tile", 1, make_tile);
  t.add("Tile", 6, make_tile);
  t.add("Pad", 1, make_pad);
  t.add("Pad", 11, make_pad);
  t.add("DepthToSpace", 1, make_depth_to_space);
  t.add("SpaceToDepth", 1, make_space_to_depth);
}

}  // namespace bulkhead::cpu
