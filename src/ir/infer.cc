// Shape and type inference: the driver (scopes, merging with declared types,
// subgraphs), the shared helpers of infer_rules.h, and the rules for control flow,
// sequences and optionals. See infer.h for the contract.
#include "ir/infer.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <unordered_set>

#include "ir/infer_rules.h"

namespace bulkhead::ir {
namespace infer {

// ---------------------------------------------------------------------------------------
// Dimension helpers.

Dim meet_dim(const Dim& a, const Dim& b) {
  if (a.fixed()) return a;
  if (b.fixed()) return b;
  return a.param.empty() ? b : a;
}

Dim join_dim(const Dim& a, const Dim& b) { return same_dim(a, b) ? a : Dim{}; }

Dim broadcast_dim(const Dim& a, const Dim& b) {
  if (a.fixed() && a.value == 1) return b;
  if (b.fixed() && b.value == 1) return a;
  if (a.fixed() && b.fixed()) return a.value == b.value ? a : Dim{};
  // A fixed size other than 1 wins: the other side must be 1 or equal to it.
  if (a.fixed()) return a;
  if (b.fixed()) return b;
  return same_dim(a, b) ? a : Dim{};
}

Dims broadcast_dims(const Dims& a, const Dims& b) {
  size_t r = std::max(a.size(), b.size());
  Dims out(r);
  for (size_t i = 0; i < r; ++i) {
    const Dim one = fixed_dim(1);
    const Dim& x = i < r - a.size() ? one : a[i - (r - a.size())];
    const Dim& y = i < r - b.size() ? one : b[i - (r - b.size())];
    out[i] = broadcast_dim(x, y);
  }
  return out;
}

Dim mul_dim(const Dim& a, const Dim& b) {
  if (a.fixed() && b.fixed()) return wide_dim(static_cast<__int128>(a.value) * b.value);
  if (a.fixed() && a.value == 1) return b;
  if (b.fixed() && b.value == 1) return a;
  if ((a.fixed() && a.value == 0) || (b.fixed() && b.value == 0)) return fixed_dim(0);
  return Dim{};
}

Dim add_dim(const Dim& a, const Dim& b) {
  if (a.fixed() && b.fixed()) return wide_dim(static_cast<__int128>(a.value) + b.value);
  if (a.fixed() && a.value == 0) return b;
  if (b.fixed() && b.value == 0) return a;
  return Dim{};
}

std::optional<int64_t> fixed_product(const Dims& d) {
  int64_t p = 1;
  for (const Dim& x : d) {
    if (!x.fixed() || __builtin_mul_overflow(p, x.value, &p)) return std::nullopt;
  }
  return p;
}

// The product of dims, symbolic when exactly one factor is symbolic and the rest are 1.
Dim product_dim(Dims::const_iterator b, Dims::const_iterator e) {
  Dim p = fixed_dim(1);
  for (auto it = b; it != e; ++it) p = mul_dim(p, *it);
  return p;
}

bool is_int_type(DataType t) { return dtype_is_integer(t) || t == DataType::kBool; }

int norm_axis(int64_t a, int r) {
  if (a < 0) a += r;
  return a < 0 || a >= r ? -1 : static_cast<int>(a);
}

std::vector<int64_t> Data::ints() const {
  std::vector<int64_t> r;
  r.reserve(v.size());
  for (const Elem& e : v) r.push_back(e.value);
  return r;
}

// ---------------------------------------------------------------------------------------
// Scopes: what is known of the values of one graph, with its enclosing graphs behind it.

class Scope {
 public:
  Scope(Graph& g, const Scope* parent) : g(g), parent(parent) {}

  const ValueInfo* type(const std::string& n) const {
    for (const Scope* s = this; s; s = s->parent) {
      auto it = s->types.find(n);
      if (it != s->types.end()) return &it->second;
    }
    return nullptr;
  }
  const Data* data(const std::string& n) const {
    for (const Scope* s = this; s; s = s->parent) {
      if (s->types.count(n)) {
        auto it = s->datas.find(n);
        return it == s->datas.end() ? nullptr : &it->second;
      }
    }
    return nullptr;
  }
  const Tensor* constant(const std::string& n) const {
    for (const Scope* s = this; s; s = s->parent) {
      if (s->types.count(n)) {
        auto it = s->consts.find(n);
        return it == s->consts.end() ? nullptr : it->second;
      }
    }
    return nullptr;
  }

