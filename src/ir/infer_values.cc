// Shape and type inference rules for the operators that compute small integer values in
// "shape sub-graphs" -- Shape, Size, Cast, Neg/Abs, element-wise arithmetic and
// comparisons, Where, Range, ConstantOfShape, Identity -- with the values themselves
// where they can be followed, so that Reshape/Expand/Tile/Slice/... targets computed at
// run time still give static shapes (infer_tensor.cc reads them). See infer.h.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>

#include "ir/infer_rules.h"

namespace bulkhead::ir::infer {
namespace {

// Fits `v` in integer type `t` unchanged?
bool fits(int64_t v, DataType t) {
  switch (t) {
    case DataType::kInt64: return true;
    case DataType::kInt32: return v >= INT32_MIN && v <= INT32_MAX;
    case DataType::kInt16: return v >= INT16_MIN && v <= INT16_MAX;
    case DataType::kInt8: return v >= INT8_MIN && v <= INT8_MAX;
    case DataType::kUInt8: return v >= 0 && v <= UINT8_MAX;
    case DataType::kUInt16: return v >= 0 && v <= UINT16_MAX;
    case DataType::kUInt32: return v >= 0 && v <= static_cast<int64_t>(UINT32_MAX);
    case DataType::kUInt64: return v >= 0;
    default: return false;
  }
}

// ---------------------------------------------------------------------------------------
// Shape, Size, ConstantOfShape, Cast, Identity.

Status rule_shape(Ctx& c) {
  c.set_type(0, DataType::kInt64);
  const Dims* s = c.in_shape(0);
  if (!s) {
    c.set_rank(0, 1);
    return Status::ok();
  }
  const int r = static_cast<int>(s->size());
  int64_t start = 0, end = r;
  if (c.opset() >= 15) {
    start = c.node.attr_int("start", 0);
    end = c.node.attr_int("end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = std::clamp<int64_t>(start, 0, r);
    end = std::clamp<int64_t>(end, 0, r);
  }
  Data d;
  for (int64_t i = start; i < end; ++i) d.v.push_back(Elem::of_dim((*s)[i]));
  c.set_shape(0, {fixed_dim(static_cast<int64_t>(d.v.size()))});
  c.set_data(0, std::move(d));
  return Status::ok();
}

Status rule_size(Ctx& c) {
  c.set(0, DataType::kInt64, {});
  if (const Dims* s = c.in_shape(0)) {
    Data d;
    d.scalar = true;
    const Dim n = product_dim(s->begin(), s->end());
    d.v.push_back(Elem::of_dim(n));
    if (n.fixed()) c.set_data(0, std::move(d));
  }
  return Status::ok();
}

Status rule_constant_of_shape(Ctx& c) {
  DataType t = DataType::kFloat32;
  const Attribute* value = c.node.attr("value");
  if (value && value->type == AttrType::kTensor && value->t.defined()) t = value->t.dtype();
  c.set_type(0, t);
  if (const Data* d = c.in_data(0)) {
    const Dims dims = d->dims();
    c.set_shape(0, dims);
    // A small integer result is data too (pytorch's expand pattern builds [1,1,...]).
    auto n = fixed_product(dims);
    if (n && dims.size() <= 1 && *n <= static_cast<int64_t>(kMaxDataElems) && is_int_type(t)) {
      int64_t v = 0;
      if (value && value->type == AttrType::kTensor && value->t.numel() == 1 && value->t.raw()) {
        switch (t) {
          case DataType::kInt64: v = value->t.data<int64_t>()[0]; break;
          case DataType::kInt32: v = value->t.data<int32_t>()[0]; break;
          case DataType::kBool: case DataType::kUInt8: v = value->t.data<uint8_t>()[0]; break;
          default: return Status::ok();
        }
      }
      Data out;
      out.scalar = dims.empty();
      out.v.assign(static_cast<size_t>(*n), Elem::of(v));
      c.set_data(0, std::move(out));
    }
  } else if (const Dims* s = c.in_shape(0); s && s->size() == 1 && (*s)[0].fixed()) {
    c.set_rank(0, (*s)[0].value);
  }
  return Status::ok();
}

// Integer values converted to integer type `to`, when every known value survives.
void cast_data(Ctx& c, DataType from, DataType to) {
  const Data* d = c.in_data(0);
  if (!d || !is_int_type(from) || !is_int_type(to)) return;
  Data r = *d;
  for (Elem& x : r.v) {
    if (!x.known) continue;
    if (to == DataType::kBool) x.value = x.value != 0;
    else if (!fits(x.value, to)) return;
  }
  c.set_data(0, std::move(r));
}

Status rule_cast(Ctx& c) {
  const DataType to = static_cast<DataType>(c.node.attr_int("to", 0));
  c.set_type(0, to);
  if (const Dims* s = c.in_shape(0)) c.set_shape(0, *s);
  cast_data(c, c.in_type(0), to);
  return Status::ok();
}

Status rule_cast_like(Ctx& c) {
  const DataType to = c.in_type(1);
  c.set_type(0, to);
  if (const Dims* s = c.in_shape(0)) c.set_shape(0, *s);
  cast_data(c, c.in_type(0), to);
  return Status::ok();
}

// Neg and Abs, with their values on integer data.
Status rule_neg_abs(Ctx& c) {
  c.same_as_input(0, 0);
  const Data* d = c.in_data(0);
  if (!d || !is_int_type(c.in_type(0))) return Status::ok();
  const bool neg = c.node.op_type == "Neg";
  Data r = *d;
  for (Elem& e : r.v) {
    if (!e.known) {
      e = Elem{};
      continue;
    }
    if (e.value == INT64_MIN) return Status::ok();
    e.value = neg ? -e.value : std::abs(e.value);
  }
  c.set_data(0, std::move(r));
  return Status::ok();
}

// BitCast (opset 26): the bits reinterpreted as type `to`; elements of equal size keep
// the shape.
Status rule_bit_cast(Ctx& c) {
  const DataType from = c.in_type(0), to = static_cast<DataType>(c.node.attr_int("to", 0));
  c.set_type(0, to);
  const Dims* s = c.in_shape(0);
  const size_t a = dtype_size(from), b = dtype_size(to);
  if (s && a > 0 && a == b) c.set_shape(0, *s);
  return Status::ok();
}

Status rule_identity(Ctx& c) {
  if (const ValueInfo* v = c.in(0); v && c.num_outputs() > 0) {
    c.out[0] = *v;
    c.out[0].name.clear();
  }
  if (const Data* d = c.in_data(0)) c.set_data(0, *d);
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// Element-wise arithmetic and comparisons (shapes, and values of integer shape data).

enum class Arith { kAdd, kSub, kMul, kDiv, kMax, kMin, kEq, kLt, kGt, kLe, kGe, kNone };

Arith arith_of(const std::string& op) {
  if (op == "Add") return Arith::kAdd;
  if (op == "Sub") return Arith::kSub;
  if (op == "Mul") return Arith::kMul;
  if (op == "Div") return Arith::kDiv;
  if (op == "Max") return Arith::kMax;
  if (op == "Min") return Arith::kMin;
  if (op == "Equal") return Arith::kEq;
  if (op == "Less") return Arith::kLt;
  if (op == "Greater") return Arith::kGt;
  if (op == "LessOrEqual") return Arith::kLe;
  if (op == "GreaterOrEqual") return Arith::kGe;
  return Arith::kNone;
}

Elem arith(Arith op, const Elem& a, const Elem& b) {
  if (a.known && b.known) {
    const int64_t x = a.value, y = b.value;
    // Wrapping like the kernels, without signed-overflow UB.
    auto wrap = [](uint64_t v) { return static_cast<int64_t>(v); };
    switch (op) {
      case Arith::kAdd: return Elem::of(wrap(static_cast<uint64_t>(x) + static_cast<uint64_t>(y)));
      case Arith::kSub: return Elem::of(wrap(static_cast<uint64_t>(x) - static_cast<uint64_t>(y)));
      case Arith::kMul: return Elem::of(wrap(static_cast<uint64_t>(x) * static_cast<uint64_t>(y)));
      case Arith::kDiv:
        if (y == 0 || (y == -1 && x == INT64_MIN)) return Elem{};
        return Elem::of(x / y);
      case Arith::kMax: return Elem::of(std::max(x, y));
      case Arith::kMin: return Elem::of(std::min(x, y));
      case Arith::kEq: return Elem::of(x == y);
      case Arith::kLt: return Elem::of(x < y);
      case Arith::kGt: return Elem::of(x > y);
      case Arith::kLe: return Elem::of(x <= y);
      case Arith::kGe: return Elem::of(x >= y);
      case Arith::kNone: return Elem{};
    }
  }
  // Identities that keep a symbolic size.
  const bool a0 = a.known && a.value == 0, a1 = a.known && a.value == 1;
  const bool b0 = b.known && b.value == 0, b1 = b.known && b.value == 1;
  const bool same = !a.known && !b.known && !a.param.empty() && a.param == b.param;
  switch (op) {
    case Arith::kAdd: return a0 ? b : b0 ? a : Elem{};
    case Arith::kSub: return b0 ? a : same ? Elem::of(0) : Elem{};
    case Arith::kMul: return a1 ? b : b1 ? a : Elem{};
    case Arith::kDiv: return b1 ? a : same ? Elem::of(1) : Elem{};
    case Arith::kMax: case Arith::kMin: return same ? a : Elem{};
    case Arith::kEq: case Arith::kLe: case Arith::kGe: return same ? Elem::of(1) : Elem{};
    case Arith::kLt: case Arith::kGt: return same ? Elem::of(0) : Elem{};
    default: return Elem{};
  }
}

// Element-wise values of rank <= 1 data with broadcasting.
std::optional<Data> data_binary(Arith op, const Data& a, const Data& b) {
  const size_t n = a.v.size(), m = b.v.size();
  if (n != m && n != 1 && m != 1) return std::nullopt;
  Data r;
  r.scalar = a.scalar && b.scalar;
  const size_t k = std::max(n, m);
  if (n == 0 || m == 0) {
    r.scalar = false;
    return r;
  }
  for (size_t i = 0; i < k; ++i) r.v.push_back(arith(op, a.v[n == 1 ? 0 : i], b.v[m == 1 ? 0 : i]));
  return r;
}

bool is_comparison(Arith a) { return a == Arith::kEq || a == Arith::kLt || a == Arith::kGt || a == Arith::kLe || a == Arith::kGe; }

// Add/Sub/Mul/Div/Mod/Pow, bitwise and logical ops, comparisons: numpy broadcasting
// from opset 7 (legacy: B onto A, so the output has A's shape).
Status rule_binary(Ctx& c) {
  const std::string& op = c.node.op_type;
  const bool logic = op == "And" || op == "Or" || op == "Xor";
  const Arith a = arith_of(op);
  const bool boolean_out = logic || is_comparison(a);
  if (logic) {
    BH_RETURN_IF_ERROR(c.require_type(0, DataType::kBool, "input"));
    BH_RETURN_IF_ERROR(c.require_type(1, DataType::kBool, "input"));
  } else if (op != "Pow" || c.opset() < 12) {
    BH_RETURN_IF_ERROR(c.require_same_types({0, 1}));
  }
  DataType t = c.in_type(0);
  if (t == DataType::kUndefined && op != "Pow") t = c.in_type(1);
  c.set_type(0, boolean_out ? DataType::kBool : t);
  const Dims* sa = c.in_shape(0);
  const Dims* sb = c.in_shape(1);
  if (c.opset() > 0 && c.opset() < 7) {
    if (sa) c.set_shape(0, *sa);
  } else if (sa && sb) {
    c.set_shape(0, broadcast_dims(*sa, *sb));
  }
  const Data* da = c.in_data(0);
  const Data* db = c.in_data(1);
  if (a != Arith::kNone && da && db && is_int_type(c.in_type(0)) && is_int_type(c.in_type(1)))
    if (auto r = data_binary(a, *da, *db)) c.set_data(0, std::move(*r));
  return Status::ok();
}

// Max/Min/Sum/Mean: numpy broadcasting of every input (from opset 8; equal shapes before).
Status rule_variadic(Ctx& c) {
  std::vector<int> all;
  for (int i = 0; i < c.num_inputs(); ++i) all.push_back(i);
  BH_RETURN_IF_ERROR(c.require_same_types(all));
  DataType t = DataType::kUndefined;
  for (int i = 0; i < c.num_inputs() && t == DataType::kUndefined; ++i) t = c.in_type(i);
  c.set_type(0, t);
  if (c.opset() > 0 && c.opset() < 8) {
    for (int i = 0; i < c.num_inputs(); ++i)
      if (const Dims* s = c.in_shape(i)) {
        c.set_shape(0, *s);
        break;
      }
    return Status::ok();
  }
  std::optional<Dims> shape;
  std::optional<Data> data;
  const Arith a = arith_of(c.node.op_type);
  for (int i = 0; i < c.num_inputs(); ++i) {
    const Dims* s = c.in_shape(i);
    if (!s) return Status::ok();
    shape = shape ? broadcast_dims(*shape, *s) : *s;
    const Data* d = c.in_data(i);
    if (a != Arith::kNone && d && is_int_type(t) && (i == 0 || data)) data = i == 0 ? std::optional<Data>(*d) : data_binary(a, *data, *d);
    else data.reset();
  }
  if (shape) c.set_shape(0, *shape);
  if (data && c.num_inputs() > 0) c.set_data(0, std::move(*data));
  return Status::ok();
}

Status rule_where(Ctx& c) {
  BH_RETURN_IF_ERROR(c.require_type(0, DataType::kBool, "condition"));
  BH_RETURN_IF_ERROR(c.require_same_types({1, 2}));
  DataType t = c.in_type(1);
  c.set_type(0, t == DataType::kUndefined ? c.in_type(2) : t);
  const Dims* s0 = c.in_shape(0);
  const Dims* s1 = c.in_shape(1);
  const Dims* s2 = c.in_shape(2);
  if (s0 && s1 && s2) c.set_shape(0, broadcast_dims(broadcast_dims(*s0, *s1), *s2));
  const Data* dc = c.in_data(0);
  const Data* dx = c.in_data(1);
  const Data* dy = c.in_data(2);
  if (dc && dx && dy && dc->all_known()) {
    const size_t n = std::max({dc->v.size(), dx->v.size(), dy->v.size()});
    for (const Data* d : {dc, dx, dy})
      if (d->v.size() != n && d->v.size() != 1) return Status::ok();
    if (n == 0) return Status::ok();
    Data r;
    r.scalar = dc->scalar && dx->scalar && dy->scalar;
    for (size_t i = 0; i < n; ++i) {
      auto at = [&](const Data* d) { return d->v[d->v.size() == 1 ? 0 : i]; };
      r.v.push_back(at(dc).value ? at(dx) : at(dy));
    }
    c.set_data(0, std::move(r));
  }
  return Status::ok();
}

Status rule_range(Ctx& c) {
  BH_RETURN_IF_ERROR(c.require_same_types({0, 1, 2}));
  const DataType t = c.in_type(0);
  c.set_type(0, t);
  std::vector<int64_t> s, l, d;
  if (c.in_ints(0, &s) && c.in_ints(1, &l) && c.in_ints(2, &d) && s.size() == 1 && l.size() == 1 && d.size() == 1 &&
      d[0] != 0) {
    const double n = std::ceil((static_cast<double>(l[0]) - static_cast<double>(s[0])) / static_cast<double>(d[0]));
    const Dim count = double_dim(n > 0 ? n : 0);
    c.set_shape(0, {count});
    if (count.fixed() && count.value <= static_cast<int64_t>(kMaxDataElems) && is_int_type(t)) {
      Data r;
      for (int64_t i = 0; i < count.value; ++i)
        r.v.push_back(Elem::of(static_cast<int64_t>(static_cast<uint64_t>(s[0]) + static_cast<uint64_t>(i) * static_cast<uint64_t>(d[0]))));
      c.set_data(0, std::move(r));
    }
    return Status::ok();
  }
  std::vector<double> fs, fl, fd;
  if (c.in_floats(0, &fs) && c.in_floats(1, &fl) && c.in_floats(2, &fd) && fs.size() == 1 && fl.size() == 1 &&
      fd.size() == 1 && fd[0] != 0 && std::isfinite(fs[0]) && std::isfinite(fl[0]) && std::isfinite(fd[0])) {
    const double n = std::ceil((fl[0] - fs[0]) / fd[0]);
    c.set_shape(0, {std::isfinite(n) ? double_dim(n > 0 ? n : 0) : Dim{}});
    return Status::ok();
  }
  c.set_rank(0, 1);
  return Status::ok();
}

}  // namespace

void add_value_rules(RuleTable& t) {
  t["Shape"] = rule_shape;
  t["Size"] = rule_size;
  t["ConstantOfShape"] = rule_constant_of_shape;
  t["Cast"] = rule_cast;
  t["CastLike"] = rule_cast_like;
  t["Identity"] = rule_identity;
  t["Neg"] = rule_neg_abs;
  t["Abs"] = rule_neg_abs;
  t["BitCast"] = rule_bit_cast;
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Mod", "Pow", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor",
                         "And", "Or", "Xor", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"})
    t[op] = rule_binary;
  for (const char* op : {"Max", "Min", "Sum", "Mean"}) t[op] = rule_variadic;
  t["Where"] = rule_where;
  t["Range"] = rule_range;
}

}  // namespace bulkhead::ir::infer
