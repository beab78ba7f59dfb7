// Session::run from many threads at once, on one session and on many; sessions created
// on one thread and run and destroyed on others (field report B's scenarios). Every
// result must be bitwise what the same session computes alone.
#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include "support/test_util.h"

namespace bulkhead::test {
namespace {

constexpr int kThreads = 4;
constexpr int kIters = 25;

const char* kIfModel = R"(<ir_version: 8, opset_import: ["" : 17]>
g (bool c, float[8] x) => (float[8] y) {
  k = Constant <value = float[8] {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0}> ()
  y = If (c) <
    then_branch = t () => (float[8] a) { m = Mul(x, k) a = Tanh(m) },
    else_branch = e () => (float[8] b) { s = Sub(x, k) b = Sigmoid(s) }
  >
})";

Tensor bool_scalar(bool v) {
  Tensor t = Tensor::host(DataType::kBool, {});
  *t.data<bool>() = v;
  return t;
}

// The demo classifier's image for each of kThreads threads, and what `ref` makes of it.
void classifier_cases(const Session& ref, float step, std::vector<Tensor>* images, std::vector<Tensor>* expected) {
  for (int t = 0; t < kThreads; ++t) {
    images->push_back(demo::classifier_image(step * t));
    auto r = ref.run({{"image", images->back()}});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    expected->push_back((*r)[0].second);
  }
}

// Runs `s` from kThreads threads at once, kIters times each, thread t on images[t]: how
// many results were not expected[t] (or failed).
int wrong_from_threads(const Session& s, const std::vector<Tensor>& images, const std::vector<Tensor>& expected) {
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIters; ++i) {
        auto r = s.run({{"image", images[t]}});
        if (!r.is_ok() || !bitwise_equal((*r)[0].second, expected[t])) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  return wrong.load();
}

TEST(Concurrency, ManyThreadsOneSession) {
  Env env;
  SessionOptions o;
  o.threads = 1;
  auto s = env.load_bytes(*demo::classifier_model_bytes(), "demo", o);
  ASSERT_TRUE(s.is_ok());
  std::vector<Tensor> images, expected;
  classifier_cases(*s, 0.37f, &images, &expected);
  EXPECT_EQ(wrong_from_threads(*s, images, expected), 0);
}

// A session of small nodes at 2 threads times its first runs at 1 and 2 threads and then
// keeps one (ThreadsProbe), re-planning its arena: here while runs overlap from several
// threads. Every result is the one-thread session's.
TEST(Concurrency, ASmallModelTimesItsThreadsWhileRunsOverlap) {
  Env env;
  SessionOptions two, one;
  two.threads = 2;
  one.threads = 1;
  auto s = env.load_bytes(*demo::classifier_model_bytes(), "demo", two);
  auto ref = env.load_bytes(*demo::classifier_model_bytes(), "demo", one);
  ASSERT_TRUE(s.is_ok() && ref.is_ok());
  ASSERT_NE(s->threads().note.find("timed"), std::string::npos) << s->threads().note;
  std::vector<Tensor> images, expected;
  classifier_cases(*ref, 0.21f, &images, &expected);
  EXPECT_EQ(wrong_from_threads(*s, images, expected), 0);
  EXPECT_NE(s->threads().note.find("timed faster"), std::string::npos) << s->threads().note;
}

TEST(Concurrency, ManySessionsCreatedHereRunElsewhere) {
  Env env;
  SessionOptions o;
  o.threads = 1;
  std::vector<Session> sessions;
  std::vector<Tensor> xs, expected;
  for (int t = 0; t < kThreads; ++t) {
    auto s = env.load_bytes(model_text_bytes(kIfModel), "if" + std::to_string(t), o);
    ASSERT_TRUE(s.is_ok()) << s.status().to_string();
    sessions.push_back(*s);
    xs.push_back(random_tensor({8}, 100 + t));
    auto r = s->run({{"c", bool_scalar(t % 2)}, {"x", xs.back()}});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    expected.push_back((*r)[0].second);
  }
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIters; ++i) {
        int k = (t + i) % kThreads;  // every thread runs every session
        auto r = sessions[k].run({{"c", bool_scalar(k % 2)}, {"x", xs[k]}});
        if (!r.is_ok() || !bitwise_equal((*r)[0].second, expected[k])) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(Concurrency, ConstructOnThreadsRunAndDestroyOnOthers) {
  Env env;
  SessionOptions o;
  o.threads = 1;
  std::vector<Session> sessions(kThreads);
  std::vector<std::thread> makers;
  for (int t = 0; t < kThreads; ++t)
    makers.emplace_back([&, t] {
      auto s = env.load_bytes(*demo::classifier_model_bytes(), "demo", o);
      if (s.is_ok()) sessions[t] = *s;
    });
  for (auto& th : makers) th.join();
  for (auto& s : sessions) ASSERT_TRUE(s.valid());
  auto ref = sessions[0].run({{"image", demo::classifier_image(1.f)}});
  ASSERT_TRUE(ref.is_ok());
  std::atomic<int> wrong{0};
  std::vector<std::thread> runners;
  for (int t = 0; t < kThreads; ++t)
    runners.emplace_back([&, t] {
      for (int i = 0; i < kIters; ++i) {
        auto r = sessions[(t + 1) % kThreads].run({{"image", demo::classifier_image(1.f)}});
        if (!r.is_ok() || !bitwise_equal((*r)[0].second, (*ref)[0].second)) ++wrong;
      }
    });
  for (auto& th : runners) th.join();
  std::vector<std::thread> killers;
  for (int t = 0; t < kThreads; ++t) killers.emplace_back([&, t] { sessions[t] = Session(); });
  for (auto& th : killers) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(env.open_device_count(), 0);
}

TEST(Concurrency, SessionsSharingWeightsAreMadeRunAndDroppedAtOnce) {
  // A 16->16 3x3 convolution: its weight (9 KiB) is shared and packed once per Env.
  const std::string text = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,16,12,12] x) => (float[1,16,12,12] y) <float[16,16,3,3] w = {)" +
                           random_values_text(16 * 16 * 9, 3, -1, 1) + R"(}> {
  c = Conv <pads = [1, 1, 1, 1]> (x, w)
  y = Relu(c)
})";
  const std::string bytes = model_text_bytes(text);
  const Tensor x = random_tensor({1, 16, 12, 12}, 4);
  SessionOptions o;
  o.threads = 1;
  Env reference_env;
  SessionOptions private_o = o;
  private_o.share_weights = false;
  auto ref = reference_env.load_bytes(bytes, "private", private_o)->run({{"x", x}});
  ASSERT_TRUE(ref.is_ok());
  Env env;
  // One session lives throughout, so that every load below finds the weights shared
  // whatever the threads' timing (on a loaded machine they may never overlap).
  auto holder = env.load_bytes(bytes, "holder", o);
  ASSERT_TRUE(holder.is_ok());
  std::atomic<int> wrong{0}, failed{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&] {
      for (int round = 0; round < 3; ++round) {
        auto s = env.load_bytes(bytes, "shared", o);
        if (!s.is_ok()) {
          ++failed;
          return;
        }
        for (int i = 0; i < 5; ++i) {
          auto r = s->run({{"x", x}});
          if (!r.is_ok() || !bitwise_equal((*r)[0].second, (*ref)[0].second)) ++wrong;
        }
      }
    });
  for (auto& th : ts) th.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GE(env.shared_weights().tensor_hits + env.shared_weights().packed_hits, size_t{kThreads * 3});
  *holder = Session();
  EXPECT_EQ(env.shared_weights().tensors, 0u);  // every session is gone, and with them what they shared
  EXPECT_EQ(env.shared_weights().packed, 0u);
}

