#include "backends/cpu/omp_placement.h"

#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace bulkhead::cpu {

namespace {

bool placement_on() {
  static const bool on = [] {
    for (const char* v : {"OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY"})
      if (const char* e = std::getenv(v); e && *e) return false;
    const char* e = std::getenv("BULKHEAD_CPU_PLACE_WORKERS");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}

// The calling thread's OpenMP workers as last placed.
struct Placement {
  int team = 0;               // the team size whose workers `tids` holds (0: none learnt)
  std::vector<pid_t> tids;    // the workers' thread ids
  int away_from = -1;         // the CPU they were kept off
};
thread_local Placement placed;

// Learns the thread ids of a team of `threads` and has each worker keep to `allowed`.
void learn_team(int threads, const cpu_set_t& allowed) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<pid_t> tids;
  int team = 0;
#pragma omp parallel num_threads(threads)
  {
    if (omp_get_thread_num() != 0) {
      // Off the caller's CPU first, so that this thread is not the one the caller waits for
      // on its own CPU at the region's end.
      (void)sched_setaffinity(0, sizeof allowed, &allowed);
      std::lock_guard lock(mu);
      tids.push_back(gettid());
      cv.notify_all();
    } else {
      // Sleep rather than spin: a worker that was put on this CPU runs meanwhile.
      std::unique_lock lock(mu);
      team = omp_get_num_threads();
      cv.wait(lock, [&] { return static_cast<int>(tids.size()) >= team - 1; });
    }
  }
  placed.team = threads;
  placed.tids = std::move(tids);
}

}  // namespace

void place_openmp_workers(int threads) {
  if (threads <= 1 || !placement_on()) return;
  const int cpu = sched_getcpu();
  if (cpu < 0) return;
  if (placed.team == threads && placed.away_from == cpu) return;  // as placed: the usual case
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || cpu >= CPU_SETSIZE) return;
  CPU_CLR(cpu, &allowed);
  if (CPU_COUNT(&allowed) == 0) return;  // no other CPU
  if (placed.team != threads) {
    learn_team(threads, allowed);  // each worker keeps to `allowed` itself
  } else {
    for (pid_t tid : placed.tids)
      if (sched_setaffinity(tid, sizeof allowed, &allowed) != 0) {
        learn_team(threads, allowed);  // a worker gone (its pool made anew): learn the team again
        break;
      }
  }
  placed.away_from = cpu;
}

int openmp_workers_kept_off() { return placed.away_from; }

}  // namespace bulkhead::cpu
