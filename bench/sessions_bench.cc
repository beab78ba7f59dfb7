// sessions_bench: resident memory of N sessions of one model in one process, with the
// weights shared across sessions (the default) and without (share_weights=0).
//
//   sessions_bench [--model PATH] [--counts 1,4,8] [--threads T] [--runs R]
//                  [--release-idle-after-ms MS | --release-idle-memory] [--json]
//
// Default model: light_resnet50 from ../shared/onnx-backend-data/light. Each (count,
// sharing) configuration runs in a child process of its own, so that one's memory never
// counts in another's. In it: N sessions are created, each runs R times (making every
// packed weight and its arena's steady state) on one input, and the process's resident
// memory (/proc/self/statm) is read at start, after creation, just after the runs (each
// session still holds its arena for its next run) and once the sessions have been idle
// long enough to give their run memory back (SessionOptions::release_idle_after_ms:
// 5000 ms by default; polled until every session's arena and cache are back, at most 3 s
// past the time; not measured with -1). The
// input: the model's reference input where its folder has one (inputs/NAME.npy, as in
// ../shared/models), else random values (dynamic dimensions as 1). Every session's output
// is compared with the first session's: a difference is an error (exit 2). The table
// gives each row's resident memory over the one-session row of the same sharing, what
// the Env shares (weights and packed weights) and one session's own memory (its arena).
// --release-idle-after-ms MS sets that time (0 = whenever no run of the session is open,
// as --release-idle-memory; -1 = never).
#include <sys/wait.h>
#include <unistd.h>

#include <malloc.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "bulkhead/bulkhead.hpp"
#include "io/npy.h"

