// Small helpers shared by the Vulkan backend: VkResult → Status.
#pragma once

#include <vulkan/vulkan.h>

#include <string>

#include "bulkhead/status.h"

namespace bulkhead::vulkan {

const char* result_name(VkResult r);

// An error Status for a failed Vulkan call: "<what>: VK_ERROR_OUT_OF_DEVICE_MEMORY".
inline Status vk_error(VkResult r, const std::string& what) {
  StatusCode code = (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
                        ? StatusCode::kResourceExhausted
                        : (r == VK_ERROR_DEVICE_LOST ? StatusCode::kUnavailable : StatusCode::kInternal);
  return Status(code, "vulkan: " + what + ": " + result_name(r));
}

}  // namespace bulkhead::vulkan

#define BH_VK(call, what)                                                \
  do {                                                                   \
    VkResult bh_vk_r_ = (call);                                          \
    if (bh_vk_r_ != VK_SUCCESS) return ::bulkhead::vulkan::vk_error(bh_vk_r_, what); \
  } while (0)
