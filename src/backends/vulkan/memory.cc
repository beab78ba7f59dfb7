#include "backends/vulkan/memory.h"

#include <algorithm>
#include <string>

#include "backends/vulkan/vk_util.h"

namespace bulkhead::vulkan {

constexpr VkDeviceSize kBlockSize = VkDeviceSize{64} << 20;

struct Block {
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize size = 0;
  void* mapped = nullptr;
  bool dedicated = false;
  std::map<VkDeviceSize, VkDeviceSize> free;  // offset -> size, coalesced
  size_t live = 0;                            // allocations out of this block
};

MemoryPool::MemoryPool(VkDevice device, VkPhysicalDevice physical, VkMemoryPropertyFlags properties, bool map,
                       VkDeviceSize alignment, const char* name)
    : device_(device), physical_(physical), properties_(properties), map_(map), alignment_(alignment), name_(name) {}

MemoryPool::~MemoryPool() {
  std::lock_guard<std::mutex> l(mu_);
  for (auto& b : blocks_) destroy_block(b.get());
  blocks_.clear();
}

void MemoryPool::destroy_block(Block* b) {
  if (b->mapped) vkUnmapMemory(device_, b->memory);
  if (b->buffer) vkDestroyBuffer(device_, b->buffer, nullptr);
  if (b->memory) vkFreeMemory(device_, b->memory, nullptr);
  reserved_ -= b->size;
}

Result<Block*> MemoryPool::new_block(VkDeviceSize size, bool dedicated) {
  auto b = std::make_unique<Block>();
  b->size = size;
  b->dedicated = dedicated;
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = size;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  BH_VK(vkCreateBuffer(device_, &bi, nullptr, &b->buffer), std::string("cannot create a ") + name_ + " buffer");
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device_, b->buffer, &req);
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(physical_, &mp);
  uint32_t type = UINT32_MAX;
  for (uint32_t i = 0; i < mp.memoryTypeCount && type == UINT32_MAX; ++i)
    if ((req.memoryTypeBits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & properties_) == properties_) type = i;
  if (type == UINT32_MAX) {
    vkDestroyBuffer(device_, b->buffer, nullptr);
    return unsupported(std::string("vulkan: the device has no memory type for ") + name_);
  }
  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = type;
  VkResult r = vkAllocateMemory(device_, &ai, nullptr, &b->memory);
  if (r != VK_SUCCESS) {
    vkDestroyBuffer(device_, b->buffer, nullptr);
    return vk_error(r, "cannot allocate " + std::to_string(size) + " bytes of " + name_);
  }
  reserved_ += size;
  auto fail = [&](VkResult e, const char* what) {
    destroy_block(b.get());
    return vk_error(e, what);
  };
  if ((r = vkBindBufferMemory(device_, b->buffer, b->memory, 0)) != VK_SUCCESS) return fail(r, "cannot bind memory");
  if (map_ && (r = vkMapMemory(device_, b->memory, 0, VK_WHOLE_SIZE, 0, &b->mapped)) != VK_SUCCESS)
    return fail(r, "cannot map memory");
  b->free[0] = size;
  blocks_.push_back(std::move(b));
  return blocks_.back().get();
}

Result<Allocation*> MemoryPool::allocate(VkDeviceSize size) {
  size = std::max<VkDeviceSize>((size + alignment_ - 1) / alignment_ * alignment_, alignment_);
  std::lock_guard<std::mutex> l(mu_);
  Block* block = nullptr;
  VkDeviceSize offset = 0;
  if (size > kBlockSize / 4) {
    BH_ASSIGN_OR_RETURN(block, new_block(size, true));
  } else {
    for (auto& b : blocks_) {
      if (b->dedicated) continue;
      for (auto& [off, n] : b->free)
        if (n >= size) {
          block = b.get();
          offset = off;
          break;
        }
      if (block) break;
    }
    if (!block) {
      BH_ASSIGN_OR_RETURN(block, new_block(kBlockSize, false));
    }
  }
  auto it = block->free.find(offset);
  VkDeviceSize left = it->second - size;
  block->free.erase(it);
  if (left) block->free[offset + size] = left;
  block->live++;
  in_use_ += size;
  auto* a = new Allocation{block->buffer, offset, size,
                           block->mapped ? static_cast<char*>(block->mapped) + offset : nullptr, block};
  return a;
}

void MemoryPool::free(Allocation* a) {
  if (!a) return;
  std::lock_guard<std::mutex> l(mu_);
  Block* b = a->block;
  in_use_ -= a->size;
  b->live--;
  // Give the range back, merged with free neighbours.
  VkDeviceSize off = a->offset, n = a->size;
  auto next = b->free.lower_bound(off);
  if (next != b->free.end() && off + n == next->first) {
    n += next->second;
    next = b->free.erase(next);
  }
  if (next != b->free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == off) {
      off = prev->first;
      n += prev->second;
      b->free.erase(prev);
    }
  }
  b->free[off] = n;
  delete a;
  if (b->dedicated && b->live == 0) {
    destroy_block(b);
    blocks_.erase(std::find_if(blocks_.begin(), blocks_.end(), [b](auto& p) { return p.get() == b; }));
  }
}

uint64_t MemoryPool::bytes_reserved() const {
  std::lock_guard<std::mutex> l(mu_);
  return reserved_;
}

uint64_t MemoryPool::bytes_in_use() const {
  std::lock_guard<std::mutex> l(mu_);
  return in_use_;
}

}  // namespace bulkhead::vulkan
