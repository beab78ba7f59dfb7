// `bulkhead check`: the isolation checker (src/check/). Exit 0 clean, 2 contamination
// found, 1 error — bad options and unreadable files included.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "bulkhead/bulkhead.hpp"
#include "check/check.h"
#include "check/report.h"
#include "check/split.h"
#include "cli.h"
#include "common/parse.h"
#include "io/file_set.h"
#include "io/npy.h"

namespace bulkhead::cli {
namespace {

struct CheckArgs {
  std::string model;
  std::vector<std::string> pipeline;
  std::vector<std::string> inputs;
  std::vector<std::string> dims;
  std::string devices = "cpu";
  int threads = 1;
  uint64_t seed = 1;
  std::string schedules;
  int iterations = 4;
  double rtol = 0;
  std::string report = "check-report";
  bool no_report = false;
  bool quiet = false;
  int timeout_ms = 120000;
  std::string precision = "fp32";
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> r;
  size_t p = 0;
  while (p <= s.size()) {
    size_t c = s.find(',', p);
    if (c == std::string::npos) c = s.size();
    if (c > p) r.push_back(s.substr(p, c - p));
    p = c + 1;
  }
  return r;
}

check::ModelSource source(const std::string& path) {
  return {std::filesystem::path(path).filename().string(), path, ""};
}

}  // namespace

// Prints the verdict table of one report (shared with `bulkhead demo`).
void print_check_table(const check::CheckReport& r, bool with_header) {
  if (with_header) std::printf("%-14s %6s  %-13s %s\n", "schedule", "steps", "verdict", "first bad step");
  for (auto& s : r.schedules) {
    auto* b = s.first_bad();
    std::string what = b ? b->label + ": " + (b->findings.empty() ? "" : b->findings.front()) : s.error;
    what = printable(what);
    if (what.size() > 110) what = what.substr(0, 107) + "...";
    std::printf("%-14s %6zu  %-13s %s\n", s.name.c_str(), s.steps.size(),
                s.clean() ? "clean" : s.error.empty() ? "CONTAMINATED" : "ERROR", what.c_str());
  }
}

namespace {

int check_cmd(const CheckArgs& a) {
  const std::string cmd = "check";
  check::CheckOptions o;
  if (!a.pipeline.empty()) {
    if (a.pipeline.size() != 2) return fail(cmd, "--pipeline takes two models: F.onnx G.onnx");
    if (!a.model.empty()) return fail(cmd, "give either MODEL or --pipeline F.onnx G.onnx, not both");
    o.front = source(a.pipeline[0]);
    o.back = source(a.pipeline[1]);
  } else {
    if (a.model.empty()) return fail(cmd, "no model given: bulkhead check MODEL or --pipeline F.onnx G.onnx");
    o.front = source(a.model);
  }
  for (auto* m : {&o.front, o.back ? &*o.back : nullptr})
    if (m) {
      auto f = io::RegularFile::open(m->path, io::kDefaultMaxFileBytes, "model");
      if (!f.is_ok()) return fail(cmd, f.status());
    }
  auto devices = SessionOptions::parse("devices=" + a.devices);
  if (!devices.is_ok()) return fail(cmd, devices.status());
  o.devices = devices->devices;
  if (a.threads < 1 || a.threads > 1024) return fail(cmd, "--threads must be 1..1024, got " + std::to_string(a.threads));
  if (a.iterations < 1 || a.iterations > 100000) return fail(cmd, "--iterations must be >= 1, got " + std::to_string(a.iterations));
  if (a.rtol < 0) return fail(cmd, "--rtol must be >= 0");
  if (a.timeout_ms < 100) return fail(cmd, "--worker-timeout must be at least 100 ms");
  o.threads = a.threads;
  o.seed = a.seed;
  o.thread_iterations = a.iterations;
  o.rtol = a.rtol;
  o.worker_timeout_ms = a.timeout_ms;
  if (a.precision != "fp32" && a.precision != "bf16")
    return fail(cmd, "--precision must be fp32 or bf16, got '" + a.precision + "'");
  o.precision = a.precision;
  o.schedules = split_list(a.schedules);
  for (const auto& spec : a.inputs) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) return fail(cmd, "bad --input '" + spec + "': expected NAME=FILE.npy");
    auto t = io::read_npy(spec.substr(eq + 1));
    if (!t.is_ok()) return fail(cmd, t.status());
    if (!o.inputs.emplace(spec.substr(0, eq), *t).second) return fail(cmd, "input '" + spec.substr(0, eq) + "' given twice");
  }
  for (const auto& spec : a.dims) {
    auto eq = spec.find('=');
    int64_t v = 0;
    if (eq == std::string::npos || eq == 0 || !parse_int_in(spec.substr(eq + 1), 1, INT64_MAX, &v))
      return fail(cmd, "bad --dim '" + spec + "': expected NAME=SIZE with SIZE a whole number >= 1");
    if (!o.dims.emplace(spec.substr(0, eq), v).second) return fail(cmd, "--dim " + spec.substr(0, eq) + " given twice");
  }
  auto rep = check::run_check(o);
  if (!rep.is_ok()) return fail(cmd, rep.status());
  if (!a.quiet) {
    std::printf("bulkhead check: %s on %s (threads %d)\n",
                printable(o.back ? o.front.name + " -> " + o.back->name : o.front.name).c_str(), rep->device_description.c_str(), o.threads);
    print_check_table(*rep, true);
  }
  if (o.precision != "fp32") {
    const auto& p = rep->precision;
    std::printf("precision: %s asked, %s run (%d nodes in bf16)%s%s\n", o.precision.c_str(), p.effective.c_str(), p.bf16_nodes,
                p.note.empty() ? "" : ": ", printable(p.note).c_str());
    for (const auto& c : rep->precision_costs()) {
      char psnr[32] = "exact";  // an exact match has no finite PSNR
      if (!std::isinf(c.metrics.psnr)) std::snprintf(psnr, sizeof psnr, "%.1f dB", c.metrics.psnr);
      std::printf("  %c output %-24s against fp32: cosine %.6f  max error %.4g (of max |ref| %.4g)  PSNR %s\n", c.role,
                  printable(c.output).c_str(), c.metrics.cosine, c.metrics.max_abs, c.metrics.ref_max_abs, psnr);
    }
  }
  if (!a.no_report) {
    Status st = check::write_report(*rep, a.report);
    if (!st.is_ok()) return fail(cmd, st);
    if (!a.quiet) std::printf("report: %s/report.html, %s/report.json; repro bundle: %s/bundle (rerun.sh)\n", a.report.c_str(),
                              a.report.c_str(), a.report.c_str());
  }
  std::printf("verdict: %s%s\n", rep->verdict().c_str(),
              rep->first_bad_step().empty() ? "" : (" — first bad step " + printable(rep->first_bad_step())).c_str());
  return rep->exit_code();
}

}  // namespace

