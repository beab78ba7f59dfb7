// Weights shared across the sessions of one Env (SessionOptions::share_weights, I3):
// sessions of one model hold its initializers, folded constants and packed weights once;
// the sharing is reference-counted, never crosses Envs, can be turned off, and nothing
// shared is ever written by a run.
#include <atomic>
#include <chrono>
#include <thread>

#include "io/npy.h"
#include "session/env_impl.h"
#include "support/test_util.h"

namespace bulkhead::test {
namespace {

std::string det_path() { return shared_dir() + "/models/ppocrv4_det/model.onnx"; }

// det is fully convolutional: a small image keeps the test fast (sanitizers included).
Tensor det_input(uint32_t seed) { return random_tensor({1, 3, 64, 96}, seed); }

SessionOptions opts(bool share, int threads = 1) {
  SessionOptions o;
  o.threads = threads;
  o.one_thread_when_small = false;  // the kernels' own threads, whatever the model's size
  o.share_weights = share;
  return o;
}

Tensor run_det(const Session& s, const Tensor& x) {
  auto r = s.run({{"x", x}});
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? r->begin()->second : Tensor();
}

uint64_t digest(const Env& env) { return env.impl()->shared_constants()->digest(); }

TEST(ShareWeights, SessionsOfOneModelHoldItsWeightsOnce) {
  Env env;
  auto a = env.load(det_path(), opts(true));
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  const Env::SharedWeights one = env.shared_weights();
  EXPECT_GT(one.tensors, 10u);
  EXPECT_GT(one.bytes, 1u << 20);  // det's convolution weights: ~4.5 MB in all
  EXPECT_EQ(one.tensor_hits, 0u);

  auto b = env.load(det_path(), opts(true));
  ASSERT_TRUE(b.is_ok()) << b.status().to_string();
  const Env::SharedWeights two = env.shared_weights();
  // The second session added nothing: every weight it has was found held.
  EXPECT_EQ(two.tensors, one.tensors);
  EXPECT_EQ(two.bytes, one.bytes);
  EXPECT_GE(two.tensor_hits, one.tensors);
  EXPECT_GE(two.hit_bytes, one.bytes);

  // Packed weights: made by the first session's runs, found by the second's.
  Tensor x = det_input(1);
  Tensor ya = run_det(*a, x);
  const Env::SharedWeights packed = env.shared_weights();
  EXPECT_GT(packed.packed, 0u);
  Tensor yb = run_det(*b, x);
  const Env::SharedWeights after = env.shared_weights();
  EXPECT_EQ(after.packed, packed.packed);
  EXPECT_GE(after.packed_hits, packed.packed);
  EXPECT_TRUE(bitwise_equal(ya, yb));

  // The same results as a session that shares nothing.
  Env private_env;
  auto p = private_env.load(det_path(), opts(false));
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  EXPECT_TRUE(bitwise_equal(run_det(*p, x), ya));
}

TEST(ShareWeights, OffKeepsEverythingPrivate) {
  Env env;
  auto a = env.load(det_path(), opts(false));
  auto b = env.load(det_path(), opts(false));
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  run_det(*a, det_input(2));
  run_det(*b, det_input(2));
  const Env::SharedWeights w = env.shared_weights();
  EXPECT_EQ(w.tensors, 0u);
  EXPECT_EQ(w.packed, 0u);
  EXPECT_EQ(w.tensor_hits, 0u);
  EXPECT_EQ(w.packed_hits, 0u);
  // A sharing session beside them shares with nobody.
  auto c = env.load(det_path(), opts(true));
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(env.shared_weights().tensor_hits, 0u);
}

TEST(ShareWeights, NeverAcrossEnvs) {
  Env e1, e2;
  auto a = e1.load(det_path(), opts(true));
  auto b = e2.load(det_path(), opts(true));
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  run_det(*a, det_input(3));
  run_det(*b, det_input(3));
  EXPECT_EQ(e1.shared_weights().tensor_hits, 0u);
  EXPECT_EQ(e2.shared_weights().tensor_hits, 0u);
  EXPECT_EQ(e2.shared_weights().packed_hits, 0u);
  EXPECT_GT(e2.shared_weights().tensors, 0u);
}

TEST(ShareWeights, FreedWithTheLastSession) {
  Env env;
  auto a = env.load(det_path(), opts(true));
  auto b = env.load(det_path(), opts(true));
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  run_det(*a, det_input(4));
  run_det(*b, det_input(4));
  const Env::SharedWeights both = env.shared_weights();
  *a = Session();
  EXPECT_EQ(env.shared_weights().tensors, both.tensors);  // b still holds them
  EXPECT_EQ(env.shared_weights().packed, both.packed);
  run_det(*b, det_input(5));
  *b = Session();
  EXPECT_EQ(env.shared_weights().tensors, 0u);
  EXPECT_EQ(env.shared_weights().bytes, 0u);
  EXPECT_EQ(env.shared_weights().packed, 0u);
  // And a new session after them makes its own again.
  auto c = env.load(det_path(), opts(true));
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(env.shared_weights().tensors, both.tensors);
}

TEST(ShareWeights, NothingSharedIsWrittenByAnyRun) {
  Env env;
  std::vector<Session> sessions;
  for (int i = 0; i < 3; ++i) {
    // Two thread counts: oneDNN may pick other weight layouts for them (more entries).
    auto s = env.load(det_path(), opts(true, i == 2 ? 2 : 1));
    ASSERT_TRUE(s.is_ok()) << s.status().to_string();
    sessions.push_back(*s);
  }
  const Shape small{1, 3, 32, 64};
  // Every session runs each shape once: every packed weight is made. Then the hash of
  // everything shared is taken, the sessions run again, overlapping, and it must not move.
  std::vector<Tensor> first;
  for (auto& s : sessions) {
    first.push_back(run_det(s, det_input(6)));
    run_det(s, random_tensor(small, 7));
  }
  const Env::SharedWeights w = env.shared_weights();
  const uint64_t before = digest(env);
  EXPECT_GT(w.packed, 0u);
  std::vector<std::thread> threads;
  for (auto& s : sessions)
    threads.emplace_back([&s, &small] {
      for (int r = 0; r < 3; ++r) {
        run_det(s, det_input(8 + r));
        run_det(s, random_tensor(small, 20 + r));
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(digest(env), before);
  const Env::SharedWeights after = env.shared_weights();
  EXPECT_EQ(after.tensors, w.tensors);
  EXPECT_EQ(after.bytes, w.bytes);
  EXPECT_EQ(after.packed, w.packed);
  for (size_t i = 0; i < sessions.size(); ++i)
    EXPECT_TRUE(bitwise_equal(run_det(sessions[i], det_input(6)), first[i])) << "session " << i;
}

TEST(ShareWeights, FoldedConstantsToo) {
  // w (32x32 floats: 4 KiB) and its transpose, folded at creation, are both shared.
  const std::string text = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[4,32] x) => (float[4,32] y) <float[32,32] w = {)" + random_values_text(32 * 32, 5, -1, 1) + R"(}> {
  wt = Transpose(w)
  y = MatMul(x, wt)
})";
  Env env;
  auto a = env.load_bytes(model_text_bytes(text), "a", opts(true));
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  EXPECT_EQ(env.shared_weights().tensors, 2u);
  auto b = env.load_bytes(model_text_bytes(text), "b", opts(true));
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(env.shared_weights().tensors, 2u);
  EXPECT_EQ(env.shared_weights().tensor_hits, 2u);
  Tensor x = random_tensor({4, 32}, 9);
  auto ya = a->run({{"x", x}});
  auto yb = b->run({{"x", x}});
  ASSERT_TRUE(ya.is_ok() && yb.is_ok());
  EXPECT_TRUE(bitwise_equal((*ya)[0].second, (*yb)[0].second));
  // A session's memory report no longer counts the shared folded constant.
  size_t in_use = 0;
  for (const auto& m : a->memory()) in_use += m.stats.in_use;
  EXPECT_LT(in_use, 4096u);
}

// A convolution whose input shape is `x_type`'s: 32 filters of 16x3x3 (18 KiB, shared).
std::string conv_text(const std::string& x_type) {
  return R"(<ir_version: 8, opset_import: ["" : 17]>
g ()" + x_type + R"( x) => (float y) <float[32,16,3,3] w = {)" + random_values_text(32 * 16 * 9, 11, -1, 1) + R"(}> {
  c = Conv<pads = [1, 1, 1, 1]>(x, w)
  y = Relu(c)
})";
}

TEST(ShareWeights, StaticShapesPackTheWeightsAtCreation) {
  // Shapes fixed before any run: the primitive and its packed weights are made by the
  // session's creation, and the first run makes nothing more (it is as fast as the next).
  Env env;
  auto s = env.load_bytes(model_text_bytes(conv_text("float[1,16,24,24]")), "static", opts(true));
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  const Env::SharedWeights made = env.shared_weights();
  EXPECT_GE(made.packed, 1u);
  Tensor x = random_tensor({1, 16, 24, 24}, 12);
  auto y = s->run({{"x", x}});
  ASSERT_TRUE(y.is_ok()) << y.status().to_string();
  const Env::SharedWeights ran = env.shared_weights();
  EXPECT_EQ(ran.packed, made.packed);
  EXPECT_EQ(ran.packed_hits, made.packed_hits);  // the run did not even look one up

  // A symbolic batch: nothing is known to pack until a run; the result is the same.
  Env lazy_env;
  auto d = lazy_env.load_bytes(model_text_bytes(conv_text("float[N,16,24,24]")), "dynamic", opts(true));
  ASSERT_TRUE(d.is_ok()) << d.status().to_string();
  EXPECT_EQ(lazy_env.shared_weights().packed, 0u);
  auto yd = d->run({{"x", x}});
  ASSERT_TRUE(yd.is_ok()) << yd.status().to_string();
  EXPECT_GE(lazy_env.shared_weights().packed, 1u);
  EXPECT_TRUE(bitwise_equal((*y)[0].second, (*yd)[0].second));
}

TEST(ShareWeights, StaticShapesPackTheInt8WeightsAtCreation) {
  // QLinearConv with its requantisation fixed: the fused int8 primitive too.
  std::string w;
  for (int i = 0; i < 32 * 16 * 9; ++i) w += (i ? "," : "") + std::to_string((i * 37) % 255 - 127);
  const std::string text = R"(<ir_version: 8, opset_import: ["" : 13]>
g (uint8[1,16,24,24] x) => (uint8[1,32,24,24] y)
  <int8[32,16,3,3] w = {)" + w + R"(}, float xs = {0.02}, uint8 xz = {128}, float ws = {0.01}, int8 wz = {0},
   float ys = {0.05}, uint8 yz = {3}> {
  y = QLinearConv<pads = [1, 1, 1, 1]>(x, xs, xz, w, ws, wz, ys, yz)
})";
  Env env;
  auto s = env.load_bytes(model_text_bytes(text), "int8", opts(true));
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  const Env::SharedWeights made = env.shared_weights();
  EXPECT_GE(made.packed, 1u);
  Tensor x = Tensor::host(DataType::kUInt8, {1, 16, 24, 24});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<uint8_t>()[i] = static_cast<uint8_t>((i * 7) % 256);
  auto y = s->run({{"x", x}});
  ASSERT_TRUE(y.is_ok()) << y.status().to_string();
  EXPECT_EQ(env.shared_weights().packed, made.packed);
  EXPECT_EQ(env.shared_weights().packed_hits, made.packed_hits);
}

TEST(ReleaseIdleMemory, RunsGiveTheirMemoryBackAndGiveTheSameResults) {
  Env env;
  SessionOptions o = opts(true);
  o.release_idle_memory = true;
  SessionOptions keep_opts = opts(true);
  keep_opts.release_idle_after_ms = -1;  // never, however long this test takes
  auto s = env.load(det_path(), o);
  auto keep = env.load(det_path(), keep_opts);
  ASSERT_TRUE(s.is_ok() && keep.is_ok()) << s.status().to_string();
  const Tensor x = det_input(30);
  const Tensor want = run_det(*keep, x);
  size_t trimmed = 0;
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(bitwise_equal(run_det(*s, x), want)) << "run " << r;
    size_t now = 0;
    for (const auto& m : s->memory()) now += m.stats.trimmed;
    EXPECT_GT(now, trimmed) << "run " << r << " gave nothing back";
    trimmed = now;
  }
  // Overlapping runs: the last to end gives the memory back, results unchanged.
  std::vector<std::thread> ts;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 3; ++t)
    ts.emplace_back([&] {
      for (int r = 0; r < 2; ++r)
        if (!bitwise_equal(run_det(*s, x), want)) ++wrong;
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(wrong.load(), 0);
  size_t now = 0;
  for (const auto& m : s->memory()) now += m.stats.trimmed;
  EXPECT_GT(now, trimmed);
  // The session that keeps its memory gave nothing back.
  for (const auto& m : keep->memory()) EXPECT_EQ(m.stats.trimmed, 0u);
}

TEST(ReleaseIdleMemory, AnIdleSessionGivesItsMemoryBackOnceItsTimeHasPassed) {
  Env env;
  SessionOptions o = opts(true);
  o.release_idle_after_ms = 1000;
  SessionOptions keep_opts = opts(true);
  keep_opts.release_idle_after_ms = -1;
  auto s = env.load(det_path(), o);
  auto keep = env.load(det_path(), keep_opts);
  ASSERT_TRUE(s.is_ok() && keep.is_ok()) << s.status().to_string();
  const Tensor x = det_input(31);
  const Tensor want = run_det(*keep, x);
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(bitwise_equal(run_det(*s, x), want)) << "run " << r;
  // Just after its runs the session keeps its arena for the next one.
  const AllocatorStats busy = s->memory()[0].stats;
  ASSERT_GT(busy.arena, 0u);
  EXPECT_EQ(busy.trimmed, 0u);
  // Idle for its time (and a bounded while more): the arena and cache go back.
  const auto start = std::chrono::steady_clock::now();
  while (s->memory()[0].stats.arena > 0 && std::chrono::steady_clock::now() - start < std::chrono::seconds(20))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const AllocatorStats idle = s->memory()[0].stats;
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(900));
  EXPECT_EQ(idle.arena, 0u) << "the idle session kept its arena";
  EXPECT_GE(idle.trimmed, busy.arena);
  // The next run faults it in again and computes the same.
  EXPECT_TRUE(bitwise_equal(run_det(*s, x), want));
  EXPECT_EQ(s->memory()[0].stats.arena, busy.arena);
  for (const auto& m : keep->memory()) EXPECT_EQ(m.stats.trimmed, 0u);
}

