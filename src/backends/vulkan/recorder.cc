#include "backends/vulkan/recorder.h"

#include <algorithm>
#include <cstring>

#include "backends/vulkan/vk_util.h"

namespace bulkhead::vulkan {
namespace {

constexpr uint32_t kSetsPerPool = 256;
constexpr uint32_t kMaxBindings = 8;

}  // namespace

RunState::RunState(std::shared_ptr<SessionAllocator> session, bool capturable) : session_(std::move(session)) {
  if (capturable && (capture_ = session_->try_take_capture())) {
    mode_ = capture_->state == Capture::State::kReady ? Mode::kReplaying : Mode::kRecording;
    session_->set_arena_mode(mode_ == Mode::kReplaying ? SessionAllocator::ArenaMode::kReplay
                                                       : SessionAllocator::ArenaMode::kRecord);
  }
  if (mode_ == Mode::kReplaying) return;  // submits the recorded command buffers: no frame
  auto f = session_->acquire_frame();
  if (f.is_ok()) frame_ = std::move(f).value();
  else error_ = f.status();
}

RunState::~RunState() {
  if (frame_ && recording_) {
    // A run that failed part-way: finish what was recorded so nothing is in flight when
    // the buffers and the frame go back.
    failed_ = true;
    (void)flush();
  }
  if (capture_) end_capture();
  if (frame_) session_->return_frame(std::move(frame_));
}

void RunState::end_capture() {
  if (mode_ == Mode::kRecording) {
    // Kept only when the whole run was recorded and completed.
    capture_->state = failed_ || capture_->dispatches.empty() ? Capture::State::kOff : Capture::State::kReady;
  } else if (failed_ || replay_pending_) {
    capture_->state = Capture::State::kOff;
  }
  session_->give_back_capture();
  capture_ = nullptr;
}

Status RunState::replay_dispatch(const Pipeline& p, const std::vector<BufferRange>& ranges, const void* push,
                                 uint32_t push_bytes, const uint32_t groups[3]) {
  const size_t i = static_cast<size_t>(dispatches_);
  const uint8_t* bytes = static_cast<const uint8_t*>(push);
  bool same = i < capture_->dispatches.size();
  if (same) {
    const Capture::Dispatch& d = capture_->dispatches[i];
    same = d.pipeline == &p && d.ranges.size() == ranges.size() && d.push.size() == push_bytes &&
           std::equal(d.push.begin(), d.push.end(), bytes) && d.groups[0] == groups[0] && d.groups[1] == groups[1] &&
           d.groups[2] == groups[2];
    for (size_t b = 0; same && b < ranges.size(); ++b)
      same = d.ranges[b].buffer == ranges[b].buffer && d.ranges[b].offset == ranges[b].offset &&
             d.ranges[b].size == ranges[b].size;
  }
  if (!same) {
    failed_ = true;
    return internal_error("vulkan: graph capture: dispatch " + std::to_string(i) + " ('" + p.name +
                          "') differs from the recorded run; capture is now off for this session");
  }
  ++dispatches_;
  replay_pending_ = true;
  return Status::ok();
}

Status RunState::replay_flush() {
  if (!replay_pending_) return Status::ok();
  if (segment_ >= capture_->segments.size() || capture_->segment_end[segment_] != dispatches_) {
    failed_ = true;
    return internal_error("vulkan: graph capture: the run reached the host at another point than the recorded one");
  }
  VulkanDevice& dev = device();
  Status s = dev.submit_and_wait(capture_->segments[segment_]->cb, capture_->segments[segment_]->fence,
                                 "a replayed run");
  ++submits_;
  dev.note_run_submit();
  dev.note_replay();
  ++segment_;
  replay_pending_ = false;
  if (!s.is_ok()) failed_ = true;
  return s;
}

void RunState::barrier(VkPipelineStageFlags2 src_stage, VkAccessFlags2 src_access, VkPipelineStageFlags2 dst_stage,
                       VkAccessFlags2 dst_access) {
  VulkanDevice& dev = device();
  if (dev.has_sync2()) {
    VkMemoryBarrier2 mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER_2};
    mb.srcStageMask = src_stage;
    mb.srcAccessMask = src_access;
    mb.dstStageMask = dst_stage;
    mb.dstAccessMask = dst_access;
    VkDependencyInfo di{VK_STRUCTURE_TYPE_DEPENDENCY_INFO};
    di.memoryBarrierCount = 1;
    di.pMemoryBarriers = &mb;
    dev.barrier2()(frame_->cb, &di);
  } else {
    // The synchronization2 bits used here all have equal legacy values.
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = static_cast<VkAccessFlags>(src_access);
    mb.dstAccessMask = static_cast<VkAccessFlags>(dst_access);
    vkCmdPipelineBarrier(frame_->cb, static_cast<VkPipelineStageFlags>(src_stage),
                         static_cast<VkPipelineStageFlags>(dst_stage), 0, 1, &mb, 0, nullptr, 0, nullptr);
  }
}

