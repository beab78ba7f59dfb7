// A Vulkan device (I4): one logical device per physical device, shared by every session
// on it through reference counting (the Env caches it weakly; the last session's
// buffers and allocators hold it).
//
// It owns, in teardown order: the transfer context (staging copies host ↔ device,
// registered with the copy router, I1/I2), the pipeline cache (immutable pipelines
// shared across sessions), the memory pools, the queue and the VkDevice; and it holds
// the Instance. Sessions get a SessionAllocator each, which owns that session's
// execution state (I3): command pools, command buffers, fences and descriptor pools,
// handed to one run at a time (RunState, recorder.h).
//
// Tensors in this device's domain are device-local: the CPU never reads them directly
// (Buffer::data() is null); every crossing is a routed, staged copy.
//
// Thread-safety: all methods may be called from any thread; queue submission and the
// transfer context are serialised by their own locks.
#pragma once

#include <vulkan/vulkan.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "backends/vulkan/instance.h"
#include "backends/vulkan/memory.h"
#include "backends/vulkan/pipelines.h"
#include "backends/vulkan/policy.h"

namespace bulkhead::vulkan {

// What a Vulkan kernel needs of its tensors: the block buffer and the byte range.
struct BufferRange {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize offset = 0, size = 0;
};

class VulkanDevice;
struct Pipeline;

// One command buffer with its pool, fence and descriptor pools: the execution state a
// run records into. Owned by a SessionAllocator; lent to one run at a time.
struct CommandFrame {
  VkCommandPool pool = VK_NULL_HANDLE;
  VkCommandBuffer cb = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  std::vector<VkDescriptorPool> descriptor_pools;
  size_t descriptor_pool_in_use = 0;
};

// A session's captured run (I6): every allocation and dispatch of one run, recorded
// into command buffers that later runs of the same session replay instead of recording
// again. Keyed to its session: nothing in it is shared with another.
struct Capture {
  enum class State { kEmpty, kReady, kOff };
  struct Dispatch {
    const Pipeline* pipeline = nullptr;
    std::vector<BufferRange> ranges;
    std::vector<uint8_t> push;
    uint32_t groups[3] = {1, 1, 1};
  };
  State state = State::kEmpty;
  std::vector<Allocation*> arena;                       // the run's allocations, in order
  std::vector<Dispatch> dispatches;                     // the run's dispatches, in order
  std::vector<std::unique_ptr<CommandFrame>> segments;  // one command buffer per submit
  std::vector<size_t> segment_end;                      // dispatches recorded by the end of each
};

class SessionAllocator final : public Allocator {
 public:
  SessionAllocator(std::shared_ptr<VulkanDevice> device, std::string owner, SubmitPolicy policy,
                   bool graph_capture = true);
  ~SessionAllocator() override;

  const Domain& domain() const override;
  std::string name() const override { return owner_; }
  Result<std::shared_ptr<Buffer>> allocate(size_t size, size_t alignment = 64) override;
  void release(void* data, void* handle, size_t size) override;
  // Device bytes in this session's live buffers, their peak, and the capture arena kept
  // for replays (cached).
  AllocatorStats stats() const override;

  VulkanDevice& device() const { return *device_; }
  const SubmitPolicy& policy() const { return policy_; }
  // A command frame for one run (made on first need), and its return.
  Result<std::unique_ptr<CommandFrame>> acquire_frame();
  void return_frame(std::unique_ptr<CommandFrame> frame);

  // Graph capture. A run that may capture takes the session's capture for its whole
  // length (try_take_capture; another run of the session meanwhile runs uncaptured) and
  // routes the allocations its thread makes to the capture's arena: new ones while
  // recording, the recorded ones again, in order, while replaying.
  bool graph_capture() const { return graph_capture_; }
  Capture* try_take_capture();      // null when another run has it or capture is off
  void give_back_capture();
  enum class ArenaMode { kNone, kRecord, kReplay };
  void set_arena_mode(ArenaMode mode);  // for the capture holder's thread

