// ModelHost: one version of one model being served — its sessions (the configuration's
// "instances"), the requests waiting for one, and what it has done.
//
// A request takes a free instance, or waits for one in arrival order; when `queue_depth`
// requests already wait it is refused at once (kResourceExhausted: HTTP 503), and one that
// waits past its time limit fails with kDeadlineExceeded. The run itself happens on the
// calling thread, on the instance it got, which no other request uses meanwhile. A
// failure of a run (a bad input, a crashed or hung worker) reaches only that request: the
// instance stays in service (a process-isolated session replaces its worker on its next
// run, I8).
//
// Ownership: the host owns its sessions; shared_ptr, because a request in flight keeps the
// host alive while the server unloads it. Thread-safety: every member may be called from
// any thread at once.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bulkhead/bulkhead.hpp"
#include "serve/repository.h"

namespace bulkhead::serve {

class ModelHost {
 public:
  // Loads `config.instances` sessions of the model at `path` into `env`.
  static Result<std::shared_ptr<ModelHost>> load(const Env& env, const std::string& name, int64_t version,
                                                 const std::string& path, const ModelConfig& config);
  ~ModelHost();

  const std::string& name() const { return name_; }
  int64_t version() const { return version_; }
  const ModelConfig& config() const { return config_; }
  const std::vector<IoInfo>& inputs() const { return sessions_[0].inputs(); }
  const std::vector<IoInfo>& outputs() const { return sessions_[0].outputs(); }

  // Runs one request (above). `outputs`: names to return, empty = all.
  Result<NamedTensors> infer(const NamedTensors& inputs, const std::vector<std::string>& outputs);

  // Process isolation: each instance not serving a request whose worker has died gets a
  // fresh one now (Session::ensure_worker), out of rotation meanwhile — requests go to the
  // other instances or wait. Called periodically by the server; returns the failures.
  std::vector<Status> check_workers();
  // Refuses new requests (kUnavailable) and waits until those in flight are done.
  void drain();
  // Loaded, not draining, and every instance able to run: an in-process session always
  // is; a process-isolated one while its worker is alive (Session::worker_pid()).
  bool ready() const;

  // Upper bounds of the latency histogram's buckets, in milliseconds (+Inf after).
  static constexpr std::array<double, 12> kLatencyBucketsMs = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000};
  struct Stats {
    uint64_t requests = 0;      // answered, successfully or not
    uint64_t successes = 0;
    uint64_t failures = 0;      // runs that failed (inputs, workers, timeouts)
    uint64_t refused = 0;       // the queue was full, or the host draining
    int waiting = 0;            // requests waiting for an instance now
    int running = 0;            // requests running now
    double latency_sum_ms = 0;  // of answered requests, waiting included
    std::array<uint64_t, kLatencyBucketsMs.size() + 1> latency_buckets{};  // not cumulative
    uint64_t worker_restarts = 0;  // worker processes seen replaced (process isolation)
  };
  Stats stats() const;

 private:
  ModelHost() = default;
  struct Waiter {
    std::condition_variable cv;
    int instance = -1;  // set by the releasing thread
  };
  void release(int instance);
  void release_locked(int instance);
  void record(double ms, bool ok);

  std::string name_;
  int64_t version_ = 0;
  ModelConfig config_;
  std::vector<Session> sessions_;

  mutable std::mutex mu_;
  std::condition_variable idle_cv_;  // running_ + waiting_ reached 0 (drain)
  std::vector<int> free_;            // instances free now
  std::deque<Waiter*> waiters_;      // in arrival order
  std::vector<int> last_pid_;        // each instance's worker pid when last seen
  bool draining_ = false;
  int checking_ = 0;                 // instances check_workers() holds
  Stats stats_;
};

}  // namespace bulkhead::serve
