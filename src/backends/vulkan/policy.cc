#include "backends/vulkan/policy.h"

#include "common/parse.h"

#include <cstdlib>
#include <cstring>

namespace bulkhead::vulkan {
namespace {

struct Quirk {
  VkDriverId driver;          // 0: any
  uint32_t vendor;            // 0: any
  const char* name_contains;  // nullptr: any
  Policy policy;
  uint64_t auto_bytes;
  const char* why;
};

// First match wins. Entries come from field reports (FIELD-REPORTS.md).
const Quirk kQuirks[] = {
    // RADV on AMD Phoenix / Strix iGPUs: long dispatch chains in one submit return zeros.
    {VK_DRIVER_ID_MESA_RADV, 0x1002, "GFX1103", Policy::kAuto, uint64_t{8} << 20,
     "quirk: RADV on an AMD Phoenix iGPU drops long chains in one submit"},
    {VK_DRIVER_ID_MESA_RADV, 0x1002, "GFX115", Policy::kAuto, uint64_t{8} << 20,
     "quirk: RADV on an AMD Strix iGPU drops long chains in one submit"},
    {VK_DRIVER_ID_MESA_RADV, 0x1002, "Phoenix", Policy::kAuto, uint64_t{8} << 20,
     "quirk: RADV on an AMD Phoenix iGPU drops long chains in one submit"},
    {VK_DRIVER_ID_MESA_RADV, 0x1002, "Strix", Policy::kAuto, uint64_t{8} << 20,
     "quirk: RADV on an AMD Strix iGPU drops long chains in one submit"},
};

std::string mib(uint64_t b) {
  if (b % (uint64_t{1} << 20) == 0) return std::to_string(b >> 20) + " MiB";
  if (b % 1024 == 0) return std::to_string(b >> 10) + " KiB";
  return std::to_string(b) + " bytes";
}

}  // namespace

const char* policy_name(Policy p) {
  switch (p) {
    case Policy::kSingle: return "single";
    case Policy::kPerDispatch: return "per-dispatch";
    case Policy::kSplit: return "split";
    case Policy::kAuto: return "auto";
  }
  return "?";
}

std::string SubmitPolicy::to_string() const {
  std::string s = policy_name(policy);
  if (policy == Policy::kAuto) s += " (" + mib(auto_bytes) + ")";
  return s;
}

Result<SubmitPolicy> parse_policy(const std::string& text, const std::string& what) {
  SubmitPolicy p;
  p.why = what;
  std::string name = text, arg;
  if (auto c = text.find(':'); c != std::string::npos) {
    name = text.substr(0, c);
    arg = text.substr(c + 1);
  }
  auto bad = [&] {
    return invalid_argument(what + ": unknown submission policy '" + text +
                            "' (expected single, per-dispatch, split, auto or auto:<bytes>[K|M|G])");
  };
  if (name == "single") p.policy = Policy::kSingle;
  else if (name == "per-dispatch") p.policy = Policy::kPerDispatch;
  else if (name == "split") p.policy = Policy::kSplit;
  else if (name == "auto") p.policy = Policy::kAuto;
  else return bad();
  p.auto_bytes = kDefaultAutoBytes;
  if (!arg.empty()) {
    if (p.policy != Policy::kAuto) return bad();
    uint64_t v = 0;
    if (!parse_byte_size(arg, &v)) return bad();
    if (v == 0) return invalid_argument(what + ": the auto threshold must be > 0");
    p.auto_bytes = v;
  }
  return p;
}

Result<SubmitPolicy> default_policy(const VkPhysicalDeviceProperties& props, VkDriverId driver) {
  if (const char* env = std::getenv("BULKHEAD_VULKAN_SUBMIT"); env && *env)
    return parse_policy(env, "BULKHEAD_VULKAN_SUBMIT");
  for (const Quirk& q : kQuirks) {
    if (q.driver && q.driver != driver) continue;
    if (q.vendor && q.vendor != props.vendorID) continue;
    if (q.name_contains && !std::strstr(props.deviceName, q.name_contains)) continue;
    return SubmitPolicy{q.policy, q.auto_bytes, q.why};
  }
  return SubmitPolicy{Policy::kAuto, kDefaultAutoBytes, "default (no quirk matches this driver and device)"};
}

}  // namespace bulkhead::vulkan
