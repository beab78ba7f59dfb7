#include <cstdio>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "common/json_safe.h"

#include "bulkhead/bulkhead.hpp"
#include "cli.h"
#include "session/env_impl.h"
#include "conformance/conformance.h"
#include "io/npy.h"

namespace bulkhead::cli {
namespace {

struct ConfArgs {
  conformance::Options opts;
  std::string backend = "cpu";
  std::string json;
  std::string expect;
  std::string write_expect;
  bool verbose = false;
  bool list = false;
};

struct Tally {
  int pass = 0, total = 0, loose = 0;
  void add(const conformance::CaseResult& r) {
    ++total;
    pass += r.outcome == conformance::CaseResult::Outcome::kPass;
    loose += r.loose;
  }
};

void progress(const conformance::CaseResult& r, void* user) {
  bool verbose = *static_cast<bool*>(user);
  bool pass = r.outcome == conformance::CaseResult::Outcome::kPass;
  if (pass && !verbose) return;
  std::printf("%-5s %s/%s%s%s\n", pass ? "PASS" : "FAIL", r.c.folder.c_str(), r.c.name.c_str(), pass ? "" : ": ",
              pass ? "" : (std::string(conformance::outcome_name(r.outcome)) + ": " + r.message + (r.loose ? " [passes with rtol 1e-2, atol 1e-5]" : "")).c_str());
  std::fflush(stdout);
}

int conformance_cmd(ConfArgs& a) {
  const std::string cmd = "conformance";
  a.opts.devices.clear();
  std::string spec = a.backend;
  size_t p = 0;
  while (p <= spec.size()) {
    size_t c = spec.find(',', p);
    if (c == std::string::npos) c = spec.size();
    if (c > p) a.opts.devices.push_back(spec.substr(p, c - p));
    p = c + 1;
  }
  // Nodes the listed devices cannot run fall back to the CPU (as in `check`).
  bool has_cpu = false;
  for (const auto& d : a.opts.devices) has_cpu = has_cpu || d == "cpu" || d.rfind("cpu:", 0) == 0;
  if (!has_cpu) a.opts.devices.push_back("cpu");
  {
    // Validate the device list before forking, by name: no device is opened here, since
    // a driver initialised before fork() is not usable in the children. A plugin is
    // found by its name in the search path.
    Env env;
    for (auto& d : a.opts.devices) {
      std::string b = d.substr(0, d.find(':'));
      Status found;
      if (env.impl()->discover(b, &found) && !found.is_ok()) return fail(cmd, found, 2);
      auto bs = env.backends();
      if (std::find(bs.begin(), bs.end(), b) == bs.end()) return fail(cmd, "unknown backend '" + b + "'", 2);
    }
  }
  if (a.opts.jobs < 1) return fail(cmd, "--jobs must be at least 1", 2);
  auto cases = conformance::discover(a.opts);
  if (!cases.is_ok()) return fail(cmd, cases.status());
  if (a.list) {
    for (auto& c : *cases) std::printf("%s/%s\t%s\t%s\t%s\n", c.folder.c_str(), c.name.c_str(), c.op.c_str(), c.tier.c_str(), c.dtypes.c_str());
    return 0;
  }
  std::set<std::string> expected;
  if (!a.expect.empty()) {
    std::ifstream f(a.expect);
    if (!f) return fail(cmd, "expectations file '" + a.expect + "' not found");
    std::string line;
    while (std::getline(f, line))
      if (!line.empty() && line[0] != '#') expected.insert(line);
  }
  auto results = conformance::run_all(*cases, a.opts, progress, &a.verbose);

  std::map<std::string, Tally> by_op, by_folder, by_tier;
  Tally all;
  for (auto& r : results) {
    all.add(r);
    by_folder[r.c.folder].add(r);
    if (r.c.folder == "node") {
      by_op[r.c.op].add(r);
      by_tier["node " + r.c.tier + " " + r.c.form + " " + r.c.dtypes].add(r);
      by_tier["node " + r.c.tier + " " + r.c.dtypes].add(r);
    }
  }
  if (!by_op.empty()) {
    std::printf("\nper operator (node cases):\n");
    for (auto& [op, t] : by_op) std::printf("  %-32s %3d/%-3d%s\n", op.c_str(), t.pass, t.total, t.pass == t.total ? "" : "  *");
  }
  std::printf("\nper folder:\n");
  for (auto& [f, t] : by_folder) std::printf("  %-24s %4d/%-4d (%.1f%%)\n", f.c_str(), t.pass, t.total, 100.0 * t.pass / std::max(1, t.total));
  if (!by_tier.empty()) {
    std::printf("per tier:\n");
    for (auto& [k, t] : by_tier) std::printf("  %-32s %4d/%-4d (%.1f%%)\n", k.c_str(), t.pass, t.total, 100.0 * t.pass / std::max(1, t.total));
  }
  std::printf("total: %d/%d passed (%.1f%%); %d more pass only with a looser tolerance\n", all.pass, all.total,
              100.0 * all.pass / std::max(1, all.total), all.loose);

  if (!a.json.empty()) {
    nlohmann::json j;
    j["backend"] = a.backend;
    j["data"] = a.opts.data_dir;
    j["totals"] = {{"pass", all.pass}, {"total", all.total}, {"loose", all.loose}};
    for (auto& [f, t] : by_folder) j["folders"][f] = {{"pass", t.pass}, {"total", t.total}};
    for (auto& [k, t] : by_tier) j["tiers"][k] = {{"pass", t.pass}, {"total", t.total}};
    for (auto& [op, t] : by_op) j["operators"][op] = {{"pass", t.pass}, {"total", t.total}};
    for (auto& r : results)
      j["cases"].push_back({{"case", r.c.folder + "/" + r.c.name}, {"op", r.c.op}, {"tier", r.c.tier}, {"form", r.c.form},
                            {"dtypes", r.c.dtypes}, {"outcome", conformance::outcome_name(r.outcome)},
                            {"loose", r.loose}, {"message", r.message}, {"seconds", r.seconds}});
    Status s = io::write_file_atomic(a.json, utf8_safe(j).dump(1) + "\n");
    if (!s.is_ok()) return fail(cmd, s);
  }
  if (!a.write_expect.empty()) {
    std::string out = "# cases that pass on backend '" + a.backend + "'; the suite fails if one stops passing\n";
    for (auto& r : results)
      if (r.outcome == conformance::CaseResult::Outcome::kPass) out += r.c.folder + "/" + r.c.name + "\n";
    Status s = io::write_file_atomic(a.write_expect, out);
    if (!s.is_ok()) return fail(cmd, s);
  }
  if (!expected.empty()) {
    int regressions = 0, seen = 0;
    for (auto& r : results) {
      std::string k = r.c.folder + "/" + r.c.name;
      if (!expected.count(k)) continue;
      ++seen;
      if (r.outcome != conformance::CaseResult::Outcome::kPass) {
        ++regressions;
        std::printf("REGRESSION %s: %s\n", k.c_str(), r.message.c_str());
      }
    }
    std::printf("expectations: %d listed cases run, %d regressed\n", seen, regressions);
    if (regressions) return 3;
  }
  return 0;
}

}  // namespace

void add_conformance(CLI::App& app) {
  auto a = std::make_shared<ConfArgs>();
  auto* cmd = app.add_subcommand("conformance", "Run ONNX backend test cases and compare with the reference outputs");
  cmd->add_option("--data", a->opts.data_dir, "onnx-backend-data folder, or one of its folders (node, light, ...)")->required();
  cmd->add_option("--backend", a->backend, "device list, e.g. cpu or vulkan (the CPU is added as the fallback)");
  cmd->add_option("--json", a->json, "write results as JSON here");
  cmd->add_option("--filter", a->opts.filter, "only cases whose folder/case matches this regex");
  cmd->add_option("--cases", a->opts.cases_tsv, "tier table (default: <data>/../conformance/cases.tsv)");
  cmd->add_option("--expect", a->expect, "expectations file: exit 3 if a listed case does not pass");
  cmd->add_option("--write-expect", a->write_expect, "write the passing cases as an expectations file");
  cmd->add_option("-j,--jobs", a->opts.jobs, "cases run in parallel (each in its own process)");
  cmd->add_option("-t,--threads", a->opts.threads, "intra-op threads per case");
  cmd->add_option("--timeout", a->opts.timeout_s, "seconds before a case is killed");
  cmd->add_flag("-v,--verbose", a->verbose, "print passing cases too");
  cmd->add_flag("--list", a->list, "list the cases and exit");
  cmd->callback([a]() {
    int rc = conformance_cmd(*a);
    if (rc) throw CLI::RuntimeError(rc);
  });
}

}  // namespace bulkhead::cli
