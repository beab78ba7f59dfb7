// The cores CPU runs of this process may use at once (issue 5, item 4). Each run of a
// CPU session asks for its session's thread count and is granted what is still free, and
// at least one thread, so concurrent runs never wait for each other and never ask for more
// threads than there are cores: on 2 cores, two sessions of 2 threads each run with
// 1 thread each rather than 4 threads time-slicing 2 cores (where every barrier of a
// parallel loop waits out a descheduled thread).
#pragma once

#include <algorithm>
#include <mutex>

namespace bulkhead::cpu {

class CoreBudget {
 public:
  explicit CoreBudget(int cores) : cores_(std::max(1, cores)) {}

  // Threads granted to a run that wants `want` (>= 1); give them back with release().
  int acquire(int want) {
    std::lock_guard<std::mutex> lock(mu_);
    int grant = std::max(1, std::min(want, cores_ - used_));
    used_ += grant;
    return grant;
  }
  void release(int granted) {
    std::lock_guard<std::mutex> lock(mu_);
    used_ -= granted;
  }
  int in_use() const {
    std::lock_guard<std::mutex> lock(mu_);
    return used_;
  }
  int cores() const { return cores_; }

 private:
  const int cores_;
  mutable std::mutex mu_;
  int used_ = 0;
};

// The budget every CPU run of this process draws from (cpu_backend.cc).
CoreBudget& process_core_budget();

}  // namespace bulkhead::cpu
