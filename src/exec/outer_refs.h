// Names a graph's subgraphs (If/Loop/Scan bodies, at any depth) read from enclosing graphs:
// values a graph rewrite must keep under their names.
#pragma once

#include <string>
#include <unordered_set>

#include "ir/graph.h"

namespace bulkhead::exec {

inline void collect_outer_refs(const ir::Graph& g, std::unordered_set<std::string>& out) {
  auto visit = [&](const std::shared_ptr<const ir::Graph>& sg) {
    if (!sg) return;
    for (const auto& r : sg->outer_refs) out.insert(r);
    collect_outer_refs(*sg, out);
  };
  for (const auto& n : g.nodes)
    for (const auto& [k, a] : n.attrs) {
      if (a.type == ir::AttrType::kGraph) visit(a.g);
      if (a.type == ir::AttrType::kGraphs)
        for (const auto& sg : a.graphs) visit(sg);
    }
}

}  // namespace bulkhead::exec
