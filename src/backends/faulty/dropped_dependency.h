// Field report C's bug: inside one run the device drops one barrier, so the consumer of
// one dispatch's output reads it before the producer's write has landed.
//
// Deterministic model: the producer's result is held back as a pending write, the buffer
// the consumer reads is zero-filled, and the write lands right after the consumer has
// computed. DroppedEdge is chosen per run from the device's node list; PendingWrites is
// that run's state (used by the run's thread only: never shared, never global).
#pragma once

#include <utility>
#include <vector>

#include "bulkhead/tensor.h"
#include "ir/graph.h"

namespace bulkhead::faulty {

struct DroppedEdge {
  const ir::Node* producer = nullptr;
  const ir::Node* consumer = nullptr;  // the first later node that reads one of its outputs
};

// The edge whose barrier is dropped, from the nodes one device dispatches in order:
// dispatch `k` (1-based) and its first consumer when it has one on the device; else the
// last producer before it that has a consumer (the last such edge of a shorter model);
// else the first one after it. Both null when no dispatch reads another's output.
DroppedEdge choose_dropped_edge(const std::vector<const ir::Node*>& nodes, int k);

class PendingWrites {
 public:
  PendingWrites() = default;
  PendingWrites(const PendingWrites&) = delete;
  PendingWrites& operator=(const PendingWrites&) = delete;
  // Lands whatever is still pending (a run that stopped before its consumer).
  ~PendingWrites() { land(); }

  // `dst` holds zeros until land() copies `result` (same bytes count) into it.
  void hold(Tensor dst, Tensor result);
  // True when `buffer` is the destination of a write that has not landed.
  bool holds(const Buffer* buffer) const;
  void land();

 private:
  std::vector<std::pair<Tensor, Tensor>> writes_;  // (destination, result)
};

}  // namespace bulkhead::faulty
