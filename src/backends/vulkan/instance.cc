#include "backends/vulkan/instance.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#if defined(BULKHEAD_SANITIZE_ADDRESS)
#include <dlfcn.h>
#include <link.h>
#endif

#include "backends/vulkan/vk_util.h"

namespace bulkhead::vulkan {
namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

bool validation_requested() {
  const char* v = std::getenv("BULKHEAD_VULKAN_VALIDATION");
  return v && *v && std::strcmp(v, "0") != 0;
}

bool has_layer(const char* name) {
  uint32_t n = 0;
  vkEnumerateInstanceLayerProperties(&n, nullptr);
  std::vector<VkLayerProperties> layers(n);
  vkEnumerateInstanceLayerProperties(&n, layers.data());
  for (const auto& l : layers)
    if (std::strcmp(l.layerName, name) == 0) return true;
  return false;
}

#if defined(BULKHEAD_SANITIZE_ADDRESS)
// LeakSanitizer cannot see pointers held in the globals of a library that was unloaded
// before the process exits: the Vulkan loader unloads the driver at vkDestroyInstance, and
// Mesa 22.3's lavapipe on an AVX2 CPU keeps a 128-byte realloc'd buffer in such a global,
// reported at exit as a leak in an "<unknown module>" that no suppression can name. In
// sanitizer builds only, the libraries the loader brings in while the instance is made are
// marked RTLD_NODELETE, so they stay mapped and their globals stay roots. Release builds
// unload drivers as the loader decides.
std::set<std::string> loaded_objects() {
  std::set<std::string> names;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        if (info->dlpi_name && *info->dlpi_name) static_cast<std::set<std::string>*>(out)->insert(info->dlpi_name);
        return 0;
      },
      &names);
  return names;
}

void pin_loaded_since(const std::set<std::string>& before) {
  for (const auto& name : loaded_objects())
    if (!before.count(name)) dlopen(name.c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}
#else
std::set<std::string> loaded_objects() { return {}; }
void pin_loaded_since(const std::set<std::string>&) {}
#endif

}  // namespace

const char* result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_INCOMPLETE: return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_FORMAT_NOT_SUPPORTED: return "VK_ERROR_FORMAT_NOT_SUPPORTED";
    case VK_ERROR_FRAGMENTED_POOL: return "VK_ERROR_FRAGMENTED_POOL";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    default: return "VkResult error";
  }
}

Result<std::shared_ptr<Instance>> Instance::create() {
  std::shared_ptr<Instance> inst(new Instance());
  const bool validate = validation_requested();
  if (validate && !has_layer(kValidationLayer))
    return not_found("BULKHEAD_VULKAN_VALIDATION is set but the Vulkan validation layer is not installed "
                     "(Debian package vulkan-validationlayers)");
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "bulkhead";
  app.pEngineName = "bulkhead";
  app.apiVersion = VK_API_VERSION_1_3;  // the highest we use; devices may offer less
  VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.pApplicationInfo = &app;
  std::vector<const char*> layers, extensions;
  VkValidationFeatureEnableEXT enables[] = {VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
  VkValidationFeaturesEXT features{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  features.enabledValidationFeatureCount = 1;
  features.pEnabledValidationFeatures = enables;
  if (validate) {
    layers.push_back(kValidationLayer);
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    ci.pNext = &features;
  }
  ci.enabledLayerCount = static_cast<uint32_t>(layers.size());
  ci.ppEnabledLayerNames = layers.data();
  ci.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  ci.ppEnabledExtensionNames = extensions.data();
  const auto loaded_before = loaded_objects();
  BH_VK(vkCreateInstance(&ci, nullptr, &inst->instance_), "cannot create an instance");
  if (validate) {
    auto create_messenger = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(inst->instance_, "vkCreateDebugUtilsMessengerEXT"));
    if (!create_messenger) return internal_error("vulkan: vkCreateDebugUtilsMessengerEXT is missing");
    VkDebugUtilsMessengerCreateInfoEXT mi{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    mi.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    mi.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    mi.pfnUserCallback = &Instance::on_message;
    mi.pUserData = inst.get();
    BH_VK(create_messenger(inst->instance_, &mi, nullptr, &inst->messenger_), "cannot create the validation messenger");
  }
  uint32_t n = 0;
  BH_VK(vkEnumeratePhysicalDevices(inst->instance_, &n, nullptr), "cannot enumerate devices");
  inst->physical_.resize(n);
  BH_VK(vkEnumeratePhysicalDevices(inst->instance_, &n, inst->physical_.data()), "cannot enumerate devices");
  inst->physical_.resize(n);
  pin_loaded_since(loaded_before);
  return inst;
}

Instance::~Instance() {
  if (messenger_) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
    if (destroy) destroy(instance_, messenger_, nullptr);
  }
  if (instance_) vkDestroyInstance(instance_, nullptr);
}

VKAPI_ATTR VkBool32 VKAPI_CALL Instance::on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                    VkDebugUtilsMessageTypeFlagsEXT,
                                                    const VkDebugUtilsMessengerCallbackDataEXT* data, void* self) {
  static_cast<Instance*>(self)->messages_.fetch_add(1);
  // The layer's messages quote long lists from the spec: the first 800 characters say
  // what is wrong.
  std::string msg = data && data->pMessage ? data->pMessage : "(no message)";
  if (msg.size() > 800) msg = msg.substr(0, 800) + "...";
  std::fprintf(stderr, "bulkhead: vulkan validation %s: %s\n",
               severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "error" : "warning", msg.c_str());
  return VK_FALSE;
}

}  // namespace bulkhead::vulkan
