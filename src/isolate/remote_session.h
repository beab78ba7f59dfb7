// RemoteSession: the supervisor of a session that lives in a worker process
// (SessionOptions::isolation == "process", I8).
//
// It starts `bulkhead worker --fd 3` (child_process.h), sends it the model and the
// options, and forwards runs: inputs go over in one shared-memory region, outputs come
// back in another, each copied once (value_transfer.h) into a region both processes keep
// mapped across runs (output_regions.h says when one may be rewritten). A worker that dies during a run
// or does not answer within worker_timeout_ms is killed and reaped and the run fails
// with one line saying so; the next run starts a fresh worker, which loads the model
// again. A worker found dead between runs is replaced without failing anyone. Every
// wait has a deadline and every child is reaped; destroying the RemoteSession ends and
// reaps its worker.
//
// Ownership: Session's SessionImpl owns the RemoteSession; the RemoteSession owns its
// worker process, the socket to it, the memfd of a model given as bytes, and the
// launcher thread. Thread-safety: all methods may be called from any thread; runs are
// serialised (one request in flight per worker).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bulkhead/bulkhead.hpp"
#include "isolate/channel.h"
#include "isolate/child_process.h"
#include "isolate/lending.h"
#include "isolate/output_regions.h"
#include "isolate/protocol.h"
#include "isolate/shared_memory.h"
#include "isolate/value_transfer.h"

namespace bulkhead::isolate {

// The model a worker loads: a file (Env::load) or serialized bytes (Env::load_bytes).
struct ModelSource {
  std::string name;  // the path, or the name given with the bytes; used in messages
  bool from_bytes = false;
  const std::string* bytes = nullptr;  // borrowed for the duration of create()
};

class RemoteSession {
 public:
  // Starts a worker and loads the model there. Errors from the worker (a missing file,
  // an unsupported operator) are returned as the worker reported them.
  static Result<std::unique_ptr<RemoteSession>> create(const ModelSource& source, const SessionOptions& options);
  ~RemoteSession();

  // The first worker's description of the model's inputs, outputs and placement.
  const ModelInfo& info() const { return info_; }
  // Runs in the worker. `inputs` must already be validated; `outputs` are the names to
  // return, in order. Profile entries are appended to `profile` when it is set.
  // `timeout_ms` is the run's RunOptions::timeout_ms, enforced by the worker's session.
  // `outputs_for`: the lend_id() of the isolated session the caller will pass the outputs
  // to (RunOptions::outputs_for), 0 for none: they are then written into regions lent to
  // it (lending.h). Inputs that view a region lent to this session are not copied.
  Result<NamedValues> run(const NamedValues& inputs, const std::vector<std::string>& outputs,
                          std::vector<NodeProfile>* profile, int64_t timeout_ms = -1, uint64_t outputs_for = 0);
  // This session's id as a receiver of lent regions (lending.h); never reused.
  uint64_t lend_id() const { return lend_id_; }
  // Buffers for this session's inputs that its worker reads where they are
  // (Session::allocate_input).
  Allocator& input_allocator() { return *input_regions_; }
  // The current worker's pid; -1 between a worker's death and its replacement.
  int worker_pid() const { return pid_.load(); }
  // Replaces a dead worker now (Session::ensure_worker).
  Status ensure_worker();

 private:
  RemoteSession() = default;
  struct Worker {
    pid_t pid = -1;
    std::unique_ptr<Channel> channel;
  };

  Status start_worker();                       // requires mu_
  Status ensure_worker_locked();               // requires mu_
  // Kills (unless it already ended) and reaps the worker; `how` says how it ended.
  void end_worker(bool kill_first, std::string* how);  // requires mu_
  // Ends the worker and describes it: "<who> <what>", where "%s" in `what` becomes how it
  // ended; `in_run` adds that a fresh worker will serve the next run. Requires mu_.
  Status worker_failed(const std::string& what, bool kill_first, bool in_run = true);
  std::string who() const;                     // "worker process 1234 for 'model.onnx'"; requires mu_

  // The most lent regions the worker keeps mapped: the least recently used beyond it are
  // forgotten (the worker unmaps them), and a run viewing more copies the rest.
  static constexpr size_t kMaxLent = 4;

  std::string binary_;
  const uint64_t lend_id_ = next_lend_id();
  std::string model_name_;
  bool from_bytes_ = false;
  UniqueFd model_bytes_;  // sealed memfd of the model's bytes
  uint64_t model_size_ = 0;
  SessionOptions worker_options_;
  int timeout_ms_ = 60000;
  ModelInfo info_;  // from the first worker; never changes after create()
  bool have_info_ = false;
  std::shared_ptr<SharedMemory> shm_ = SharedMemory::create("isolation");
  std::shared_ptr<InputRegions> input_regions_ = std::make_shared<InputRegions>(shm_, lend_id_);

  std::mutex mu_;  // serialises runs and guards everything below
  Launcher launcher_;
  Worker worker_;
  std::vector<pid_t> unreaped_;  // killed workers that did not go away in time
  uint64_t last_run_id_ = 0;
  ReusableRegion inputs_;         // where runs' inputs are written (value_transfer.h)
  uint64_t inputs_sent_id_ = 0;   // the inputs_ region the current worker has mapped
  std::shared_ptr<OutputRegions> outputs_ = OutputRegions::create(shm_);  // where outputs come back
  uint64_t last_output_bytes_ = 0;  // the last run's, to pick a region for the next
  std::vector<uint64_t> lent_mapped_;  // uids of lent regions the worker maps, oldest first
  // Lent regions a failed run sent: the worker may or may not have mapped them, so the
  // next run has it forget them first and sends them again when needed.
  std::vector<uint64_t> lent_unsure_;
  std::atomic<int> pid_{-1};
};

}  // namespace bulkhead::isolate
