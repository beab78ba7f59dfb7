// `bulkhead selftest` on the machine's Vulkan device: the field report's canary (quick
// sizes) runs under every policy, all agree with each other and with the CPU, each
// policy makes the submits it promises (auto: counted against the bytes each dispatch
// writes), and the CLI's exit codes and errors are right.
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "check/selftest.h"
#include "vulkan/vulkan_support.h"

namespace bulkhead::test {
namespace {

struct Output {
  int code;
  std::string text;
};

Output run_cli(const std::string& args) {
  std::string cmd = std::string(BULKHEAD_BINARY) + " " + args + " 2>&1";
  Output o{-1, ""};
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return o;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) o.text.append(buf, n);
  int st = pclose(p);
  o.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return o;
}

TEST(VulkanSelftest, QuickCanaryAgreesUnderEveryPolicyWithThePromisedSubmits) {
  check::SelftestOptions o;
  o.make_quick();
  o.runs = 1;
  // A threshold between one link's bytes and two: auto must submit every few dispatches.
  o.auto_policy = "auto:256K";
  auto rep = check::run_selftest(o);
  ASSERT_TRUE(rep.is_ok()) << rep.status().to_string();
  EXPECT_EQ(rep->nodes_on_device, 2 * o.links);
  ASSERT_EQ(rep->policies.size(), 4u);
  for (const auto& p : rep->policies) {
    EXPECT_TRUE(p.error.empty()) << p.policy << ": " << p.error;
    EXPECT_TRUE(p.matches_cpu) << p.policy << ": max diff " << p.max_abs_vs_cpu << " > " << p.tolerance;
    EXPECT_TRUE(p.matches_single) << p.policy;
    EXPECT_GT(p.expected_submits, 0u) << p.policy << ": the submits must be predictable";
    EXPECT_EQ(p.submits, p.expected_submits) << p.policy;
  }
  EXPECT_EQ(rep->policies[2].submits, rep->policies[2].dispatches) << "split: one submit per dispatch";
  EXPECT_GT(rep->policies[3].submits, 1u) << "auto:256K splits this chain";
  EXPECT_LT(rep->policies[3].submits, rep->policies[2].submits) << "but less often than split";
  EXPECT_TRUE(rep->agree);
}

TEST(VulkanSelftest, CliExitCodesAndErrors) {
  auto ok = run_cli("selftest --device vulkan:0 --quick --links 3 --runs 1");
  EXPECT_EQ(ok.code, 0) << ok.text;
  EXPECT_NE(ok.text.find("every policy agrees"), std::string::npos) << ok.text;
  for (const char* policy : {"single", "per-dispatch", "split", "auto"})
    EXPECT_NE(ok.text.find(policy), std::string::npos) << ok.text;
  auto cpu = run_cli("selftest --device cpu --quick");
  EXPECT_EQ(cpu.code, 1) << cpu.text;
  EXPECT_NE(cpu.text.find("no submission policies"), std::string::npos) << cpu.text;
  auto bad = run_cli("selftest --device vulkan:0 --quick --links 0");
  EXPECT_EQ(bad.code, 1) << bad.text;
  EXPECT_NE(bad.text.find("--links must be 1..64"), std::string::npos) << bad.text;
  auto bad_auto = run_cli("selftest --device vulkan:0 --quick --auto sometimes");
  EXPECT_EQ(bad_auto.code, 1) << bad_auto.text;
}

TEST(VulkanSelftest, RunTakesASubmitPolicyAndRejectsABadOne) {
  const std::string model = std::string(BULKHEAD_SHARED_DIR) + "/models/ppocrv4_rec/model.onnx";
  const std::string input = std::string(BULKHEAD_SHARED_DIR) + "/models/ppocrv4_rec/inputs/x.npy";
  ASSERT_EQ(access(model.c_str(), R_OK), 0) << "test data missing: " << model;
  auto bad = run_cli("run " + model + " -i x=" + input + " --device vulkan,cpu --submit-policy sometimes");
  EXPECT_EQ(bad.code, 1) << bad.text;
  EXPECT_NE(bad.text.find("unknown submission policy 'sometimes'"), std::string::npos) << bad.text;
  auto ok = run_cli("run " + model + " -i x=" + input + " --device vulkan,cpu --submit-policy split --no-capture -q");
  EXPECT_EQ(ok.code, 0) << ok.text;
}

}  // namespace
}  // namespace bulkhead::test
