// isolation_bench: what process isolation (SessionOptions::isolation = "process") costs.
//   1. per-call overhead on a tiny model (Add of two float32[1,4]): median latency of
//      many runs in-process and in a worker process;
//   2. the hand-off cost per MiB, each direction on its own:
//      - inputs: `Shape(x)` of a float32 x of 1, 4, 16 and 64 MiB — the model never
//        touches x's bytes, so in a worker the extra time is the copy of x into shared
//        memory and the request;
//      - inputs the caller wrote into Session::allocate_input: the same, and the worker
//        reads x where it is, so the extra time is the request alone, whatever the size;
//      - outputs: `ConstantOfShape(n)` making 1–64 MiB of float32 — both sessions fill
//        the tensor; a worker's run writes it straight into the shared-memory region
//        the supervisor reads once the session's memory plan holds, so its extra time is
//        the request and the reply, whatever the size.
//      extra/MiB is (process − in-process) / MiB; for inputs, GB/s is the copy rate that
//      implies.
// Both sessions run in this process, one after the other, on 1 intra-op thread, with
// glibc's malloc as a user gets it (no tuning variables): the worker keeps its tensors in
// the same lifetime-planned arena as an in-process session and its shared-memory regions
// from run to run, so a run does not fault in fresh pages for them.
//
//   isolation_bench [--calls N] [--big-calls N] [--worker PATH]
#include <algorithm>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bulkhead/bulkhead.hpp"
#include "demo/demo_model.h"

namespace {

using namespace bulkhead;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// Median milliseconds per run over `calls` runs, after `warmup` untimed ones.
double time_runs(const Session& s, const NamedTensors& in, int calls, int warmup) {
  std::vector<double> ms;
  for (int i = 0; i < warmup + calls; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    auto r = s.run(in);
    double dt = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!r.is_ok()) {
      std::fprintf(stderr, "isolation_bench: error: %s\n", r.status().message().c_str());
      std::exit(1);
    }
    if (i >= warmup) ms.push_back(dt);
  }
  return median(ms);
}

Session load(const Env& env, const std::string& text, const std::string& name, bool process, const std::string& worker) {
  auto bytes = demo::model_from_text(text);
  if (!bytes.is_ok()) {
    std::fprintf(stderr, "isolation_bench: error: %s\n", bytes.status().message().c_str());
    std::exit(1);
  }
  SessionOptions o;
  o.threads = 1;
  if (process) {
    o.isolation = "process";
    o.worker_binary = worker;
  }
  auto s = env.load_bytes(*bytes, name, o);
  if (!s.is_ok()) {
    std::fprintf(stderr, "isolation_bench: error: %s\n", s.status().message().c_str());
    std::exit(1);
  }
  return *s;
}

}  // namespace

int main(int argc, char** argv) {
  int calls = 2000, big_calls = 15;
  std::string worker = BULKHEAD_BINARY;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--calls" && i + 1 < argc) calls = std::atoi(argv[++i]);
    else if (a == "--big-calls" && i + 1 < argc) big_calls = std::atoi(argv[++i]);
    else if (a == "--worker" && i + 1 < argc) worker = argv[++i];
    else {
      std::fprintf(stderr, "usage: isolation_bench [--calls N] [--big-calls N] [--worker PATH]\n");
      return 2;
    }
  }
  if (calls < 1 || big_calls < 1) {
    std::fprintf(stderr, "isolation_bench: error: --calls and --big-calls must be at least 1\n");
    return 2;
  }
  Env env;

  const char* tiny = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,4] x, float[1,4] z) => (float[1,4] y) { y = Add(x, z) })";
  NamedTensors tiny_in = {{"x", Tensor::from_vector<float>(DataType::kFloat32, {1, 4}, {1, 2, 3, 4})},
                          {"z", Tensor::from_vector<float>(DataType::kFloat32, {1, 4}, {5, 6, 7, 8})}};
  double t_in = time_runs(load(env, tiny, "tiny", false, worker), tiny_in, calls, 100);
  double t_proc = time_runs(load(env, tiny, "tiny", true, worker), tiny_in, calls, 100);
  std::printf("per-call overhead, tiny model (Add float32[1,4]), median of %d runs\n", calls);
  std::printf("  %-12s %10s %10s %10s\n", "", "in-process", "process", "overhead");
  std::printf("  %-12s %8.1f us %8.1f us %8.1f us\n\n", "per call", t_in * 1e3, t_proc * 1e3, (t_proc - t_in) * 1e3);

  const char* shape_of = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[N] x) => (int64[1] y) { y = Shape(x) })";
  const char* constant_of = R"(<ir_version: 8, opset_import: ["" : 17]>
g (int64[1] n) => (float[N] y) { y = ConstantOfShape <value = float[1] {1.5}> (n) })";
  struct Direction {
    const char* title;
    const char* model;
    bool input;
    bool allocated = false;  // x from the remote session's allocate_input
  };
  std::printf("hand-off cost per direction, median of %d runs\n", big_calls);
  for (const Direction& d : {Direction{"inputs (Shape of x)", shape_of, true},
                             Direction{"inputs written into allocate_input (Shape of x, read in place)", shape_of, true, true},
                             Direction{"outputs (ConstantOfShape, written in place)", constant_of, false}}) {
    Session local = load(env, d.model, "handoff", false, worker);
    Session remote = load(env, d.model, "handoff", true, worker);
    std::printf("  %s\n  %-8s %12s %12s %12s %12s %10s\n", d.title, "size", "in-process", "process", "extra",
                "extra/MiB", d.input && !d.allocated ? "copy rate" : "");
    for (int mib : {1, 4, 16, 64}) {
      const int64_t n = int64_t{mib} * 1024 * 1024 / 4;
      NamedTensors in;
      if (d.input) {
        Tensor x = Tensor::host(DataType::kFloat32, {n});
        if (d.allocated) {
          auto shared = remote.allocate_input(DataType::kFloat32, {n});
          if (!shared.is_ok()) {
            std::fprintf(stderr, "isolation_bench: error: %s\n", shared.status().message().c_str());
            return 1;
          }
          x = *shared;
        }
        for (int64_t i = 0; i < n; ++i) x.data<float>()[i] = static_cast<float>(i % 1000);
        in = {{"x", x}};
      } else {
        in = {{"n", Tensor::from_vector<int64_t>(DataType::kInt64, {1}, {n})}};
      }
      double a = time_runs(local, in, big_calls, 3);
      double b = time_runs(remote, in, big_calls, 3);
      const double per_mib = (b - a) / mib;
      std::printf("  %4d MiB %9.3f ms %9.3f ms %9.3f ms %9.3f ms", mib, a, b, b - a, per_mib);
      if (d.input && !d.allocated) std::printf(" %7.1f GB/s", per_mib > 0 ? 1.048576 / per_mib : 0.0);
      std::printf("\n");
    }
  }
  return 0;
}