  Graph& g;
  const Scope* parent;
  std::unordered_map<std::string, ValueInfo> types;
  std::unordered_map<std::string, Data> datas;
  std::unordered_map<std::string, const Tensor*> consts;
};

namespace {

Dims dims_of(const Shape& s) {
  Dims d;
  d.reserve(s.size());
  for (int64_t v : s) d.push_back(fixed_dim(v));
  return d;
}

// The elements of a small integer or bool constant of rank <= 1.
std::optional<Data> data_of_tensor(const Tensor& t) {
  if (t.rank() > 1 || t.numel() > static_cast<int64_t>(kMaxDataElems) || (t.numel() > 0 && !t.raw())) return std::nullopt;
  Data d;
  d.scalar = t.rank() == 0;
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    int64_t v;
    switch (t.dtype()) {
      case DataType::kInt64: v = t.data<int64_t>()[i]; break;
      case DataType::kInt32: v = t.data<int32_t>()[i]; break;
      case DataType::kInt16: v = t.data<int16_t>()[i]; break;
      case DataType::kInt8: v = t.data<int8_t>()[i]; break;
      case DataType::kUInt8: case DataType::kBool: v = t.data<uint8_t>()[i]; break;
      case DataType::kUInt16: v = t.data<uint16_t>()[i]; break;
      case DataType::kUInt32: v = t.data<uint32_t>()[i]; break;
      default: return std::nullopt;
    }
    d.v.push_back(Elem::of(v));
  }
  return d;
}

bool declared_nothing(const ValueInfo& d) {
  return d.type == ValueType::kTensor && d.dtype == DataType::kUndefined && !d.shape;
}

// A declared shape completed by an inferred one: an inferred fixed dim fills a declared
// unknown or symbolic dim; a conflict (other rank, other fixed size) keeps the declaration.
std::vector<Dim> merge_shapes(const std::vector<Dim>& declared, const std::vector<Dim>& inferred) {
  if (declared.size() != inferred.size()) return declared;
  for (size_t i = 0; i < declared.size(); ++i)
    if (declared[i].fixed() && inferred[i].fixed() && declared[i].value != inferred[i].value) return declared;
  std::vector<Dim> r = declared;
  for (size_t i = 0; i < r.size(); ++i) {
    if (r[i].fixed()) continue;
    if (inferred[i].fixed()) r[i] = inferred[i];
    else if (r[i].param.empty()) r[i] = inferred[i];
  }
  return r;
}

// Declared information about a value completed by inferred information; an element type
// that conflicts with the declared one is an invalid model.
Result<ValueInfo> merge_declared(const ValueInfo* declared, ValueInfo inferred, const Node* node, const std::string& name) {
  inferred.name = name;
  if (!declared || declared_nothing(*declared)) return inferred;
  ValueInfo r = *declared;
  r.name = name;
  if (r.type == ValueType::kUnknown || r.type != inferred.type) return r;
  if (r.type == ValueType::kOptional && r.optional_elem != inferred.optional_elem) return r;
  if (r.dtype == DataType::kUndefined) {
    r.dtype = inferred.dtype;
  } else if (inferred.dtype != DataType::kUndefined && inferred.dtype != r.dtype) {
    std::string where = node ? node->label() + ": " : std::string();
    return invalid_model(where + "output '" + name + "' is declared as " + dtype_name(r.dtype) + " but " +
                         (node ? node->op_type : std::string("the graph")) + " produces " + dtype_name(inferred.dtype));
  }
  if (!r.shape) r.shape = inferred.shape;
  else if (inferred.shape) r.shape = merge_shapes(*r.shape, *inferred.shape);
  return r;
}

const RuleTable& rules() {
  static const RuleTable table = [] {
    RuleTable t;
    add_value_rules(t);
    add_tensor_rules(t);
    add_nn_rules(t);
    add_control_rules(t);
    return t;
  }();
  return table;
}

Status infer_graph(Graph& g, const Scope* parent, int64_t ir_version) {
  Scope s(g, parent);
  const bool top = parent == nullptr;
  for (const ValueInfo& in : g.inputs) s.types[in.name] = in;
  for (const auto& [name, t] : g.initializers) {
    const bool is_input = g.find_input(name) != nullptr;
    // An IR >= 4 default (or a subgraph input's default) may be replaced by the caller.
    const bool overridable = is_input && (!top || ir_version >= 4);
    ValueInfo& vi = s.types[name];
    vi.name = name;
    if (overridable) {
      if (vi.dtype == DataType::kUndefined) vi.dtype = t.dtype();
      continue;
    }
    vi.type = ValueType::kTensor;
    vi.dtype = t.dtype();
    vi.shape = dims_of(t.shape());
    s.consts[name] = &t;
    if (auto d = data_of_tensor(t)) s.datas[name] = std::move(*d);
  }

  std::unordered_map<std::string, size_t> output_index;
  for (size_t i = 0; i < g.outputs.size(); ++i) output_index.emplace(g.outputs[i].name, i);

  const RuleTable& table = rules();
  for (Node& n : g.nodes) {
    Ctx c(n, s, ir_version);
    auto it = table.find(n.domain.empty() ? n.op_type : n.domain + ":" + n.op_type);
    if (it != table.end()) BH_RETURN_IF_ERROR(it->second(c));
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      const std::string& name = n.outputs[i];
      if (name.empty()) continue;
      auto oi = output_index.find(name);
      const ValueInfo* declared = nullptr;
      if (oi != output_index.end()) declared = &g.outputs[oi->second];
      else if (auto vi = g.value_info.find(name); vi != g.value_info.end()) declared = &vi->second;
      BH_ASSIGN_OR_RETURN(ValueInfo merged, merge_declared(declared, c.out[i], &n, name));
      if (oi != output_index.end()) g.outputs[oi->second] = merged;
      g.value_info[name] = merged;
      if (c.out_data[i] && merged.type == ValueType::kTensor) s.datas[name] = std::move(*c.out_data[i]);
      s.types[name] = std::move(merged);
    }
  }
  // Outputs that are inputs, initializers or outer values.
  for (ValueInfo& o : g.outputs) {
    if (const ValueInfo* t = s.type(o.name)) {
      auto merged = merge_declared(&o, *t, nullptr, o.name);
      if (merged.is_ok()) o = std::move(merged).value();
    }
  }
  // A subgraph records the types of the enclosing values it reads, so that it describes
  // every value its nodes use.
  if (parent)
    for (const std::string& name : g.outer_refs)
      if (!g.value_info.count(name) && !g.find_input(name) && !g.initializers.count(name))
        if (const ValueInfo* t = parent->type(name)) {
          ValueInfo vi = *t;
          vi.name = name;
          g.value_info[name] = std::move(vi);
        }
  return Status::ok();
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Ctx.

Ctx::Ctx(Node& node, Scope& scope, int64_t ir_version)
    : node(node), scope(scope), ir_version(ir_version), out(node.outputs.size()), out_data(node.outputs.size()) {}

const ValueInfo* Ctx::in(int i) const { return has_input(i) ? scope.type(node.inputs[i]) : nullptr; }
DataType Ctx::in_type(int i) const {
  const ValueInfo* v = in(i);
  return v && v->type == ValueType::kTensor ? v->dtype : DataType::kUndefined;
}
const Dims* Ctx::in_shape(int i) const {
  const ValueInfo* v = in(i);
  return v && v->type == ValueType::kTensor && v->shape ? &*v->shape : nullptr;
}
int Ctx::in_rank(int i) const {
  const Dims* d = in_shape(i);
  return d ? static_cast<int>(d->size()) : -1;
}
const Data* Ctx::in_data(int i) const { return has_input(i) ? scope.data(node.inputs[i]) : nullptr; }
const Tensor* Ctx::in_const(int i) const { return has_input(i) ? scope.constant(node.inputs[i]) : nullptr; }

bool Ctx::in_ints(int i, std::vector<int64_t>* v) const {
  const Data* d = in_data(i);
  if (!d || !d->all_known()) return false;
  *v = d->ints();
  return true;
}

bool Ctx::in_floats(int i, std::vector<double>* v) const {
  const Tensor* t = in_const(i);
  if (t && dtype_is_float(t->dtype()) && t->rank() <= 1 && t->numel() <= static_cast<int64_t>(kMaxDataElems) &&
      (t->numel() == 0 || t->raw())) {
    v->clear();
    for (int64_t k = 0; k < t->numel(); ++k) {
      switch (t->dtype()) {
        case DataType::kFloat32: v->push_back(t->data<float>()[k]); break;
        case DataType::kFloat64: v->push_back(t->data<double>()[k]); break;
        case DataType::kFloat16: v->push_back(half_to_float(t->data<uint16_t>()[k])); break;
        default: v->push_back(bfloat16_to_float(t->data<uint16_t>()[k])); break;
      }
    }
    return true;
  }
  std::vector<int64_t> iv;
  if (!in_ints(i, &iv)) return false;
  v->assign(iv.begin(), iv.end());
  return true;
}

void Ctx::set_type(int o, DataType t) {
  if (o < 0 || o >= num_outputs()) return;
  out[o].type = ValueType::kTensor;
  out[o].dtype = t;
}
void Ctx::set_shape(int o, Dims d) {
  if (o < 0 || o >= num_outputs()) return;
  out[o].shape = std::move(d);
}
void Ctx::set_rank(int o, int64_t rank) {
  if (rank >= 0 && rank <= kMaxInferredRank) set_shape(o, Dims(static_cast<size_t>(rank)));
}
void Ctx::same_as_input(int o, int i) {
  set_type(o, in_type(i));
  if (const Dims* d = in_shape(i)) set_shape(o, *d);
}
void Ctx::set_data(int o, Data d) {
  if (o < 0 || o >= num_outputs() || d.v.size() > kMaxDataElems) return;
  out_data[o] = std::move(d);
}

Status Ctx::fail(const std::string& msg) const { return invalid_model(node.label() + ": " + msg); }

Status Ctx::require_same_types(const std::vector<int>& inputs) const {
  int first = -1;
  for (int i : inputs) {
    DataType t = in_type(i);
    if (t == DataType::kUndefined) continue;
    if (first < 0) {
      first = i;
      continue;
    }
    DataType f = in_type(first);
    if (t != f)
      return fail("inputs '" + node.inputs[first] + "' and '" + node.inputs[i] + "' must have the same element type, got " +
                  dtype_name(f) + " and " + dtype_name(t));
  }
  return Status::ok();
}

Status Ctx::require_type(int i, DataType t, const char* what) const {
  DataType got = in_type(i);
  if (got == DataType::kUndefined || got == t) return Status::ok();
  return fail(std::string(what) + " '" + node.inputs[i] + "' must be " + dtype_name(t) + ", got " + dtype_name(got));
}

namespace {
// A subgraph input's declaration completed from what the enclosing node passes in.
void complete_input(ValueInfo& declared, const ValueInfo& given) {
  if (declared_nothing(declared)) {
    std::string name = declared.name;
    declared = given;
    declared.name = name;
    return;
  }
  if (declared.type != given.type) return;
  if (declared.dtype == DataType::kUndefined) declared.dtype = given.dtype;
  if (!declared.shape) declared.shape = given.shape;
}
}  // namespace

Result<std::vector<ValueInfo>> Ctx::infer_subgraph(const std::string& attr, const std::vector<const ValueInfo*>& inputs) {
  auto it = node.attrs.find(attr);
  if (it == node.attrs.end() || it->second.type != AttrType::kGraph || !it->second.g) return std::vector<ValueInfo>{};
  auto sub = std::make_shared<Graph>(*it->second.g);
  for (size_t i = 0; i < std::min(inputs.size(), sub->inputs.size()); ++i)
    if (inputs[i]) complete_input(sub->inputs[i], *inputs[i]);
  Status st = infer_graph(*sub, &scope, ir_version);
  if (!st.is_ok()) return st.with_context(node.label() + ": " + attr + ": ");
  std::vector<ValueInfo> outs = sub->outputs;
  it->second.g = std::move(sub);
  return outs;
}

Status same_as_input0(Ctx& c) {
  c.same_as_input(0, 0);
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// Control flow, sequences, optionals.

namespace {

ValueInfo tensor_info(DataType t, std::optional<Dims> shape) {
  ValueInfo v;
  v.dtype = t;
  v.shape = std::move(shape);
  return v;
}

// One of two values, not known which.
ValueInfo join_info(const ValueInfo& a, const ValueInfo& b) {
  ValueInfo r;
  if (a.type != b.type || (a.type == ValueType::kOptional && a.optional_elem != b.optional_elem)) {
    r.type = ValueType::kUnknown;
    return r;
  }
  r.type = a.type;
  r.optional_elem = a.optional_elem;
  if (a.dtype == b.dtype || b.dtype == DataType::kUndefined) r.dtype = a.dtype;
  else if (a.dtype == DataType::kUndefined) r.dtype = b.dtype;
  if (a.shape && b.shape && a.shape->size() == b.shape->size()) {
    Dims d(a.shape->size());
    for (size_t i = 0; i < d.size(); ++i) d[i] = join_dim((*a.shape)[i], (*b.shape)[i]);
    r.shape = std::move(d);
  }
  return r;
}

void set_info(Ctx& c, int o, ValueInfo v) {
  if (o < 0 || o >= c.num_outputs()) return;
  if (v.type == ValueType::kUnknown) v = ValueInfo{};
  v.name.clear();
  c.out[o] = std::move(v);
}

Status rule_if(Ctx& c) {
  BH_RETURN_IF_ERROR(c.require_type(0, DataType::kBool, "condition"));
  BH_ASSIGN_OR_RETURN(auto then_out, c.infer_subgraph("then_branch", {}));
  BH_ASSIGN_OR_RETURN(auto else_out, c.infer_subgraph("else_branch", {}));
  for (int o = 0; o < c.num_outputs(); ++o) {
    const bool t = o < static_cast<int>(then_out.size()), e = o < static_cast<int>(else_out.size());
    if (t && e) set_info(c, o, join_info(then_out[o], else_out[o]));
  }
  return Status::ok();
}

// Loop(M, cond, v_initial...) with body(iter, cond, v_in...) -> (cond, v_out..., scans...).
Status rule_loop(Ctx& c) {
  const int n_carried = std::max(0, c.num_inputs() - 2);
  ValueInfo iter = tensor_info(DataType::kInt64, Dims{});
  ValueInfo cond = tensor_info(DataType::kBool, Dims{});
  std::vector<ValueInfo> carried(n_carried);
  std::vector<const ValueInfo*> body_in{&iter, &cond};
  for (int i = 0; i < n_carried; ++i) {
    if (const ValueInfo* v = c.in(i + 2)) {
      carried[i] = *v;
      carried[i].shape.reset();  // may change from one iteration to the next
      body_in.push_back(&carried[i]);
    } else {
      body_in.push_back(nullptr);
    }
  }
  BH_ASSIGN_OR_RETURN(auto body_out, c.infer_subgraph("body", body_in));
  for (int i = 0; i < n_carried && i < c.num_outputs(); ++i) {
    const ValueInfo* init = c.in(i + 2);
    const bool have_body = i + 1 < static_cast<int>(body_out.size());
    if (init && have_body) set_info(c, i, join_info(*init, body_out[i + 1]));
    else if (init) set_info(c, i, *init);
    else if (have_body) set_info(c, i, body_out[i + 1]);
    if (c.out[i].type == ValueType::kTensor && (!init || !have_body)) c.out[i].shape.reset();
  }
  for (int o = n_carried; o < c.num_outputs(); ++o) {
    const int b = o + 1;
    if (b >= static_cast<int>(body_out.size()) || body_out[b].type != ValueType::kTensor) continue;
    ValueInfo v = body_out[b];
    if (v.shape) v.shape->insert(v.shape->begin(), Dim{});
    set_info(c, o, v);
  }
  return Status::ok();
}

// Scan (opset >= 9): inputs are N states then M scan inputs; the body takes states and
// one slice of each scan input and returns states and K per-iteration outputs.
Status rule_scan(Ctx& c) {
  const int64_t m64 = c.node.attr_int("num_scan_inputs", 0);
  if (m64 < 0 || m64 > c.num_inputs()) return Status::ok();  // the kernel reports it
  const int m = static_cast<int>(m64);
  if (c.opset() < 9) {
    // Opset 8: a batch axis and sequence_lens in front; element types only.
    BH_ASSIGN_OR_RETURN(auto body_out, c.infer_subgraph("body", {}));
    for (int o = 0; o < c.num_outputs() && o < static_cast<int>(body_out.size()); ++o)
      c.set_type(o, body_out[o].dtype);
    return Status::ok();
  }
  const int n = c.num_inputs() - m;
  if (m < 0 || n < 0) return Status::ok();
  std::vector<int64_t> in_axes = c.node.attr_ints("scan_input_axes", std::vector<int64_t>(m, 0));
  std::vector<ValueInfo> slices(m);
  std::vector<const ValueInfo*> body_in;
  for (int i = 0; i < n; ++i) body_in.push_back(c.in(i));
  Dim seq_len;
  for (int j = 0; j < m; ++j) {
    const int i = n + j;
    slices[j] = tensor_info(c.in_type(i), std::nullopt);
    if (const Dims* s = c.in_shape(i)) {
      int ax = norm_axis(j < static_cast<int>(in_axes.size()) ? in_axes[j] : 0, static_cast<int>(s->size()));
      if (ax >= 0) {
        Dims d = *s;
        seq_len = j == 0 ? d[ax] : meet_dim(seq_len, d[ax]);
        d.erase(d.begin() + ax);
        slices[j].shape = d;
      }
    }
    body_in.push_back(&slices[j]);
  }
  BH_ASSIGN_OR_RETURN(auto body_out, c.infer_subgraph("body", body_in));
  for (int o = 0; o < n && o < c.num_outputs(); ++o) {
    if (const ValueInfo* init = c.in(o); init && o < static_cast<int>(body_out.size()))
      set_info(c, o, join_info(*init, body_out[o]));
  }
  const int k = c.num_outputs() - n;
  std::vector<int64_t> out_axes = c.node.attr_ints("scan_output_axes", std::vector<int64_t>(std::max(k, 0), 0));
  for (int j = 0; j < k; ++j) {
    const int b = n + j;
    if (b >= static_cast<int>(body_out.size()) || body_out[b].type != ValueType::kTensor) continue;
    ValueInfo v = body_out[b];
    if (v.shape) {
      int r = static_cast<int>(v.shape->size()) + 1;
      int ax = norm_axis(j < static_cast<int>(out_axes.size()) ? out_axes[j] : 0, r);
      if (ax >= 0) v.shape->insert(v.shape->begin() + ax, seq_len);
      else v.shape.reset();
    }
    set_info(c, b, v);
  }
  return Status::ok();
}

ValueInfo sequence_of(DataType t, std::optional<Dims> elem_shape) {
  ValueInfo v;
  v.type = ValueType::kSequence;
  v.dtype = t;
  v.shape = std::move(elem_shape);
  return v;
}

// The element of a sequence (or a tensor passed where one is allowed), as a tensor.
std::optional<ValueInfo> element_of(const ValueInfo* v) {
  if (!v) return std::nullopt;
  if (v->type == ValueType::kSequence || v->type == ValueType::kTensor) return tensor_info(v->dtype, v->shape);
  return std::nullopt;
}

Status rule_sequence_map(Ctx& c) {
  std::vector<ValueInfo> elems(c.num_inputs());
  std::vector<const ValueInfo*> body_in;
  for (int i = 0; i < c.num_inputs(); ++i) {
    auto e = element_of(c.in(i));
    if (e) elems[i] = *e;
    body_in.push_back(e ? &elems[i] : nullptr);
  }
  BH_ASSIGN_OR_RETURN(auto body_out, c.infer_subgraph("body", body_in));
  for (int o = 0; o < c.num_outputs() && o < static_cast<int>(body_out.size()); ++o)
    if (body_out[o].type == ValueType::kTensor) set_info(c, o, sequence_of(body_out[o].dtype, std::nullopt));
  return Status::ok();
}

Status rule_sequence_empty(Ctx& c) {
  set_info(c, 0, sequence_of(static_cast<DataType>(c.node.attr_int("dtype", 1)), std::nullopt));
  return Status::ok();
}

Status rule_sequence_construct(Ctx& c) {
  std::vector<int> all;
  for (int i = 0; i < c.num_inputs(); ++i) all.push_back(i);
  BH_RETURN_IF_ERROR(c.require_same_types(all));
  DataType t = DataType::kUndefined;
  std::optional<Dims> shape;
  for (int i = 0; i < c.num_inputs(); ++i) {
    if (t == DataType::kUndefined) t = c.in_type(i);
    const Dims* s = c.in_shape(i);
    if (i == 0 && s) shape = *s;
    if (!s || !shape || s->size() != shape->size()) {
      shape.reset();
      continue;
    }
    for (size_t k = 0; k < s->size(); ++k) (*shape)[k] = join_dim((*shape)[k], (*s)[k]);
  }
  set_info(c, 0, sequence_of(t, shape));
  return Status::ok();
}

Status rule_sequence_insert(Ctx& c) {
  const ValueInfo* seq = c.in(0);
  if (!seq || seq->type != ValueType::kSequence) return Status::ok();
  DataType t = seq->dtype, x = c.in_type(1);
  if (t != DataType::kUndefined && x != DataType::kUndefined && t != x)
    return c.fail("tensor '" + c.node.inputs[1] + "' of type " + dtype_name(x) + " cannot go into a sequence of " +
                  dtype_name(t));
  set_info(c, 0, sequence_of(t == DataType::kUndefined ? x : t, std::nullopt));
  return Status::ok();
}

Status rule_sequence_same(Ctx& c) {
  if (const ValueInfo* seq = c.in(0); seq && seq->type == ValueType::kSequence) set_info(c, 0, *seq);
  return Status::ok();
}

Status rule_sequence_at(Ctx& c) {
  if (const ValueInfo* seq = c.in(0); seq && seq->type == ValueType::kSequence)
    set_info(c, 0, tensor_info(seq->dtype, seq->shape));
  return Status::ok();
}

Status rule_sequence_length(Ctx& c) {
  c.set(0, DataType::kInt64, {});
  return Status::ok();
}

Status rule_split_to_sequence(Ctx& c) {
  set_info(c, 0, sequence_of(c.in_type(0), std::nullopt));
  return Status::ok();
}

Status rule_concat_from_sequence(Ctx& c) {
  const ValueInfo* seq = c.in(0);
  if (!seq || seq->type != ValueType::kSequence) return Status::ok();
  c.set_type(0, seq->dtype);
  if (seq->shape) {
    Dims d = *seq->shape;
    const bool new_axis = c.node.attr_int("new_axis", 0) != 0;
    const int r = static_cast<int>(d.size()) + (new_axis ? 1 : 0);
    int ax = norm_axis(c.node.attr_int("axis", 0), r);
    if (ax < 0) return Status::ok();
    if (new_axis) d.insert(d.begin() + ax, Dim{});
    else d[ax] = Dim{};
    c.set_shape(0, d);
  }
  return Status::ok();
}

Status rule_optional(Ctx& c) {
  ValueInfo v;
  if (const Attribute* a = c.node.attr("type"); a && a->type == AttrType::kType && !a->types.empty()) v = a->types[0];
  else if (const ValueInfo* in = c.in(0)) v = *in;
  else return Status::ok();
  if (v.type == ValueType::kOptional || v.type == ValueType::kUnknown) return Status::ok();
  v.optional_elem = v.type;
  v.type = ValueType::kOptional;
  set_info(c, 0, v);
  return Status::ok();
}

Status rule_optional_has_element(Ctx& c) {
  c.set(0, DataType::kBool, {});
  return Status::ok();
}

Status rule_optional_get_element(Ctx& c) {
  const ValueInfo* in = c.in(0);
  if (!in) return Status::ok();
  ValueInfo v = *in;
  if (v.type == ValueType::kOptional) v.type = v.optional_elem;
  set_info(c, 0, v);
  return Status::ok();
}

}  // namespace

void add_control_rules(RuleTable& t) {
  t["If"] = rule_if;
  t["Loop"] = rule_loop;
  t["Scan"] = rule_scan;
  t["SequenceMap"] = rule_sequence_map;
  t["SequenceEmpty"] = rule_sequence_empty;
  t["SequenceConstruct"] = rule_sequence_construct;
  t["SequenceInsert"] = rule_sequence_insert;
  t["SequenceErase"] = rule_sequence_same;
  t["SequenceAt"] = rule_sequence_at;
  t["SequenceLength"] = rule_sequence_length;
  t["SplitToSequence"] = rule_split_to_sequence;
  t["ConcatFromSequence"] = rule_concat_from_sequence;
  t["Optional"] = rule_optional;
  t["OptionalHasElement"] = rule_optional_has_element;
  t["OptionalGetElement"] = rule_optional_get_element;
}

}  // namespace infer

Status infer_shapes(Graph& g, const Model& m) { return infer::infer_graph(g, nullptr, m.ir_version); }

}  // namespace bulkhead::ir
