#include "ir/gradient.h"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_set>

namespace bulkhead::ir {
namespace {

constexpr const char* kTrainingDomain = "ai.onnx.preview.training";

bool is_gradient(const Node& n) { return n.op_type == "Gradient" && n.domain == kTrainingDomain; }

// Emits the nodes of one expansion; every name it makes is fresh in the graph.
class Builder {
 public:
  Builder(Graph& g, int opset, DataType dt, std::string prefix, std::unordered_set<std::string>& names)
      : g_(g), opset_(opset), dt_(dt), prefix_(std::move(prefix)), names_(names) {}

  std::vector<Node>& nodes() { return nodes_; }

  std::string fresh(const std::string& hint) {
    for (;;) {
      std::string n = prefix_ + "/" + hint + "_" + std::to_string(counter_++);
      if (names_.insert(n).second) return n;
    }
  }

  // One node with one output; returns the output's name (or `out` when given).
  std::string op(const std::string& type, std::vector<std::string> inputs, std::map<std::string, Attribute> attrs = {},
                 std::string out = {}) {
    Node n;
    n.op_type = type;
    n.opset = opset_;
    n.name = fresh(type);
    n.inputs = std::move(inputs);
    n.outputs = {out.empty() ? fresh(type + "_out") : out};
    n.attrs = std::move(attrs);
    nodes_.push_back(std::move(n));
    return nodes_.back().outputs[0];
  }

  // A scalar initializer of the computation's element type.
  std::string scalar(double v) {
    auto it = scalars_.find(v);
    if (it != scalars_.end()) return it->second;
    std::string n = fresh("const");
    g_.initializers.emplace(n, value_tensor(v, {}));
    scalars_.emplace(v, n);
    return n;
  }

  std::string ints(const std::vector<int64_t>& v) {
    std::string n = fresh("ints");
    g_.initializers.emplace(n, Tensor::from_vector<int64_t>(DataType::kInt64, {static_cast<int64_t>(v.size())}, v));
    return n;
  }

  // A tensor filled with `v`, of the shape `like` has at run time.
  std::string filled_like(const std::string& like, double v, const std::string& out = {}) {
    Attribute value;
    value.type = AttrType::kTensor;
    value.t = value_tensor(v, {1});
    return op("ConstantOfShape", {op("Shape", {like})}, {{"value", value}}, out);
  }

  std::string reduce_sum(const std::string& x, const std::vector<int64_t>& axes) {
    Attribute keep;
    keep.type = AttrType::kInt;
    keep.i = 1;
    if (opset_ >= 13) return op("ReduceSum", {x, ints(axes)}, {{"keepdims", keep}});
    Attribute a;
    a.type = AttrType::kInts;
    a.ints = axes;
    return op("ReduceSum", {x}, {{"axes", a}, {"keepdims", keep}});
  }

  std::string transpose_last_two(const std::string& x, int rank) {
    Attribute perm;
    perm.type = AttrType::kInts;
    for (int i = 0; i < rank; ++i) perm.ints.push_back(i);
    std::swap(perm.ints[rank - 1], perm.ints[rank - 2]);
    return op("Transpose", {x}, {{"perm", perm}});
  }

 private:
  Tensor value_tensor(double v, Shape shape) const {
    if (dt_ == DataType::kFloat64) return Tensor::from_vector<double>(dt_, shape, {v});
    return Tensor::from_vector<float>(dt_, shape, {static_cast<float>(v)});
  }

