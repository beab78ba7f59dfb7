#include "memory/arena_plan.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <utility>

namespace bulkhead {

ArenaPlan plan_arena(const std::vector<ArenaBlock>& blocks) {
  ArenaPlan plan;
  plan.offsets.assign(blocks.size(), 0);
  std::vector<size_t> order(blocks.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return blocks[a].size > blocks[b].size; });
  std::vector<size_t> placed;
  placed.reserve(blocks.size());
  std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of placed blocks alive at the same time
  for (size_t i : order) {
    const ArenaBlock& b = blocks[i];
    busy.clear();
    for (size_t j : placed)
      if (lifetimes_overlap(b, blocks[j])) busy.emplace_back(plan.offsets[j], plan.offsets[j] + blocks[j].size);
    std::sort(busy.begin(), busy.end());
    size_t best = std::numeric_limits<size_t>::max(), best_gap = std::numeric_limits<size_t>::max();
    size_t reach = 0;  // end of the busy ranges seen so far
    for (const auto& [off, end] : busy) {
      if (off > reach && off - reach >= b.size && off - reach < best_gap) {
        best = reach;
        best_gap = off - reach;
      }
      reach = std::max(reach, end);
    }
    plan.offsets[i] = best != std::numeric_limits<size_t>::max() ? best : reach;
    plan.size = std::max(plan.size, plan.offsets[i] + b.size);
    placed.push_back(i);
  }
  return plan;
}

size_t peak_live_bytes(const std::vector<ArenaBlock>& blocks) {
  // +size at start, -size at end; at equal times the release (end) comes first.
  std::vector<std::pair<uint64_t, long long>> events;
  events.reserve(blocks.size() * 2);
  for (const auto& b : blocks) {
    events.emplace_back(b.start, static_cast<long long>(b.size));
    events.emplace_back(b.end, -static_cast<long long>(b.size));
  }
  std::sort(events.begin(), events.end());
  long long live = 0, peak = 0;
  for (const auto& [t, d] : events) {
    live += d;
    peak = std::max(peak, live);
  }
  return static_cast<size_t>(peak);
}

}  // namespace bulkhead
