// The submission self-test (I5): the field report's canary — a chain of N links of
// ConvTranspose → Slice, each writing tens of MiB — run on a GPU device under every
// submission policy, compared with each other and with the CPU. A driver that drops
// long chains in one submit shows up as a policy that disagrees (often all zeros).
//
// `bulkhead selftest --device vulkan:N [--quick]`. Stateless; each policy gets its own
// session, all in one Env.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bulkhead/status.h"

namespace bulkhead::check {

struct SelftestOptions {
  std::string device = "vulkan:0";
  int links = 8;
  // The field report's sizes: 128 → 128 channels on 60×480, kernel 3×4, stride (1, 2):
  // 29 MiB written by each ConvTranspose, 14 MiB by each Slice.
  int channels = 128, height = 60, width = 480;
  std::string auto_policy = "auto";  // the auto variant to run ("auto" = device default threshold)
  int runs = 3;                      // timed runs per policy (after one warm-up)
  // Seconds-on-lavapipe sizes: 8 channels on 15×120.
  void make_quick() {
    channels = 8;
    height = 15;
    width = 120;
  }
};

struct PolicyOutcome {
  std::string policy;
  std::string error;               // non-empty when the runs failed
  uint64_t submits = 0;            // of the run's work, counted on the last run
  uint64_t dispatches = 0;
  uint64_t expected_submits = 0;   // what the policy promises (0: cannot be predicted)
  double median_ms = 0;
  double max_abs_vs_cpu = 0, tolerance = 0, zero_fraction = 0;
  bool matches_cpu = false, matches_single = false;
};

struct SelftestReport {
  std::string device, device_name, default_policy;
  int nodes_on_device = 0, nodes_total = 0;
  uint64_t convt_bytes = 0, slice_bytes = 0;  // written per link
  double output_max = 0;                      // max |y| of the CPU reference
  std::vector<PolicyOutcome> policies;
  bool agree = false;  // every policy ran, matched the CPU and matched `single` bit for bit
};

// The canary model (serialized ModelProto) for these options.
Result<std::string> canary_model(const SelftestOptions& o);
// Runs the canary on the CPU and on o.device under every policy. Errors: a bad option,
// an unknown device, a device without a submit counter, or a canary the device cannot
// run (its ConvTranspose/Slice would fall back to the CPU, so nothing would be tested).
Result<SelftestReport> run_selftest(const SelftestOptions& o);

}  // namespace bulkhead::check
