// A session's execution state on a device (BhpSession, I3) and its runs (BhpRun).
//
// A session holds its submission policy and a pool of in-order queues: each run takes a
// queue of its own (runs of one session may overlap on different threads) and gives it
// back when it ends; no queue is ever shared with another session. Thread-safe.
//
// Graph capture (I6): OpenCL 1.2 has no command buffers to record, so a session accepts
// the flag and records nothing — every run enqueues its kernels afresh, and the device's
// `replays` counter stays 0.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "device.h"
#include "stream.h"

namespace bulkhead::opencl {

class Run;

class Session {
 public:
  static Result<std::unique_ptr<Session>> open(Device& device, const BhpSessionConfig& config);

  Device& device() const { return device_; }
  const SubmitPolicy& policy() const { return policy_; }
  const std::string& owner() const { return owner_; }
  Result<std::unique_ptr<Run>> begin_run();
  // A queue a run is done with, for the next run.
  void give_back(std::unique_ptr<QueueSlot> slot);

 private:
  Session(Device& device, SubmitPolicy policy, std::string owner)
      : device_(device), policy_(std::move(policy)), owner_(std::move(owner)) {}
  Result<std::unique_ptr<QueueSlot>> take_slot();

  Device& device_;
  const SubmitPolicy policy_;
  const std::string owner_;
  std::mutex mu_;
  std::vector<std::unique_ptr<QueueSlot>> idle_;  // guarded by mu_
};

// One run: a queue of its session and the stream its kernels go to. Used by one thread
// at a time; ending it waits for what it queued and gives the queue back.
class Run {
 public:
  Run(Session& session, std::unique_ptr<QueueSlot> slot)
      : session_(session), slot_(std::move(slot)), stream_(session.device(), *slot_, session.policy(), true) {}
  ~Run();

  Session& session() const { return session_; }
  Stream& stream() { return stream_; }
  Status flush() { return stream_.submit(); }

 private:
  Session& session_;
  std::unique_ptr<QueueSlot> slot_;
  Stream stream_;
};

}  // namespace bulkhead::opencl
