// The process-wide core budget of CPU runs (backends/cpu/core_budget.h), that a run
// granted fewer threads than its session asked for really runs on no more, and that the
// OpenMP workers of a calling thread are kept off its CPU (backends/cpu/omp_placement.h).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <future>
#include <mutex>
#include <omp.h>
#include <sched.h>
#include <sstream>
#include <thread>
#include <vector>

#include "backends/cpu/core_budget.h"
#include "backends/cpu/omp_placement.h"
#include "support/test_util.h"

namespace bulkhead::cpu {
namespace {

TEST(CoreBudget, GrantsWhatIsFreeAndAtLeastOne) {
  CoreBudget b(2);
  int first = b.acquire(2);
  EXPECT_EQ(first, 2);
  int second = b.acquire(2);  // nothing free: one thread, never a wait
  EXPECT_EQ(second, 1);
  EXPECT_EQ(b.in_use(), 3);
  b.release(first);
  EXPECT_EQ(b.acquire(4), 1);  // one core free of two
  b.release(second);
  b.release(1);
  EXPECT_EQ(b.in_use(), 0);
  EXPECT_EQ(b.acquire(1), 1);
  EXPECT_EQ(b.acquire(1), 1);
  EXPECT_EQ(b.in_use(), 2);
}

TEST(CoreBudget, ConcurrentRunsNeverExceedTheCoresWhileThereIsRoom) {
  CoreBudget b(4);
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        int g = b.acquire(2);
        EXPECT_GE(g, 1);
        EXPECT_LE(g, 2);
        b.release(g);
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(b.in_use(), 0);
}

// The OS threads of this process. OpenMP keeps a team's workers in a pool owned by the
// thread that started the team, so a thread whose count goes up across a call has just
// run a parallel region of more than one thread.
int os_threads() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// 3x3 convolutions big enough for oneDNN to split across threads, with constant weights
// (packed once per primitive), a pooling between them and a sum after.
std::string conv_model() {
  std::ostringstream os;
  os << "<ir_version: 8, opset_import: [\"\" : 17]>\n"
     << "g (float[1,32,56,56] x) => (float[1,32,28,28] y)\n"
     << "<float[64,32,3,3] w1 = {" << test::random_values_text(64 * 32 * 9, 1, -0.1f, 0.1f) << "}, "
     << "float[32,64,3,3] w2 = {" << test::random_values_text(32 * 64 * 9, 2, -0.1f, 0.1f) << "}> {\n"
     << "  a = Conv <pads = [1, 1, 1, 1]> (x, w1)\n"
     << "  r = Relu (a)\n"
     << "  p = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (r)\n"
     << "  c = Conv <pads = [1, 1, 1, 1]> (p, w2)\n"
     << "  q = AveragePool <kernel_shape = [2, 2], strides = [2, 2]> (x)\n"
     << "  y = Add (c, q)\n"
     << "}";
  return os.str();
}

struct Outcome {
  int threads_started = 0;
  Tensor y;
  std::string error;
};

// Runs `s` on a new thread, which stays alive (and keeps its OpenMP pool) until `done`.
Outcome run_on_new_thread(Session& s, const Tensor& x, std::shared_future<void> done, std::thread& t) {
  std::promise<Outcome> result;
  auto got = result.get_future();
  t = std::thread([&s, &x, &result, done] {
    Outcome o;
    int before = os_threads();
    auto r = s.run({{"x", x}});
    o.threads_started = os_threads() - before;
    if (r.is_ok()) o.y = (*r)[0].second; else o.error = r.status().to_string();
    result.set_value(o);
    done.wait();
  });
  return got.get();
}

TEST(CoreBudget, ARunGrantedOneThreadRunsOnOneThreadWhateverRanBefore) {
#if defined(BULKHEAD_SANITIZE_THREAD)
  // libgomp is not built for TSan, so it cannot see a team's join: every write a worker
  // makes reads as a race with the caller's next use. This test counts threads; races in
  // the runtime are the business of concurrency_test, whose sessions run 1 thread.
  GTEST_SKIP() << "OpenMP teams of 2 under ThreadSanitizer report libgomp's joins as races";
#endif
  int cores = process_core_budget().cores();
  if (cores < 2) GTEST_SKIP() << "needs 2 cores";
  Env env;
  SessionOptions o;
  o.threads = 2;
  o.one_thread_when_small = false;  // the kernels' own threads, whatever the model's size
  auto s = env.load_bytes(test::model_text_bytes(conv_model()), "conv2", o);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  Tensor x = test::random_tensor({1, 32, 56, 56}, 7);
  std::promise<void> done;
  std::shared_future<void> done_f = done.get_future().share();
  std::thread a, b, c;

  // Alone, the session is granted its 2 threads: its primitives are made for 2 and run a
  // team of 2 (the control: this probe does see a second thread).
  ASSERT_EQ(process_core_budget().in_use(), 0);
  Outcome two = run_on_new_thread(*s, x, done_f, a);
  ASSERT_EQ(two.error, "");
  EXPECT_GE(two.threads_started, 1);

  // With all cores but one held (as by other sessions' runs), the next run is granted one
  // thread: no OpenMP team, in oneDNN or in our loops, even though the session's
  // primitives were first made for 2. Twice, so that a cached 1-thread plan is used too.
  int held = process_core_budget().acquire(cores - 1);
  Outcome one = run_on_new_thread(*s, x, done_f, b);
  Outcome again = run_on_new_thread(*s, x, done_f, c);
  process_core_budget().release(held);
  ASSERT_EQ(one.error, "");
  ASSERT_EQ(again.error, "");
  EXPECT_EQ(one.threads_started, 0);
  EXPECT_EQ(again.threads_started, 0);

  // The same results, whatever the thread count.
  float worst = 0;
  for (int64_t i = 0; i < two.y.numel(); ++i) {
    float ref = two.y.data<float>()[i];
    worst = std::max(worst, std::abs(one.y.data<float>()[i] - ref) / std::max(1.f, std::abs(ref)));
  }
  EXPECT_LT(worst, 1e-4f);
  EXPECT_TRUE(test::bitwise_equal(one.y, again.y));
  done.set_value();
  a.join();
  b.join();
  c.join();
}

// The affinity of each worker of a team of `threads` made by the calling thread.
std::vector<cpu_set_t> worker_masks(int threads) {
  std::vector<cpu_set_t> masks;
  std::mutex mu;
#pragma omp parallel num_threads(threads)
  {
    if (omp_get_thread_num() != 0) {
      cpu_set_t m;
      CPU_ZERO(&m);
      sched_getaffinity(0, sizeof m, &m);
      std::lock_guard lock(mu);
      masks.push_back(m);
    }
  }
  std::lock_guard lock(mu);  // the workers' writes, seen through the mutex (TSan does not see OpenMP's barrier)
  return masks;
}

// The workers may use every CPU the caller may, except the one it was on.
void expect_kept_off(const std::vector<cpu_set_t>& masks, const cpu_set_t& caller, int off, int threads) {
  EXPECT_EQ(masks.size(), static_cast<size_t>(threads - 1));
  for (const cpu_set_t& m : masks)
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      EXPECT_EQ(CPU_ISSET(c, &m) != 0, c != off && CPU_ISSET(c, &caller) != 0) << "CPU " << c << ", kept off " << off;
    }
}

// The calling thread's affinity.
cpu_set_t own_affinity() {
  cpu_set_t m;
  CPU_ZERO(&m);
  EXPECT_EQ(sched_getaffinity(0, sizeof m, &m), 0);
  return m;
}

class OpenMPWorkers : public ::testing::Test {
 protected:
  void SetUp() override {
#if defined(BULKHEAD_SANITIZE_THREAD)
    GTEST_SKIP() << "OpenMP teams of 2 under ThreadSanitizer report libgomp's fork and join as races";
#endif
    if (CPU_COUNT(&caller_) < 2) GTEST_SKIP() << "one CPU: nothing to keep the workers off";
  }
  const cpu_set_t caller_ = own_affinity();  // the test thread's, which new threads inherit
};

TEST_F(OpenMPWorkers, AreKeptOffTheCallersCPUAndTheCallerIsLeftAlone) {
  for (int threads : {2, 3, 2}) {  // a new team size learns its team again
    place_openmp_workers(threads);
    const int off = openmp_workers_kept_off();
    ASSERT_GE(off, 0);
    EXPECT_TRUE(CPU_ISSET(off, &caller_));
    expect_kept_off(worker_masks(threads), caller_, off, threads);
    const cpu_set_t after = own_affinity();
    EXPECT_TRUE(CPU_EQUAL(&caller_, &after)) << "the calling thread's own affinity changed";
  }
  // One thread: nothing to place, nothing changes.
  const int off = openmp_workers_kept_off();
  place_openmp_workers(1);
  EXPECT_EQ(openmp_workers_kept_off(), off);
}

TEST_F(OpenMPWorkers, EachCallingThreadPlacesItsOwnPool) {
  std::vector<std::thread> callers;
  for (int i = 0; i < 3; ++i)
    callers.emplace_back([this] {
      EXPECT_EQ(openmp_workers_kept_off(), -1) << "a new thread has placed nothing";
      for (int round = 0; round < 20; ++round) {
        place_openmp_workers(2);
        const int off = openmp_workers_kept_off();
        ASSERT_GE(off, 0);
        expect_kept_off(worker_masks(2), caller_, off, 2);
      }
    });
  for (auto& t : callers) t.join();
}

}  // namespace
}  // namespace bulkhead::cpu
