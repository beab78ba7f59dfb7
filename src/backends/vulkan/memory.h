// Device memory for the Vulkan backend: a pool of large VkDeviceMemory blocks, each
// spanned by one VkBuffer, handed out as aligned sub-ranges (an Allocation). Tensors
// bind (block buffer, offset, size) in descriptors, so no VkBuffer is created per
// tensor. Requests over a quarter of the block size get a block of their own, which is
// freed with them.
//
// Ownership: the device owns its pools; a pool frees its blocks when destroyed (after
// every Buffer, which keeps the device alive). Thread-safety: allocate/free lock.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "bulkhead/status.h"

namespace bulkhead::vulkan {

struct Block;

// One sub-range; Buffer::handle() of a Vulkan tensor points to one.
struct Allocation {
  VkBuffer buffer = VK_NULL_HANDLE;  // the block's buffer
  VkDeviceSize offset = 0;           // of this range in the block
  VkDeviceSize size = 0;
  void* mapped = nullptr;            // CPU address of the range (host-visible pools only)
  Block* block = nullptr;
  bool in_arena = false;             // owned by a session's capture arena, not by its Buffer
};

class MemoryPool {
 public:
  // `properties`: the memory property flags wanted (the first type that has them all is
  // used); `map`: keep blocks mapped (host-visible pools).
  MemoryPool(VkDevice device, VkPhysicalDevice physical, VkMemoryPropertyFlags properties, bool map,
             VkDeviceSize alignment, const char* name);
  ~MemoryPool();
  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;

  Result<Allocation*> allocate(VkDeviceSize size);
  void free(Allocation* a);
  uint64_t bytes_reserved() const;  // in blocks
  uint64_t bytes_in_use() const;    // handed out

 private:
  Result<Block*> new_block(VkDeviceSize size, bool dedicated);  // requires mu_
  void destroy_block(Block* b);                                 // requires mu_

  VkDevice device_;
  VkPhysicalDevice physical_;
  VkMemoryPropertyFlags properties_;
  bool map_;
  VkDeviceSize alignment_;
  const char* name_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Block>> blocks_;
  uint64_t reserved_ = 0, in_use_ = 0;
};

}  // namespace bulkhead::vulkan
