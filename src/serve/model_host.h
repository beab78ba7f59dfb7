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
// Dynamic batching (config max_batch_size > 1; the model's inputs and outputs must all
// have a free first dimension, checked at load): a request that gets an instance takes
// along the waiting requests that match it (the same datatypes, the same dimensions after
// the first, the same requested outputs), in arrival order, up to max_batch_size rows —
// waiting up to max_queue_delay_us after its own arrival for more to come — runs them as
// one batch concatenated along the first dimension, and hands each its own rows of the
// outputs. A request taken into a batch waits for that run however long it takes (its
// inputs are being read); a failed batch run fails each of its requests.
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
#include <optional>
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

  // Upper bounds of the batch histogram's buckets: requests run together (+Inf after).
  static constexpr std::array<double, 8> kBatchBuckets = {1, 2, 4, 8, 16, 32, 64, 128};
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
    uint64_t runs = 0;             // session runs (a batch is one)
    uint64_t batched_requests = 0; // requests those runs served
    std::array<uint64_t, kBatchBuckets.size() + 1> batch_buckets{};  // requests per run, not cumulative
  };
  Stats stats() const;

 private:
  ModelHost() = default;
  struct Waiter {
    std::condition_variable cv;
    int instance = -1;  // set by the releasing thread
    // Dynamic batching: the request, for a request with an instance to take along.
    const NamedTensors* inputs = nullptr;
    const std::string* key = nullptr;  // null: runs alone
    int64_t rows = 0;
    bool batched = false;  // taken into another request's batch
    bool done = false;     // and answered: `result`
    std::optional<Result<NamedTensors>> result;
  };
  void release(int instance);
  void release_locked(int instance);
  void record(double ms, bool ok);
  void record_run(size_t requests);
  // Runs `inputs` on `instance`, or (when `batch` is not empty) them and the batch's
  // requests as one run; answers the batch's requests.
  Result<NamedTensors> run_batch(int instance, const NamedTensors& inputs, int64_t rows,
                                 const std::vector<std::string>& outputs, const std::vector<Waiter*>& batch,
                                 const RunOptions& ro);

  std::string name_;
  int64_t version_ = 0;
  ModelConfig config_;
  std::vector<Session> sessions_;

  mutable std::mutex mu_;
  std::condition_variable idle_cv_;  // running_ + waiting_ reached 0 (drain)
  std::condition_variable batch_cv_; // a request arrived (a batch waiting to fill looks again)
  std::vector<int> free_;            // instances free now
  std::deque<Waiter*> waiters_;      // in arrival order
  std::vector<int> last_pid_;        // each instance's worker pid when last seen
  bool draining_ = false;
  int checking_ = 0;                 // instances check_workers() holds
  Stats stats_;
};

}  // namespace bulkhead::serve
