// concurrent_bench: several sessions of one model run at once in one process, each from
// its own thread, against the same sessions run one at a time — what the process-wide
// core budget (src/backends/cpu/core_budget.h) buys when the sessions together ask for
// more threads than there are cores.
//
//   concurrent_bench [--sessions K] [--threads T] [--runs N] [MODEL.onnx]
//
// Default: 2 sessions of light_squeezenet, 2 threads each, 200 runs per session. Inputs are
// float32 tensors of the declared shapes (unknown dimensions set to 1), filled with a
// fixed pattern. Printed:
//   - alone: each session's median latency when it runs by itself;
//   - together: the median latency of every run while all K run at once, the wall time of
//     the whole and the throughput (runs per second over all sessions), and the process's
//     CPU time per run (user + system: threads spinning or waiting on a descheduled team
//     member show up here);
//   - whether every concurrent result is bit-identical to the session's result alone.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bulkhead/bulkhead.hpp"

namespace {

using namespace bulkhead;

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "concurrent_bench: error: %s\n", msg.c_str());
  std::exit(1);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

NamedTensors make_inputs(const Session& s) {
  NamedTensors in;
  for (const IoInfo& io : s.inputs()) {
    if (!io.is_tensor || io.dtype != DataType::kFloat32 || !io.has_shape)
      die("input '" + io.name + "' is " + io.type_string + "; this benchmark feeds float32 tensors of known rank only");
    Shape shape;
    for (int64_t d : io.shape) shape.push_back(d < 0 ? 1 : d);
    Tensor t = Tensor::host(DataType::kFloat32, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i % 251) / 251.f - 0.5f;
    in.emplace_back(io.name, t);
  }
  return in;
}

bool same(const NamedTensors& a, const NamedTensors& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].second.nbytes() != b[i].second.nbytes() ||
        std::memcmp(a[i].second.raw(), b[i].second.raw(), a[i].second.nbytes()) != 0)
      return false;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int sessions = 2, threads = 2, runs = 200;
  std::string model = std::string(BULKHEAD_SHARED_DIR) + "/onnx-backend-data/light/light_squeezenet.onnx";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) {
      if (i + 1 >= argc) die(std::string(name) + " needs a value");
      int v = std::atoi(argv[++i]);
      if (v < 1) die(std::string(name) + " must be a positive integer, got '" + argv[i] + "'");
      return v;
    };
    if (a == "--sessions") sessions = value("--sessions");
    else if (a == "--threads") threads = value("--threads");
    else if (a == "--runs") runs = value("--runs");
    else if (!a.empty() && a[0] == '-') die("unknown option '" + a + "'");
    else model = a;
  }

  Env env;
  SessionOptions o;
  o.threads = threads;
  std::vector<Session> ss;
  std::vector<NamedTensors> inputs, expected;
  for (int k = 0; k < sessions; ++k) {
    auto s = env.load(model, o);
    if (!s.is_ok()) die(s.status().message());
    ss.push_back(*s);
    inputs.push_back(make_inputs(ss.back()));
  }

  // Alone: each session by itself (its primitives are made for `threads` here).
  std::printf("model %s: %d sessions, %d threads each, %d runs per session, %u cores\n", model.c_str(), sessions,
              threads, runs, std::thread::hardware_concurrency());
  std::vector<double> alone_ms;
  double alone_wall = 0, alone_cpu = 0;
  for (int k = 0; k < sessions; ++k) {
    for (int i = 0; i < 3; ++i) {  // warm-up: the first run makes the primitives and plans the arena
      auto r = ss[k].run(inputs[k]);
      if (!r.is_ok()) die(r.status().message());
      if (i == 0) expected.push_back(*r);
    }
    double cpu0 = cpu_seconds(), wall0 = now_ms();
    for (int i = 0; i < runs; ++i) {
      double t0 = now_ms();
      auto r = ss[k].run(inputs[k]);
      if (!r.is_ok()) die(r.status().message());
      alone_ms.push_back(now_ms() - t0);
    }
    alone_wall += now_ms() - wall0;
    alone_cpu += cpu_seconds() - cpu0;
  }
  std::printf("alone:    median %.3f ms per run, %.1f runs/s, CPU %.3f ms per run\n", median(alone_ms),
              sessions * runs / (alone_wall / 1000), 1000 * alone_cpu / (sessions * runs));

  // Together: every session on its own thread at once.
  std::vector<std::vector<double>> ms(sessions);
  std::vector<int> wrong(sessions, 0);
  std::vector<std::thread> ts;
  double cpu0 = cpu_seconds(), wall0 = now_ms();
  for (int k = 0; k < sessions; ++k)
    ts.emplace_back([&, k] {
      for (int i = 0; i < runs; ++i) {
        double t0 = now_ms();
        auto r = ss[k].run(inputs[k]);
        ms[k].push_back(now_ms() - t0);
        if (!r.is_ok() || !same(*r, expected[k])) ++wrong[k];
      }
    });
  for (auto& t : ts) t.join();
  double wall = now_ms() - wall0, cpu = cpu_seconds() - cpu0;
  std::vector<double> all;
  int bad = 0;
  for (int k = 0; k < sessions; ++k) {
    all.insert(all.end(), ms[k].begin(), ms[k].end());
    bad += wrong[k];
  }
  std::printf("together: median %.3f ms per run, %.1f runs/s, CPU %.3f ms per run, wall %.0f ms\n", median(all),
              sessions * runs / (wall / 1000), 1000 * cpu / (sessions * runs), wall);
  std::printf("results: %s\n", bad ? "DIFFER from the sessions' results alone" : "bit-identical to each session alone");
  return bad ? 2 : 0;
}