 private:
  void destroy(CommandFrame& f);
  Result<std::shared_ptr<Buffer>> arena_allocate(size_t size);
  void count(int64_t delta, size_t arena_delta = 0);
  std::shared_ptr<VulkanDevice> device_;
  mutable std::mutex stats_mu_;
  AllocatorStats stats_;
  std::string owner_;
  SubmitPolicy policy_;
  std::mutex mu_;
  std::vector<std::unique_ptr<CommandFrame>> idle_;
  bool graph_capture_ = true;
  std::mutex capture_mu_;  // held by the run that has the capture
  Capture capture_;
  std::atomic<std::thread::id> capture_thread_{};
  ArenaMode arena_mode_ = ArenaMode::kNone;  // of the capture holder
  size_t arena_next_ = 0;                    // replay: the next arena slot
};

class VulkanDevice final : public Device, public std::enable_shared_from_this<VulkanDevice> {
 public:
  static Result<std::shared_ptr<VulkanDevice>> open(std::shared_ptr<Instance> instance, VkPhysicalDevice physical,
                                                    DeviceInfo info, SubmitPolicy policy,
                                                    std::shared_ptr<CopyRouter> router,
                                                    std::shared_ptr<const KernelTable> kernels);
  ~VulkanDevice() override;

  const DeviceInfo& info() const override { return info_; }
  const Domain& compute_domain() const override { return domain_; }
  std::shared_ptr<Allocator> create_session_allocator(const std::string& owner) override;
  Result<std::shared_ptr<Allocator>> open_session(const SessionConfig& config) override;
  const KernelTable& kernels() const override { return *kernels_; }
  std::shared_ptr<void> begin_run(const RunStart& run) override;
  Status flush(void* run_state) override;

  VkDevice vk() const { return device_; }
  uint32_t queue_family() const { return queue_family_; }
  MemoryPool& memory() { return *memory_; }
  PipelineCache& pipelines() { return *pipelines_; }
  bool has_sync2() const { return barrier2_ != nullptr; }
  PFN_vkCmdPipelineBarrier2 barrier2() const { return barrier2_; }
  const SubmitPolicy& default_policy() const { return policy_; }

  // Submits `cb` on the device's queue and waits for `fence` (then resets it).
  Status submit_and_wait(VkCommandBuffer cb, VkFence fence, const std::string& what);
  // Where a tensor of this device lives; an error for any other tensor.
  Result<BufferRange> range_of(const Tensor& t) const;
  // A staged copy between this device's memory and the host: the router's entry for this
  // device, and how a kernel reads a small device tensor back (after flushing its run).
  Status copy(const Tensor& src, const Tensor& dst);

  // Counters since the device opened, for tests and `bulkhead devices`.
  uint64_t submits() const { return submits_.load(); }          // every submit, copies included
  uint64_t run_submits() const { return run_submits_.load(); }  // submits of runs' work
  void note_run_submit() { run_submits_.fetch_add(1); }
  uint64_t dispatches() const { return dispatches_.load(); }
  void note_dispatch() { dispatches_.fetch_add(1); }
  uint64_t replays() const { return replays_.load(); }  // submits of captured command buffers
  void note_replay() { replays_.fetch_add(1); }
  uint64_t validation_messages() const { return instance_->validation_messages(); }

 private:
  VulkanDevice() = default;

  std::shared_ptr<Instance> instance_;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  PFN_vkCmdPipelineBarrier2 barrier2_ = nullptr;
  VkDeviceSize storage_alignment_ = 1;  // minStorageBufferOffsetAlignment
  DeviceInfo info_;
  Domain domain_;
  SubmitPolicy policy_;
  std::shared_ptr<CopyRouter> router_;
  std::shared_ptr<const KernelTable> kernels_;
  std::unique_ptr<MemoryPool> memory_, staging_;
  std::unique_ptr<PipelineCache> pipelines_;
  std::mutex queue_mu_;
  // The transfer context: one command buffer for staged copies, used under its lock.
  std::mutex transfer_mu_;
  VkCommandPool transfer_pool_ = VK_NULL_HANDLE;
  VkCommandBuffer transfer_cb_ = VK_NULL_HANDLE;
  VkFence transfer_fence_ = VK_NULL_HANDLE;
  std::atomic<uint64_t> submits_{0}, run_submits_{0}, dispatches_{0}, replays_{0};
};

}  // namespace bulkhead::vulkan
