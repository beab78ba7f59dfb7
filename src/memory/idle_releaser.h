// IdleReleaser: gives the run memory of idle sessions back to the system, a while after
// their last run ended (SessionOptions::release_idle_after_ms).
//
// A session keeps its arena and cache between runs, so that steady-state runs allocate
// nothing; one that has been idle for the time it asked for gives them back, and its next
// run faults them in again. Something has to notice that time passing while nothing
// runs: one thread per releaser, started when the first allocator asks to be woken,
// sleeping until the earliest time asked for. At that time it calls each allocator that
// is due (PlannedHostAllocator::release_if_idle), which gives its memory back or names a
// later time (a run came and went meanwhile).
//
// One releaser per CPU device, so one per Env: nothing here is process-wide. It holds
// allocators weakly (a session that goes away is forgotten) and never calls one with its
// own mutex held, so an allocator may call wake_at with its mutex held.
//
// A process that forks without exec keeps the thread in the parent only: sessions the child
// inherited keep their memory there (as they keep oneDNN's thread pool in the parent).
//
// Ownership: held by the device and by each allocator it serves (shared_ptr); the thread
// stops with the last holder, which joins it (or, when the last holder lets go on the
// thread itself, the thread finishes on its own). Thread-safe.
#pragma once

#include <chrono>
#include <memory>

namespace bulkhead {

class PlannedHostAllocator;

class IdleReleaser {
 public:
  using Clock = std::chrono::steady_clock;
  IdleReleaser();
  ~IdleReleaser();
  IdleReleaser(const IdleReleaser&) = delete;
  IdleReleaser& operator=(const IdleReleaser&) = delete;

  // Calls a->release_if_idle() at `when` or soon after (unless `a` is gone by then).
  // False when no thread could be started for it: the allocator then keeps its memory.
  bool wake_at(std::weak_ptr<PlannedHostAllocator> a, Clock::time_point when);

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace bulkhead
