// Submission policies (I5): how a run's dispatches reach the queue.
//
//   single        one command buffer per run (until the host needs a result), with an
//                 exact storage-write → read barrier only before a dispatch that reads
//                 or overwrites what an earlier one wrote;
//   per-dispatch  a full memory barrier after every dispatch (each dispatch its own
//                 pass), still one submit;
//   split         submit and wait on a fence after every dispatch;
//   auto          as single, but submit and wait once the bytes written since the last
//                 submit reach a threshold — the defence against drivers that return
//                 zeros for long chains in one submit (FIELD-REPORTS.md).
//
// The default comes from a quirks table keyed by driver ID, vendor and device name;
// BULKHEAD_VULKAN_SUBMIT (e.g. "split" or "auto:8M") overrides it for the process and
// the session option submit_policy overrides both.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <string>

#include "bulkhead/status.h"

namespace bulkhead::vulkan {

enum class Policy { kSingle, kPerDispatch, kSplit, kAuto };

struct SubmitPolicy {
  Policy policy = Policy::kAuto;
  uint64_t auto_bytes = 0;  // kAuto: submit once this many bytes were written
  std::string why;          // where the choice came from

  std::string to_string() const;  // "auto (64 MiB)"
};

const char* policy_name(Policy p);
// The default threshold of `auto` (measured: see policy.cc).
constexpr uint64_t kDefaultAutoBytes = uint64_t{64} << 20;

// Parses "single", "per-dispatch", "split", "auto" or "auto:<bytes>[K|M|G]". `what` names
// the source in errors.
Result<SubmitPolicy> parse_policy(const std::string& text, const std::string& what);

// The quirks table's choice for a device, then BULKHEAD_VULKAN_SUBMIT if set.
Result<SubmitPolicy> default_policy(const VkPhysicalDeviceProperties& props, VkDriverId driver);

}  // namespace bulkhead::vulkan