TEST(Concurrency, ConcurrentCopiesAndRunsInSeveralEnvs) {
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      Env env;  // one Env per thread: they share nothing
      SessionOptions o;
      o.threads = 1;
      auto s = env.load_bytes(*demo::classifier_model_bytes(), "demo", o);
      if (!s.is_ok()) { ++wrong; return; }
      Tensor img = demo::classifier_image(0.1f * t);
      auto first = s->run({{"image", img}});
      for (int i = 0; i < kIters; ++i) {
        auto r = s->run({{"image", img}});
        Tensor dst = Tensor::host(DataType::kFloat32, {1, 10});
        if (!r.is_ok() || !env.copy((*r)[0].second, dst).is_ok() || !bitwise_equal(dst, (*first)[0].second)) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

NamedTensors loop_inputs(int64_t n) {
  return {{"n", Tensor::from_vector<int64_t>(DataType::kInt64, {}, {n})},
          {"x", random_tensor({32, 32}, 5)},
          {"w", random_tensor({32, 32}, 9)}};
}

// Waits (bounded) until `s` has `n` runs executing.
bool wait_running(const Session& s, int n) {
  for (int i = 0; i < 20000; ++i) {
    if (s.runs().running >= n) return true;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return false;
}

TEST(Concurrency, MaxConcurrentRunsBoundsTheRunsThatExecuteAtOnce) {
  Env env;
  SessionOptions o;
  o.threads = 1;
  o.max_concurrent_runs = 2;
  auto s = env.load_bytes(model_text_bytes(kLoopModel), "loop", o);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  const NamedTensors in = loop_inputs(kSanitized ? 50 : 400);
  auto want = s->run(in);
  ASSERT_TRUE(want.is_ok()) << want.status().to_string();
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 4; ++i) {
        auto r = s->run(in);
        if (!r.is_ok() || !bitwise_equal((*r)[0].second, (*want)[0].second)) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  Session::RunCounts c = s->runs();
  EXPECT_EQ(c.limit, 2);
  EXPECT_EQ(c.running, 0);
  EXPECT_LE(c.most_at_once, 2);
  EXPECT_GE(c.most_at_once, 1);
  EXPECT_EQ(c.timed_out, 0u);
}

TEST(Concurrency, ARunWaitingForASlotKeepsToItsTimeLimit) {
  Env env;
  SessionOptions o;
  o.threads = 1;
  o.max_concurrent_runs = 1;
  auto s = env.load_bytes(model_text_bytes(kLoopModel), "loop", o);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  // The long run holds the only slot (it stops at its own limit if it runs too long).
  std::thread long_run([&] {
    RunOptions ro;
    ro.timeout_ms = 3000;
    (void)s->run(loop_inputs(100000000), ro);
  });
  ASSERT_TRUE(wait_running(*s, 1));
  RunOptions ro;
  ro.timeout_ms = 20;
  auto r = s->run(loop_inputs(3), ro);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(r.status().message().find("ms waiting for one of the session's 1 run slots (session option max_concurrent_runs)"),
            std::string::npos) << r.status().to_string();
  long_run.join();
  // The slot is free again, and a run that waited its turn out gave it up.
  auto again = s->run(loop_inputs(3));
  EXPECT_TRUE(again.is_ok()) << again.status().to_string();
  Session::RunCounts c = s->runs();
  EXPECT_EQ(c.waited, 1u);
  EXPECT_EQ(c.timed_out, 1u);
  EXPECT_EQ(c.most_at_once, 1);
}

TEST(Concurrency, TheLastOfOverlappingRunsGivesTheBurstsMemoryBack) {
  Env env;
  SessionOptions o;
  o.threads = 1;
  o.release_idle_after_ms = -1;  // only the burst gives memory back here
  auto s = env.load_bytes(model_text_bytes(kLoopModel), "loop", o);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  const NamedTensors in = loop_inputs(kSanitized ? 300 : 3000);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(s->run(in).is_ok());
  const AllocatorStats steady = s->memory()[0].stats;
  EXPECT_EQ(steady.trimmed, 0u);
  // Two runs at once (tried until they did overlap: the first must still be running
  // when the second starts). Their callers hold both outputs until both runs are over,
  // past the trim at the end of the burst, as a caller on another thread may.
  for (int attempt = 0; attempt < 20 && s->runs().most_at_once < 2; ++attempt) {
    std::optional<Result<NamedTensors>> a, b;
    std::thread first([&] { a.emplace(s->run(in)); });
    if (wait_running(*s, 1)) b.emplace(s->run(in));
    first.join();
    EXPECT_TRUE(a && a->is_ok());
    if (b) {
      EXPECT_TRUE(b->is_ok());
    }
  }
  ASSERT_EQ(s->runs().most_at_once, 2);
  const AllocatorStats after = s->memory()[0].stats;
  EXPECT_GT(after.trimmed, 0u) << "the overlapping run's blocks stayed cached";
  EXPECT_LE(after.cached, steady.cached);
  // One run at a time again: the steady state is what it was before the burst.
  ASSERT_TRUE(s->run(in).is_ok());
  const AllocatorStats settled = s->memory()[0].stats;
  EXPECT_EQ(settled.cached, steady.cached);
  EXPECT_EQ(settled.arena, steady.arena);
  EXPECT_EQ(settled.in_use, 0u);
}

size_t trimmed_of(const Session& s) {
  size_t n = 0;
  for (const auto& m : s.memory()) n += m.stats.trimmed;
  return n;
}

// SessionOptions::release_idle_after_ms: the Env's releaser thread gives an idle
// session's memory back while other sessions (and the same one, from other threads) run,
// and sessions and Envs go away with a release due, being made, or just made.
TEST(Concurrency, IdleSessionsGiveTheirMemoryBackWhileOthersRun) {
  Env env;
  SessionOptions idle_opts, keep_opts;
  idle_opts.threads = keep_opts.threads = 1;
  idle_opts.release_idle_after_ms = 5;
  keep_opts.release_idle_after_ms = -1;
  auto idle = env.load_bytes(*demo::classifier_model_bytes(), "demo", idle_opts);
  auto keep = env.load_bytes(*demo::classifier_model_bytes(), "demo", keep_opts);
  ASSERT_TRUE(idle.is_ok() && keep.is_ok());
  const Tensor image = demo::classifier_image(0.5f);
  auto first = keep->run({{"image", image}});
  ASSERT_TRUE(first.is_ok());
  const Tensor want = (*first)[0].second;
  std::atomic<int> wrong{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)  // the idle session, with pauses longer and shorter than its time
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIters; ++i) {
        auto r = idle->run({{"image", image}});
        if (!r.is_ok() || !bitwise_equal((*r)[0].second, want)) ++wrong;
        std::this_thread::sleep_for(std::chrono::milliseconds((i * 7 + t * 3) % 12));
      }
    });
  threads.emplace_back([&] {  // the other session, without a pause
    while (!done.load()) {
      auto r = keep->run({{"image", image}});
      if (!r.is_ok() || !bitwise_equal((*r)[0].second, want)) ++wrong;
    }
  });
  threads[0].join();
  threads[1].join();
  done = true;
  threads[2].join();
  EXPECT_EQ(wrong.load(), 0);
  // Idle now: its memory goes back within a bounded time; the other session's never.
  for (int i = 0; i < 1000 && idle->memory()[0].stats.arena > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(idle->memory()[0].stats.arena, 0u);
  EXPECT_GT(trimmed_of(*idle), 0u);
  EXPECT_EQ(trimmed_of(*keep), 0u);
  auto again = idle->run({{"image", image}});
  ASSERT_TRUE(again.is_ok());
  EXPECT_TRUE(bitwise_equal((*again)[0].second, want));

  // Sessions and Envs dropped around the time their release falls due (on this thread or
  // the releaser's, whichever lets go last), or holding an output past both.
  for (int i = 0; i < 12; ++i) {
    Tensor out;
    {
      Env e;
      SessionOptions o = idle_opts;
      o.release_idle_after_ms = 1 + i % 3;
      auto s = e.load_bytes(*demo::classifier_model_bytes(), "demo", o);
      ASSERT_TRUE(s.is_ok());
      auto r = s->run({{"image", image}});
      ASSERT_TRUE(r.is_ok());
      if (i % 2) out = (*r)[0].second;
      std::this_thread::sleep_for(std::chrono::microseconds(500 * (i % 6)));
    }
    if (i % 2) {
      EXPECT_TRUE(bitwise_equal(out, want)) << i;
    }
  }
}

TEST(Concurrency, MaxConcurrentRunsIsCheckedAndParsed) {
  auto o = SessionOptions::parse("max_concurrent_runs=4");
  ASSERT_TRUE(o.is_ok()) << o.status().to_string();
  EXPECT_EQ(o->max_concurrent_runs, 4);
  auto bad = SessionOptions::parse("max_concurrent_runs=-1");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("bad value '-1' for session option 'max_concurrent_runs'"), std::string::npos)
      << bad.status().to_string();
  SessionOptions set;
  set.max_concurrent_runs = -3;
  Env env;
  auto s = env.load_bytes(model_text_bytes(kLoopModel), "loop", set);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find("bad value -3 for session option 'max_concurrent_runs'"), std::string::npos)
      << s.status().to_string();
}

}  // namespace
}  // namespace bulkhead::test
