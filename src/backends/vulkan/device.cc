#include "backends/vulkan/device.h"

#include <cstring>

#include "backends/vulkan/recorder.h"
#include "backends/vulkan/vk_util.h"

namespace bulkhead::vulkan {
namespace {

// How long a submit may take before the device is declared hung.
constexpr uint64_t kFenceSliceNs = uint64_t{1} * 1000 * 1000 * 1000;

}  // namespace

// ---------------------------------------------------------------- SessionAllocator

SessionAllocator::SessionAllocator(std::shared_ptr<VulkanDevice> device, std::string owner, SubmitPolicy policy,
                                   bool graph_capture)
    : device_(std::move(device)), owner_(std::move(owner)), policy_(std::move(policy)), graph_capture_(graph_capture) {}

SessionAllocator::~SessionAllocator() {
  for (auto& f : idle_) destroy(*f);
  for (auto& f : capture_.segments) destroy(*f);
  for (Allocation* a : capture_.arena) {
    a->in_arena = false;
    device_->memory().free(a);
  }
}

Capture* SessionAllocator::try_take_capture() {
  if (!graph_capture_ || !capture_mu_.try_lock()) return nullptr;
  if (capture_.state == Capture::State::kOff) {
    capture_mu_.unlock();
    return nullptr;
  }
  capture_thread_.store(std::this_thread::get_id());
  return &capture_;
}

void SessionAllocator::give_back_capture() {
  arena_mode_ = ArenaMode::kNone;
  capture_thread_.store(std::thread::id());
  capture_mu_.unlock();
}

void SessionAllocator::set_arena_mode(ArenaMode mode) {
  arena_mode_ = mode;
  arena_next_ = 0;
}

Result<std::shared_ptr<Buffer>> SessionAllocator::arena_allocate(size_t size) {
  Allocation* a = nullptr;
  if (arena_mode_ == ArenaMode::kRecord) {
    BH_ASSIGN_OR_RETURN(a, device_->memory().allocate(size));
    a->in_arena = true;
    capture_.arena.push_back(a);
    count(0, a->size);
  } else {
    // Replay: the recorded run's allocation at this position — same size, or the run
    // is not the one recorded.
    if (arena_next_ >= capture_.arena.size() || capture_.arena[arena_next_]->size < size)
      return internal_error("vulkan: graph capture: this run allocates differently from the recorded one");
    a = capture_.arena[arena_next_++];
  }
  count(static_cast<int64_t>(size));
  return std::make_shared<Buffer>(shared_from_this(), domain(), nullptr, size, a);
}

void SessionAllocator::count(int64_t delta, size_t arena_delta) {
  std::lock_guard<std::mutex> l(stats_mu_);
  stats_.in_use = static_cast<size_t>(static_cast<int64_t>(stats_.in_use) + delta);
  stats_.peak = std::max(stats_.peak, stats_.in_use);
  stats_.cached += arena_delta;
}

AllocatorStats SessionAllocator::stats() const {
  std::lock_guard<std::mutex> l(stats_mu_);
  return stats_;
}

void SessionAllocator::destroy(CommandFrame& f) {
  VkDevice vk = device_->vk();
  for (VkDescriptorPool p : f.descriptor_pools) vkDestroyDescriptorPool(vk, p, nullptr);
  if (f.fence) vkDestroyFence(vk, f.fence, nullptr);
  if (f.pool) vkDestroyCommandPool(vk, f.pool, nullptr);  // frees its command buffer
}

const Domain& SessionAllocator::domain() const { return device_->compute_domain(); }

Result<std::shared_ptr<Buffer>> SessionAllocator::allocate(size_t size, size_t alignment) {
  // The run holding the capture allocates from its arena (only on its own thread: a
  // concurrent uncaptured run of this session allocates normally).
  if (arena_mode_ != ArenaMode::kNone && capture_thread_.load() == std::this_thread::get_id())
    return arena_allocate(size);
  BH_ASSIGN_OR_RETURN(Allocation * a, device_->memory().allocate(size));
  count(static_cast<int64_t>(size));
  return std::make_shared<Buffer>(shared_from_this(), domain(), nullptr, size, a);
}

void SessionAllocator::release(void*, void* handle, size_t size) {
  auto* a = static_cast<Allocation*>(handle);
  count(-static_cast<int64_t>(size));
  if (a && a->in_arena) return;  // the capture keeps it for the next replay
  device_->memory().free(a);
}

Result<std::unique_ptr<CommandFrame>> SessionAllocator::acquire_frame() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!idle_.empty()) {
      auto f = std::move(idle_.back());
      idle_.pop_back();
      return f;
    }
  }
  auto f = std::make_unique<CommandFrame>();
  VkDevice vk = device_->vk();
  auto fail = [&](VkResult r, const char* what) {
    destroy(*f);
    return vk_error(r, what);
  };
  VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pi.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
  pi.queueFamilyIndex = device_->queue_family();
  if (VkResult r = vkCreateCommandPool(vk, &pi, nullptr, &f->pool); r != VK_SUCCESS)
    return fail(r, "cannot create a command pool");
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = f->pool;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  if (VkResult r = vkAllocateCommandBuffers(vk, &ai, &f->cb); r != VK_SUCCESS)
    return fail(r, "cannot allocate a command buffer");
  VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  if (VkResult r = vkCreateFence(vk, &fi, nullptr, &f->fence); r != VK_SUCCESS) return fail(r, "cannot create a fence");
  return f;
}

