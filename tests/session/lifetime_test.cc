// I4: devices are reference-counted and torn down by their last user, in any order, on
// any thread; failed construction releases what it took; re-creating works.
#include <thread>

#include "support/test_util.h"

namespace bulkhead::test {
namespace {

std::string classifier() {
  auto b = demo::classifier_model_bytes();
  EXPECT_TRUE(b.is_ok());
  return *b;
}

TEST(Lifetime, DeviceLivesWhileAnySessionDoes) {
  Env env;
  EXPECT_EQ(env.open_device_count(), 0);
  auto a = env.load_bytes(classifier(), "a");
  auto b = env.load_bytes(classifier(), "b");
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_EQ(env.open_device_count(), 1);  // one shared CPU device
  *a = Session();
  EXPECT_EQ(env.open_device_count(), 1);
  ASSERT_TRUE(b->run({{"image", demo::classifier_image(0)}}).is_ok());
  *b = Session();
  EXPECT_EQ(env.open_device_count(), 0);
  // Re-creating after teardown works.
  auto c = env.load_bytes(classifier(), "c");
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(env.open_device_count(), 1);
  ASSERT_TRUE(c->run({{"image", demo::classifier_image(0)}}).is_ok());
}

TEST(Lifetime, FailedConstructionReleasesTheDevice) {
  Env env;
  auto bad = env.load_bytes(model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y) { y = NoSuchOp(x) })"), "bad");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(env.open_device_count(), 0);
}

TEST(Lifetime, SessionOutlivesItsEnvHandle) {
  Session s;
  {
    Env env;
    auto r = env.load_bytes(classifier(), "a");
    ASSERT_TRUE(r.is_ok());
    s = *r;
  }
  auto out = s.run({{"image", demo::classifier_image(0.2f)}});
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
}

TEST(Lifetime, OutputsOutliveTheirSession) {
  Tensor kept;
  {
    Env env;
    auto s = env.load_bytes(classifier(), "a");
    ASSERT_TRUE(s.is_ok());
    auto out = s->run({{"image", demo::classifier_image(0.2f)}});
    ASSERT_TRUE(out.is_ok());
    kept = (*out)[0].second;
  }
  float sum = 0;
  for (int i = 0; i < 10; ++i) sum += kept.data<float>()[i];
  EXPECT_NEAR(sum, 1.f, 1e-5);
}

TEST(Lifetime, SessionsDestroyedInAnyOrderOnAnyThread) {
  for (int order = 0; order < 3; ++order) {
    Env env;
    std::vector<Session> sessions;
    for (int i = 0; i < 4; ++i) {
      auto s = env.load_bytes(classifier(), "s" + std::to_string(i));
      ASSERT_TRUE(s.is_ok());
      sessions.push_back(*s);
    }
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i) {
      int idx = order == 0 ? i : order == 1 ? 3 - i : (i * 3) % 4;
      threads.emplace_back([&sessions, idx] {
        (void)sessions[idx].run({{"image", demo::classifier_image(0.1f * idx)}});
        sessions[idx] = Session();
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(env.open_device_count(), 0);
  }
}

}  // namespace
}  // namespace bulkhead::test
