// What the Vulkan tests share: session options, a relative-difference measure, the
// device's counters, and the fixture every Vulkan test uses — it requires a Vulkan
// device, turns the validation layer on for the whole binary, and fails a test after
// which the layer reported anything.
#pragma once

#include <cstdlib>
#include <string>

#include "backends/vulkan/vulkan_backend.h"
#include "session/env_impl.h"
#include "support/test_util.h"

namespace bulkhead::test {

// The validation layer is on for every Vulkan instance the test binary creates: set
// during static initialisation, before any Env exists.
inline const bool kVulkanValidationOn = [] {
  setenv("BULKHEAD_VULKAN_VALIDATION", "1", 1);
  return true;
}();

// vulkan:0 with the CPU as fallback, one intra-op thread.
inline SessionOptions vulkan_options(const std::string& policy = "") {
  SessionOptions o;
  o.devices = {"vulkan:0", "cpu"};
  o.threads = 1;
  o.submit_policy = policy;
  return o;
}

inline SessionOptions cpu_options() {
  SessionOptions o;
  o.threads = 1;
  return o;
}

// Largest |a - b| relative to max(1, |b|), float32; a shape mismatch is a failure.
inline double max_rel_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  if (a.shape() != b.shape()) return 1e9;
  double worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.data<float>()[i], y = b.data<float>()[i];
    worst = std::max(worst, std::abs(x - y) / std::max(1.0, std::abs(y)));
  }
  return worst;
}

inline vulkan::DeviceCounters vulkan_counters(const Env& env) {
  auto dev = env.impl()->acquire_device("vulkan:0");
  EXPECT_TRUE(dev.is_ok()) << dev.status().to_string();
  vulkan::DeviceCounters c;
  EXPECT_TRUE(dev.is_ok() && vulkan::counters(**dev, &c));
  return c;
}

class VulkanFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kVulkanValidationOn);
    bool found = false;
    for (auto& d : env_.devices()) found = found || d.backend == "vulkan";
    ASSERT_TRUE(found) << "no Vulkan device: install mesa-vulkan-drivers (scripts/install-deps.sh)";
  }
  void TearDown() override { EXPECT_EQ(vulkan_counters(env_).validation_messages, 0u) << "validation layer reported"; }
  Env env_;
};

}  // namespace bulkhead::test