Status RunState::begin() {
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  // A recorded command buffer is submitted again by later runs.
  bi.flags = mode_ == Mode::kRecording ? 0 : VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  BH_VK(vkBeginCommandBuffer(frame_->cb, &bi), "cannot begin a command buffer");
  recording_ = true;
  // Order this batch after everything submitted before it on the queue: uploads
  // (transfer writes) and earlier batches (shader writes).
  barrier(VK_PIPELINE_STAGE_2_TRANSFER_BIT | VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT,
          VK_ACCESS_2_TRANSFER_WRITE_BIT | VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT, VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT,
          VK_ACCESS_2_SHADER_STORAGE_READ_BIT | VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT);
  written_.clear();
  read_.clear();
  return Status::ok();
}

Result<VkDescriptorSet> RunState::descriptor_set(const Pipeline& p) {
  VkDevice vk = device().vk();
  for (;;) {
    if (frame_->descriptor_pool_in_use == frame_->descriptor_pools.size()) {
      VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSetsPerPool * kMaxBindings};
      VkDescriptorPoolCreateInfo ci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
      ci.maxSets = kSetsPerPool;
      ci.poolSizeCount = 1;
      ci.pPoolSizes = &size;
      VkDescriptorPool pool;
      BH_VK(vkCreateDescriptorPool(vk, &ci, nullptr, &pool), "cannot create a descriptor pool");
      frame_->descriptor_pools.push_back(pool);
    }
    VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorPool = frame_->descriptor_pools[frame_->descriptor_pool_in_use];
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &p.set_layout;
    VkDescriptorSet set;
    VkResult r = vkAllocateDescriptorSets(vk, &ai, &set);
    if (r == VK_SUCCESS) return set;
    if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL) return vk_error(r, "cannot allocate a descriptor set");
    frame_->descriptor_pool_in_use++;  // this pool is full: the next one
  }
}

