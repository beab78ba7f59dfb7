// The Vulkan backend on the machine's Vulkan driver (Mesa's lavapipe in CI), with the
// Khronos validation layer on: device and memory (a second domain, staged copies routed
// by owner), element-wise kernels against the CPU, fallback of unsupported nodes to the
// CPU, every submission policy giving the same answer with the submits each promises,
// per-session state under interleaved sessions, and clear errors for bad options.
#include <cstdlib>
#include <optional>
#include <thread>

#include "vulkan/vulkan_support.h"

namespace bulkhead::test {
namespace {

// A chain of element-wise ops with broadcasting: every node has a Vulkan kernel.
const char* kChain = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3,40] x, float[3,1] z) => (float[2,3,40] y) {
  a = Add(x, z)
  b = Relu(a)
  c = Mul(b, x)
  d = Sigmoid(c)
  e = Sub(d, z)
  f = Tanh(e)
  k = Constant <value = float[1] {0.5}> ()
  y = Div(f, k)
})";

using Vulkan = VulkanFixture;

TEST_F(Vulkan, DeviceIsListedWithItsPolicy) {
  for (const auto& d : env_.devices()) {
    if (d.backend != "vulkan") continue;
    EXPECT_FALSE(d.name.empty());
    EXPECT_NE(d.submit_policy.find("auto"), std::string::npos) << d.submit_policy;
    EXPECT_NE(d.submit_policy.find("quirk"), std::string::npos) << "says why: " << d.submit_policy;
  }
  auto missing = env_.impl()->acquire_device("vulkan:99");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("vulkan:99 does not exist"), std::string::npos) << missing.status().message();
}

TEST_F(Vulkan, CopiesRoundTripThroughDeviceMemory) {
  auto dev = env_.impl()->acquire_device("vulkan:0");
  ASSERT_TRUE(dev.is_ok()) << dev.status().to_string();
  auto alloc = (*dev)->create_session_allocator("test");
  for (int64_t n : {1, 1000, 3 << 20}) {
    Tensor h = random_tensor({n}, static_cast<uint32_t>(n));
    auto d = Tensor::allocate(*alloc, DataType::kFloat32, {n});
    ASSERT_TRUE(d.is_ok());
    EXPECT_EQ(d->domain(), (*dev)->compute_domain());
    EXPECT_EQ(d->raw(), nullptr) << "device-local: never read by the CPU directly";
    EXPECT_EQ(d->buffer()->allocator(), alloc.get()) << "I1: the buffer knows its allocator";
    ASSERT_TRUE(env_.copy(h, *d).is_ok());
    auto d2 = Tensor::allocate(*alloc, DataType::kFloat32, {n});
    ASSERT_TRUE(env_.copy(*d, *d2).is_ok()) << "device to device";
    Tensor back = Tensor::host(DataType::kFloat32, {n});
    ASSERT_TRUE(env_.copy(*d2, back).is_ok());
    EXPECT_TRUE(bitwise_equal(back, h)) << n;
  }
}

TEST_F(Vulkan, ElementwiseChainMatchesTheCpu) {
  std::string bytes = model_text_bytes(kChain);
  auto cpu = env_.load_bytes(bytes, "chain", cpu_options());
  auto gpu = env_.load_bytes(bytes, "chain", vulkan_options());
  ASSERT_TRUE(cpu.is_ok() && gpu.is_ok()) << gpu.status().to_string();
  auto placement = gpu->placement();
  ASSERT_FALSE(placement.empty());
  EXPECT_EQ(placement[0].first, "vulkan:0");
  EXPECT_EQ(placement[0].second, 7) << "every node but the folded Constant runs on Vulkan";
  NamedTensors in = {{"x", random_tensor({2, 3, 40}, 1)}, {"z", random_tensor({3, 1}, 2)}};
  auto a = cpu->run(in);
  auto b = gpu->run(in);
  ASSERT_TRUE(a.is_ok() && b.is_ok()) << b.status().to_string();
  EXPECT_TRUE((*b)[0].second.domain().is_host()) << "outputs come back in host memory";
  EXPECT_LT(max_rel_diff((*b)[0].second, (*a)[0].second), 1e-5);
}