  Graph& g_;
  int opset_;
  DataType dt_;
  std::string prefix_;
  std::unordered_set<std::string>& names_;
  std::map<double, std::string> scalars_;
  std::vector<Node> nodes_;
  int counter_ = 0;
};

const std::vector<Dim>* shape_of(const Graph& g, const std::string& v) {
  if (auto it = g.initializers.find(v); it != g.initializers.end()) {
    // Initializers carry their own shape; value_info may not list them.
    static thread_local std::vector<Dim> dims;
    dims.clear();
    for (int64_t d : it->second.shape()) dims.push_back(Dim{d, {}});
    return &dims;
  }
  const ValueInfo* vi = g.info(v);
  return vi && vi->shape ? &*vi->shape : nullptr;
}

bool same_dims(const std::vector<Dim>& a, const std::vector<Dim>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].fixed() || b[i].fixed()) {
      if (a[i].value != b[i].value) return false;
    } else if (a[i].param.empty() || a[i].param != b[i].param) {
      return false;
    }
  }
  return true;
}

bool all_fixed(const std::vector<Dim>& d) {
  return std::all_of(d.begin(), d.end(), [](const Dim& x) { return x.fixed(); });
}

class Expansion {
 public:
  Expansion(Graph& g, const Node& grad, int opset, std::unordered_set<std::string>& names)
      : g_(g), grad_(grad), opset_(opset), names_(names) {}

  Result<std::vector<Node>> run() {
    const std::string where = grad_.label() + ": ";
    std::vector<std::string> xs = grad_.attr_strings("xs");
    std::vector<std::string> zs = grad_.attr_strings("zs");
    const std::string y = grad_.attr_string("y", "");
    if (xs.empty()) return invalid_model(where + "missing required attribute xs");
    if (y.empty()) return invalid_model(where + "missing required attribute y");
    std::vector<std::string> expected = xs;
    expected.insert(expected.end(), zs.begin(), zs.end());
    if (grad_.inputs != expected)
      return unsupported(where + "the inputs must be the values named by xs and then zs (the graph's own values)");
    if (grad_.outputs.size() != xs.size())
      return invalid_model(where + "has " + std::to_string(grad_.outputs.size()) + " outputs for " + std::to_string(xs.size()) + " xs");
    if (opset_ < 9) return unsupported(where + "differentiating needs the default opset 9 or later, the model has " + std::to_string(opset_));
    const ValueInfo* yi = g_.info(y);
    if (!yi && !g_.initializers.count(y)) return invalid_model(where + "y '" + y + "' is not a value of the graph");
    DataType dt = yi ? yi->dtype : g_.initializers.at(y).dtype();
    if (dt != DataType::kFloat32 && dt != DataType::kFloat64)
      return unsupported(where + "y '" + y + "' is " + dtype_name(dt) + "; only float32 and float64 are differentiated");

    // The nodes on a path from an x to y: they read a value that depends on an x, and y
    // depends on what they produce. zs are constants, so they start no path.
    std::unordered_set<std::string> from_x(xs.begin(), xs.end());
    std::vector<const Node*> forward;
    for (const Node& n : g_.nodes) {
      if (&n == &grad_ || is_gradient(n) || n.op_type.empty()) continue;
      bool reads = false;
      for (const auto& in : n.inputs) reads |= !in.empty() && from_x.count(in);
      if (!reads) continue;
      forward.push_back(&n);
      for (const auto& o : n.outputs)
        if (!o.empty()) from_x.insert(o);
    }
    std::unordered_set<std::string> to_y{y};
    std::vector<const Node*> path;
    for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
      bool feeds = false;
      for (const auto& o : (*it)->outputs) feeds |= !o.empty() && to_y.count(o);
      if (!feeds) continue;
      path.push_back(*it);
      for (const auto& in : (*it)->inputs)
        if (!in.empty()) to_y.insert(in);
    }