Status RunState::dispatch(const std::string& shader, const std::vector<Bind>& binds, const void* push,
                          uint32_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz) {
  if (mode_ != Mode::kReplaying && !frame_) return error_;
  VulkanDevice& dev = device();
  BH_ASSIGN_OR_RETURN(const Pipeline* p, dev.pipelines().get(shader));
  if (binds.size() != p->bindings || binds.size() > kMaxBindings)
    return internal_error("vulkan: shader '" + shader + "' takes " + std::to_string(p->bindings) + " buffers, " +
                          std::to_string(binds.size()) + " given");
  if (push_bytes > kPushBytes) return internal_error("vulkan: push constants of '" + shader + "' are too large");
  if (gx == 0 || gy == 0 || gz == 0) return Status::ok();  // nothing to do
  std::vector<VkDescriptorBufferInfo> infos(binds.size());
  std::vector<BufferRange> ranges(binds.size());
  for (size_t i = 0; i < binds.size(); ++i) {
    BH_ASSIGN_OR_RETURN(ranges[i], dev.range_of(*binds[i].tensor));
    infos[i] = {ranges[i].buffer, ranges[i].offset, ranges[i].size};
  }
  const uint32_t groups[3] = {gx, gy, gz};
  if (mode_ == Mode::kReplaying) {
    BH_RETURN_IF_ERROR(replay_dispatch(*p, ranges, push, push_bytes, groups));
    dev.note_dispatch();
    // The policy's submit points were recorded: replay submits where the recording did.
    const size_t i = static_cast<size_t>(dispatches_);
    if (segment_ < capture_->segment_end.size() && capture_->segment_end[segment_] == i &&
        (policy().policy == Policy::kSplit || policy().policy == Policy::kAuto))
      return replay_flush();
    return Status::ok();
  }
  if (mode_ == Mode::kRecording) {
    Capture::Dispatch d;
    d.pipeline = p;
    d.ranges = ranges;
    d.push.assign(static_cast<const uint8_t*>(push), static_cast<const uint8_t*>(push) + push_bytes);
    std::copy(groups, groups + 3, d.groups);
    capture_->dispatches.push_back(std::move(d));
  }
  if (!recording_) BH_RETURN_IF_ERROR(begin());
  // single / auto: a barrier only where this dispatch depends on an earlier one of the
  // batch (read or overwrite after write, or overwrite after read).
  bool hazard = false;
  for (const Bind& b : binds) {
    const Buffer* buf = b.tensor->buffer().get();
    hazard = hazard || written_.count(buf) || (b.written && read_.count(buf));
  }
  if (hazard && policy().policy != Policy::kPerDispatch) {
    barrier(VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT, VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT,
            VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT,
            VK_ACCESS_2_SHADER_STORAGE_READ_BIT | VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT);
    written_.clear();
    read_.clear();
  }
  BH_ASSIGN_OR_RETURN(VkDescriptorSet set, descriptor_set(*p));
  std::vector<VkWriteDescriptorSet> writes(binds.size());
  for (size_t i = 0; i < binds.size(); ++i) {
    writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstSet = set;
    writes[i].dstBinding = static_cast<uint32_t>(i);
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  vkUpdateDescriptorSets(dev.vk(), static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
  vkCmdBindPipeline(frame_->cb, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipeline);
  vkCmdBindDescriptorSets(frame_->cb, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, 1, &set, 0, nullptr);
  uint8_t constants[kPushBytes] = {};
  if (push_bytes) std::memcpy(constants, push, push_bytes);
  vkCmdPushConstants(frame_->cb, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushBytes, constants);
  vkCmdDispatch(frame_->cb, gx, gy, gz);
  ++dispatches_;
  dev.note_dispatch();
  for (const Bind& b : binds) {
    in_flight_.push_back(b.tensor->buffer());
    (b.written ? written_ : read_).insert(b.tensor->buffer().get());
    if (b.written) bytes_since_submit_ += b.tensor->nbytes();
  }
  switch (policy().policy) {
    case Policy::kSingle: break;
    case Policy::kPerDispatch:
      // Every dispatch its own pass: all its writes complete before anything after it.
      barrier(VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT, VK_ACCESS_2_MEMORY_WRITE_BIT, VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT,
              VK_ACCESS_2_MEMORY_READ_BIT | VK_ACCESS_2_MEMORY_WRITE_BIT);
      break;
    case Policy::kSplit: return flush();
    case Policy::kAuto:
      if (bytes_since_submit_ >= policy().auto_bytes) return flush();
      break;
  }
  return Status::ok();
}

Status RunState::flush() {
  if (mode_ == Mode::kReplaying) return replay_flush();
  if (!frame_) return error_;
  if (!recording_) return Status::ok();
  recording_ = false;
  VulkanDevice& dev = device();
  BH_VK(vkEndCommandBuffer(frame_->cb), "cannot end a command buffer");
  Status s = dev.submit_and_wait(frame_->cb, frame_->fence, "a run's work");
  ++submits_;
  dev.note_run_submit();
  bytes_since_submit_ = 0;
  if (!s.is_ok()) {
    // The work may still be running (a hung device): its buffers and frame must never be
    // reused, so they are given up rather than returned.
    new std::vector<std::shared_ptr<Buffer>>(std::move(in_flight_));
    (void)frame_.release();
    error_ = s;
    failed_ = true;
    return s;
  }
  in_flight_.clear();  // completed: the memory may be reused
  if (mode_ == Mode::kRecording) {
    // Kept for replay, with its descriptor sets; the next dispatches go to a new frame.
    capture_->segments.push_back(std::move(frame_));
    capture_->segment_end.push_back(static_cast<size_t>(dispatches_));
    auto f = session_->acquire_frame();
    if (!f.is_ok()) {
      failed_ = true;
      error_ = f.status();
      return f.status();
    }
    frame_ = std::move(f).value();
    return Status::ok();
  }
  vkResetCommandPool(dev.vk(), frame_->pool, 0);
  for (VkDescriptorPool pool : frame_->descriptor_pools) vkResetDescriptorPool(dev.vk(), pool, 0);
  frame_->descriptor_pool_in_use = 0;
  return s;
}

}  // namespace bulkhead::vulkan
