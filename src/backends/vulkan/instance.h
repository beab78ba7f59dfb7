// The Vulkan instance of one backend object (one per Env that uses Vulkan), and the
// physical devices it sees.
//
// Validation: with BULKHEAD_VULKAN_VALIDATION=1 in the environment the Khronos
// validation layer is enabled (synchronization validation included) and every message
// of warning or error severity is printed to stderr and counted; tests assert the count
// stays zero. Asking for validation without the layer installed is an error.
//
// Ownership: held by shared_ptr by the backend and by every device opened from it, so
// the instance outlives its devices (I4). Thread-safety: immutable after create(); the
// message counter is atomic.
#pragma once

#include <vulkan/vulkan.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "bulkhead/status.h"

namespace bulkhead::vulkan {

class Instance {
 public:
  static Result<std::shared_ptr<Instance>> create();
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  VkInstance get() const { return instance_; }
  const std::vector<VkPhysicalDevice>& physical_devices() const { return physical_; }
  bool validation() const { return messenger_ != VK_NULL_HANDLE; }
  // Validation messages (warning or error) reported so far.
  uint64_t validation_messages() const { return messages_.load(); }

 private:
  Instance() = default;
  static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                   VkDebugUtilsMessageTypeFlagsEXT types,
                                                   const VkDebugUtilsMessengerCallbackDataEXT* data, void* self);

  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  std::vector<VkPhysicalDevice> physical_;
  std::atomic<uint64_t> messages_{0};
};

}  // namespace bulkhead::vulkan
