// Reductions over any set of axes (ReduceSum, ReduceMean, ReduceMax, ReduceMin and
// ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSumExp), Softmax and LogSoftmax, float32
// (kernels/reduce.cl). The axes come from the attribute before the opset that moved them
// to input 1 (13 for ReduceSum, 18 for the others), and from there as a constant input.
#include <algorithm>

#include "ops/families.h"

namespace bulkhead::opencl {
namespace {

struct ReduceAttrs {
  int op = 0;
  Dims axes;
  bool keepdims = true, noop_empty = false;
};

Status reduce(const ReduceAttrs& a, Call& call) {
  const Tensor* x = call.input(0);
  if (!x || x->dtype != BH_TYPE_FLOAT32) return invalid_argument(call.where() + "expects a float32 input");
  if (a.axes.empty() && a.noop_empty) return call.alias(0, 0, x->dims);
  const int rank = x->rank();
  if (rank > OCL_MAX_RANK)
    return unsupported(call.where() + "rank " + std::to_string(rank) + " is above the kernel's 8");
  std::vector<bool> reduced(rank, a.axes.empty());
  for (int64_t axis : a.axes) {
    OCL_ASSIGN(int d, normalize_axis(axis, rank, call.where()));
    if (reduced[d]) return invalid_argument(call.where() + "axis " + std::to_string(axis) + " appears twice in axes");
    reduced[d] = true;
  }
  const Dims in_strides = strides_of(x->dims);
  Dims out, kept, kept_st, red, red_st;
  for (int d = 0; d < rank; ++d) {
    if (reduced[d]) {
      red.push_back(x->dims[d]);
      red_st.push_back(in_strides[d]);
      if (a.keepdims) out.push_back(1);
    } else {
      out.push_back(x->dims[d]);
      kept.push_back(x->dims[d]);
      kept_st.push_back(in_strides[d]);
    }
  }
  OCL_ASSIGN(Tensor y, call.output(0, BH_TYPE_FLOAT32, out));
  if (y.numel() == 0) return Status::ok();
  OCL_TRY(call.check_size({x}));
  const int64_t count = numel(red);
  simplify(kept, {&kept_st});
  simplify(red, {&red_st});
  Reduce p{};
  p.kept_rank = static_cast<int>(kept.size());
  p.red_rank = static_cast<int>(red.size());
  for (size_t d = 0; d < kept.size(); ++d) {
    p.kept_dims[d] = static_cast<int>(kept[d]);
    p.kept[d] = static_cast<int>(kept_st[d]);
  }
  for (size_t d = 0; d < red.size(); ++d) {
    p.red_dims[d] = static_cast<int>(red[d]);
    p.red[d] = static_cast<int>(red_st[d]);
  }
  p.count = static_cast<int>(count);
  p.op = a.op;
  return call.stream().dispatch("reduce", items(y.numel()), y.nbytes(), x->buf(), y.buf(), p);
}

Status softmax(int64_t axis_attr, bool coerce_2d, bool log, Call& call) {
  const Tensor* x = call.input(0);
  if (!x || x->dtype != BH_TYPE_FLOAT32) return invalid_argument(call.where() + "expects a float32 input");
  const int rank = x->rank();
  if (rank == 0) return invalid_argument(call.where() + "expects an input of rank >= 1");
  OCL_ASSIGN(int axis, normalize_axis(axis_attr, rank, call.where()));
  OCL_ASSIGN(Tensor y, call.output(0, BH_TYPE_FLOAT32, x->dims));
  if (y.numel() == 0) return Status::ok();
  OCL_TRY(call.check_size({x}));
  // Before opset 13 the input is coerced to 2-D at `axis`: one row is everything from there.
  const Dims& d = x->dims;
  const int64_t outer = numel(Dims(d.begin(), d.begin() + axis)), inner = numel(Dims(d.begin() + axis + 1, d.end()));
  const int r = static_cast<int>(coerce_2d ? d[axis] * inner : d[axis]);
  const int in = static_cast<int>(coerce_2d ? 1 : inner);
  return call.stream().dispatch("softmax", items(outer * in), y.nbytes(), x->buf(), y.buf(), r, in, log ? 1 : 0);
}

}  // namespace

Result<OpPtr> make_reduce(const Node& n, int op, int axes_input_since) {
  OCL_TRY(n.require_types(kFloat, {0}));
  ReduceAttrs a;
  a.op = op;
  a.keepdims = n.attr_int("keepdims", 1) != 0;
  if (n.opset() < axes_input_since) {
    a.axes = n.attr_ints("axes");
  } else {
    if (n.has_input(1)) {
      OCL_ASSIGN(a.axes, n.constant_ints(1, "axes"));
    }
    a.noop_empty = n.attr_int("noop_with_empty_axes", 0) != 0;
  }
  return make_op([a](Call& call) { return reduce(a, call); });
}

Result<OpPtr> make_softmax(const Node& n, bool log) {
  OCL_TRY(n.require_types(kFloat, {0}));
  const bool coerce = n.opset() < 13;
  const int64_t axis = n.attr_int("axis", coerce ? 1 : -1);
  return make_op([axis, coerce, log](Call& call) { return softmax(axis, coerce, log, call); });
}

}  // namespace bulkhead::opencl
