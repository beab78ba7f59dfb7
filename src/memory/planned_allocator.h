// PlannedHostAllocator: a session's host memory, with its runs' intermediates placed in
// one arena by lifetime.
//
// The first run of a session allocates best-fit from one reserved range in 2 MiB pages
// (RecordingHeap; in sanitizer builds from a size-class cache, CachingHostAllocator) and
// records every allocation of the run: its size, and when it was made and released on a
// clock of such events. When the run ends, the record is planned (arena_plan.h):
// each block that was released during the run gets an offset in one arena, blocks alive
// at the same time never sharing bytes, and the recording's free pages are given back. Later runs
// replay the plan: their i-th allocation gets the i-th block of the arena. Blocks still
// alive when the run ended (the run's outputs, which the caller keeps) come from the
// cache, then and later (or from a SurvivorRegion lent to the run). A run that releases
// nothing gets no arena, only the plan of its surviving blocks.
//
// A run that does not repeat the record (different input shapes, a Loop that iterates a
// different number of times) stops using the arena at its first difference and is
// recorded for a new plan; after a few such runs the session stops planning and keeps
// the cache alone. Whatever happens, two live buffers never overlap: a planned block is
// handed out only when no live block of the arena overlaps it.
//
// Runs of one session may overlap: one run at a time holds the arena (open_run), the
// others allocate from the cache. When the last of several overlapping runs ends, the
// cache is given back to the system (a burst must not leave its memory behind), and so
// is every block released after that until the next run opens (the burst's outputs,
// which their callers held past the end of the burst). A session that has had no run open
// for SessionOptions::release_idle_after_ms gives its arena's pages and its cache back as
// well (the IdleReleaser wakes it); its next run maps the arena in again in one system
// call. Each session owns its allocator (I3): no block moves
// between sessions. BULKHEAD_CPU_ARENA=0 turns planning off for the process.
//
// Thread-safe: one mutex guards the plan, the arena and the counters.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "bulkhead/memory.h"
#include "memory/arena_plan.h"
#include "memory/caching_allocator.h"
#include "memory/idle_releaser.h"

namespace bulkhead {

// Memory given to one run for the blocks the plan says outlive it (its outputs): a
// process-isolated session's worker lends its shared-memory output region here, so the
// outputs are written where the supervisor reads them instead of being copied there
// (isolate/worker.cc). Blocks are bump-allocated, 64-byte aligned, never reused within
// the region; a block that does not fit comes from the cache as usual.
//
// Ownership: keeps `keep` (the memory's owner) alive while the region or any block in it
// lives. Thread-safety: every member may be called from any thread (atomic counters).
class SurvivorRegion {
 public:
  SurvivorRegion(char* base, size_t size, std::shared_ptr<void> keep)
      : base_(base), size_(size), keep_(std::move(keep)) {}
  char* base() const { return base_; }
  // Bytes from the start of the region to the end of its last block.
  size_t used() const { return used_.load(); }
  // Blocks taken and not yet given back: 0 means no Buffer of the process points into
  // the region any more (a run's Buffers hold its allocator, which holds the region).
  size_t live() const { return live_.load(); }
  // A block of `bytes` (a multiple of 64), or null when the region is full.
  void* take(size_t bytes);
  void give() { live_.fetch_sub(1); }

