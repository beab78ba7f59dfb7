#include "ir/graph.h"

namespace bulkhead::ir {

std::string ValueInfo::type_string() const {
  std::string r;
  if (type == ValueType::kSequence) r = "sequence<";
  if (type == ValueType::kOptional) r = "optional<";
  r += dtype_name(dtype);
  if (shape) {
    r += "[";
    for (size_t i = 0; i < shape->size(); ++i) {
      if (i) r += ",";
      const Dim& d = (*shape)[i];
      r += d.fixed() ? std::to_string(d.value) : (d.param.empty() ? "?" : d.param);
    }
    r += "]";
  }
  if (type == ValueType::kSequence || type == ValueType::kOptional) r += ">";
  return r;
}

int64_t Node::attr_int(const std::string& n, int64_t def) const {
  const Attribute* a = attr(n);
  return a && a->type == AttrType::kInt ? a->i : def;
}
float Node::attr_float(const std::string& n, float def) const {
  const Attribute* a = attr(n);
  if (!a) return def;
  if (a->type == AttrType::kFloat) return a->f;
  if (a->type == AttrType::kInt) return static_cast<float>(a->i);
  return def;
}
std::string Node::attr_string(const std::string& n, const std::string& def) const {
  const Attribute* a = attr(n);
  return a && a->type == AttrType::kString ? a->s : def;
}
std::vector<int64_t> Node::attr_ints(const std::string& n, std::vector<int64_t> def) const {
  const Attribute* a = attr(n);
  return a && a->type == AttrType::kInts ? a->ints : def;
}
std::vector<float> Node::attr_floats(const std::string& n, std::vector<float> def) const {
  const Attribute* a = attr(n);
  return a && a->type == AttrType::kFloats ? a->floats : def;
}
std::vector<std::string> Node::attr_strings(const std::string& n) const {
  const Attribute* a = attr(n);
  return a && a->type == AttrType::kStrings ? a->strings : std::vector<std::string>{};
}
std::string Node::label() const { return "node '" + name + "' (" + (domain.empty() ? "" : domain + ".") + op_type + ")"; }

const ValueInfo* Graph::find_input(const std::string& n) const {
  for (auto& v : inputs)
    if (v.name == n) return &v;
  return nullptr;
}

namespace {
bool static_tensor(const ValueInfo* v) {
  if (!v || v->type != ValueType::kTensor || !v->shape) return false;
  for (const Dim& d : *v->shape)
    if (!d.fixed()) return false;
  return true;
}
}  // namespace

void Graph::remove_nodes(const std::vector<bool>& dead) {
  std::vector<Node> kept;
  kept.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    if (i >= dead.size() || !dead[i]) kept.push_back(std::move(nodes[i]));
  nodes = std::move(kept);
}

bool Graph::all_shapes_static() const {
  for (const ValueInfo& in : inputs)
    if (!static_tensor(&in) && !(initializers.count(in.name) && in.type == ValueType::kTensor && !in.shape)) return false;
  for (const Node& n : nodes) {
    for (const std::string& o : n.outputs)
      if (!o.empty() && !static_tensor(info(o))) return false;
    for (const auto& [name, a] : n.attrs) {
      if (a.g && !a.g->all_shapes_static()) return false;
      for (const auto& g : a.graphs)
        if (g && !g->all_shapes_static()) return false;
    }
  }
  return true;
}

const ValueInfo* Graph::info(const std::string& n) const {
  if (auto* v = find_input(n)) return v;
  for (auto& v : outputs)
    if (v.name == n) return &v;
  auto it = value_info.find(n);
  return it == value_info.end() ? nullptr : &it->second;
}

}  // namespace bulkhead::ir
