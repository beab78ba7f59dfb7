// ThreadsProbe: how many threads a CPU session of small nodes runs on, decided by timing
// its first runs (SessionOptions::one_thread_when_small).
//
// Whether a second core pays for a model whose every node is small (exec/work.h) depends
// on the machine: each split node hands half of its output to the other core's cache.
// ShuffleNet at 2 threads ran in 3.84 ms against 2.95 at one on one 2-core machine, and
// in 1.49 against 2.05 on another. So the session does not guess: its first runs
// alternate between the threads asked for and one thread (the first kWarm runs of each
// make that count's primitives and touch its memory, and are not counted); once each has
// kSamples timed runs, the
// count whose median is lower is kept for every later run. On a near tie (within
// kMargin) one thread is kept, which leaves a core to the rest of the machine. Results do
// not depend on the count: a run may be granted fewer threads than it asks for anyway
// (the core budget).
//
// Thread-safety: every method may be called from any thread; runs overlap.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace bulkhead {

class ThreadsProbe {
 public:
  static constexpr int kWarm = 2;     // runs of each count not timed (primitives, first touches)
  static constexpr int kSamples = 6;  // timed runs of each count
  static constexpr double kMargin = 0.03;

  // `many`: the threads the session was asked for (> 1); `why`: what makes the session
  // small, the start of every note.
  ThreadsProbe(int many, std::string why) : many_(many), why_(std::move(why)) {}

  // The threads the next run asks for.
  int next_run();
  // A run that asked for `threads` succeeded in `ms` (failed runs are not counted). True
  // for the one call that decided.
  bool ran(int threads, double ms);
  // The count kept, or 0 while the first runs are still being timed.
  int decided() const { return decided_.load(std::memory_order_acquire); }
  // Why the session runs on what it does (Session::ThreadUse::note).
  std::string note() const;

 private:
  const int many_;
  const std::string why_;
  std::atomic<int> decided_{0};
  std::atomic<uint64_t> started_{0};
  mutable std::mutex mu_;
  int warm_one_ = 0, warm_many_ = 0;           // guarded by mu_
  std::vector<double> one_ms_, many_ms_;       // guarded by mu_
  std::string note_;                           // guarded by mu_; set when decided
};

}  // namespace bulkhead