 private:
  char* base_;
  size_t size_;
  std::shared_ptr<void> keep_;
  std::atomic<size_t> used_{0}, live_{0};
};

class PlannedHostAllocator final : public Allocator {
 public:
  explicit PlannedHostAllocator(std::string name);
  ~PlannedHostAllocator() override;
  const Domain& domain() const override { return domain_; }
  std::string name() const override { return name_; }
  // Outside a run (constants made at session creation, overlapping runs): the cache.
  Result<std::shared_ptr<Buffer>> allocate(size_t size, size_t alignment = 64) override;
  void release(void* data, void* handle, size_t size) override;
  AllocatorStats stats() const override;
  std::shared_ptr<RunAllocator> open_run() override;
  // SessionOptions::release_idle_after_ms: once no run has been open for `after_ms`, the
  // arena's pages and the cache go back to the system (the next run maps them in again,
  // the plan stays). 0: whenever the last open run ends; < 0: never (the default). A
  // positive time needs `releaser`, which wakes this allocator when the time has passed.
  // Set once, before the first run.
  void set_release_when_idle(int after_ms, std::shared_ptr<IdleReleaser> releaser);
  // The runs' allocations changed for good (the session settled on a thread count after
  // timing its first runs at several, whose different scratch sizes made the plan give up):
  // planning starts again from the next run, as for a new session.
  void restart_planning();
  // Called by the IdleReleaser at the time this allocator asked for: gives the memory
  // back when no run has been open since `after_ms` before `now`, and says when to ask
  // again otherwise (nullopt: nothing to wait for, the next run's end asks again).
  std::optional<IdleReleaser::Clock::time_point> release_if_idle(IdleReleaser::Clock::time_point now);
  // The next run that replays the plan takes `region` for its surviving blocks (the
  // plan's from_cache slots); null withdraws a region no run has taken yet.
  void set_survivor_region(std::shared_ptr<SurvivorRegion> region);

  // Runs that differed from the plan before the session gave planning up.
  static constexpr int kMaxReplans = 3;
  // A run with more allocations than this is not planned (the greedy is quadratic).
  static constexpr size_t kMaxBlocks = 8192;

  struct Arena;
  struct Slot {
    size_t offset = 0, size = 0;
    bool from_cache = false;  // alive when the recorded run ended: served by the cache
  };

 private:
  friend class RunArena;
  friend class CacheRun;
  // A run opened by open_run() is over. When it was the last of several that overlapped,
  // or the last open one and the session releases its memory as soon as it is idle, the
  // cache is trimmed (and the arena's pages discarded) and true returned (the caller then
  // releases malloc's heaps, after letting mu_ go). When the session releases its memory
  // after a while, the releaser is asked to wake it then. Holds mu_.
  bool run_closed_locked();
  // No run is open: the arena's pages (unless a block of it is still live) and the cache
  // go back to the system. Holds mu_.
  void release_idle_locked();
  // Called by a run that recorded `trace` (one block per allocation, in order; `open`
  // marks those still alive at its end) instead of replaying the plan. Holds mu_.
  void replan_locked(const std::vector<ArenaBlock>& trace, const std::vector<bool>& open);
  void count_in_locked(size_t bytes);
  // A block of the cache is free again: cached, or freed just after a burst. Holds mu_.
  void give_to_cache_locked(void* data, size_t size);

  Domain domain_ = Domain::host();
  std::string name_;
  std::shared_ptr<CachingHostAllocator> cache_;
  mutable std::mutex mu_;
  std::shared_ptr<Arena> arena_;                     // the current arena (null before a plan)
  std::shared_ptr<const std::vector<Slot>> plan_;    // one slot per allocation of a run
  std::shared_ptr<SurvivorRegion> survivors_;         // for the next run that gets the arena
  bool busy_ = false;      // a run holds the arena
  int release_after_ms_ = -1;                   // SessionOptions::release_idle_after_ms
  std::shared_ptr<IdleReleaser> releaser_;     // for release_after_ms_ > 0
  IdleReleaser::Clock::time_point idle_since_;  // when the last open run ended
  bool wake_pending_ = false;  // the releaser will call release_if_idle
  bool released_ = false;      // the arena's pages were given back since the last run
  bool disabled_ = false;  // planning given up (or turned off)
  int replans_ = 0;
  int runs_open_ = 0;       // runs opened and not yet finished
  bool overlapped_ = false; // two or more were open at once since runs_open_ was last 0
  bool after_burst_ = false; // a burst ended and no run has opened since
  size_t in_use_ = 0, peak_ = 0, trimmed_ = 0;
};

}  // namespace bulkhead
