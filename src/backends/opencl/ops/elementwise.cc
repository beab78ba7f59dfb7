// Element-wise float32 ops (kernels/elementwise.cl): unary activations with their
// attributes, and binary ops with numpy broadcasting. Other element types, variadic
// Max/Min and pre-opset-7 broadcasting stay on the CPU.
#include <algorithm>
#include <limits>

#include "ops/families.h"

namespace bulkhead::opencl {
namespace {

// Clip's bound from constant input i (opset >= 11), `fallback` when omitted.
Result<float> clip_bound(const Node& n, size_t i, float fallback) {
  if (!n.has_input(i)) return fallback;
  OCL_ASSIGN(std::vector<float> v, n.constant_floats(i, i == 1 ? "min" : "max"));
  if (v.size() != 1) return unsupported(n.where() + "Clip's min and max must be scalars");
  return v[0];
}

// y's shape when a and b broadcast (numpy rules), and both operands' strides along it.
Status broadcast(const std::string& where, const Tensor& a, const Tensor& b, Dims* out, Broadcast* p) {
  const int rank = std::max(a.rank(), b.rank());
  out->assign(rank, 1);
  Dims dims(rank), sa(rank), sb(rank);
  int64_t stride_a = 1, stride_b = 1;
  for (int d = rank - 1; d >= 0; --d) {
    const int64_t da = d - (rank - a.rank()) >= 0 ? a.dims[d - (rank - a.rank())] : 1;
    const int64_t db = d - (rank - b.rank()) >= 0 ? b.dims[d - (rank - b.rank())] : 1;
    if (da != db && da != 1 && db != 1)
      return invalid_argument(where + "shapes " + a.describe() + " and " + b.describe() + " do not broadcast");
    dims[d] = (*out)[d] = da == 1 ? db : da;
    sa[d] = da == 1 ? 0 : stride_a;
    sb[d] = db == 1 ? 0 : stride_b;
    stride_a *= da;
    stride_b *= db;
  }
  simplify(dims, {&sa, &sb});
  if (dims.size() > OCL_MAX_RANK)
    return unsupported(where + "the broadcast needs " + std::to_string(dims.size()) +
                       " dimensions, above the kernel's 8");
  *p = Broadcast{};
  p->rank = static_cast<int>(dims.size());
  for (size_t d = 0; d < dims.size(); ++d) {
    p->dims[d] = static_cast<int>(dims[d]);
    p->a[d] = static_cast<int>(sa[d]);
    p->b[d] = static_cast<int>(sb[d]);
  }
  return Status::ok();
}

}  // namespace

Result<OpPtr> make_unary(const Node& n, int code) {
  OCL_TRY(n.require_types(kFloat, {0}));
  float a = 0, b = 0;
  switch (code) {
    case UNARY_LEAKY_RELU:
      a = n.attr_float("alpha", 0.01f);
      break;
    case UNARY_HARD_SIGMOID:
      a = n.attr_float("alpha", 0.2f);
      b = n.attr_float("beta", 0.5f);
      break;
    case UNARY_ELU:
      a = n.attr_float("alpha", 1.0f);
      break;
    case UNARY_SELU:
      a = n.attr_float("alpha", 1.67326319217681884765625f);
      b = n.attr_float("gamma", 1.05070102214813232421875f);
      break;
    case UNARY_CLIP:
      if (n.opset() < 11) {
        a = n.attr_float("min", -std::numeric_limits<float>::infinity());
        b = n.attr_float("max", std::numeric_limits<float>::infinity());
      } else {
        OCL_ASSIGN(a, clip_bound(n, 1, -std::numeric_limits<float>::infinity()));
        OCL_ASSIGN(b, clip_bound(n, 2, std::numeric_limits<float>::infinity()));
      }
      break;
    case UNARY_GELU: {
      const std::string approx = n.attr_string("approximate", "none");
      if (approx == "tanh")
        code = UNARY_GELU_TANH;
      else if (approx != "none")
        return invalid_argument(n.where() + "unknown approximate '" + approx + "'");
      break;
    }
    default:
      break;
  }
  return make_op([code, a, b](Call& call) -> Status {
    const Tensor* x = call.input(0);
    if (!x || x->dtype != BH_TYPE_FLOAT32) return invalid_argument(call.where() + "expects a float32 input");
    OCL_ASSIGN(Tensor y, call.output(0, BH_TYPE_FLOAT32, x->dims));
    OCL_TRY(call.check_size({x}));
    return call.stream().dispatch("unary", items(y.numel()), y.nbytes(), x->buf(), y.buf(), code, a, b);
  });
}

Status dispatch_binary(Call& call, const Tensor& a, const Tensor& b, const Tensor& y, int op) {
  Dims out;
  Broadcast p;
  OCL_TRY(broadcast(call.where(), a, b, &out, &p));
  if (out != y.dims)
    return internal_error(call.where() + "the broadcast of " + a.describe() + " and " + b.describe() + " is not " +
                          y.describe());
  return call.stream().dispatch("binary", items(y.numel()), y.nbytes(), a.buf(), b.buf(), y.buf(), op, p);
}

Result<OpPtr> make_binary(const Node& n, int code) {
  if (n.num_inputs() != 2 || !n.has_input(0) || !n.has_input(1))
    return unsupported(n.where() + "the OpenCL kernel takes exactly two inputs");
  // Before opset 7 broadcasting was an attribute (and PRelu's slope per channel): the CPU keeps those rules.
  if (n.opset() < 7) return unsupported(n.where() + "opset < 7 broadcasting rules run on the CPU");
  OCL_TRY(n.require_types(kFloat, {0, 1}));
  return make_op([code](Call& call) -> Status {
    const Tensor* a = call.input(0);
    const Tensor* b = call.input(1);
    if (!a || !b || a->dtype != BH_TYPE_FLOAT32 || b->dtype != BH_TYPE_FLOAT32)
      return invalid_argument(call.where() + "expects two float32 inputs");
    Dims out;
    Broadcast p;
    OCL_TRY(broadcast(call.where(), *a, *b, &out, &p));
    if (code == BINARY_PRELU && out != a->dims)
      return invalid_argument(call.where() + "slope " + b->describe() + " does not broadcast to X " + a->describe());
    OCL_ASSIGN(Tensor y, call.output(0, BH_TYPE_FLOAT32, out));
    OCL_TRY(call.check_size({a, b, &y}));
    return call.stream().dispatch("binary", items(y.numel()), y.nbytes(), a->buf(), b->buf(), y.buf(), code, p);
  });
}

}  // namespace bulkhead::opencl
