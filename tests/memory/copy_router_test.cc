// I1/I2: a copy is routed by the domains that own its two ends, whatever the order in
// which backends, devices and buffers were created or destroyed, and whichever thread
// asks. Two fake backends register transfers that log who served them.
#include <thread>

#include "session/env_impl.h"
#include "support/fake_backend.h"
#include "support/test_util.h"

namespace bulkhead::test {
namespace {

struct TwoBackends {
  std::shared_ptr<TransferLog> log = std::make_shared<TransferLog>();
  Env env;
  TwoBackends() {
    EXPECT_TRUE(env.register_backend(std::make_shared<FakeBackend>("alpha", log)).is_ok());
    EXPECT_TRUE(env.register_backend(std::make_shared<FakeBackend>("beta", log)).is_ok());
  }
  std::shared_ptr<Device> device(const std::string& name) {
    auto d = env.impl()->acquire_device(name);
    EXPECT_TRUE(d.is_ok()) << d.status().to_string();
    return *d;
  }
};

Tensor device_tensor(Device& d, const Shape& s) {
  auto alloc = d.create_session_allocator("test");
  auto t = Tensor::allocate(*alloc, DataType::kFloat32, s);
  EXPECT_TRUE(t.is_ok());
  return *t;
}

Tensor iota(int64_t n, float base) {
  Tensor t = Tensor::host(DataType::kFloat32, {n});
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = base + static_cast<float>(i);
  return t;
}

// Round-trips host → device → host through env.copy and checks which transfers served it.
void round_trip(TwoBackends& tb, Device& dev, const std::string& name, float base) {
  Tensor src = iota(16, base), back = Tensor::host(DataType::kFloat32, {16});
  Tensor on_dev = device_tensor(dev, {16});
  ASSERT_TRUE(tb.env.copy(src, on_dev).is_ok());
  EXPECT_EQ(tb.log->last(), name + ":h2d");
  ASSERT_TRUE(tb.env.copy(on_dev, back).is_ok());
  EXPECT_EQ(tb.log->last(), name + ":d2h");
  EXPECT_TRUE(bitwise_equal(src, back));
}

TEST(CopyRouter, RoutesByOwnerInEitherCreationOrder) {
  for (bool alpha_first : {true, false}) {
    TwoBackends tb;
    std::shared_ptr<Device> a, b;
    if (alpha_first) {
      a = tb.device("alpha");
      b = tb.device("beta");
    } else {
      b = tb.device("beta");
      a = tb.device("alpha");
    }
    // The most recently created device must not capture the other's copies.
    round_trip(tb, *a, "alpha", 1);
    round_trip(tb, *b, "beta", 100);
    round_trip(tb, *a, "alpha", 7);
  }
}

// Two backends' devices with no transfer between them: staged through host memory by
// each end's own transfer (alpha out, beta in) — never one handed the other's buffer.
TEST(CopyRouter, DevicesOfTwoBackendsAreStagedThroughTheHost) {
  TwoBackends tb;
  auto a = tb.device("alpha");
  auto b = tb.device("beta");
  Tensor ta = device_tensor(*a, {4}), tb2 = device_tensor(*b, {4}), src = iota(4, 3), back = Tensor::host(DataType::kFloat32, {4});
  ASSERT_TRUE(tb.env.copy(src, ta).is_ok());
  ASSERT_TRUE(tb.env.copy(ta, tb2).is_ok());
  {
    std::lock_guard l(tb.log->mu);
    ASSERT_GE(tb.log->events.size(), 2u);
    EXPECT_EQ(tb.log->events[tb.log->events.size() - 2], "alpha:d2h");
    EXPECT_EQ(tb.log->events.back(), "beta:h2d");
  }
  EXPECT_EQ(tb.env.impl()->router()->route_name(ta.domain(), tb2.domain()), "alpha → host → beta");
  ASSERT_TRUE(tb.env.copy(tb2, back).is_ok());
  EXPECT_TRUE(bitwise_equal(src, back));
}

// A domain nobody registered a transfer for (its device is gone, or it never had one):
// rejected with an error naming both domains.
TEST(CopyRouter, UnroutablePairIsRejectedNamingBothDomains) {
  TwoBackends tb;
  auto b = tb.device("beta");
  Domain orphan;
  orphan.id = Domain::new_id();
  orphan.backend = "orphan";
  orphan.device = 0;
  orphan.kind = MemoryKind::kDeviceLocal;
  static float bytes[4];
  Tensor to(DataType::kFloat32, {4}, std::make_shared<Buffer>(nullptr, orphan, nullptr, sizeof bytes, bytes));
  Tensor tb2 = device_tensor(*b, {4});
  for (Status s : {tb.env.copy(to, tb2), tb.env.copy(tb2, to)}) {
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("orphan:0"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("beta:0"), std::string::npos) << s.message();
  }
}

TEST(CopyRouter, MismatchedTensorsAreRejected) {
  Env env;
  Tensor a = iota(4, 0), b = Tensor::host(DataType::kFloat32, {5});
  EXPECT_FALSE(env.copy(a, b).is_ok());
  Tensor c = Tensor::host(DataType::kInt32, {4});
  EXPECT_FALSE(env.copy(a, c).is_ok());
  Tensor d = Tensor::host(DataType::kFloat32, {2, 2});
  EXPECT_TRUE(env.copy(a, d).is_ok());
  EXPECT_EQ(d.data<float>()[3], 3.f);
}

TEST(CopyRouter, TeardownRemovesRoutesAndReopenWorks) {
  TwoBackends tb;
  auto b = tb.device("beta");
  size_t routes_with_beta = tb.env.impl()->router()->size();
  uint64_t first_id;
  {
    auto a = tb.device("alpha");
    first_id = a->compute_domain().id;
    round_trip(tb, *a, "alpha", 3);
    EXPECT_EQ(tb.env.open_device_count(), 2);
  }
  // alpha's last user is gone: it is torn down and its routes leave the table.
  EXPECT_EQ(tb.log->last(), "alpha:teardown");
  EXPECT_EQ(tb.env.open_device_count(), 1);
  EXPECT_EQ(tb.env.impl()->router()->size(), routes_with_beta);
  round_trip(tb, *b, "beta", 5);
  // Re-opening gives a new domain (never confused with the old one) whose routes work.
  auto a2 = tb.device("alpha");
  EXPECT_NE(a2->compute_domain().id, first_id);
  round_trip(tb, *a2, "alpha", 9);
}

TEST(CopyRouter, BufferKeepsItsDeviceAndRoutesAlive) {
  TwoBackends tb;
  Tensor survivor;
  {
    auto a = tb.device("alpha");
    survivor = device_tensor(*a, {8});
    ASSERT_TRUE(tb.env.copy(iota(8, 2), survivor).is_ok());
  }
  // The device handle is gone but a buffer still lives on it: no teardown yet.
  EXPECT_EQ(tb.env.open_device_count(), 1);
  Tensor back = Tensor::host(DataType::kFloat32, {8});
  ASSERT_TRUE(tb.env.copy(survivor, back).is_ok());
  EXPECT_EQ(tb.log->last(), "alpha:d2h");
  EXPECT_EQ(back.data<float>()[7], 9.f);
  survivor = Tensor();
  EXPECT_EQ(tb.log->last(), "alpha:teardown");
  EXPECT_EQ(tb.env.open_device_count(), 0);
}

TEST(CopyRouter, EnvsShareNothing) {
  TwoBackends one, two;
  auto a1 = one.device("alpha");
  Tensor t1 = device_tensor(*a1, {4});
  // Env two has its own alpha device; env one's buffer is not routable there.
  auto a2 = two.device("alpha");
  Status s = two.env.copy(iota(4, 0), t1);
  EXPECT_FALSE(s.is_ok());
  EXPECT_TRUE(one.env.copy(iota(4, 0), t1).is_ok());
}

TEST(CopyRouter, DevicesOpenedOnSeparateThreadsAndCopiedFromOthers) {
  TwoBackends tb;
  std::shared_ptr<Device> a, b;
  std::thread ta([&] { a = tb.device("alpha"); });
  std::thread tbt([&] { b = tb.device("beta"); });
  ta.join();
  tbt.join();
  std::vector<std::thread> workers;
  std::atomic<int> wrong{0};
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&, w] {
      Device& d = (w % 2) ? *b : *a;
      for (int i = 0; i < 50; ++i) {
        Tensor src = iota(32, static_cast<float>(w * 1000 + i)), back = Tensor::host(DataType::kFloat32, {32});
        Tensor on = device_tensor(d, {32});
        if (!tb.env.copy(src, on).is_ok() || !tb.env.copy(on, back).is_ok() || !bitwise_equal(src, back)) ++wrong;
      }
    });
  }
  for (auto& t : workers) t.join();
  EXPECT_EQ(wrong.load(), 0);
  // Every event names the backend that owns the buffer it served.
  int h2d_alpha = 0, h2d_beta = 0;
  for (auto& e : tb.log->events) {
    h2d_alpha += e == "alpha:h2d";
    h2d_beta += e == "beta:h2d";
  }
  EXPECT_EQ(h2d_alpha, 100);
  EXPECT_EQ(h2d_beta, 100);
}

TEST(CopyRouter, RegisteringTwiceIsAnErrorAndTheFirstStays) {
  auto log = std::make_shared<TransferLog>();
  Env env;
  ASSERT_TRUE(env.register_backend(std::make_shared<FakeBackend>("alpha", log)).is_ok());
  EXPECT_FALSE(env.register_backend(std::make_shared<FakeBackend>("alpha", log)).is_ok());
  EXPECT_FALSE(env.register_backend(nullptr).is_ok());
}

}  // namespace
}  // namespace bulkhead::test
