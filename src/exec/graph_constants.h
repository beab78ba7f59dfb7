// The constants a graph rewrite may rely on: initializers that are not an overridable
// graph input (IR >= 4: an initializer also listed as an input is a default the caller may
// replace; IR < 4 lists every initializer as an input, and there they are constants), and
// the values of Constant nodes. A view of the graph it was made from: valid while that
// graph's initializers and nodes are not changed. Thread-compatible.
#pragma once

#include <string>
#include <unordered_map>
#include <unordered_set>

#include "ir/graph.h"

namespace bulkhead::exec {

class GraphConstants {
 public:
  GraphConstants(const ir::Graph& g, bool input_defaults_constant) : g_(g) {
    if (!input_defaults_constant)
      for (const auto& in : g.inputs) overridable_.insert(in.name);
    for (const auto& n : g.nodes)
      if (n.op_type == "Constant" && n.domain.empty() && n.outputs.size() == 1)
        if (const ir::Attribute* a = n.attr("value"); a && a->type == ir::AttrType::kTensor) nodes_[n.outputs[0]] = &a->t;
  }
  // The constant named `v`, or null.
  const Tensor* get(const std::string& v) const {
    if (auto c = nodes_.find(v); c != nodes_.end()) return c->second;
    auto it = g_.initializers.find(v);
    if (it == g_.initializers.end() || overridable_.count(v)) return nullptr;
    return &it->second;
  }

 private:
  const ir::Graph& g_;
  std::unordered_set<std::string> overridable_;
  std::unordered_map<std::string, const Tensor*> nodes_;
};

}  // namespace bulkhead::exec