namespace {

using namespace bulkhead;

[[noreturn]] void die(const std::string& msg) { bench::die("sessions_bench", msg); }
using bench::rss_mib;

struct Row {
  int count = 0;
  bool share = false;
  double start = 0, created = 0, ran = 0;
  double idle = -1;         // after the idle time (-1: not measured)
  double shared_mib = 0;
  double private_mib = 0;  // the first session's own memory (in use + cached) after its runs
};

// One configuration, in this (child) process; writes its row to `fd`.
int measure(const std::string& model, int count, bool share, int release_after_ms, int threads, int runs, int fd) {
  Row row;
  row.count = count;
  row.share = share;
  row.start = rss_mib();
  Env env;
  SessionOptions o;
  o.threads = threads;
  o.share_weights = share;
  o.release_idle_after_ms = release_after_ms;
  std::vector<Session> ss;
  for (int i = 0; i < count; ++i) {
    auto s = env.load(model, o);
    if (!s.is_ok()) die(s.status().message());
    ss.push_back(*s);
  }
  row.created = rss_mib();

  NamedTensors in;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(-1, 1);
  const std::string dir = model.substr(0, model.find_last_of('/') + 1);
  for (const IoInfo& io : ss[0].inputs()) {
    // The model's reference input where it has one (../shared/models/*/inputs), else random.
    if (access((dir + "inputs/" + io.name + ".npy").c_str(), R_OK) == 0) {
      auto t = io::read_npy(dir + "inputs/" + io.name + ".npy");
      if (!t.is_ok()) die(t.status().message());
      in.emplace_back(io.name, *t);
      continue;
    }
    if (io.dtype != DataType::kFloat32 || !io.has_shape) die("input '" + io.name + "' is not a float32 tensor of known shape");
    Shape shape;
    for (int64_t v : io.shape) shape.push_back(v < 0 ? 1 : v);
    Tensor t = Tensor::host(DataType::kFloat32, shape);
    for (int64_t k = 0; k < t.numel(); ++k) t.data<float>()[k] = d(rng);
    in.emplace_back(io.name, t);
  }
  NamedTensors first;
  for (int r = 0; r < runs; ++r)
    for (size_t k = 0; k < ss.size(); ++k) {
      auto out = ss[k].run(in);
      if (!out.is_ok()) die(out.status().message());
      if (k == 0 && r == 0) {
        first = *out;
        continue;
      }
      for (size_t j = 0; j < first.size(); ++j)
        if (std::memcmp((*out)[j].second.raw(), first[j].second.raw(), first[j].second.nbytes()) != 0) {
          std::fprintf(stderr, "sessions_bench: session %zu's output '%s' differs from session 0's\n", k,
                       first[j].first.c_str());
          return 2;
        }
    }
  row.ran = rss_mib();
  row.shared_mib = (env.shared_weights().bytes + env.shared_weights().packed_bytes) / 1048576.0;
  for (const auto& m : ss[0].memory()) row.private_mib += (m.stats.in_use + m.stats.cached) / 1048576.0;
  if (release_after_ms >= 0) {
    using Clock = std::chrono::steady_clock;
    const auto ran_at = Clock::now();
    auto all_given_back = [&] {
      for (const Session& s : ss)
        for (const auto& m : s.memory())
          if (m.stats.arena > 0 || m.stats.cached > 0) return false;
      return true;
    };
    while (Clock::now() - ran_at < std::chrono::milliseconds(release_after_ms + 3000) &&
           !(Clock::now() - ran_at >= std::chrono::milliseconds(release_after_ms) && all_given_back()))
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    row.idle = rss_mib();
  }
  if (write(fd, &row, sizeof row) != sizeof row) return 1;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = std::string(BULKHEAD_SHARED_DIR) + "/onnx-backend-data/light/light_resnet50.onnx";
  std::vector<int> counts{1, 4, 8};
  int threads = 1, runs = 2;
  bool json = false;
  int release_after_ms = SessionOptions{}.release_idle_after_ms;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    auto integer = [&](const std::string& v, int lo, int hi) {
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || n < lo || n > hi)
        die(a + " expects integers " + std::to_string(lo) + ".." + std::to_string(hi) + ", got '" + v + "'");
      return static_cast<int>(n);
    };
    if (a == "--model") model = next();
    else if (a == "--threads") threads = integer(next(), 0, 256);
    else if (a == "--runs") runs = integer(next(), 1, 1000);
    else if (a == "--json") json = true;
    else if (a == "--release-idle-memory") release_after_ms = 0;
    else if (a == "--release-idle-after-ms") release_after_ms = integer(next(), -1, 600000);
    else if (a == "--counts") {
      counts.clear();
      std::stringstream s(next());
      for (std::string c; std::getline(s, c, ',');) counts.push_back(integer(c, 1, 64));
    } else
      die("unknown option '" + a +
          "' (known: --model, --counts, --threads, --runs, --release-idle-after-ms, --release-idle-memory, --json)");
  }
  if (access(model.c_str(), R_OK) != 0) die("cannot read model '" + model + "'");

  std::vector<Row> rows;
  for (bool share : {true, false})
    for (int count : counts) {
      int fds[2];
      if (pipe(fds) != 0) die("pipe failed");
      pid_t pid = fork();
      if (pid < 0) die("fork failed");
      if (pid == 0) {
        close(fds[0]);
        _exit(measure(model, count, share, release_after_ms, threads, runs, fds[1]));
      }
      close(fds[1]);
      Row row;
      ssize_t got = read(fds[0], &row, sizeof row);
      close(fds[0]);
      int status = 0;
      waitpid(pid, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || got != sizeof row)
        die("the measurement of " + std::to_string(count) + " session(s) failed (exit " +
            std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")");
      rows.push_back(row);
    }

  auto base = [&](bool share, double Row::*field) {
    for (const Row& r : rows)
      if (r.share == share && r.count == counts.front()) return r.*field;
    return 0.0;
  };
  if (json) {
    std::printf("[");
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::printf("%s{\"sessions\": %d, \"share_weights\": %s, \"rss_start_mib\": %.1f, \"rss_created_mib\": %.1f, "
                  "\"rss_after_runs_mib\": %.1f, \"shared_mib\": %.1f, \"session_private_mib\": %.1f, \"ratio_to_first\": %.3f",
                  i ? ", " : "", r.count, r.share ? "true" : "false", r.start, r.created, r.ran, r.shared_mib,
                  r.private_mib, r.ran / base(r.share, &Row::ran));
      if (r.idle >= 0)
        std::printf(", \"rss_idle_mib\": %.1f, \"idle_ratio_to_first\": %.3f", r.idle, r.idle / base(r.share, &Row::idle));
      std::printf("}");
    }
    std::printf("]\n");
    return 0;
  }
  std::printf("model: %s, %d thread(s), %d run(s) per session, release_idle_after_ms %d\n", model.c_str(), threads, runs,
              release_after_ms);
  std::printf("%-8s %-6s %10s %12s %12s %10s %12s %8s %10s %8s\n", "sessions", "share", "start MiB", "created MiB",
              "after runs", "shared", "per session", "ratio", "idle MiB", "ratio");
  for (const Row& r : rows) {
    std::printf("%-8d %-6s %10.1f %12.1f %12.1f %10.1f %12.1f %8.2f", r.count, r.share ? "yes" : "no", r.start, r.created,
                r.ran, r.shared_mib, r.private_mib, r.ran / base(r.share, &Row::ran));
    if (r.idle >= 0) std::printf(" %10.1f %8.2f", r.idle, r.idle / base(r.share, &Row::idle));
    std::printf("\n");
  }
  return 0;
}
