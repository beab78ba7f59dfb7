// BatchNormalization (inference), InstanceNormalization and LayerNormalization, float32
// (kernels/normalize.cl). Training outputs, LayerNormalization's Mean/InvStdDev and
// stash types other than float32 stay on the CPU.
#include <algorithm>

#include "ops/families.h"

namespace bulkhead::opencl {
namespace {

Status batch_norm(float eps, bool relu, Call& call) {
  const Tensor* x = call.input(0);
  if (!x || x->dtype != BH_TYPE_FLOAT32 || x->rank() < 2)
    return invalid_argument(call.where() + "expects a float32 input of rank >= 2");
  const int64_t c = x->dims[1];
  for (size_t i = 1; i <= 4; ++i)
    if (!call.input(i) || call.input(i)->dtype != BH_TYPE_FLOAT32 || call.input(i)->numel() != c)
      return invalid_argument(call.where() + "input " + std::to_string(i) +
                              " must be float32 with C = " + std::to_string(c) + " elements");
  OCL_ASSIGN(Tensor y, call.output(0, BH_TYPE_FLOAT32, x->dims));
  if (y.numel() == 0) return Status::ok();
  OCL_TRY(call.check_size({x}));
  const int spatial = static_cast<int>(x->numel() / (x->dims[0] * c));
  return call.stream().dispatch("batch_norm", items(y.numel()), y.nbytes(), x->buf(), call.input(1)->buf(),
                                call.input(2)->buf(), call.input(3)->buf(), call.input(4)->buf(), y.buf(),
                                static_cast<int>(c), spatial, eps, relu ? 1 : 0);
}

// Rows of `n` elements normalised, scale and bias indexed per element modulo `period`
// (per_row 0) or per row modulo `period` (per_row 1).
Status norm_rows(Call& call, const Tensor& x, const Tensor& scale, const Tensor* bias, int64_t rows, int64_t n,
                 int64_t period, bool per_row, float eps) {
  OCL_ASSIGN(Tensor y, call.output(0, BH_TYPE_FLOAT32, x.dims));
  if (y.numel() == 0) return Status::ok();
  OCL_TRY(call.check_size({&x}));
  return call.stream().dispatch("norm_rows", groups(rows, 1, 1, OCL_GROUP, 1), y.nbytes(), x.buf(), scale.buf(),
                                bias ? bias->buf() : Buf{}, y.buf(), static_cast<int>(n), static_cast<int>(period),
                                per_row ? 1 : 0, bias ? 1 : 0, eps);
}

Status instance_norm(float eps, Call& call) {
  const Tensor* x = call.input(0);
  const Tensor* scale = call.input(1);
  const Tensor* bias = call.input(2);
  if (!x || !scale || !bias || x->dtype != BH_TYPE_FLOAT32 || scale->dtype != BH_TYPE_FLOAT32 ||
      bias->dtype != BH_TYPE_FLOAT32)
    return invalid_argument(call.where() + "expects float32 input, scale and B");
  if (x->rank() < 3)
    return invalid_argument(call.where() + "X " + x->describe() + " needs N, C and spatial dimensions");
  const int64_t c = x->dims[1];
  if (scale->numel() != c || bias->numel() != c)
    return invalid_argument(call.where() + "scale " + scale->describe() + " and B " + bias->describe() + " must have " +
                            std::to_string(c) + " elements");
  const int64_t rows = x->dims[0] * c;
  return norm_rows(call, *x, *scale, bias, rows, rows ? x->numel() / rows : 0, c, true, eps);
}

Status layer_norm(int64_t axis_attr, float eps, Call& call) {
  const Tensor* x = call.input(0);
  const Tensor* scale = call.input(1);
  const Tensor* bias = call.input(2);
  if (!x || !scale || x->dtype != BH_TYPE_FLOAT32 || scale->dtype != BH_TYPE_FLOAT32 ||
      (bias && bias->dtype != BH_TYPE_FLOAT32))
    return invalid_argument(call.where() + "expects float32 X, scale and optional B");
  OCL_ASSIGN(int axis, normalize_axis(axis_attr, x->rank(), call.where()));
  const Dims block(x->dims.begin() + axis, x->dims.end());
  const int64_t n = numel(block);
  // Scale and B broadcast to the normalised block: after leading 1s, their dimensions must
  // be the block's last ones, so that element k of the block reads k modulo their size.
  for (const Tensor* t : {scale, bias}) {
    if (!t) continue;
    Dims d = t->dims;
    while (!d.empty() && d.front() == 1 && d.size() > 1) d.erase(d.begin());
    const bool suffix = d.size() <= block.size() && std::equal(d.begin(), d.end(), block.end() - d.size());
    if (!suffix && t->numel() != 1)
      return unsupported(call.where() + "the OpenCL LayerNormalization broadcasts " + (t == scale ? "scale " : "B ") +
                         t->describe() + " only as the last dimensions of the normalised shape " + dims_text(block));
  }
  if (bias && bias->numel() != scale->numel())
    return unsupported(call.where() + "the OpenCL LayerNormalization needs scale and B of one shape");
  return norm_rows(call, *x, *scale, bias, x->numel() / std::max<int64_t>(n, 1), n, scale->numel(), false, eps);
}

}  // namespace

Result<OpPtr> make_batch_norm(const Node& n) {
  OCL_TRY(n.require_types(kFloat));
  OCL_TRY(n.require_one_output("the training statistics"));
  if (n.attr_int("training_mode", 0) != 0) return unsupported(n.where() + "the OpenCL kernel is for inference only");
  if (n.attr_int("spatial", 1) == 0)
    return unsupported(n.where() + "the OpenCL kernel takes per-channel statistics only");
  const float eps = n.attr_float("epsilon", 1e-5f);
  const bool relu = n.attr_int("_relu", 0) != 0;  // a Relu the graph optimiser fused
  return make_op([eps, relu](Call& call) { return batch_norm(eps, relu, call); });
}

Result<OpPtr> make_instance_norm(const Node& n) {
  OCL_TRY(n.require_types(kFloat));
  const float eps = n.attr_float("epsilon", 1e-5f);
  return make_op([eps](Call& call) { return instance_norm(eps, call); });
}

Result<OpPtr> make_layer_norm(const Node& n) {
  OCL_TRY(n.require_types(kFloat));
  OCL_TRY(n.require_one_output("Mean and InvStdDev"));
  if (n.attr_int("stash_type", 1) != 1)
    return unsupported(n.where() + "the OpenCL kernel takes stash_type float32 only");
  const int64_t axis = n.attr_int("axis", -1);
  const float eps = n.attr_float("epsilon", 1e-5f);
  return make_op([axis, eps](Call& call) { return layer_norm(axis, eps, call); });
}

}  // namespace bulkhead::opencl