void add_check(CLI::App& app) {
  auto a = std::make_shared<CheckArgs>();
  auto* cmd = app.add_subcommand("check", "prove two sessions on a device do not leak into each other (exit 0 clean, 2 contaminated, 1 error)");
  cmd->add_option("model", a->model, "ONNX model: F and G are two sessions of it");
  cmd->add_option("--pipeline", a->pipeline, "F.onnx G.onnx: F's outputs feed G's inputs (by name, else by position)")->expected(2);
  cmd->add_option("-d,--device", a->devices, "the device list under test, e.g. cpu, vulkan:0,cpu or faulty:shared-scratch");
  cmd->add_option("-i,--input", a->inputs, "NAME=FILE.npy input of F (repeatable); others are generated from --seed");
  cmd->add_option("--dim", a->dims, "NAME=SIZE for a symbolic dimension of a generated input (default 1)");
  cmd->add_option("-t,--threads", a->threads, "intra-op threads per session (default 1)");
  cmd->add_option("--seed", a->seed, "seed of the generated inputs");
  cmd->add_option("--schedules", a->schedules, "comma-separated subset of: front_only, back_only, same_process, order_after_g, threads, recover, cross_process, pipeline");
  cmd->add_option("--iterations", a->iterations, "runs per thread in the threads schedule (default 4)");
  cmd->add_option("--rtol", a->rtol, "accuracy floor relative to the reference's largest magnitude (default 1e-4 on cpu, 1e-2 elsewhere)");
  cmd->add_option("--precision", a->precision,
                  "fp32 (default) or bf16: the sessions under test compute so; the report gives the error against fp32");
  cmd->add_option("--worker-timeout", a->timeout_ms, "milliseconds a worker process may take per run (cross_process)");
  cmd->add_option("--report", a->report, "folder for report.json, report.html and the repro bundle (default check-report)");
  cmd->add_flag("--no-report", a->no_report, "print the verdict only");
  cmd->add_flag("-q,--quiet", a->quiet, "print only the verdict line");
  cmd->callback([a]() { throw CLI::RuntimeError(check_cmd(*a)); });
}

// `bulkhead split`: cut a model in two for pipelines (check --pipeline, the isolation benchmark).
void add_split(CLI::App& app) {
  struct SplitArgs {
    std::string model, front, back;
    double fraction = 0.5;
    std::vector<std::string> at;
  };
  auto a = std::make_shared<SplitArgs>();
  auto* cmd = app.add_subcommand("split", "cut a model in two: F computes the values crossing the cut, G the rest");
  cmd->add_option("model", a->model, "ONNX model")->required();
  cmd->add_option("front", a->front, "where to write F")->required();
  cmd->add_option("back", a->back, "where to write G")->required();
  cmd->add_option("--fraction", a->fraction, "cut after this fraction of the nodes in topological order (default 0.5)");
  cmd->add_option("--at", a->at, "cut right after the nodes producing these values (repeatable)");
  cmd->callback([a]() {
    auto r = check::split_model(a->model, a->fraction, a->at);
    if (!r.is_ok()) throw CLI::RuntimeError(fail("split", r.status()));
    if (a->front == a->back) throw CLI::RuntimeError(fail("split", "F and G would both be written to '" + a->front + "'"));
    Status st = io::write_files_all_or_nothing({{a->front, r->front}, {a->back, r->back}});
    if (!st.is_ok()) throw CLI::RuntimeError(fail("split", st));
    std::string b;
    for (auto& x : r->boundary) b += (b.empty() ? "" : ", ") + x;
    std::printf("F: %s (%d nodes)\nG: %s (%d nodes)\nboundary (%zu): %s\n", a->front.c_str(), r->front_nodes, a->back.c_str(),
                r->back_nodes, r->boundary.size(), b.c_str());
    throw CLI::RuntimeError(0);
  });
}

}  // namespace bulkhead::cli