TEST(ReleaseIdleMemory, TheTimeIsParsedAndChecked) {
  EXPECT_EQ(SessionOptions{}.release_idle_after_ms, 5000);  // the default
  auto ms = SessionOptions::parse("release_idle_after_ms=250");
  ASSERT_TRUE(ms.is_ok()) << ms.status().to_string();
  EXPECT_EQ(ms->release_idle_after_ms, 250);
  auto never = SessionOptions::parse("release_idle_after_ms=-1");
  ASSERT_TRUE(never.is_ok());
  EXPECT_EQ(never->release_idle_after_ms, -1);
  for (const char* bad : {"release_idle_after_ms=-2", "release_idle_after_ms=soon", "release_idle_after_ms=",
                          "release_idle_after_ms=86400001"}) {
    auto r = SessionOptions::parse(bad);
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_NE(r.status().message().find("session option 'release_idle_after_ms'"), std::string::npos)
        << r.status().to_string();
  }
  SessionOptions set = opts(true);
  set.release_idle_after_ms = -7;
  Env env;
  auto s = env.load(det_path(), set);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find("bad value -7 for session option 'release_idle_after_ms'"), std::string::npos)
      << s.status().to_string();
}

TEST(ShareWeights, OptionParses) {
  auto on = SessionOptions::parse("share_weights=1");
  ASSERT_TRUE(on.is_ok());
  EXPECT_TRUE(on->share_weights);
  auto off = SessionOptions::parse("share_weights=off");
  ASSERT_TRUE(off.is_ok());
  EXPECT_FALSE(off->share_weights);
  EXPECT_TRUE(SessionOptions{}.share_weights);  // the default
  auto idle = SessionOptions::parse("release_idle_memory=1");
  ASSERT_TRUE(idle.is_ok());
  EXPECT_TRUE(idle->release_idle_memory);
  EXPECT_FALSE(SessionOptions{}.release_idle_memory);
  auto bad_idle = SessionOptions::parse("release_idle_memory=2");
  ASSERT_FALSE(bad_idle.is_ok());
  EXPECT_NE(bad_idle.status().message().find("release_idle_memory"), std::string::npos);
  auto bad = SessionOptions::parse("share_weights=maybe");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("share_weights"), std::string::npos) << bad.status().to_string();
}

}  // namespace
}  // namespace bulkhead::test
