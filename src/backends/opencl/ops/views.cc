// The views — Reshape, Flatten, Squeeze, Unsqueeze, Identity — hand the input's bytes on
// with a new shape through alias_output: no work reaches the device. Every fixed-size
// element type; shape-like inputs (Reshape's shape, Squeeze/Unsqueeze's axes from opset
// 13) must be constants.
#include <functional>

#include "ops/families.h"

namespace bulkhead::opencl {
namespace {

using ShapeFn = std::function<Result<Dims>(const Dims& in, const std::string& where)>;

Result<OpPtr> view(const Node& n, ShapeFn fn) {
  OCL_TRY(n.require_types(kAnyFixed, {0}));
  return make_op([fn = std::move(fn)](Call& call) -> Status {
    const Tensor* x = call.input(0);
    if (!x) return invalid_argument(call.where() + "missing input");
    OCL_ASSIGN(Dims d, fn(x->dims, call.where()));
    if (numel(d) != x->numel())
      return invalid_argument(call.where() + "cannot view " + x->describe() + " as " + dims_text(d));
    return call.alias(0, 0, d);
  });
}

Result<Dims> reshape_target(const Dims& in, const Dims& spec, bool allowzero, const std::string& where) {
  Dims out(spec.size());
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t s = spec[i];
    if (s == -1 && infer < 0) {
      infer = static_cast<int>(i);
      continue;
    }
    if (s < 0) return invalid_argument(where + "shape " + dims_text(spec) + " is invalid");
    if (s == 0 && !allowzero) {
      if (i >= in.size()) return invalid_argument(where + "shape " + dims_text(spec) + " copies a missing dimension");
      s = in[i];
    }
    out[i] = s;
    known *= s;
  }
  if (infer >= 0) {
    if (known == 0 || numel(in) % known != 0)
      return invalid_argument(where + "cannot reshape " + dims_text(in) + " to " + dims_text(spec));
    out[infer] = numel(in) / known;
  }
  return out;
}

}  // namespace

Result<OpPtr> make_reshape(const Node& n) {
  Dims spec = n.attr_ints("shape");
  if (n.opset() >= 5) {
    OCL_ASSIGN(spec, n.constant_ints(1, "shape"));
  }
  const bool allowzero = n.attr_int("allowzero", 0) != 0;
  return view(n, [spec, allowzero](const Dims& in, const std::string& where) {
    return reshape_target(in, spec, allowzero, where);
  });
}

Result<OpPtr> make_flatten(const Node& n) {
  const int64_t axis = n.attr_int("axis", 1);
  return view(n, [axis](const Dims& in, const std::string& where) -> Result<Dims> {
    const int r = static_cast<int>(in.size());
    if (axis < -r || axis > r) return invalid_argument(where + "axis " + std::to_string(axis) + " is out of range");
    const int64_t a = axis < 0 ? axis + r : axis;
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < r; ++d) (d < a ? outer : inner) *= in[d];
    return Dims{outer, inner};
  });
}

Result<OpPtr> make_squeeze(const Node& n) {
  Dims axes = n.attr_ints("axes");
  if (n.opset() >= 13 && n.has_input(1)) {
    OCL_ASSIGN(axes, n.constant_ints(1, "axes"));
  }
  return view(n, [axes](const Dims& in, const std::string& where) -> Result<Dims> {
    const int r = static_cast<int>(in.size());
    std::vector<bool> drop(r, false);
    for (int d = 0; d < r && axes.empty(); ++d) drop[d] = in[d] == 1;  // no axes: every dimension of size 1
    for (int64_t a0 : axes) {
      OCL_ASSIGN(int a, normalize_axis(a0, r, where));
      if (in[a] != 1)
        return invalid_argument(where + "cannot squeeze axis " + std::to_string(a0) + " of " + dims_text(in));
      drop[a] = true;
    }
    Dims out;
    for (int d = 0; d < r; ++d)
      if (!drop[d]) out.push_back(in[d]);
    return out;
  });
}

Result<OpPtr> make_unsqueeze(const Node& n) {
  Dims axes = n.attr_ints("axes");
  if (n.opset() >= 13) {
    OCL_ASSIGN(axes, n.constant_ints(1, "axes"));
  }
  return view(n, [axes](const Dims& in, const std::string& where) -> Result<Dims> {
    const int r = static_cast<int>(in.size() + axes.size());
    std::vector<bool> added(r, false);
    for (int64_t a0 : axes) {
      OCL_ASSIGN(int a, normalize_axis(a0, r, where));
      if (added[a]) return invalid_argument(where + "axes repeat axis " + std::to_string(a));
      added[a] = true;
    }
    Dims out(r);
    for (int d = 0, j = 0; d < r; ++d) out[d] = added[d] ? 1 : in[j++];
    return out;
  });
}

Result<OpPtr> make_identity(const Node& n) {
  return view(n, [](const Dims& in, const std::string&) -> Result<Dims> { return in; });
}

}  // namespace bulkhead::opencl
