// The Vulkan backend: every physical device the Vulkan loader reports (Mesa's lavapipe
// in tests, any GPU driver in the field) as `vulkan:N`. Kernels are GLSL compute shaders
// compiled to SPIR-V at build time; nodes it has no kernel for fall back to the next
// device in the session's list (`--device vulkan,cpu`).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backend/backend.h"

namespace bulkhead {

std::shared_ptr<Backend> make_vulkan_backend();

namespace vulkan {
// Counters of an open Vulkan device (tests, benchmarks): submits of runs' work, and
// validation messages seen (BULKHEAD_VULKAN_VALIDATION=1). False for other devices.
struct DeviceCounters {
  uint64_t run_submits = 0;
  uint64_t dispatches = 0;
  uint64_t replays = 0;  // submits of captured command buffers (graph capture)
  uint64_t all_submits = 0;
  uint64_t validation_messages = 0;
  uint64_t pipelines = 0;
  uint64_t memory_reserved = 0;
};
bool counters(const Device& device, DeviceCounters* out);
// The byte threshold `auto` submits at on a Vulkan device for a submit_policy value
// ("auto" → the device's default, "auto:8M" → 8 MiB); 0 when not an auto policy.
uint64_t auto_threshold(const Device& device, const std::string& policy);
}  // namespace vulkan

}  // namespace bulkhead
