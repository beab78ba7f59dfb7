// burst_bench: what a burst of overlapping runs leaves behind in resident memory.
//
//   burst_bench [--threads-per-run T] [--burst-threads K] [--burst-ms MS]
//               [--max-concurrent-runs N] [--rounds R]
//
// Three CPU sessions of the real OCR models (ppocrv4_rec twice, ppocrv4_det), each with
// its reference inputs from ../shared/models. Printed, with the process's resident memory
// (/proc/self/statm) at each point:
//   - after loading, and after each session's solo runs (the steady state);
//   - after a burst: K threads run the three sessions round-robin, all at once, for MS
//     milliseconds (bounded: at most 200 runs per thread), so runs of one session overlap;
//   - after the burst is over and each session ran once more alone;
//   - Session::memory() of each session (in use, cached, arena, peak) at the end.
// With --max-concurrent-runs N each session executes at most N runs at once (the rest
// wait). Every burst result is compared with the session's solo result: any difference
// is an error (exit 2).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "bulkhead/bulkhead.hpp"
#include "io/npy.h"

namespace {

using namespace bulkhead;

[[noreturn]] void die(const std::string& msg) { bench::die("burst_bench", msg); }
using bench::rss_mib;

bool same(const NamedTensors& a, const NamedTensors& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].second.nbytes() != b[i].second.nbytes() ||
        std::memcmp(a[i].second.raw(), b[i].second.raw(), a[i].second.nbytes()) != 0)
      return false;
  return true;
}

double mib(size_t b) { return b / 1048576.0; }

}  // namespace

int main(int argc, char** argv) {
  int per_run = 1, burst_threads = 8, burst_ms = 3000, max_concurrent = 0, rounds = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name, int lo) {
      if (i + 1 >= argc) die(std::string(name) + " needs a value");
      char* end = nullptr;
      long v = std::strtol(argv[++i], &end, 10);
      if (*end || v < lo || v > 1000000) die(std::string(name) + " must be an integer >= " + std::to_string(lo) + ", got '" + argv[i] + "'");
      return static_cast<int>(v);
    };
    if (a == "--threads-per-run") per_run = value("--threads-per-run", 1);
    else if (a == "--burst-threads") burst_threads = value("--burst-threads", 1);
    else if (a == "--burst-ms") burst_ms = value("--burst-ms", 1);
    else if (a == "--max-concurrent-runs") max_concurrent = value("--max-concurrent-runs", 0);
    else if (a == "--rounds") rounds = value("--rounds", 1);
    else die("unknown option '" + a + "'");
  }
  const std::string models = std::string(BULKHEAD_SHARED_DIR) + "/models/";
  const char* names[] = {"ppocrv4_rec", "ppocrv4_rec", "ppocrv4_det"};

  std::printf("resident at start: %.1f MiB\n", rss_mib());
  Env env;
  SessionOptions o;
  o.threads = per_run;
  o.max_concurrent_runs = max_concurrent;
  std::vector<Session> ss;
  std::vector<NamedTensors> inputs, expected;
  for (const char* n : names) {
    auto s = env.load(models + n + "/model.onnx", o);
    if (!s.is_ok()) die(s.status().message());
    NamedTensors in;
    for (const IoInfo& io : s->inputs()) {
      auto t = io::read_npy(models + n + "/inputs/" + io.name + ".npy");
      if (!t.is_ok()) die(t.status().message());
      in.emplace_back(io.name, *t);
    }
    ss.push_back(*s);
    inputs.push_back(in);
  }
  std::printf("resident after loading 3 sessions: %.1f MiB\n", rss_mib());
  for (size_t k = 0; k < ss.size(); ++k)
    for (int i = 0; i < 3; ++i) {
      auto r = ss[k].run(inputs[k]);
      if (!r.is_ok()) die(r.status().message());
      if (i == 0) expected.push_back(*r);
    }
  const double solo = rss_mib();
  std::printf("resident after solo runs: %.1f MiB\n", solo);

  int bad = 0;
  double after_burst = 0, settled = 0;
  for (int round = 0; round < rounds; ++round) {
    std::atomic<int> runs{0}, wrong{0};
    std::vector<std::thread> ts;
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(burst_ms);
    for (int t = 0; t < burst_threads; ++t)
      ts.emplace_back([&, t] {
        for (int i = 0; i < 200 && std::chrono::steady_clock::now() < end; ++i) {
          size_t k = (t + i) % ss.size();
          auto r = ss[k].run(inputs[k]);
          if (!r.is_ok() || !same(*r, expected[k])) ++wrong;
          ++runs;
        }
      });
    std::atomic<bool> done{false};
    double most = 0;
    std::thread sampler([&] {
      while (!done) {
        most = std::max(most, rss_mib());
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    });
    for (auto& t : ts) t.join();
    done = true;
    sampler.join();
    after_burst = rss_mib();
    for (size_t k = 0; k < ss.size(); ++k) {
      auto r = ss[k].run(inputs[k]);
      if (!r.is_ok() || !same(*r, expected[k])) ++wrong;
    }
    settled = rss_mib();
    std::printf("burst %d: %d threads, %d runs in %d ms; resident at most %.1f MiB during it, %.1f MiB right after, "
                "%.1f MiB after one more solo run each (%+.1f%% against the solo steady state)%s\n",
                round + 1, burst_threads, runs.load(), burst_ms, most, after_burst, settled, 100 * (settled - solo) / solo,
                wrong ? "; RESULTS DIFFER" : "");
    bad += wrong;
  }
  for (size_t k = 0; k < ss.size(); ++k) {
    const Session::RunCounts rc = ss[k].runs();
    std::printf("session %zu (%s): at most %d runs at once (limit %d), %llu runs waited for a slot\n", k, names[k],
                rc.most_at_once, rc.limit, static_cast<unsigned long long>(rc.waited));
    for (const auto& m : ss[k].memory())
      std::printf("session %zu (%s) %s: in use %.1f MiB, cached %.1f MiB, arena %.1f MiB, peak %.1f MiB, trimmed %.1f MiB\n", k,
                  names[k], m.device.c_str(), mib(m.stats.in_use), mib(m.stats.cached), mib(m.stats.arena), mib(m.stats.peak),
                  mib(m.stats.trimmed));
  }
  return bad ? 2 : 0;
}