void SessionAllocator::return_frame(std::unique_ptr<CommandFrame> frame) {
  std::lock_guard<std::mutex> l(mu_);
  idle_.push_back(std::move(frame));
}

// ---------------------------------------------------------------- VulkanDevice

Result<std::shared_ptr<VulkanDevice>> VulkanDevice::open(std::shared_ptr<Instance> instance, VkPhysicalDevice physical,
                                                         DeviceInfo info, SubmitPolicy policy,
                                                         std::shared_ptr<CopyRouter> router,
                                                         std::shared_ptr<const KernelTable> kernels) {
  std::shared_ptr<VulkanDevice> d(new VulkanDevice());
  d->instance_ = std::move(instance);
  d->physical_ = physical;
  d->info_ = std::move(info);
  d->policy_ = std::move(policy);
  d->kernels_ = std::move(kernels);

  uint32_t nq = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> families(nq);
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &nq, families.data());
  uint32_t family = UINT32_MAX;
  for (uint32_t i = 0; i < nq && family == UINT32_MAX; ++i)
    if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) family = i;
  if (family == UINT32_MAX) return unsupported("vulkan: device '" + d->info_.name + "' has no compute queue");
  d->queue_family_ = family;

  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(physical, &props);
  VkPhysicalDeviceVulkan13Features f13{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  const bool v13 = props.apiVersion >= VK_API_VERSION_1_3;
  if (v13) f2.pNext = &f13;
  vkGetPhysicalDeviceFeatures2(physical, &f2);
  VkPhysicalDeviceVulkan13Features enable13{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
  enable13.synchronization2 = v13 && f13.synchronization2;

  float priority = 1.0f;
  VkDeviceQueueCreateInfo qi{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qi.queueFamilyIndex = family;
  qi.queueCount = 1;
  qi.pQueuePriorities = &priority;
  VkDeviceCreateInfo ci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  ci.queueCreateInfoCount = 1;
  ci.pQueueCreateInfos = &qi;
  if (enable13.synchronization2) ci.pNext = &enable13;
  BH_VK(vkCreateDevice(physical, &ci, nullptr, &d->device_), "cannot create a logical device");
  vkGetDeviceQueue(d->device_, family, 0, &d->queue_);
  if (enable13.synchronization2)
    d->barrier2_ = reinterpret_cast<PFN_vkCmdPipelineBarrier2>(vkGetDeviceProcAddr(d->device_, "vkCmdPipelineBarrier2"));

  const VkDeviceSize align = std::max<VkDeviceSize>(256, props.limits.minStorageBufferOffsetAlignment);
  d->storage_alignment_ = std::max<VkDeviceSize>(1, props.limits.minStorageBufferOffsetAlignment);
  d->memory_ = std::make_unique<MemoryPool>(d->device_, physical, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, false, align,
                                            "device-local memory");
  d->staging_ = std::make_unique<MemoryPool>(d->device_, physical,
                                             VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                                             true, align, "staging memory");
  d->pipelines_ = std::make_unique<PipelineCache>(d->device_);

  VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = family;
  BH_VK(vkCreateCommandPool(d->device_, &pi, nullptr, &d->transfer_pool_), "cannot create a command pool");
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = d->transfer_pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  BH_VK(vkAllocateCommandBuffers(d->device_, &ai, &d->transfer_cb_), "cannot allocate a command buffer");
  VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  BH_VK(vkCreateFence(d->device_, &fi, nullptr, &d->transfer_fence_), "cannot create a fence");

  d->domain_.id = Domain::new_id();
  d->domain_.backend = d->info_.backend;
  d->domain_.device = d->info_.ordinal;
  d->domain_.kind = MemoryKind::kDeviceLocal;
  d->router_ = std::move(router);
  std::weak_ptr<VulkanDevice> weak = d;
  auto copy = [weak](const Tensor& src, const Tensor& dst) -> Status {
    auto dev = weak.lock();
    if (!dev) return Status(StatusCode::kUnavailable, "vulkan: the device was closed");
    return dev->copy(src, dst);
  };
  const std::string owner = d->info_.backend + ":" + std::to_string(d->info_.ordinal);
  d->router_->add(Domain::host(), d->domain_, copy, owner);
  d->router_->add(d->domain_, Domain::host(), copy, owner);
  d->router_->add(d->domain_, d->domain_, copy, owner);
  return d;
}

VulkanDevice::~VulkanDevice() {
  if (router_) router_->remove_domain(domain_.id);
  if (!device_) return;
  vkDeviceWaitIdle(device_);
  if (transfer_fence_) vkDestroyFence(device_, transfer_fence_, nullptr);
  if (transfer_pool_) vkDestroyCommandPool(device_, transfer_pool_, nullptr);
  pipelines_.reset();
  staging_.reset();
  memory_.reset();
  vkDestroyDevice(device_, nullptr);
}

std::shared_ptr<Allocator> VulkanDevice::create_session_allocator(const std::string& owner) {
  return std::make_shared<SessionAllocator>(shared_from_this(), info_.backend + ":" + std::to_string(info_.ordinal) + ":" + owner,
                                            policy_);
}

Result<std::shared_ptr<Allocator>> VulkanDevice::open_session(const SessionConfig& config) {
  SubmitPolicy policy = policy_;
  if (!config.submit_policy.empty()) {
    BH_ASSIGN_OR_RETURN(policy, parse_policy(config.submit_policy, "session option 'submit_policy'"));
  }
  return std::shared_ptr<Allocator>(std::make_shared<SessionAllocator>(
      shared_from_this(), info_.backend + ":" + std::to_string(info_.ordinal) + ":" + config.owner, policy,
      config.graph_capture));
}

std::shared_ptr<void> VulkanDevice::begin_run(const RunStart& run) {
  auto* session = dynamic_cast<SessionAllocator*>(run.session_allocator);
  if (!session) return nullptr;
  return std::make_shared<RunState>(std::static_pointer_cast<SessionAllocator>(session->shared_from_this()),
                                    run.capturable);
}

Status VulkanDevice::flush(void* run_state) {
  return run_state ? static_cast<RunState*>(run_state)->flush() : Status::ok();
}

Status VulkanDevice::submit_and_wait(VkCommandBuffer cb, VkFence fence, const std::string& what) {
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cb;
  {
    std::lock_guard<std::mutex> l(queue_mu_);
    BH_VK(vkQueueSubmit(queue_, 1, &si, fence), "cannot submit " + what);
  }
  submits_.fetch_add(1);
  // A slow device is not a broken one: wait as long as the work takes, a slice at a time,
  // until it is done or the driver says the device is lost. (The work's memory cannot be
  // given back while the device may still use it, so no time limit cuts this wait short;
  // run time limits are checked between nodes.)
  VkResult r;
  do {
    r = vkWaitForFences(device_, 1, &fence, VK_TRUE, kFenceSliceNs);
  } while (r == VK_TIMEOUT);
  if (r == VK_ERROR_DEVICE_LOST)
    return Status(StatusCode::kUnavailable, "vulkan: device '" + info_.name + "' was lost (VK_ERROR_DEVICE_LOST) while running " + what);
  if (r != VK_SUCCESS) return vk_error(r, "waiting for " + what);
  BH_VK(vkResetFences(device_, 1, &fence), "cannot reset a fence");
  return Status::ok();
}

Result<BufferRange> VulkanDevice::range_of(const Tensor& t) const {
  if (!t.buffer() || t.domain() != domain_ || !t.buffer()->handle())
    return internal_error("vulkan: tensor " + t.describe() + " is not in " + domain_.to_string());
  auto* a = static_cast<const Allocation*>(t.buffer()->handle());
  const VkDeviceSize n = std::max<VkDeviceSize>(t.nbytes(), 4);
  if (t.offset() + t.nbytes() > a->size) return internal_error("vulkan: tensor " + t.describe() + " overruns its buffer");
  // A storage-buffer descriptor must start at a multiple of the device's alignment: a
  // view at another byte offset cannot be bound (kernels make such views copies).
  if ((a->offset + t.offset()) % storage_alignment_ != 0)
    return internal_error("vulkan: tensor " + t.describe() + " is a view at byte offset " + std::to_string(t.offset()) +
                          ", not a multiple of the device's storage-buffer alignment " + std::to_string(storage_alignment_));
  return BufferRange{a->buffer, a->offset + t.offset(), std::min<VkDeviceSize>(n, a->size - t.offset())};
}

Status VulkanDevice::copy(const Tensor& src, const Tensor& dst) {
  if (src.nbytes() != dst.nbytes())
    return invalid_argument("copy " + src.describe() + " -> " + dst.describe() + ": sizes differ");
  const VkDeviceSize n = src.nbytes();
  if (n == 0) return Status::ok();
  const bool from_host = src.domain().is_host(), to_host = dst.domain().is_host();
  if (from_host && !src.raw()) return invalid_argument("copy: the host tensor has no memory");
  if (to_host && !dst.raw()) return invalid_argument("copy: the host tensor has no memory");
  Allocation* staging = nullptr;
  if (from_host || to_host) {
    BH_ASSIGN_OR_RETURN(staging, staging_->allocate(n));
  }
  struct Free {
    MemoryPool& pool;
    Allocation* a;
    ~Free() { pool.free(a); }
  } free_staging{*staging_, staging};
  BufferRange s{}, d{};
  if (from_host) {
    std::memcpy(staging->mapped, src.raw(), n);
    s = {staging->buffer, staging->offset, n};
  } else {
    BH_ASSIGN_OR_RETURN(s, range_of(src));
  }
  if (to_host) {
    d = {staging->buffer, staging->offset, n};
  } else {
    BH_ASSIGN_OR_RETURN(d, range_of(dst));
  }
  std::lock_guard<std::mutex> l(transfer_mu_);
  BH_VK(vkResetCommandBuffer(transfer_cb_, 0), "cannot reset the transfer command buffer");
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  BH_VK(vkBeginCommandBuffer(transfer_cb_, &bi), "cannot begin the transfer command buffer");
  // After every earlier write on the queue (runs' shaders, earlier copies)...
  VkMemoryBarrier before{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  before.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  before.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  vkCmdPipelineBarrier(transfer_cb_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &before, 0, nullptr, 0, nullptr);
  VkBufferCopy region{s.offset, d.offset, n};
  vkCmdCopyBuffer(transfer_cb_, s.buffer, d.buffer, 1, &region);
  // ...and, for a download, visible to the host once the fence signals.
  VkMemoryBarrier after{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  after.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  after.dstAccessMask = to_host ? VK_ACCESS_HOST_READ_BIT : VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  vkCmdPipelineBarrier(transfer_cb_, VK_PIPELINE_STAGE_TRANSFER_BIT,
                       to_host ? VK_PIPELINE_STAGE_HOST_BIT : VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &after, 0,
                       nullptr, 0, nullptr);
  BH_VK(vkEndCommandBuffer(transfer_cb_), "cannot end the transfer command buffer");
  BH_RETURN_IF_ERROR(submit_and_wait(transfer_cb_, transfer_fence_, "a copy"));
  if (to_host) std::memcpy(dst.raw(), staging->mapped, n);
  return Status::ok();
}

}  // namespace bulkhead::vulkan
