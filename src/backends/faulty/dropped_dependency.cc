#include "backends/faulty/dropped_dependency.h"

#include <cstring>
#include <string>
#include <unordered_map>

namespace bulkhead::faulty {

DroppedEdge choose_dropped_edge(const std::vector<const ir::Node*>& nodes, int k) {
  const int n = static_cast<int>(nodes.size());
  std::unordered_map<std::string, int> producer_of;  // value name -> dispatch index
  std::vector<int> first_consumer(n, -1);
  for (int j = 0; j < n; ++j) {
    for (const auto& in : nodes[j]->inputs) {
      if (in.empty()) continue;
      auto it = producer_of.find(in);
      if (it != producer_of.end() && first_consumer[it->second] < 0) first_consumer[it->second] = j;
    }
    for (const auto& out : nodes[j]->outputs)
      if (!out.empty()) producer_of[out] = j;
  }
  const int want = std::max(k, 1) - 1;
  int pick = -1;
  if (want < n && first_consumer[want] >= 0) pick = want;
  for (int p = std::min(want, n) - 1; pick < 0 && p >= 0; --p)
    if (first_consumer[p] >= 0) pick = p;
  for (int p = want + 1; pick < 0 && p < n; ++p)
    if (first_consumer[p] >= 0) pick = p;
  if (pick < 0) return {};
  return {nodes[pick], nodes[first_consumer[pick]]};
}

void PendingWrites::hold(Tensor dst, Tensor result) {
  if (dst.raw() && dst.nbytes()) std::memset(dst.raw(), 0, dst.nbytes());
  writes_.emplace_back(std::move(dst), std::move(result));
}

bool PendingWrites::holds(const Buffer* buffer) const {
  for (const auto& [dst, result] : writes_)
    if (dst.buffer().get() == buffer) return true;
  return false;
}

void PendingWrites::land() {
  for (auto& [dst, result] : writes_)
    if (dst.raw() && result.raw() && dst.nbytes() == result.nbytes()) std::memcpy(dst.raw(), result.raw(), dst.nbytes());
  writes_.clear();
}

}  // namespace bulkhead::faulty