TEST_F(Vulkan, UnsupportedNodesFallBackToTheCpu) {
  // Hardmax and an int64 Add have no Vulkan kernel: they run on the CPU, with copies at
  // the boundaries.
  std::string bytes = model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[4,8] x, int64[2] i) => (float[4,8] y, int64[2] j) {
  a = Relu(x)
  s = Hardmax(a)
  y = Add(s, x)
  j = Add(i, i)
})");
  auto cpu = env_.load_bytes(bytes, "mixed", cpu_options());
  auto gpu = env_.load_bytes(bytes, "mixed", vulkan_options());
  ASSERT_TRUE(cpu.is_ok() && gpu.is_ok()) << gpu.status().to_string();
  auto placement = gpu->placement();
  std::map<std::string, int> where(placement.begin(), placement.end());
  EXPECT_EQ(where["vulkan:0"], 2);
  EXPECT_EQ(where["cpu:0"], 2);
  NamedTensors in = {{"x", random_tensor({4, 8}, 3)},
                     {"i", Tensor::from_vector<int64_t>(DataType::kInt64, {2}, {5, -7})}};
  auto a = cpu->run(in);
  auto b = gpu->run(in);
  ASSERT_TRUE(a.is_ok() && b.is_ok()) << b.status().to_string();
  EXPECT_LT(max_rel_diff((*b)[0].second, (*a)[0].second), 1e-5);
  EXPECT_TRUE(bitwise_equal((*b)[1].second, (*a)[1].second));
}

TEST_F(Vulkan, EveryPolicyGivesTheSameAnswerWithTheSubmitsItPromises) {
  std::string bytes = model_text_bytes(kChain);
  NamedTensors in = {{"x", random_tensor({2, 3, 40}, 4)}, {"z", random_tensor({3, 1}, 5)}};
  Tensor reference;
  // 7 dispatches, each writing 2*3*40 floats = 960 bytes.
  struct Case {
    std::string policy;
    uint64_t submits;
  } cases[] = {{"single", 1}, {"per-dispatch", 1}, {"split", 7}, {"auto", 1}, {"auto:1920", 3}, {"auto:1", 7}};
  for (const Case& c : cases) {
    auto s = env_.load_bytes(bytes, "chain", vulkan_options(c.policy));
    ASSERT_TRUE(s.is_ok()) << c.policy << ": " << s.status().to_string();
    auto before = vulkan_counters(env_).run_submits;
    auto r = s->run(in);
    ASSERT_TRUE(r.is_ok()) << c.policy << ": " << r.status().to_string();
    // auto:1920 submits after every second dispatch: 3 full pairs, then the last one at
    // the end of the run.
    uint64_t expected = c.policy == "auto:1920" ? 4 : c.submits;
    EXPECT_EQ(vulkan_counters(env_).run_submits - before, expected) << c.policy;
    if (!reference.defined()) reference = (*r)[0].second;
    else EXPECT_TRUE(bitwise_equal((*r)[0].second, reference)) << c.policy << " differs from single";
  }
}

