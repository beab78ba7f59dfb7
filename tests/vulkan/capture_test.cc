// Graph capture on Vulkan (I6): a static-shape graph without control flow is recorded by
// its session's first run and replayed by later runs; two sessions of one model with
// different inputs, interleaved (and from two threads), each get their own outputs;
// graph_capture=false, symbolic shapes and If turn it off.
#include <atomic>
#include <thread>

#include "vulkan/vulkan_support.h"

namespace bulkhead::test {
namespace {

// Element-wise work, a Softmax and a CPU-only node (Hardmax) in the middle: the run
// reaches the host mid-way, so the capture has several command buffers.
const char* kModel = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[4,64] x, float[64] b) => (float[4,64] y, float[4,64] h) {
  a = Add(x, b)
  s = Sigmoid(a)
  m = Softmax(s)
  h = Hardmax(m)
  k = Mul(h, x)
  t = Tanh(k)
  y = Add(t, m)
})";

SessionOptions options(bool capture, std::vector<std::string> devices = {"vulkan:0", "cpu"}) {
  SessionOptions o;
  o.devices = std::move(devices);
  o.threads = 1;
  o.graph_capture = capture;
  return o;
}

NamedTensors inputs(uint32_t seed) { return {{"x", random_tensor({4, 64}, seed)}, {"b", random_tensor({64}, seed + 1)}}; }

class VulkanCapture : public VulkanFixture {
 protected:
};

bool same_outputs(const NamedTensors& a, const NamedTensors& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!bitwise_equal(a[i].second, b[i].second)) return false;
  return true;
}

TEST_F(VulkanCapture, InterleavedSessionsReplayTheirOwnRecordings) {
  std::string bytes = model_text_bytes(kModel);
  auto nocap = env_.load_bytes(bytes, "m", options(false));
  auto s1 = env_.load_bytes(bytes, "m", options(true));
  auto s2 = env_.load_bytes(bytes, "m", options(true));
  ASSERT_TRUE(nocap.is_ok() && s1.is_ok() && s2.is_ok()) << s1.status().to_string();
  NamedTensors in1 = inputs(1), in2 = inputs(50);
  NamedTensors want1 = *nocap->run(in1), want2 = *nocap->run(in2);
  ASSERT_FALSE(same_outputs(want1, want2));
  const uint64_t before = vulkan_counters(env_).replays;
  for (int i = 0; i < 5; ++i) {
    auto a = s1->run(in1);
    auto b = s2->run(in2);
    ASSERT_TRUE(a.is_ok() && b.is_ok()) << a.status().to_string() << b.status().to_string();
    EXPECT_TRUE(same_outputs(*a, want1)) << "session 1, run " << i;
    EXPECT_TRUE(same_outputs(*b, want2)) << "session 2, run " << i;
  }
  // Runs 2..5 of each session replay; each replay submits two recorded command buffers
  // (before and after the CPU's Hardmax).
  EXPECT_EQ(vulkan_counters(env_).replays - before, 2u * 4 * 2);
  // Swapping inputs between the sessions: each replay reads the inputs of its own run.
  auto a = s1->run(in2);
  auto b = s2->run(in1);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_TRUE(same_outputs(*a, want2));
  EXPECT_TRUE(same_outputs(*b, want1));
}

TEST_F(VulkanCapture, ConcurrentRunsOfOneSessionStayCorrect) {
  // One run at a time holds a session's capture; the others run uncaptured.
  std::string bytes = model_text_bytes(kModel);
  auto nocap = env_.load_bytes(bytes, "m", options(false));
  auto s = env_.load_bytes(bytes, "m", options(true));
  ASSERT_TRUE(nocap.is_ok() && s.is_ok());
  std::vector<NamedTensors> in, want;
  for (uint32_t t = 0; t < 3; ++t) {
    in.push_back(inputs(100 + 10 * t));
    want.push_back(*nocap->run(in.back()));
  }
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 8; ++i) {
        auto r = s->run(in[t]);
        if (!r.is_ok() || !same_outputs(*r, want[t])) ++bad;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(vulkan_counters(env_).replays, 0u);
}

TEST_F(VulkanCapture, OffWhenDisabledDynamicOrWithControlFlow) {
  auto replays_over_runs = [&](const std::string& text, bool capture, const NamedTensors& in) {
    auto s = env_.load_bytes(model_text_bytes(text), "m", options(capture));
    EXPECT_TRUE(s.is_ok()) << s.status().to_string();
    const uint64_t before = vulkan_counters(env_).replays;
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(s->run(in).is_ok());
    return vulkan_counters(env_).replays - before;
  };
  EXPECT_GT(replays_over_runs(kModel, true, inputs(7)), 0u);
  EXPECT_EQ(replays_over_runs(kModel, false, inputs(7)), 0u) << "graph_capture=false";
  EXPECT_EQ(replays_over_runs(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[N] x) => (float[N] y) { a = Sigmoid(x) y = Tanh(a) })",
                              true, {{"x", random_tensor({100}, 3)}}),
            0u)
      << "symbolic shapes";
  EXPECT_EQ(replays_over_runs(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[8] x, bool c) => (float[8] y) {
  a = Sigmoid(x)
  y = If (c) <then_branch = t () => (float[8] r) { r = Tanh(a) }, else_branch = e () => (float[8] r) { r = Relu(a) }>
})",
                              true,
                              {{"x", random_tensor({8}, 4)}, {"c", Tensor::from_vector<bool>(DataType::kBool, {}, {true})}}),
            0u)
      << "If";
}

}  // namespace
}  // namespace bulkhead::test