    Builder b(g_, opset_, dt, grad_.name + "/grad", names_);
    b_ = &b;
    if (from_x.count(y)) grads_[y] = b.filled_like(y, 1.0);
    for (const Node* n : path) {  // reverse topological order
      if (n->outputs.size() != 1 || !grads_.count(n->outputs[0])) continue;
      BH_RETURN_IF_ERROR(backprop(*n, grads_.at(n->outputs[0]), from_x, where));
    }
    for (size_t i = 0; i < xs.size(); ++i) {
      const std::string& out = grad_.outputs[i];
      if (out.empty()) continue;
      auto it = grads_.find(xs[i]);
      if (it != grads_.end()) b.op("Identity", {it->second}, {}, out);
      else b.filled_like(xs[i], 0.0, out);
    }
    return std::move(b.nodes());
  }

 private:
  void accumulate(const std::string& v, const std::string& g) {
    auto it = grads_.find(v);
    if (it == grads_.end()) grads_[v] = g;
    else it->second = b_->op("Add", {it->second, g});
  }

  // `g` (of the shape of `out`, the node's output) summed back to the shape of `in`,
  // where `in` was broadcast to it.
  Result<std::string> unbroadcast(const std::string& g, const std::string& out, const std::string& in, const Node& n,
                                  const std::string& where) {
    const std::vector<Dim>* os = shape_of(g_, out);
    const std::vector<Dim>* is = shape_of(g_, in);
    if (os && is && same_dims(*os, *is)) return g;
    if (!os || !is || !all_fixed(*os) || !all_fixed(*is))
      return unsupported(where + "the shapes of " + n.label() + "'s input '" + in + "' and output '" + out +
                         "' are not known at import, so its gradient cannot be summed over broadcast axes");
    const size_t lead = os->size() - is->size();
    std::vector<int64_t> axes, target;
    for (size_t i = 0; i < os->size(); ++i) {
      const bool extra = i < lead;
      if (extra || ((*is)[i - lead].value == 1 && (*os)[i].value != 1)) axes.push_back(static_cast<int64_t>(i));
    }
    for (const Dim& d : *is) target.push_back(d.value);
    std::string summed = axes.empty() ? g : b_->reduce_sum(g, axes);
    return b_->op("Reshape", {summed, b_->ints(target)});
  }

  Status backprop(const Node& n, const std::string& g, const std::unordered_set<std::string>& from_x, const std::string& where) {
    const std::string& y = n.outputs[0];
    auto needs = [&](size_t i) { return i < n.inputs.size() && !n.inputs[i].empty() && from_x.count(n.inputs[i]); };
    auto give = [&](size_t i, const std::string& gi) -> Status {
      BH_ASSIGN_OR_RETURN(std::string r, unbroadcast(gi, y, n.inputs[i], n, where));
      accumulate(n.inputs[i], r);
      return Status::ok();
    };
    const std::string& op = n.op_type;
    if (!n.domain.empty()) return unsupported(where + "no gradient rule for " + n.label() + " of domain '" + n.domain + "'");
    Builder& b = *b_;
    if (op == "Add" || op == "Sub") {
      if (n.inputs.size() != 2) return invalid_model(where + n.label() + " must have 2 inputs");
      if (needs(0)) BH_RETURN_IF_ERROR(give(0, g));
      if (needs(1)) BH_RETURN_IF_ERROR(give(1, op == "Add" ? g : b.op("Neg", {g})));
      return Status::ok();
    }
    if (op == "Mul") {
      if (n.inputs.size() != 2) return invalid_model(where + n.label() + " must have 2 inputs");
      if (needs(0)) BH_RETURN_IF_ERROR(give(0, b.op("Mul", {g, n.inputs[1]})));
      if (needs(1)) BH_RETURN_IF_ERROR(give(1, b.op("Mul", {g, n.inputs[0]})));
      return Status::ok();
    }
    if (op == "Div") {
      if (n.inputs.size() != 2) return invalid_model(where + n.label() + " must have 2 inputs");
      if (needs(0)) BH_RETURN_IF_ERROR(give(0, b.op("Div", {g, n.inputs[1]})));
      // d(a/b)/db = -(a/b)/b
      if (needs(1)) BH_RETURN_IF_ERROR(give(1, b.op("Neg", {b.op("Div", {b.op("Mul", {g, y}), n.inputs[1]})})));
      return Status::ok();
    }
    if (n.inputs.empty()) return invalid_model(where + n.label() + " has no input");
    const std::string& x = n.inputs[0];
    std::string gx;
    if (op == "Identity") gx = g;
    else if (op == "Neg") gx = b.op("Neg", {g});
    else if (op == "Relu") gx = b.op("Where", {b.op("Greater", {x, b.scalar(0)}), g, b.scalar(0)});
    else if (op == "Sigmoid") gx = b.op("Mul", {g, b.op("Mul", {y, b.op("Sub", {b.scalar(1), y})})});
    else if (op == "Tanh") gx = b.op("Mul", {g, b.op("Sub", {b.scalar(1), b.op("Mul", {y, y})})});
    else if (op == "Exp") gx = b.op("Mul", {g, y});
    else if (op == "Log") gx = b.op("Div", {g, x});
    else if (op == "Sqrt") gx = b.op("Div", {b.op("Mul", {g, b.scalar(0.5)}), y});
    else if (op == "MatMul") return backprop_matmul(n, g, needs(0), needs(1), where);
    else return unsupported(where + "no gradient rule for " + n.label() + " (bulkhead differentiates Add, Sub, Mul, Div, Neg, Identity, Relu, Sigmoid, Tanh, Exp, Log, Sqrt and MatMul)");
    if (needs(0)) accumulate(x, gx);
    return Status::ok();
  }

  Status backprop_matmul(const Node& n, const std::string& g, bool da, bool db, const std::string& where) {
    if (n.inputs.size() != 2) return invalid_model(where + n.label() + " must have 2 inputs");
    const std::vector<Dim>* as = shape_of(g_, n.inputs[0]);
    const std::vector<Dim>* bs = shape_of(g_, n.inputs[1]);
    bool ok = as && bs && as->size() >= 2 && as->size() == bs->size();
    for (size_t i = 0; ok && i + 2 < as->size(); ++i) ok = same_dims({(*as)[i]}, {(*bs)[i]});
    if (!ok)
      return unsupported(where + "the gradient of " + n.label() +
                         " needs operands of one known rank (2 or more) with equal batch dims");
    const int rank = static_cast<int>(as->size());
    Builder& b = *b_;
    if (da) accumulate(n.inputs[0], b.op("MatMul", {g, b.transpose_last_two(n.inputs[1], rank)}));
    if (db) accumulate(n.inputs[1], b.op("MatMul", {b.transpose_last_two(n.inputs[0], rank), g}));
    return Status::ok();
  }

  Graph& g_;
  const Node& grad_;
  int opset_;
  std::unordered_set<std::string>& names_;
  Builder* b_ = nullptr;
  std::map<std::string, std::string> grads_;  // value -> the name of d(sum y)/d(value)
};

}  // namespace

bool has_gradient_nodes(const Graph& g) {
  return std::any_of(g.nodes.begin(), g.nodes.end(), is_gradient);
}

Status expand_gradients(Graph& g, int default_opset) {
  std::unordered_set<std::string> names;
  for (const auto& in : g.inputs) names.insert(in.name);
  for (const auto& [k, v] : g.initializers) names.insert(k);
  for (const auto& n : g.nodes) {
    names.insert(n.name);
    for (const auto& o : n.outputs) names.insert(o);
  }
  std::vector<Node> result;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!is_gradient(g.nodes[i])) continue;
    BH_ASSIGN_OR_RETURN(std::vector<Node> expanded, Expansion(g, g.nodes[i], default_opset, names).run());
    g.nodes[i].op_type.clear();  // marked for removal below
    for (auto& n : expanded) result.push_back(std::move(n));
  }
  g.nodes.erase(std::remove_if(g.nodes.begin(), g.nodes.end(), [](const Node& n) { return n.op_type.empty(); }), g.nodes.end());
  for (auto& n : result) g.nodes.push_back(std::move(n));
  return Status::ok();
}

}  // namespace bulkhead::ir
