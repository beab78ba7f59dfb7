// `bulkhead selftest`: the field report's dispatch-chain canary under every submission
// policy on a GPU device (check/selftest.h). Exit 0 when all agree, 2 when they do not,
// 1 on errors.
#include <cstdio>

#include "check/selftest.h"
#include "cli.h"

namespace bulkhead::cli {

void add_selftest(CLI::App& app) {
  struct Args {
    check::SelftestOptions o;
    bool quick = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("selftest",
                                 "Run the dispatch-chain canary (N x ConvTranspose -> Slice) under every submission "
                                 "policy on a GPU device; exit 2 when the policies or the CPU disagree");
  cmd->add_option("-d,--device", a->o.device, "the device, e.g. vulkan:0");
  cmd->add_flag("--quick", a->quick, "small sizes (8 channels, 15x120) that run in seconds on lavapipe");
  cmd->add_option("--links", a->o.links, "links in the chain (default 8)");
  cmd->add_option("--auto", a->o.auto_policy, "the auto variant to run: auto (device default) or auto:<bytes>[K|M|G]");
  cmd->add_option("--runs", a->o.runs, "timed runs per policy after one warm-up (default 3)");
  cmd->callback([a]() {
    if (a->quick) a->o.make_quick();
    if (a->o.auto_policy.rfind("auto", 0) != 0)
      throw CLI::RuntimeError(fail("selftest", "--auto takes auto or auto:<bytes>, got '" + a->o.auto_policy + "'"));
    auto rep = check::run_selftest(a->o);
    if (!rep.is_ok()) throw CLI::RuntimeError(fail("selftest", rep.status()));
    const auto& r = *rep;
    std::printf("selftest on %s (%s); default policy: %s\n", r.device.c_str(), r.device_name.c_str(),
                r.default_policy.c_str());
    std::printf("canary: %d links of ConvTranspose (%.1f MiB written) -> Slice (%.1f MiB), %d of %d nodes on the device\n",
                a->o.links, r.convt_bytes / 1048576.0, r.slice_bytes / 1048576.0, r.nodes_on_device, r.nodes_total);
    std::printf("CPU reference: max |y| = %.4g; tolerance 1e-3 of it\n", r.output_max);
    std::printf("%-16s %8s %9s %11s %13s %8s %8s  %s\n", "policy", "submits", "expected", "median ms", "max|diff| cpu",
                "zeros", "= single", "verdict");
    for (const auto& p : r.policies) {
      if (!p.error.empty()) {
        std::printf("%-16s failed: %s\n", p.policy.c_str(), p.error.c_str());
        continue;
      }
      std::string expected = p.expected_submits ? std::to_string(p.expected_submits) : "-";
      std::printf("%-16s %8llu %9s %11.2f %13.3g %7.1f%% %8s  %s\n", p.policy.c_str(),
                  static_cast<unsigned long long>(p.submits), expected.c_str(), p.median_ms, p.max_abs_vs_cpu,
                  100 * p.zero_fraction, p.matches_single ? "yes" : "NO",
                  p.matches_cpu && p.matches_single ? "agrees" : "DISAGREES");
    }
    std::printf("%s\n", r.agree ? "every policy agrees with the others and with the CPU"
                                : "POLICIES DISAGREE: this driver needs the policy that agrees (set submit_policy)");
    if (!r.agree) throw CLI::RuntimeError(2);
  });
}

}  // namespace bulkhead::cli
