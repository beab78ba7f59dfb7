// The field's matrix (FIELD-REPORTS.md B and D) across three backends in one process:
// the CPU, Vulkan (lavapipe here) and OpenCL (PoCL here) loaded as a plugin library.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "backend/backend.h"
#include "backend/plugin_host.h"
#include "bulkhead/bulkhead.hpp"
#include "session/env_impl.h"
#include "support/test_util.h"

namespace bulkhead {
namespace {

const std::string kOpenCl = OPENCL_PLUGIN;

bool library_loaded(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (h) dlclose(h);
  return h != nullptr;
}

// y = Relu(Conv(x, W, B) + x): a shape-preserving block both GPU backends run, so one
// model's output can feed the other. `seed` makes F and G different models.
std::string block(uint32_t seed) {
  return test::model_text_bytes(std::string(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,4,8,8] x) => (float[1,4,8,8] y)
<float[4,4,3,3] w = {)") + test::random_values_text(144, seed, -0.3f, 0.3f) + R"(}, float[4] b = {)" +
                                  test::random_values_text(4, seed + 1, -0.1f, 0.1f) + R"(}> {
  c = Conv <pads = [1, 1, 1, 1]> (x, w, b)
  s = Add(c, x)
  y = Relu(s)
})");
}

Tensor output(const NamedTensors& outs) { return outs.empty() ? Tensor() : outs.front().second; }

SessionOptions on(std::vector<std::string> devices) {
  SessionOptions o;
  o.devices = std::move(devices);
  o.threads = 1;
  return o;
}

double max_diff(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || a.shape() != b.shape()) return INFINITY;
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, double(std::abs(a.data<float>()[i] - b.data<float>()[i])));
  return m;
}

bool have_vulkan(const Env& env) {
  for (auto& d : env.devices())
    if (d.backend == "vulkan") return true;
  return false;
}

class Matrix : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(env_.load_backend(kOpenCl).is_ok());
    ASSERT_TRUE(have_vulkan(env_)) << "no Vulkan device: these tests need Mesa's lavapipe (mesa-vulkan-drivers)";
    bool cl = false;
    for (auto& d : env_.devices()) cl = cl || d.backend == "opencl";
    ASSERT_TRUE(cl) << "no OpenCL device: these tests need PoCL (pocl-opencl-icd)";
  }
  Env env_;
};

// F on OpenCL and G on Vulkan, alive together, each feeding the other for several
// rounds; every result matches the same chain on the CPU alone.
TEST_F(Matrix, TwoGpuBackendsAliveTogetherFeedEachOtherAlternately) {
  auto f = env_.load_bytes(block(1), "F", on({"opencl", "cpu"}));
  auto g = env_.load_bytes(block(2), "G", on({"vulkan", "cpu"}));
  auto fc = env_.load_bytes(block(1), "F-cpu", on({"cpu"}));
  auto gc = env_.load_bytes(block(2), "G-cpu", on({"cpu"}));
  ASSERT_TRUE(f.is_ok() && g.is_ok() && fc.is_ok() && gc.is_ok()) << f.status().to_string() << g.status().to_string();
  // The optimiser folds Add and Relu into the Conv: one node, on the GPU in both.
  for (auto* s : {&*f, &*g}) {
    auto p = s->placement();
    ASSERT_FALSE(p.empty());
    EXPECT_GE(p[0].second, 1);
    for (size_t i = 1; i < p.size(); ++i) EXPECT_EQ(p[i].second, 0) << p[i].first;
  }
  EXPECT_EQ(f->placement()[0].first, "opencl:0");
  EXPECT_EQ(g->placement()[0].first, "vulkan:0");
  Tensor x = test::random_tensor({1, 4, 8, 8}, 5), xc = x;
  std::vector<std::pair<Tensor, Tensor>> rounds;  // (input, output) of each round
  for (int round = 0; round < 6; ++round) {
    bool on_f = round % 2 == 0;
    auto y = (on_f ? *f : *g).run({{"x", x}});
    auto yc = (on_f ? *fc : *gc).run({{"x", xc}});
    ASSERT_TRUE(y.is_ok() && yc.is_ok()) << (y.is_ok() ? yc.status() : y.status()).to_string();
    EXPECT_LT(max_diff(output(*y), output(*yc)), 1e-4) << "round " << round;
    rounds.emplace_back(x, output(*y));
    x = output(*y);
    xc = output(*yc);
  }
  // Each round's answer is bit for bit what that model gives alone, in an Env of its own.
  for (size_t round = 0; round < rounds.size(); ++round) {
    bool on_f = round % 2 == 0;
    Env solo;
    ASSERT_TRUE(solo.load_backend(kOpenCl).is_ok());
    auto s = solo.load_bytes(block(on_f ? 1 : 2), "solo", on({on_f ? "opencl" : "vulkan", "cpu"}));
    ASSERT_TRUE(s.is_ok());
    auto y = s->run({{"x", rounds[round].first}});
    ASSERT_TRUE(y.is_ok());
    EXPECT_TRUE(test::bitwise_equal(output(*y), rounds[round].second)) << "round " << round;
  }
}

