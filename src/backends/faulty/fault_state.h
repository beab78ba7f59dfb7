// The faulty device's state at its three lifetimes:
//   DeviceFaults — device-wide (the scratch area, the slot, the capture cache): owned by
//     the device, torn down with it; thread-safe (each part has its own mutex).
//   SessionState — one session's state on the device: owned by the allocator the device
//     made for that session (so it lives while the session or any of its buffers does);
//     thread-safe.
//   RunState — one run: made by Device::begin_run, handed to the device's kernels through
//     KernelContext::device_run_state(), used by that run's thread only.
// Nothing here keeps the device alive, so device teardown is never delayed by a cycle.
#pragma once

#include <cstdint>
#include <memory>

#include "backends/faulty/capture_cache.h"
#include "backends/faulty/dropped_dependency.h"
#include "backends/faulty/fault.h"
#include "backends/faulty/global_slot.h"
#include "backends/faulty/shared_scratch.h"

namespace bulkhead::faulty {

struct DeviceFaults {
  Fault fault = Fault::kNone;
  int dropped_dispatch = 6;  // k: the dispatch whose consumer loses its barrier (1-based)
  SharedScratch scratch;
  GlobalSlot slot;
  std::shared_ptr<CaptureCache> capture = std::make_shared<CaptureCache>();
};

struct SessionState {
  uint64_t id = 0;  // unique among the device's sessions, never reused
  ScratchLayout scratch_layout;
  std::shared_ptr<SessionWeights> weights = std::make_shared<SessionWeights>();
};

struct RunState {
  Fault fault = Fault::kNone;
  std::shared_ptr<DeviceFaults> device;
  std::shared_ptr<SessionState> session;
  DroppedEdge dropped;
  PendingWrites pending;               // lands before `capture` publishes; both before the run returns
  std::unique_ptr<CaptureRun> capture;  // null unless stale-replay captures this graph
};

}  // namespace bulkhead::faulty
