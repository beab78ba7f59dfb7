// Session::run from many threads at once, on one session and on many; sessions created
// on one thread and run and destroyed on others (field report B's scenarios). Every
// result must be bitwise what the same session computes alone.
#include <atomic>
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

TEST(Concurrency, ManyThreadsOneSession) {
  Env env;
  SessionOptions o;
  o.threads = 1;
  auto s = env.load_bytes(*demo::classifier_model_bytes(), "demo", o);
  ASSERT_TRUE(s.is_ok());
  std::vector<Tensor> images, expected;
  for (int t = 0; t < kThreads; ++t) {
    images.push_back(demo::classifier_image(0.37f * t));
    auto r = s->run({{"image", images.back()}});
    ASSERT_TRUE(r.is_ok());
    expected.push_back((*r)[0].second);
  }
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIters; ++i) {
        auto r = s->run({{"image", images[t]}});
        if (!r.is_ok() || !bitwise_equal((*r)[0].second, expected[t])) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
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

}  // namespace
}  // namespace bulkhead::test