// Sessions constructed on separate threads at once, and sessions built on this thread
// run from workers, on all three backends.
TEST_F(Matrix, SessionsBuiltOnThreadsAtOnceAndRunFromWorkers) {
  const std::vector<std::vector<std::string>> lists = {{"opencl", "cpu"}, {"vulkan", "cpu"}, {"cpu"}};
  auto ref = env_.load_bytes(block(3), "ref", on({"cpu"}));
  ASSERT_TRUE(ref.is_ok());
  Tensor x = test::random_tensor({1, 4, 8, 8}, 9);
  Tensor want = output(*ref->run({{"x", x}}));
  std::vector<Session> built(lists.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < lists.size(); ++i)
    threads.emplace_back([&, i] {
      auto s = env_.load_bytes(block(3), "m", on(lists[i]));
      if (s.is_ok()) built[i] = *s;
    });
  for (auto& t : threads) t.join();
  threads.clear();
  for (auto& s : built) ASSERT_TRUE(s.valid());
  std::atomic<int> good{0};
  for (size_t i = 0; i < lists.size(); ++i)
    for (int w = 0; w < 2; ++w)
      threads.emplace_back([&, i] {
        for (int k = 0; k < 3; ++k) {
          auto r = built[i].run({{"x", x}});
          good += r.is_ok() && max_diff(output(*r), want) < 1e-4;
        }
      });
  for (auto& t : threads) t.join();
  EXPECT_EQ(good.load(), static_cast<int>(lists.size()) * 2 * 3);
}

// Process-level copies between every pair of the three domains, with the two device
// tensors made and dropped in every order.
TEST_F(Matrix, CopiesBetweenEveryPairOfDomainsInAnyOrder) {
  const Tensor src = test::random_tensor({3, 5, 7}, 11);
  const std::vector<std::string> devs = {"opencl:0", "vulkan:0", "cpu:0"};
  for (size_t a = 0; a < devs.size(); ++a)
    for (size_t b = 0; b < devs.size(); ++b) {
      if (a == b) continue;
      for (bool b_first : {false, true}) {
        SCOPED_TRACE(devs[a] + " -> " + devs[b] + (b_first ? " (made second first)" : ""));
        Env env;
        ASSERT_TRUE(env.load_backend(kOpenCl).is_ok());
        Result<Tensor> ta = Tensor(), tb = Tensor();
        if (b_first) tb = env.impl()->allocate_zeroed(devs[b], DataType::kFloat32, src.shape());
        ta = env.impl()->allocate_zeroed(devs[a], DataType::kFloat32, src.shape());
        if (!b_first) tb = env.impl()->allocate_zeroed(devs[b], DataType::kFloat32, src.shape());
        ASSERT_TRUE(ta.is_ok() && tb.is_ok()) << (ta.is_ok() ? tb.status() : ta.status()).to_string();
        ASSERT_TRUE(env.copy(src, *ta).is_ok());
        Status st = env.copy(*ta, *tb);
        ASSERT_TRUE(st.is_ok()) << st.to_string();
        Tensor back = Tensor::host(DataType::kFloat32, src.shape());
        // Drop the source first or last: the copy out of tb must not care.
        if (b_first) *ta = Tensor();
        ASSERT_TRUE(env.copy(*tb, back).is_ok());
        EXPECT_TRUE(test::bitwise_equal(back, src));
      }
    }
}

// The OpenCL library is closed by the last release of what came from it, on any thread;
// an Env that loads it on a thread that makes no session is fine.
TEST(MatrixLifetime, TheLastReleaseClosesTheDeviceAndThenTheLibrary) {
  auto env = std::make_unique<Env>();
  std::thread([&] { ASSERT_TRUE(env->load_backend(kOpenCl).is_ok()); }).join();
  auto s = env->load_bytes(block(4), "m", on({"opencl", "cpu"}));
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  auto draft = env->load_bytes(block(5), "draft", on({"opencl", "cpu"}));
  ASSERT_TRUE(draft.is_ok());
  EXPECT_EQ(env->open_device_count(), 2);  // opencl:0 shared by both, cpu:0
  ASSERT_TRUE(env->unload_backend("opencl").is_ok());
  env.reset();
  EXPECT_TRUE(library_loaded(kOpenCl));
  Tensor x = test::random_tensor({1, 4, 8, 8}, 1);
  ASSERT_TRUE(s->run({{"x", x}}).is_ok());
  *s = Session();
  EXPECT_TRUE(library_loaded(kOpenCl));  // the draft still holds the device
  ASSERT_TRUE(draft->run({{"x", x}}).is_ok());
  std::thread([&] { *draft = Session(); }).join();
  EXPECT_FALSE(library_loaded(kOpenCl));
}

}  // namespace
}  // namespace bulkhead
