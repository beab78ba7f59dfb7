// libFuzzer harness: the parsers of user-given option text — session option strings
// (SessionOptions::parse), submission policies, byte sizes and integers
// (common/parse.h). None may crash; a value that parses must be within its range.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "backends/vulkan/policy.h"
#include "bulkhead/bulkhead.hpp"
#include "common/parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string s(reinterpret_cast<const char*>(data), size);
  auto o = bulkhead::SessionOptions::parse(s);
  if (o.is_ok()) {
    if (o->threads < 0 || o->threads > bulkhead::SessionOptions::kMaxThreads || o->devices.empty() ||
        o->worker_timeout_ms <= 0 || o->max_file_bytes == 0 || o->max_loop_iterations < 0 || o->run_timeout_ms < 0)
      std::abort();
    for (auto& d : o->devices)
      if (d.empty()) std::abort();
  }
  (void)bulkhead::vulkan::parse_policy(s, "fuzz");
  uint64_t b = 0;
  (void)bulkhead::parse_byte_size(s, &b);
  int64_t v = 0;
  if (bulkhead::parse_int_in(s, -1000, 1000, &v) && (v < -1000 || v > 1000)) std::abort();
  return 0;
}