TEST_F(Vulkan, InterleavedSessionsEachGetTheirOwnOutputs) {
  std::string bytes = model_text_bytes(kChain);
  auto cpu = env_.load_bytes(bytes, "chain", cpu_options());
  auto s1 = env_.load_bytes(bytes, "chain", vulkan_options());
  auto s2 = env_.load_bytes(bytes, "chain", vulkan_options("split"));
  ASSERT_TRUE(cpu.is_ok() && s1.is_ok() && s2.is_ok());
  NamedTensors in1 = {{"x", random_tensor({2, 3, 40}, 10)}, {"z", random_tensor({3, 1}, 11)}};
  NamedTensors in2 = {{"x", random_tensor({2, 3, 40}, 20)}, {"z", random_tensor({3, 1}, 21)}};
  Tensor want1 = (*cpu->run(in1))[0].second, want2 = (*cpu->run(in2))[0].second;
  std::atomic<int> bad{0};
  auto loop = [&](const Session& s, const NamedTensors& in, const Tensor& want) {
    for (int i = 0; i < 20; ++i) {
      auto r = s.run(in);
      if (!r.is_ok() || max_rel_diff((*r)[0].second, want) > 1e-5) ++bad;
    }
  };
  std::thread t1(loop, std::cref(*s1), std::cref(in1), std::cref(want1));
  std::thread t2(loop, std::cref(*s2), std::cref(in2), std::cref(want2));
  std::thread t3(loop, std::cref(*s1), std::cref(in2), std::cref(want2));  // one session, two threads
  t1.join();
  t2.join();
  t3.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST_F(Vulkan, MixedBackendsCreatedOnOneThreadRunOnOthersAndCopyBackAndForth) {
  // The field's GPU plugin followed a process-global "current backend": here a CPU and a
  // Vulkan session made on one thread are run from two others, and their results are
  // copied into each other's domains with Env::copy in alternation.
  std::string bytes = model_text_bytes(kChain);
  std::optional<Session> cpu, gpu;
  std::thread maker([&] {
    auto c = env_.load_bytes(bytes, "chain", cpu_options());
    auto g = env_.load_bytes(bytes, "chain", vulkan_options());
    ASSERT_TRUE(c.is_ok() && g.is_ok());
    cpu = *c;
    gpu = *g;
  });
  maker.join();
  ASSERT_TRUE(cpu && gpu);
  auto dev = env_.impl()->acquire_device("vulkan:0");
  ASSERT_TRUE(dev.is_ok());
  auto alloc = (*dev)->create_session_allocator("mixed-test");
  std::atomic<int> bad{0};
  auto worker = [&](uint32_t seed) {
    for (int i = 0; i < 10; ++i) {
      NamedTensors in = {{"x", random_tensor({2, 3, 40}, seed + i)}, {"z", random_tensor({3, 1}, seed + 100 + i)}};
      const Session& first = i % 2 ? *cpu : *gpu;
      const Session& second = i % 2 ? *gpu : *cpu;
      auto a = first.run(in);
      auto b = second.run(in);
      if (!a.is_ok() || !b.is_ok() || max_rel_diff((*a)[0].second, (*b)[0].second) > 1e-5) {
        ++bad;
        continue;
      }
      // Host -> Vulkan -> host, routed by the domains of the two ends.
      auto on_gpu = Tensor::allocate(*alloc, DataType::kFloat32, (*a)[0].second.shape());
      Tensor back = Tensor::host(DataType::kFloat32, (*a)[0].second.shape());
      if (!on_gpu.is_ok() || !env_.copy((*a)[0].second, *on_gpu).is_ok() || !env_.copy(*on_gpu, back).is_ok() ||
          !bitwise_equal(back, (*a)[0].second))
        ++bad;
    }
  };
  std::thread t1(worker, 1000), t2(worker, 2000);
  t1.join();
  t2.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST_F(Vulkan, BadSubmitPolicyIsAClearError) {
  auto s = env_.load_bytes(model_text_bytes(kChain), "chain", vulkan_options("sometimes"));
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find("unknown submission policy 'sometimes'"), std::string::npos)
      << s.status().message();
  auto parsed = SessionOptions::parse("devices=vulkan,cpu;submit_policy=auto:8M");
  ASSERT_TRUE(parsed.is_ok());
  EXPECT_EQ(parsed->submit_policy, "auto:8M");
}

}  // namespace
}  // namespace bulkhead::test
