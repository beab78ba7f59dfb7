#include "backends/vulkan/pipelines.h"

#include <algorithm>
#include <vector>

#include "backends/vulkan/vk_util.h"

namespace bulkhead::vulkan {
namespace {

// The number of descriptor bindings a SPIR-V module declares: one more than the largest
// `Binding` decoration (OpDecorate = 71, Binding = 33).
uint32_t count_bindings(const ShaderCode& code) {
  uint32_t n = 0;
  for (size_t i = 5; i < code.count;) {
    const uint32_t words = code.words[i] >> 16, op = code.words[i] & 0xffff;
    if (words == 0) break;
    if (op == 71 && words >= 4 && code.words[i + 2] == 33) n = std::max(n, code.words[i + 3] + 1);
    i += words;
  }
  return n;
}

}  // namespace

PipelineCache::~PipelineCache() {
  for (auto& [name, p] : pipelines_) {
    if (p->pipeline) vkDestroyPipeline(device_, p->pipeline, nullptr);
    if (p->layout) vkDestroyPipelineLayout(device_, p->layout, nullptr);
    if (p->set_layout) vkDestroyDescriptorSetLayout(device_, p->set_layout, nullptr);
  }
}

size_t PipelineCache::size() const {
  std::lock_guard<std::mutex> l(mu_);
  return pipelines_.size();
}

Result<const Pipeline*> PipelineCache::get(const std::string& shader) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = pipelines_.find(shader);
  if (it != pipelines_.end()) return it->second.get();
  const ShaderCode* code = find_shader(shader);
  if (!code) return internal_error("vulkan: no shader named '" + shader + "' was built");
  auto p = std::make_unique<Pipeline>();
  p->name = shader;
  p->bindings = count_bindings(*code);
  // Built into `p`, which the destructor cleans up even when a step fails part-way.
  auto cleanup = [&] {
    if (p->layout) vkDestroyPipelineLayout(device_, p->layout, nullptr);
    if (p->set_layout) vkDestroyDescriptorSetLayout(device_, p->set_layout, nullptr);
  };
  std::vector<VkDescriptorSetLayoutBinding> bindings(p->bindings);
  for (uint32_t b = 0; b < p->bindings; ++b) {
    bindings[b].binding = b;
    bindings[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[b].descriptorCount = 1;
    bindings[b].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo dl{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  dl.bindingCount = p->bindings;
  dl.pBindings = bindings.data();
  BH_VK(vkCreateDescriptorSetLayout(device_, &dl, nullptr, &p->set_layout), "cannot create a descriptor set layout");
  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushBytes};
  VkPipelineLayoutCreateInfo pl{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pl.setLayoutCount = 1;
  pl.pSetLayouts = &p->set_layout;
  pl.pushConstantRangeCount = 1;
  pl.pPushConstantRanges = &range;
  VkResult r = vkCreatePipelineLayout(device_, &pl, nullptr, &p->layout);
  if (r != VK_SUCCESS) {
    cleanup();
    return vk_error(r, "cannot create a pipeline layout");
  }
  VkShaderModuleCreateInfo sm{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  sm.codeSize = code->count * 4;
  sm.pCode = code->words;
  VkShaderModule module = VK_NULL_HANDLE;
  if ((r = vkCreateShaderModule(device_, &sm, nullptr, &module)) != VK_SUCCESS) {
    cleanup();
    return vk_error(r, "cannot create shader module '" + shader + "'");
  }
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = module;
  ci.stage.pName = "main";
  ci.layout = p->layout;
  r = vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &ci, nullptr, &p->pipeline);
  vkDestroyShaderModule(device_, module, nullptr);
  if (r != VK_SUCCESS) {
    cleanup();
    return vk_error(r, "cannot create pipeline '" + shader + "'");
  }
  const Pipeline* out = p.get();
  pipelines_[shader] = std::move(p);
  return out;
}

}  // namespace bulkhead::vulkan
