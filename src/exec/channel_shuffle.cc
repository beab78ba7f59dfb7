#include "exec/channel_shuffle.h"

#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "exec/outer_refs.h"

namespace bulkhead::exec {
namespace {

using ir::Dim;
using ir::Graph;
using ir::Node;

const std::vector<Dim>* shape_of(const Graph& g, const std::string& v) {
  const ir::ValueInfo* vi = g.info(v);
  return vi && vi->type == ir::ValueType::kTensor && vi->shape ? &*vi->shape : nullptr;
}

bool fixed(const Dim& d, int64_t want) { return d.fixed() && d.value == want; }

// Two batch dimensions known to be equal: the same fixed value or the same symbol.
bool same_dim(const Dim& a, const Dim& b) {
  if (a.fixed() || b.fixed()) return a.fixed() && b.fixed() && a.value == b.value;
  return !a.param.empty() && a.param == b.param;
}

}  // namespace

int fold_channel_shuffles(Graph& g, bool input_defaults_constant) {
  std::unordered_set<std::string> pinned;
  for (const auto& o : g.outputs) pinned.insert(o.name);
  collect_outer_refs(g, pinned);
  std::unordered_map<std::string, std::vector<size_t>> readers;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& in : g.nodes[i].inputs)
      if (!in.empty()) readers[in].push_back(i);
  // The one node reading `v`, which reads it once, when nothing outside sees `v`.
  auto sole = [&](const std::string& v) -> std::optional<size_t> {
    if (pinned.count(v)) return std::nullopt;
    auto it = readers.find(v);
    if (it == readers.end() || it->second.size() != 1) return std::nullopt;
    const Node& n = g.nodes[it->second[0]];
    int uses = 0;
    for (const auto& in : n.inputs) uses += in == v;
    if (uses != 1) return std::nullopt;
    return it->second[0];
  };
  auto plain = [](const Node& n, const char* op) {
    return n.op_type == op && n.domain.empty() && n.outputs.size() == 1 && !n.outputs[0].empty() && !n.inputs.empty() &&
           !n.inputs[0].empty();
  };
  std::vector<bool> dead(g.nodes.size(), false);
  int folded = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& r1 = g.nodes[i];
    if (dead[i] || !plain(r1, "Reshape")) continue;
    const auto* xs = shape_of(g, r1.inputs[0]);
    const auto* as = shape_of(g, r1.outputs[0]);
    if (!xs || !as || xs->size() != 4 || as->size() != 5) continue;
    const Dim &C = (*xs)[1], &H = (*xs)[2], &W = (*xs)[3], &G = (*as)[1], &Cg = (*as)[2];
    if (!C.fixed() || !H.fixed() || !W.fixed() || !G.fixed() || !Cg.fixed() || G.value < 2 || Cg.value < 1 ||
        G.value * Cg.value != C.value || !fixed((*as)[3], H.value) || !fixed((*as)[4], W.value) ||
        !same_dim((*xs)[0], (*as)[0]))
      continue;
    const auto ti = sole(r1.outputs[0]);
    if (!ti) continue;
    const Node& t = g.nodes[*ti];
    if (!plain(t, "Transpose") || t.inputs.size() != 1 || t.attr_ints("perm") != std::vector<int64_t>{0, 2, 1, 3, 4})
      continue;
    const auto r2i = sole(t.outputs[0]);
    if (!r2i) continue;
    const Node& r2 = g.nodes[*r2i];
    const auto* cs = shape_of(g, r2.outputs[0]);
    if (!plain(r2, "Reshape") || r2.inputs[0] != t.outputs[0] || !cs || cs->size() != 4 || !same_dim((*cs)[0], (*xs)[0]) ||
        !fixed((*cs)[1], C.value) || !fixed((*cs)[2], H.value) || !fixed((*cs)[3], W.value))
      continue;
    const auto ci = sole(r2.outputs[0]);
    if (!ci) continue;
    Node& conv = g.nodes[*ci];
    if (!plain(conv, "Conv") || conv.inputs[0] != r2.outputs[0] || conv.inputs.size() < 2 || conv.has_attr("_x_shuffle") ||
        conv.attr_int("group", 1) != C.value)
      continue;
    auto w = g.initializers.find(conv.inputs[1]);
    if (w == g.initializers.end() || w->second.dtype() != DataType::kFloat32 || w->second.rank() != 4 ||
        w->second.dim(0) != C.value || w->second.dim(1) != 1)
      continue;
    bool input_default = false;
    for (const auto& in : g.inputs) input_default = input_default || in.name == conv.inputs[1];
    if (input_default && !input_defaults_constant) continue;  // an initializer the caller may replace
    conv.inputs[0] = r1.inputs[0];
    ir::Attribute a;
    a.type = ir::AttrType::kInt;
    a.i = G.value;
    conv.attrs["_x_shuffle"] = a;
    dead[i] = dead[*ti] = dead[*r2i] = true;
    ++folded;
  }
  if (folded) g.remove_nodes(dead);
  return folded;
}

}  // namespace bulkhead::exec
