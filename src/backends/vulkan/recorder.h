// RunState: one run's recording on one Vulkan device (the object Device::begin_run
// makes and kernels reach through KernelContext::device_run_state()).
//
// Kernels call dispatch(); the run records into a command frame lent by its session
// (I3) and submits according to the session's submission policy (policy.h, I5). Every
// buffer a recorded dispatch touches is kept alive until the work that uses it has
// completed, so memory released by the executor mid-run is never reused — by this run
// or another session — while the device may still read or write it. flush() submits
// what is recorded and waits; the executor calls it before a result leaves the device
// and at the end of the run.
//
// Graph capture (I6): a capturable run (RunStart::capturable) of a session with
// graph_capture on takes the session's Capture. The first such run records: its
// allocations come from the capture's arena and its command buffers are kept, one per
// submit. Later runs replay: they get the same allocations in the same order, their
// dispatches are checked against the recorded ones (pipeline, buffers, push constants,
// groups) instead of being recorded, and each flush submits the recorded command buffer
// of that point. A run that diverges fails with an error and turns capture off for the
// session. While one run holds the capture, other runs of the session run uncaptured.
//
// Ownership: the run owns the frame until it ends, then gives it back to the session.
// Thread-safety: one run, one thread (the executor's).
#pragma once

#include <memory>
#include <unordered_set>
#include <vector>

#include "backends/vulkan/device.h"

namespace bulkhead::vulkan {

class RunState {
 public:
  RunState(std::shared_ptr<SessionAllocator> session, bool capturable = false);
  ~RunState();
  RunState(const RunState&) = delete;
  RunState& operator=(const RunState&) = delete;

  struct Bind {
    const Tensor* tensor;
    bool written;
  };
  // Records one dispatch of `shader` over `groups` workgroups, with `binds` as storage
  // buffers 0..n-1 and `push` (at most kPushBytes) as push constants.
  Status dispatch(const std::string& shader, const std::vector<Bind>& binds, const void* push, uint32_t push_bytes,
                  uint32_t gx, uint32_t gy = 1, uint32_t gz = 1);
  // Submits what is recorded and waits for it.
  Status flush();

  VulkanDevice& device() const { return session_->device(); }
  const SubmitPolicy& policy() const { return session_->policy(); }
  uint64_t submits() const { return submits_; }
  uint64_t dispatches() const { return dispatches_; }

 private:
  enum class Mode { kPlain, kRecording, kReplaying };
  Status begin();  // starts recording into the frame
  Status replay_dispatch(const Pipeline& p, const std::vector<BufferRange>& ranges, const void* push,
                         uint32_t push_bytes, const uint32_t groups[3]);
  Status replay_flush();
  void end_capture();  // at the end of the run: keep or drop what was recorded
  void barrier(VkPipelineStageFlags2 src_stage, VkAccessFlags2 src_access, VkPipelineStageFlags2 dst_stage,
               VkAccessFlags2 dst_access);
  Result<VkDescriptorSet> descriptor_set(const Pipeline& p);

  std::shared_ptr<SessionAllocator> session_;
  Mode mode_ = Mode::kPlain;
  Capture* capture_ = nullptr;  // held for the whole run in kRecording / kReplaying
  bool failed_ = false;         // a dispatch or submit of this run failed
  size_t segment_ = 0;          // replay: the next recorded command buffer to submit
  bool replay_pending_ = false; // replay: dispatches checked since the last submit
  std::unique_ptr<CommandFrame> frame_;
  Status error_;  // a failure to get a frame, reported by the first dispatch
  bool recording_ = false;
  std::vector<std::shared_ptr<Buffer>> in_flight_;  // kept until the work completes
  std::unordered_set<const Buffer*> written_, read_;  // since the last barrier
  uint64_t bytes_since_submit_ = 0;
  uint64_t submits_ = 0, dispatches_ = 0;
};

}  // namespace bulkhead::vulkan
