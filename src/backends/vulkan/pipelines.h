// Compute pipelines of one Vulkan device, built from the SPIR-V compiled at build time
// (shaders/*.comp → glslc → embedded words) the first time a kernel asks for one, then
// kept for the device's life and shared by every session on it: a pipeline is immutable,
// so sharing it is allowed by I3.
//
// Every pipeline's layout is one descriptor set of storage buffers (bindings 0..n-1, n
// read from the SPIR-V) and one push-constant range of kPushBytes.
//
// Thread-safety: get() locks; a returned Pipeline lives as long as the cache.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "bulkhead/status.h"

namespace bulkhead::vulkan {

constexpr uint32_t kPushBytes = 128;  // the minimum every Vulkan implementation offers

struct ShaderCode {
  const char* name;
  const uint32_t* words;
  size_t count;
};
// The shader compiled from shaders/<name>.comp, or nullptr (generated registry).
const ShaderCode* find_shader(const std::string& name);

struct Pipeline {
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  uint32_t bindings = 0;
  std::string name;
};

class PipelineCache {
 public:
  explicit PipelineCache(VkDevice device) : device_(device) {}
  ~PipelineCache();
  PipelineCache(const PipelineCache&) = delete;
  PipelineCache& operator=(const PipelineCache&) = delete;

  Result<const Pipeline*> get(const std::string& shader);
  size_t size() const;

 private:
  VkDevice device_;
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<Pipeline>> pipelines_;
};

}  // namespace bulkhead::vulkan
