#include "backends/vulkan/vulkan_backend.h"

#include <mutex>

#include "backends/vulkan/device.h"
#include "backends/vulkan/kernels/kernels.h"

namespace bulkhead {
namespace {

using vulkan::Instance;
using vulkan::VulkanDevice;

std::string version_string(uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) + "." +
         std::to_string(VK_API_VERSION_PATCH(v));
}

const char* type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
  }
}

class VulkanBackend final : public Backend {
 public:
  std::string name() const override { return "vulkan"; }

  std::vector<DeviceInfo> enumerate() const override {
    std::vector<DeviceInfo> r;
    auto inst = instance();
    if (!inst.is_ok()) return r;  // no loader or no driver: no devices
    for (size_t i = 0; i < (*inst)->physical_devices().size(); ++i) {
      auto d = describe((*inst)->physical_devices()[i], static_cast<int>(i));
      if (d.is_ok()) r.push_back(d->first);
    }
    return r;
  }

  Result<std::shared_ptr<Device>> open_device(int ordinal, std::shared_ptr<CopyRouter> router) override {
    BH_ASSIGN_OR_RETURN(auto inst, instance());
    const auto& phys = inst->physical_devices();
    if (ordinal < 0 || ordinal >= static_cast<int>(phys.size()))
      return not_found("vulkan:" + std::to_string(ordinal) + " does not exist (" + std::to_string(phys.size()) +
                       " Vulkan device(s) found" + (phys.empty() ? "; is a Vulkan driver installed?" : "") + ")");
    BH_ASSIGN_OR_RETURN(auto described, describe(phys[ordinal], ordinal));
    std::shared_ptr<const KernelTable> table;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!kernels_) kernels_ = std::make_shared<const KernelTable>(vulkan::make_kernel_table());
      table = kernels_;
    }
    BH_ASSIGN_OR_RETURN(auto dev, VulkanDevice::open(inst, phys[ordinal], described.first, described.second,
                                                    std::move(router), std::move(table)));
    return std::shared_ptr<Device>(std::move(dev));
  }

 private:
  // Created on first use and kept: creating an instance loads every driver.
  Result<std::shared_ptr<Instance>> instance() const {
    std::lock_guard<std::mutex> l(mu_);
    if (!instance_) {
      auto inst = Instance::create();
      if (!inst.is_ok()) return inst.status();
      instance_ = std::move(inst).value();
    }
    return instance_;
  }

  static Result<std::pair<DeviceInfo, vulkan::SubmitPolicy>> describe(VkPhysicalDevice phys, int ordinal) {
    VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    p2.pNext = &driver;
    vkGetPhysicalDeviceProperties2(phys, &p2);
    const VkPhysicalDeviceProperties& props = p2.properties;
    BH_ASSIGN_OR_RETURN(auto policy, vulkan::default_policy(props, driver.driverID));
    DeviceInfo d;
    d.backend = "vulkan";
    d.ordinal = ordinal;
    d.name = props.deviceName;
    d.driver = std::string(driver.driverName) + " " + driver.driverInfo;
    d.submit_policy = policy.to_string() + " — " + policy.why;
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(phys, &mp);
    uint64_t local = 0;
    for (uint32_t i = 0; i < mp.memoryHeapCount; ++i)
      if (mp.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) local += mp.memoryHeaps[i].size;
    d.detail = std::string(type_name(props.deviceType)) + ", Vulkan " + version_string(props.apiVersion) + ", " +
               std::to_string(local >> 20) + " MiB device-local";
    return std::make_pair(d, policy);
  }

  mutable std::mutex mu_;
  mutable std::shared_ptr<Instance> instance_;
  mutable std::shared_ptr<const KernelTable> kernels_;
};

}  // namespace

std::shared_ptr<Backend> make_vulkan_backend() { return std::make_shared<VulkanBackend>(); }

bool vulkan::counters(const Device& device, DeviceCounters* out) {
  auto* d = dynamic_cast<const VulkanDevice*>(&device);
  if (!d) return false;
  auto* dev = const_cast<VulkanDevice*>(d);
  out->run_submits = d->run_submits();
  out->dispatches = d->dispatches();
  out->replays = d->replays();
  out->all_submits = d->submits();
  out->validation_messages = d->validation_messages();
  out->pipelines = dev->pipelines().size();
  out->memory_reserved = dev->memory().bytes_reserved();
  return true;
}

}  // namespace bulkhead

namespace bulkhead {

uint64_t vulkan::auto_threshold(const Device& device, const std::string& policy) {
  auto* d = dynamic_cast<const VulkanDevice*>(&device);
  if (!d) return 0;
  if (policy == "auto" || policy.empty())
    return d->default_policy().policy == Policy::kAuto ? d->default_policy().auto_bytes : 0;
  auto p = parse_policy(policy, "policy");
  return p.is_ok() && p->policy == Policy::kAuto ? p->auto_bytes : 0;
}

}  // namespace bulkhead
