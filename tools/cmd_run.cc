#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <thread>
#include <tuple>

#include "bulkhead/bulkhead.hpp"
#include "cli.h"
#include "io/file_set.h"
#include "io/npy.h"
#include "isolate/protocol.h"

namespace bulkhead::cli {
namespace {

struct RunArgs {
  std::string model;
  std::vector<std::string> inputs;
  std::string devices = "cpu";
  std::string isolation = "in-process";
  std::string submit_policy;
  bool no_capture = false;
  bool release_idle_memory = false;
  int threads = 0;
  int optimization_level = 2;
  std::string precision = "fp32";
  int repeat = 1;
  int warmup = -1;
  std::string output_dir;
  bool output_dir_given = false;
  std::string max_file_size;
  std::string max_tensor_size;
  std::string timeout_ms;
  std::string max_loop_iterations;
  bool quiet = false;
  bool profile = false;
  int profile_nodes = 8;
  int profile_runs = 1;
};

// "3.7 MiB", "12.0 KiB", "512 B".
std::string bytes_text(size_t n) {
  char buf[32];
  if (n >= (size_t{1} << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", n / 1048576.0);
  else if (n >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", n / 1024.0);
  else std::snprintf(buf, sizeof buf, "%zu B", n);
  return buf;
}

std::string stats(const Tensor& t) {
  if (t.dtype() == DataType::kString) return "";
  int64_t n = t.numel();
  if (n == 0 || !t.raw()) return "(empty)";
  double mn = INFINITY, mx = -INFINITY, sum = 0;
  int64_t nan = 0, inf = 0;
  auto at = [&](int64_t i) -> double {
    switch (t.dtype()) {
      case DataType::kFloat32: return t.data<float>()[i];
      case DataType::kFloat64: return t.data<double>()[i];
      case DataType::kFloat16: return half_to_float(t.data<uint16_t>()[i]);
      case DataType::kInt64: return static_cast<double>(t.data<int64_t>()[i]);
      case DataType::kInt32: return t.data<int32_t>()[i];
      case DataType::kInt8: return t.data<int8_t>()[i];
      case DataType::kUInt8: case DataType::kBool: return t.data<uint8_t>()[i];
      default: return NAN;
    }
  };
  for (int64_t i = 0; i < n; ++i) {
    double v = at(i);
    if (std::isnan(v)) { ++nan; continue; }
    if (std::isinf(v)) ++inf;
    mn = std::min(mn, v);
    mx = std::max(mx, v);
    sum += v;
  }
  char buf[256];
  std::snprintf(buf, sizeof buf, "min %.6g  max %.6g  mean %.6g", mn, mx, n - nan ? sum / static_cast<double>(n - nan) : NAN);
  std::string r = buf;
  if (nan) r += "  nan " + std::to_string(nan);
  if (inf) r += "  inf " + std::to_string(inf);
  return r;
}

// `runs` more runs, timed per node: each node's (and hand-off entry's) median over them,
// in the order of the first run. A node that runs several times in one run (inside a
// Loop) counts its sum per run.
Result<std::vector<NodeProfile>> profiled_runs(const Session& session, const NamedTensors& inputs, int runs) {
  std::vector<NodeProfile> order;
  std::map<std::pair<std::string, std::string>, std::vector<double>> times;
  for (int r = 0; r < runs; ++r) {
    std::vector<NodeProfile> prof;
    RunOptions ro;
    ro.profile = &prof;
    auto out = session.run(inputs, ro);
    if (!out.is_ok()) return out.status();
    std::map<std::pair<std::string, std::string>, double> this_run;
    for (const auto& p : prof) {
      auto [it, fresh] = this_run.try_emplace({p.node, p.op_type}, 0.0);
      it->second += p.ms;
      if (fresh && r == 0) order.push_back(p);
    }
    for (const auto& [key, ms] : this_run) times[key].push_back(ms);
  }
  for (auto& p : order) {
    auto& v = times[{p.node, p.op_type}];
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    p.ms = v[v.size() / 2];
  }
  return order;
}

int run_cmd(const RunArgs& a) {
  const std::string cmd = "run";
  if (a.repeat < 1) return fail(cmd, "--repeat must be at least 1, got " + std::to_string(a.repeat), 2);
  if (a.profile_nodes < 0) return fail(cmd, "--profile-nodes must be >= 0, got " + std::to_string(a.profile_nodes), 2);
  if (a.profile_runs < 1) return fail(cmd, "--profile-runs must be at least 1, got " + std::to_string(a.profile_runs), 2);
  if (a.warmup < -1) return fail(cmd, "--warmup must be >= 0, got " + std::to_string(a.warmup), 2);
  if (a.threads < 0 || a.threads > SessionOptions::kMaxThreads)
    return fail(cmd, "--threads must be 0.." + std::to_string(SessionOptions::kMaxThreads) + " (0 = every core), got " + std::to_string(a.threads), 2);
  if (a.output_dir_given && a.output_dir.empty()) return fail(cmd, "--output-dir is empty", 2);
  auto opts = SessionOptions::parse("devices=" + a.devices);
  if (!opts.is_ok()) return fail(cmd, opts.status(), 2);
  opts->threads = a.threads;
  if (!a.max_file_size.empty()) {
    auto o = SessionOptions::parse("max_file_bytes=" + a.max_file_size);
    if (!o.is_ok()) return fail(cmd, "bad --max-file-size '" + a.max_file_size + "': expected a size such as 512M or 64G", 2);
    opts->max_file_bytes = o->max_file_bytes;
  }
  // The limits of a run, through the session option parser (one set of checks).
  for (auto [flag, key, value] : {std::tuple{"--max-tensor-size", "max_tensor_bytes", &a.max_tensor_size},
                                  std::tuple{"--timeout", "run_timeout_ms", &a.timeout_ms},
                                  std::tuple{"--max-loop-iterations", "max_loop_iterations", &a.max_loop_iterations}}) {
    if (value->empty()) continue;
    auto o = SessionOptions::parse(std::string(key) + "=" + *value);
    if (!o.is_ok()) return fail(cmd, "bad " + std::string(flag) + " '" + *value + "': " + o.status().message(), 2);
    opts->max_tensor_bytes = std::max(opts->max_tensor_bytes, o->max_tensor_bytes);
    opts->run_timeout_ms = std::max(opts->run_timeout_ms, o->run_timeout_ms);
    opts->max_loop_iterations = std::max(opts->max_loop_iterations, o->max_loop_iterations);
  }
  if (a.optimization_level < 0 || a.optimization_level > 2)
    return fail(cmd, "--optimization-level must be 0, 1 or 2, got " + std::to_string(a.optimization_level), 2);
  opts->optimization_level = a.optimization_level;
  {
    auto o = SessionOptions::parse("precision=" + a.precision);
    if (!o.is_ok()) return fail(cmd, "bad --precision '" + a.precision + "': expected fp32 or bf16", 2);
    opts->precision = o->precision;
    if (opts->precision == "bf16" && opts->optimization_level < 2)
      return fail(cmd, "--precision bf16 needs --optimization-level 2, got " + std::to_string(opts->optimization_level), 2);
  }
  if (a.isolation != "in-process" && a.isolation != "process")
    return fail(cmd, "--isolation must be in-process or process, got '" + a.isolation + "'", 2);
  opts->isolation = a.isolation;
  opts->submit_policy = a.submit_policy;  // checked by the device when the session opens
  opts->graph_capture = !a.no_capture;
  opts->release_idle_memory = a.release_idle_memory;

  Env env;
  // Session creation as a user sees it: reading the file, parsing, optimising, compiling.
  auto tc = std::chrono::steady_clock::now();
  auto session = env.load(a.model, *opts);
  double create_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - tc).count();
  if (!session.is_ok()) return fail(cmd, session.status());

  NamedTensors inputs;
  std::set<std::string> seen;
  for (const auto& spec : a.inputs) {
    std::string name, path;
    auto eq = spec.find('=');
    if (eq == std::string::npos) {
      // A bare FILE.npy names the model's input only where it has one tensor input.
      const IoInfo* only = nullptr;
      size_t tensors = 0;
      for (auto& io : session->inputs())
        if (io.is_tensor && tensors++ == 0) only = &io;
      if (a.inputs.size() != 1 || tensors != 1)
        return fail(cmd, "bad --input '" + spec + "': expected NAME=FILE.npy", 2);
      name = only->name;
      path = spec;
    } else {
      name = spec.substr(0, eq);
      path = spec.substr(eq + 1);
    }
    if (name.empty() || path.empty()) return fail(cmd, "bad --input '" + spec + "': expected NAME=FILE.npy", 2);
    auto t = io::read_npy(path, opts->max_file_bytes);
    if (!t.is_ok()) return fail(cmd, t.status().with_context("input '" + name + "': "));
    inputs.emplace_back(name, std::move(t).value());
  }
  if (!a.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(a.output_dir, ec);
    if (ec) return fail(cmd, "cannot create output directory '" + a.output_dir + "': " + ec.message());
  }

  int warmup = a.warmup >= 0 ? a.warmup : (a.repeat > 1 ? 1 : 0);
  std::vector<double> ms;
  double first_ms = 0;  // the session's first run (warm-up or timed)
  Result<NamedTensors> outs = Status(StatusCode::kInternal, "no run");
  for (int i = 0; i < warmup + a.repeat; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    outs = session->run(inputs);
    double dt = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!outs.is_ok()) return fail(cmd, outs.status());
    if (i == 0) first_ms = dt;
    if (i >= warmup) ms.push_back(dt);
  }
  if (a.profile) {
    auto prof = profiled_runs(*session, inputs, a.profile_runs);
    if (!prof.is_ok()) return fail(cmd, prof.status());
    // A worker process's hand-off (the inputs' and outputs' copies, messages and
    // wake-ups) is reported apart from the kernels.
    auto kernels_end = std::stable_partition(prof->begin(), prof->end(),
                                             [](const NodeProfile& p) { return p.op_type != isolate::kIsolationOp; });
    const std::vector<NodeProfile> handoff(kernels_end, prof->end());
    prof->erase(kernels_end, prof->end());
    std::map<std::string, std::pair<double, int>> by_op;
    double total = 0;
    for (auto& p : *prof) {
      by_op[p.op_type].first += p.ms;
      by_op[p.op_type].second++;
      total += p.ms;
    }
    std::vector<std::pair<double, std::string>> order;
    for (auto& [op, v] : by_op) order.emplace_back(v.first, op);
    std::sort(order.rbegin(), order.rend());
    if (a.profile_runs == 1) std::printf("profile (one run, %.3f ms in kernels):\n", total);
    else std::printf("profile (each node's median over %d runs, %.3f ms in kernels):\n", a.profile_runs, total);
    for (auto& [ms, op] : order)
      std::printf("  %-24s %5d nodes %9.3f ms %5.1f%%\n", op.c_str(), by_op[op].second, ms, 100 * ms / total);
    std::sort(prof->begin(), prof->end(), [](const NodeProfile& x, const NodeProfile& y) { return x.ms > y.ms; });
    std::printf("slowest nodes:\n");
    for (size_t i = 0; i < prof->size() && i < static_cast<size_t>(a.profile_nodes); ++i)
      std::printf("  %-28s %-14s %9.3f ms  %s\n", printable((*prof)[i].node).c_str(), printable((*prof)[i].op_type).c_str(),
                  (*prof)[i].ms, (*prof)[i].shapes.c_str());
    if (!handoff.empty()) {
      double sum = 0;
      for (auto& h : handoff) sum += h.ms;
      std::printf("hand-off to the worker process (%.3f ms of the run):\n", sum);
      for (auto& h : handoff)
        std::printf("  %-28s %9.3f ms  %s\n", printable(h.node).c_str(), h.ms, h.shapes.c_str());
    }
  }
  if (!a.quiet) {
    std::printf("model %s\n", printable(a.model).c_str());
    for (auto& [dev, n] : session->placement()) std::printf("  %s: %d nodes\n", dev.c_str(), n);
    const Session::PrecisionUse prec = session->precision();
    if (prec.requested != "fp32")
      std::printf("  precision %s (%d nodes compute in bf16)%s%s\n", prec.effective.c_str(), prec.bf16_nodes,
                  prec.note.empty() ? "" : ": ", prec.note.c_str());
    for (auto& m : session->memory()) {
      std::printf("  %s memory: peak %s in use, %s kept for reuse", m.device.c_str(), bytes_text(m.stats.peak).c_str(),
                  bytes_text(m.stats.cached).c_str());
      if (m.stats.arena)
        std::printf(" (a %s arena holds %zu tensors of each run, placed by lifetime)", bytes_text(m.stats.arena).c_str(),
                    m.stats.arena_blocks);
      std::printf("\n");
    }
    for (auto& [name, t] : *outs)
      std::printf("output %-24s %-20s %s\n", printable(name).c_str(), t.describe().c_str(), stats(t).c_str());
  }
  std::printf("session created in %.3f ms\n", create_ms);
  // Time to the first result: creation and the first run (which pays for whatever a
  // session makes on first use).
  std::printf("first run in %.3f ms (created and run once: %.3f ms)\n", first_ms, create_ms + first_ms);
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  double median = sorted.size() % 2 ? sorted[sorted.size() / 2] : (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]) / 2;
  // What a run may use: the threads asked for, at most the machine's cores (core budget).
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int used = a.threads == 0 ? cores : std::min(a.threads, cores);
  const Session::ThreadUse tu = session->threads();
  std::string threads = "threads " + std::to_string(tu.note.empty() ? used : tu.effective);
  if (!tu.note.empty()) threads += ": " + tu.note;
  if (a.threads > cores)
    threads += (tu.note.empty() ? ": " : "; ") + std::to_string(a.threads) + " asked for, " + std::to_string(cores) + " cores";
  else if (!tu.note.empty())
    threads += ", " + std::to_string(a.threads ? a.threads : cores) + " asked for";
  std::printf("latency over %d run(s): median %.3f ms  min %.3f ms  (%s)\n", a.repeat, median, sorted.front(), threads.c_str());

  if (!a.output_dir.empty()) {
    // Serialise everything first, then write all or nothing (io/file_set.h).
    std::vector<std::pair<std::string, std::string>> files;
    std::map<std::string, std::string> owner;  // file name -> output name
    for (auto& [name, t] : *outs) {
      std::string file = io::safe_file_name(name) + ".npy";
      auto [it, fresh] = owner.emplace(file, name);
      if (!fresh)
        return fail(cmd, "outputs '" + printable(it->second) + "' and '" + printable(name) + "' would both be written to '" +
                             file + "'; nothing was written");
      auto bytes = io::to_npy(t);
      if (!bytes.is_ok()) return fail(cmd, bytes.status().with_context("output '" + printable(name) + "': ").message() + "; nothing was written", 1);
      files.emplace_back(a.output_dir + "/" + file, std::move(bytes).value());
    }
    Status s = io::write_files_all_or_nothing(files);
    if (!s.is_ok()) return fail(cmd, s);
    for (auto& [path, bytes] : files) std::printf("wrote %s\n", printable(path).c_str());
  }
  return 0;
}

}  // namespace

void add_run(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand("run", "Run a model on .npy inputs; print outputs, statistics and latency");
  cmd->add_option("model", a->model, "ONNX model file")->required();
  cmd->add_option("-i,--input", a->inputs, "NAME=FILE.npy (repeatable; FILE.npy alone for a one-input model)");
  cmd->add_option("-d,--device", a->devices, "devices in order of preference, e.g. cpu or vulkan:0,cpu");
  cmd->add_option("-t,--threads", a->threads, "intra-op threads (0 = all cores)");
  cmd->add_option("-O,--optimization-level", a->optimization_level, "graph optimisations: 2 (default: fusions and CPU blocked layout), 1 (fusions only) or 0 (off)");
  cmd->add_option("--precision", a->precision,
                  "CPU arithmetic of convolutions and matrix products: fp32 (default) or bf16 (fast on AMX / AVX512-BF16; "
                  "about 1e-2 relative error: see `bulkhead check --precision bf16`)");
  cmd->add_option("--isolation", a->isolation, "in-process (default) or process: run the model in a worker process");
  cmd->add_option("--submit-policy", a->submit_policy,
                  "GPU submission policy: single, per-dispatch, split, auto or auto:<bytes>[K|M|G] (default: the device's)");
  cmd->add_flag("--no-capture", a->no_capture, "GPU: record and submit every run anew (no graph capture)");
  cmd->add_flag("--release-idle-memory", a->release_idle_memory,
                "CPU: give the run memory back to the system after every run (SessionOptions::release_idle_memory)");
  cmd->add_option("-r,--repeat", a->repeat, "timed runs (median and min are printed)");
  cmd->add_option("--warmup", a->warmup, "untimed runs first (default 1 when --repeat > 1)");
  cmd->add_option("-o,--output-dir", a->output_dir, "write each output as NAME.npy here (all or nothing)")
      ->each([a](const std::string&) { a->output_dir_given = true; });
  cmd->add_option("--max-file-size", a->max_file_size, "largest model, external data or input file to read (default 64G)");
  cmd->add_option("--timeout", a->timeout_ms, "milliseconds a run may take (default: no limit)");
  cmd->add_option("--max-tensor-size", a->max_tensor_size, "largest tensor a run may create, e.g. 2G (default: no limit)");
  cmd->add_option("--max-loop-iterations", a->max_loop_iterations, "most iterations of one Loop/Scan node per run (default: no limit)");
  cmd->add_flag("-q,--quiet", a->quiet, "print only the session-creation and latency lines");
  cmd->add_flag("--profile", a->profile, "print time per operator type for extra runs (--profile-runs, default one)");
  cmd->add_option("--profile-nodes", a->profile_nodes, "with --profile: how many of the slowest nodes to list (default 8)");
  cmd->add_option("--profile-runs", a->profile_runs, "with --profile: profiled runs; each node's median over them is printed (default 1)");
  cmd->callback([a]() {
    int rc = run_cmd(*a);
    if (rc) throw CLI::RuntimeError(rc);
  });
}

}  // namespace bulkhead::cli
