// Internals of shape and type inference (infer.h): the per-node context the rules see,
// shape helpers, and the rule tables of each op family (infer_values.cc: the integer
// values of "shape sub-graphs" and element-wise arithmetic; infer_tensor.cc: shape,
// layout and indexing; infer_nn.cc: maths, reductions, convolution, pooling,
// normalisation, recurrent, attention and the rest; infer.cc: control flow, sequences,
// optionals and the driver).
//
// Used only while infer_shapes() runs, on one thread; nothing here outlives that call.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "bulkhead/status.h"
#include "ir/graph.h"

namespace bulkhead::ir::infer {

using Dims = std::vector<Dim>;

inline Dim fixed_dim(int64_t v) {
  Dim d;
  d.value = v;
  return d;
}
inline Dim sym_dim(const std::string& p) {
  Dim d;
  d.param = p;
  return d;
}
inline bool dim_known(const Dim& d) { return d.fixed() || !d.param.empty(); }
// Both describe the same size for certain: equal fixed values or equal symbolic names.
inline bool same_dim(const Dim& a, const Dim& b) {
  if (a.fixed() || b.fixed()) return a.fixed() && b.fixed() && a.value == b.value;
  return !a.param.empty() && a.param == b.param;
}
inline bool all_fixed(const Dims& d) {
  for (const Dim& x : d)
    if (!x.fixed()) return false;
  return true;
}

// Two statements about one dimension that both hold (Concat's non-axis dims, MatMul's
// batch dims of equal rank): the more precise one.
Dim meet_dim(const Dim& a, const Dim& b);
// One of two dimensions, not known which (If branches): kept only when they agree.
Dim join_dim(const Dim& a, const Dim& b);
// Numpy broadcasting of two dimensions / shapes (1 broadcasts; equal names unify).
Dim broadcast_dim(const Dim& a, const Dim& b);
Dims broadcast_dims(const Dims& a, const Dims& b);
// a*b, a+b, a-b (unknown unless both fixed, with the identities x*1 and x+0 kept symbolic).
Dim mul_dim(const Dim& a, const Dim& b);
Dim add_dim(const Dim& a, const Dim& b);
// The product of dims as a fixed value, when every dim is fixed.
std::optional<int64_t> fixed_product(const Dims& d);
// A size computed in wide arithmetic: fixed when it fits in [0, INT64_MAX], else unknown
// (absurd attributes must not overflow).
inline Dim wide_dim(__int128 v) { return v >= 0 && v <= INT64_MAX ? fixed_dim(static_cast<int64_t>(v)) : Dim{}; }
// A non-negative size from a double, truncated; unknown when not finite or too large.
inline Dim double_dim(double v) { return v >= 0 && v < 9.0e18 ? fixed_dim(static_cast<int64_t>(v)) : Dim{}; }
// The product of dims, symbolic when exactly one factor is symbolic and the rest are 1.
Dim product_dim(Dims::const_iterator b, Dims::const_iterator e);
// Integer or bool: element types whose values inference follows.
bool is_int_type(DataType t);
// Axis `a` normalised against rank `r` (negative counts from the end); -1 if out of range.
int norm_axis(int64_t a, int r);

// One element of a small integer tensor: a known value (any sign), or a symbolic
// dimension name (from Shape), or unknown.
struct Elem {
  bool known = false;
  int64_t value = 0;  // when known
  std::string param;  // when not known: the symbolic dim it equals, if any
  static Elem of(int64_t v) {
    Elem e;
    e.known = true;
    e.value = v;
    return e;
  }
  static Elem of_dim(const Dim& d) {
    if (d.fixed()) return of(d.value);
    Elem e;
    e.param = d.param;
    return e;
  }
  // As a dimension: negative values are not sizes.
  Dim dim() const { return known ? (value >= 0 ? fixed_dim(value) : Dim{}) : sym_dim(param); }
};

// The value of a small integer (or bool) tensor of rank 0 or 1, as far as inference
// knows it.
struct Data {
  bool scalar = false;
  std::vector<Elem> v;
  bool all_known() const {
    for (const Elem& e : v)
      if (!e.known) return false;
    return true;
  }
  std::vector<int64_t> ints() const;
  Dims dims() const {
    Dims d;
    for (const Elem& e : v) d.push_back(e.dim());
    return d;
  }
};

// Constants larger than this are not tracked element by element.
constexpr size_t kMaxDataElems = 64;
// The largest rank inference will write down: a rank read from a shape input (Expand,
// ConstantOfShape) past this is left unknown rather than allocated (a corrupt model can
// say 2^31).
constexpr int64_t kMaxInferredRank = 64;

class Scope;

// One node under inference. Rules read the inputs' types, shapes, constant values and
// propagated integer data, and write the outputs' types, shapes and data.
class Ctx {
 public:
  Ctx(Node& node, Scope& scope, int64_t ir_version);

  Node& node;
  Scope& scope;
  int64_t ir_version;
  std::vector<ValueInfo> out;                // one per node output
  std::vector<std::optional<Data>> out_data;  // one per node output

  int opset() const { return node.opset; }
  int num_inputs() const { return static_cast<int>(node.inputs.size()); }
  bool has_input(int i) const { return i >= 0 && i < num_inputs() && !node.inputs[i].empty(); }
  // Type of input i; nullptr when omitted or nothing is known of it.
  const ValueInfo* in(int i) const;
  DataType in_type(int i) const;
  const Dims* in_shape(int i) const;  // nullptr when the rank is unknown
  int in_rank(int i) const;           // -1 when unknown
  const Data* in_data(int i) const;
  // Input i as a constant tensor (an initializer the caller cannot override).
  const Tensor* in_const(int i) const;
  // Input i's values when all are known integers.
  bool in_ints(int i, std::vector<int64_t>* v) const;
  // Input i's values as doubles when it is a small constant (float or integer).
  bool in_floats(int i, std::vector<double>* v) const;

  int num_outputs() const { return static_cast<int>(out.size()); }
  void set_type(int o, DataType t);
  void set_shape(int o, Dims d);
  void set_rank(int o, int64_t rank);  // shape of `rank` unknown dims
  void set(int o, DataType t, Dims d) {
    set_type(o, t);
    set_shape(o, std::move(d));
  }
  // Output o gets input i's element type and shape (a tensor).
  void same_as_input(int o, int i);
  void set_data(int o, Data d);

  // An invalid-model error naming this node.
  Status fail(const std::string& msg) const;
  // Inputs that ONNX binds to one type parameter must agree where both are known.
  Status require_same_types(const std::vector<int>& inputs) const;
  Status require_type(int i, DataType t, const char* what) const;

  // Infers the subgraph in attribute `attr` with `inputs` describing its graph inputs in
  // order (nullptr entries, or fewer entries, leave the declared types), replaces the
  // node's attribute with the inferred copy, and returns the subgraph's outputs.
  Result<std::vector<ValueInfo>> infer_subgraph(const std::string& attr, const std::vector<const ValueInfo*>& inputs);
};

using Rule = Status (*)(Ctx&);
using RuleTable = std::unordered_map<std::string, Rule>;

void add_value_rules(RuleTable& t);   // infer_values.cc
void add_tensor_rules(RuleTable& t);  // infer_tensor.cc
void add_nn_rules(RuleTable& t);      // infer_nn.cc
void add_control_rules(RuleTable& t);  // infer.cc

// Convenience: output 0 = input 0 (element type and shape).
Status same_as_input0(Ctx& c);

}  // namespace bulkhead::ir::infer
