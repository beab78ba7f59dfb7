// The `faulty` backend reproduces field reports A-D on purpose. Each test runs the field's
// sequence with two small models built in code — F (an image to two boundary tensors) and
// G (those two to one output), both with Conv and MatMul weights — and compares every
// result with a CPU session's, asserting exactly the effect the fault must have: wrong
// where the field saw wrong answers, right everywhere else. Plus naming, listing, bad
// names and teardown.
#include <atomic>
#include <cmath>
#include <thread>

#include "backend/backend.h"
#include "backends/faulty/dropped_dependency.h"
#include "backends/faulty/faulty_backend.h"
#include "session/env_impl.h"
#include "support/test_util.h"

namespace bulkhead::test {
namespace {

// 9 nodes (Conv, Tanh, Conv, Tanh, GlobalAveragePool, Flatten, MatMul, Tanh, MatMul).
const char* kFront = R"(<ir_version: 8, opset_import: ["" : 17]>
front (float[1,3,8,8] x) => (float[1,8,8,8] main, float[1,4] code) {
  c1 = Conv <pads = [1,1,1,1]> (x, w1, b1)
  t1 = Tanh (c1)
  c2 = Conv <pads = [1,1,1,1]> (t1, w2, b2)
  main = Tanh (c2)
  p = GlobalAveragePool (main)
  f = Flatten (p)
  m = MatMul (f, w3)
  t3 = Tanh (m)
  code = MatMul (t3, w4)
})";

// 6 nodes (Conv, Tanh, GlobalAveragePool, Flatten, MatMul, Add).
const char* kBack = R"(<ir_version: 8, opset_import: ["" : 17]>
back (float[1,8,8,8] main, float[1,4] code) => (float[1,4] out) {
  c = Conv <pads = [1,1,1,1]> (main, w5, b5)
  t = Tanh (c)
  p = GlobalAveragePool (t)
  f = Flatten (p)
  m = MatMul (f, w6)
  out = Add (m, code)
})";

std::string with_weights(const char* text, const std::vector<demo::Weight>& ws) {
  auto bytes = demo::model_with_weights(text, ws);
  if (!bytes.is_ok()) throw std::runtime_error(bytes.status().message());
  return *bytes;
}

const std::string& front_model() {
  static const std::string b = with_weights(kFront, {{"w1", {8, 3, 3, 3}, 0.4f, 0.1f},
                                                     {"b1", {8}, 0.1f, 0.2f},
                                                     {"w2", {8, 8, 3, 3}, 0.3f, 0.3f},
                                                     {"b2", {8}, 0.1f, 0.4f},
                                                     {"w3", {8, 16}, 0.5f, 0.5f},
                                                     {"w4", {16, 4}, 0.5f, 0.6f}});
  return b;
}

const std::string& back_model() {
  static const std::string b = with_weights(kBack, {{"w5", {8, 8, 3, 3}, 0.3f, 1.7f},
                                                    {"b5", {8}, 0.1f, 1.8f},
                                                    {"w6", {8, 4}, 0.6f, 1.9f}});
  return b;
}

Session load(const Env& env, const std::string& bytes, std::vector<std::string> devices) {
  SessionOptions o;
  o.devices = std::move(devices);
  o.threads = 1;
  auto s = env.load_bytes(bytes, "model", o);
  if (!s.is_ok()) throw std::runtime_error(s.status().to_string());
  return *s;
}

// Runs and copies the outputs to plain host memory (so they hold no device alive).
NamedTensors run(const Session& s, const NamedTensors& inputs) {
  auto r = s.run(inputs);
  if (!r.is_ok()) throw std::runtime_error(r.status().to_string());
  NamedTensors out;
  for (auto& [n, t] : *r) out.emplace_back(n, t.clone_host());
  return out;
}

bool close(const NamedTensors& got, const NamedTensors& want) {
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i) {
    const Tensor& a = got[i].second;
    const Tensor& b = want[i].second;
    if (a.shape() != b.shape() || a.dtype() != DataType::kFloat32 || b.dtype() != DataType::kFloat32) return false;
    for (int64_t k = 0; k < a.numel(); ++k) {
      float x = a.data<float>()[k], y = b.data<float>()[k];
      if (!(std::fabs(x - y) <= 1e-4f + 1e-4f * std::fabs(y))) return false;
    }
  }
  return true;
}

// Inputs for variants A (0) and B (1), and the CPU reference results.
struct Reference {
  NamedTensors f_in[2], g_in[2], f_ref[2], g_ref[2];
  Reference() {
    Env env;
    Session f = load(env, front_model(), {"cpu"}), g = load(env, back_model(), {"cpu"});
    for (int v = 0; v < 2; ++v) {
      f_in[v] = {{"x", random_tensor({1, 3, 8, 8}, 11 + v)}};
      g_in[v] = {{"main", random_tensor({1, 8, 8, 8}, 21 + v)}, {"code", random_tensor({1, 4}, 31 + v)}};
      f_ref[v] = run(f, f_in[v]);
      g_ref[v] = run(g, g_in[v]);
    }
  }
};

const Reference& ref() {
  static const Reference r;
  return r;
}

// True when session `s` of F (or G) gives the CPU's answer for variant v.
bool f_ok(const Session& s, int v) { return close(run(s, ref().f_in[v]), ref().f_ref[v]); }
bool g_ok(const Session& s, int v) { return close(run(s, ref().g_in[v]), ref().g_ref[v]); }

TEST(Faulty, ReferenceVariantsDiffer) {
  // Otherwise "reads the other variant's answer" could not be told from right.
  EXPECT_FALSE(close(ref().f_ref[0], ref().f_ref[1]));
  EXPECT_FALSE(close(ref().g_ref[0], ref().g_ref[1]));
}

TEST(Faulty, DevicesListTheFaults) {
  Env env;
  std::vector<std::string> names;
  for (auto& d : env.devices())
    if (d.backend == "faulty") {
      EXPECT_EQ(d.ordinal, static_cast<int>(names.size()));
      EXPECT_FALSE(d.detail.empty()) << d.name;
      names.push_back(d.name);
    }
  EXPECT_EQ(names, (std::vector<std::string>{"none", "shared-scratch", "global-slot", "dropped-dependency", "stale-replay"}));
  EXPECT_EQ(env.open_device_count(), 0);  // listing opens nothing
}

TEST(Faulty, DevicesAreNamedByOrdinalOrByName) {
  Env env;
  const char* names[] = {"none", "shared-scratch", "global-slot", "dropped-dependency", "stale-replay"};
  for (int i = 0; i < 5; ++i) {
    auto by_ordinal = env.impl()->acquire_device("faulty:" + std::to_string(i));
    auto by_name = env.impl()->acquire_device(std::string("faulty:") + names[i]);
    ASSERT_TRUE(by_ordinal.is_ok()) << by_ordinal.status().to_string();
    ASSERT_TRUE(by_name.is_ok()) << by_name.status().to_string();
    EXPECT_EQ(by_ordinal->get(), by_name->get()) << names[i];
    EXPECT_EQ((*by_name)->info().name, names[i]);
    EXPECT_EQ((*by_name)->compute_domain().kind, MemoryKind::kHostVisible);
    EXPECT_NE((*by_name)->compute_domain().id, Domain::host().id);
  }
  EXPECT_EQ(env.open_device_count(), 0);  // nothing held them
  Session s = load(env, front_model(), {"faulty:stale-replay"});
  EXPECT_EQ(s.placement(), (std::vector<std::pair<std::string, int>>{{"faulty:4", 9}}));
  // The CPU as before.
  for (const char* cpu : {"cpu", "cpu:0"}) EXPECT_TRUE(f_ok(load(env, front_model(), {cpu}), 0)) << cpu;
}

TEST(Faulty, BadDeviceNamesGiveOneClearError) {
  Env env;
  SessionOptions o;
  o.devices = {"faulty:bogus"};
  auto r = env.load_bytes(front_model(), "f", o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  const std::string m = r.status().message();
  EXPECT_NE(m.find("'faulty:bogus'"), std::string::npos) << m;
  for (const char* n : {"none", "shared-scratch", "global-slot", "dropped-dependency", "stale-replay"})
    EXPECT_NE(m.find(n), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  for (const char* bad : {"faulty:5", "faulty:-1", "faulty:", "cpu:x", "cpu:1", "faulty:None"}) {
    o.devices = {bad};
    auto b = env.load_bytes(front_model(), "f", o);
    ASSERT_FALSE(b.is_ok()) << bad;
    EXPECT_NE(b.status().message().find(bad), std::string::npos) << b.status().message();
  }
  EXPECT_EQ(env.open_device_count(), 0);
}

TEST(Faulty, NoneAlwaysMatchesTheCpu) {
  for (auto devices : {std::vector<std::string>{"faulty:none"}, std::vector<std::string>{"faulty:0", "cpu"}}) {
    Env env;
    Session f = load(env, front_model(), devices);
    EXPECT_TRUE(f_ok(f, 0));
    EXPECT_TRUE(f_ok(f, 1));
    Session g = load(env, back_model(), devices);
    EXPECT_TRUE(g_ok(g, 0));
    EXPECT_TRUE(f_ok(f, 1));
    EXPECT_TRUE(g_ok(g, 1));
    f = load(env, front_model(), devices);  // recover
    EXPECT_TRUE(f_ok(f, 0));
    EXPECT_TRUE(g_ok(g, 0));
    Session f2 = load(env, front_model(), devices);  // two sessions of one model
    EXPECT_TRUE(f_ok(f2, 1));
    EXPECT_TRUE(f_ok(f, 0));
  }
}

TEST(Faulty, OutputsLiveInTheFaultyDomainAndCopyThroughTheRouter) {
  Env env;
  Session f = load(env, front_model(), {"faulty:none", "cpu"});
  auto r = f.run(ref().f_in[0]);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const Tensor& main = (*r)[0].second;
  EXPECT_EQ(main.domain().backend, "faulty");
  Tensor host = Tensor::host(DataType::kFloat32, main.shape());
  ASSERT_TRUE(env.copy(main, host).is_ok());
  EXPECT_TRUE(bitwise_equal(host, main));
}

// Field report A: F1, F2 fine; G created; G1 fine; F3 and every later F wrong; G2 fine.
TEST(Faulty, SharedScratchReproducesFieldReportA) {
  Env env;
  Session f = load(env, front_model(), {"faulty:shared-scratch"});
  EXPECT_TRUE(f_ok(f, 0));  // F1
  EXPECT_TRUE(f_ok(f, 1));  // F2
  Session g = load(env, back_model(), {"faulty:shared-scratch"});
  EXPECT_TRUE(f_ok(f, 0));   // G created, idle: harmless
  EXPECT_TRUE(g_ok(g, 0));   // G1 uploads over F's weights
  EXPECT_FALSE(f_ok(f, 1));  // F3
  EXPECT_TRUE(g_ok(g, 1));   // G2: one-way contamination
  EXPECT_FALSE(f_ok(f, 0));  // every later F
  g = Session();
  EXPECT_FALSE(f_ok(f, 1));  // deleting G does not heal F
  // Re-creating F (it uploads again on its first run) recovers F; a live G then reads F's.
  g = load(env, back_model(), {"faulty:shared-scratch"});
  EXPECT_TRUE(g_ok(g, 0));
  f = load(env, front_model(), {"faulty:shared-scratch"});
  EXPECT_TRUE(f_ok(f, 0));
  EXPECT_TRUE(f_ok(f, 1));
  EXPECT_FALSE(g_ok(g, 1));
}

TEST(Faulty, SharedScratchAloneOrApartIsClean) {
  for (int which = 0; which < 2; ++which) {
    Env env;
    Session s = load(env, which ? back_model() : front_model(), {"faulty:1"});
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(which ? g_ok(s, i % 2) : f_ok(s, i % 2)) << which << " run " << i;
  }
  // Separate Envs are separate devices.
  Env a, b;
  Session f = load(a, front_model(), {"faulty:1"}), g = load(b, back_model(), {"faulty:1"});
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(f_ok(f, i % 2));
    EXPECT_TRUE(g_ok(g, i % 2));
  }
}

// Field report B: F's runs after G was created read G's state, even before G runs; G,
// created last, is fine; a destroyed slot session reads as zeros, never a dangling one.
TEST(Faulty, GlobalSlotReproducesFieldReportB) {
  Env env;
  Session f = load(env, front_model(), {"faulty:global-slot"});
  EXPECT_TRUE(f_ok(f, 0));
  EXPECT_TRUE(f_ok(f, 1));
  Session g = load(env, back_model(), {"faulty:global-slot"});
  EXPECT_FALSE(f_ok(f, 0));  // G created, not run yet
  EXPECT_TRUE(g_ok(g, 0));
  EXPECT_FALSE(f_ok(f, 1));
  EXPECT_TRUE(g_ok(g, 1));
  // order_after_g: F created after G ran is fine, and now G reads F's.
  f = load(env, front_model(), {"faulty:global-slot"});
  EXPECT_TRUE(f_ok(f, 0));
  EXPECT_FALSE(g_ok(g, 1));
  EXPECT_TRUE(f_ok(f, 1));
  // The slot's session goes: G reads zeros (wrong), no crash; a new session is current.
  f = Session();
  EXPECT_FALSE(g_ok(g, 0));
  f = load(env, front_model(), {"faulty:global-slot"});
  EXPECT_TRUE(f_ok(f, 1));
  // A G created on a thread of its own still takes the slot.
  std::thread([&] { g = load(env, back_model(), {"faulty:global-slot"}); }).join();
  EXPECT_FALSE(f_ok(f, 0));
  EXPECT_TRUE(g_ok(g, 0));
}

TEST(Faulty, GlobalSlotAloneIsClean) {
  Env env;
  Session f = load(env, front_model(), {"faulty:2"});
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(f_ok(f, i % 2));
}

// Field report C: every run is wrong, even one session alone; deterministically so.
TEST(Faulty, DroppedDependencyReproducesFieldReportC) {
  Env env;
  Session f = load(env, front_model(), {"faulty:dropped-dependency"});
  NamedTensors first = run(f, ref().f_in[0]);
  EXPECT_FALSE(close(first, ref().f_ref[0]));  // front_only step 1
  // Dispatch 6 is Flatten; its consumer MatMul read zeros: `code` is exactly 0, `main` is right.
  EXPECT_TRUE(close({first[0]}, {ref().f_ref[0][0]}));
  const Tensor& code = first[1].second;
  for (int64_t i = 0; i < code.numel(); ++i) EXPECT_EQ(code.data<float>()[i], 0.f);
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(f_ok(f, i % 2)) << "run " << i;
    EXPECT_TRUE(bitwise_equal(run(f, ref().f_in[0])[1].second, code));
  }
  // G has 6 dispatches (< k+1): the last producer -> consumer edge, MatMul -> Add, loses
  // its barrier, so `out` is exactly the `code` input.
  Session g = load(env, back_model(), {"faulty:3"});
  NamedTensors out = run(g, ref().g_in[1]);
  EXPECT_FALSE(close(out, ref().g_ref[1]));
  EXPECT_TRUE(bitwise_equal(out[0].second, ref().g_in[1][1].second));
}

TEST(Faulty, DroppedDependencyRunsAreIndependent) {
  // The pending write is per-run state: concurrent runs are each wrong in the same way.
  Env env;
  Session f = load(env, front_model(), {"faulty:dropped-dependency"});
  NamedTensors expect[2] = {run(f, ref().f_in[0]), run(f, ref().f_in[1])};
  std::atomic<int> differ{0}, right{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        NamedTensors got = run(f, ref().f_in[(t + i) % 2]);
        if (!bitwise_equal(got[0].second, expect[(t + i) % 2][0].second) ||
            !bitwise_equal(got[1].second, expect[(t + i) % 2][1].second))
          ++differ;
        if (close(got, ref().f_ref[(t + i) % 2])) ++right;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(differ.load(), 0);
  EXPECT_EQ(right.load(), 0);
}

TEST(Faulty, DroppedDependencyHonoursK) {
  // With k = 1 the first Conv's output is read as zeros: `main` is wrong too.
  Env env;
  ASSERT_TRUE(env.register_backend(make_faulty_backend({"faulty-k1", 1})).is_ok());
  Session f = load(env, front_model(), {"faulty-k1:dropped-dependency"});
  NamedTensors out = run(f, ref().f_in[0]);
  EXPECT_FALSE(close({out[0]}, {ref().f_ref[0][0]}));
  EXPECT_FALSE(close({out[1]}, {ref().f_ref[0][1]}));
}

TEST(Faulty, DroppedEdgeChoice) {
  // A chain of n nodes, each reading the previous one's output.
  auto chain = [](int n) {
    auto nodes = std::make_shared<std::vector<ir::Node>>(n);
    for (int i = 0; i < n; ++i) {
      (*nodes)[i].op_type = "Relu";
      (*nodes)[i].inputs = {i ? "v" + std::to_string(i - 1) : "x"};
      (*nodes)[i].outputs = {"v" + std::to_string(i)};
    }
    return nodes;
  };
  auto ptrs = [](const std::vector<ir::Node>& v) {
    std::vector<const ir::Node*> p;
    for (auto& n : v) p.push_back(&n);
    return p;
  };
  auto eight = chain(8);
  auto e = faulty::choose_dropped_edge(ptrs(*eight), 6);
  EXPECT_EQ(e.producer, &(*eight)[5]);
  EXPECT_EQ(e.consumer, &(*eight)[6]);
  auto four = chain(4);  // shorter: the last edge
  e = faulty::choose_dropped_edge(ptrs(*four), 6);
  EXPECT_EQ(e.producer, &(*four)[2]);
  EXPECT_EQ(e.consumer, &(*four)[3]);
  (*eight)[6].inputs = {"x"};  // dispatch 6 has no consumer now: the nearest earlier edge
  e = faulty::choose_dropped_edge(ptrs(*eight), 6);
  EXPECT_EQ(e.producer, &(*eight)[4]);
  EXPECT_EQ(e.consumer, &(*eight)[5]);
  auto one = chain(1);  // nothing reads anything: no edge
  e = faulty::choose_dropped_edge(ptrs(*one), 6);
  EXPECT_EQ(e.producer, nullptr);
  EXPECT_EQ(e.consumer, nullptr);
}

// Field report D: another session of the same graph replays the recorder's buffers.
TEST(Faulty, StaleReplayReproducesFieldReportD) {
  Env env;
  Session g = load(env, back_model(), {"faulty:stale-replay"});  // keeps the device alive
  EXPECT_TRUE(g_ok(g, 0));
  Session f1 = load(env, front_model(), {"faulty:stale-replay"});
  EXPECT_TRUE(f_ok(f1, 0));  // records
  EXPECT_TRUE(f_ok(f1, 1));  // replays its own, with its new inputs
  Session f2 = load(env, front_model(), {"faulty:stale-replay"});
  // f2 gets the recorder's result for the recorder's last input (B), not its own (A).
  NamedTensors got = run(f2, ref().f_in[0]);
  EXPECT_FALSE(close(got, ref().f_ref[0]));
  EXPECT_TRUE(close(got, ref().f_ref[1]));
  EXPECT_TRUE(f_ok(f1, 0));  // the recorder stays right
  EXPECT_TRUE(close(run(f2, ref().f_in[1]), ref().f_ref[0]));
  EXPECT_TRUE(g_ok(g, 1));  // another graph, another recording
  // recover: F destroyed and re-created while G keeps the device: the old F's results.
  f1 = Session();
  f2 = Session();
  Session f3 = load(env, front_model(), {"faulty:stale-replay"});
  EXPECT_TRUE(close(run(f3, ref().f_in[1]), ref().f_ref[0]));
  // When every session is gone the device and its cache go: a new session is clean.
  f3 = Session();
  g = Session();
  EXPECT_EQ(env.open_device_count(), 0);
  Session f4 = load(env, front_model(), {"faulty:stale-replay"});
  EXPECT_TRUE(f_ok(f4, 1));
  EXPECT_TRUE(f_ok(f4, 0));
}

TEST(Faulty, StaleReplayDifferentGraphsDoNotInterfere) {
  Env env;
  Session f = load(env, front_model(), {"faulty:4"});
  EXPECT_TRUE(f_ok(f, 0));
  EXPECT_TRUE(f_ok(f, 1));
  Session g = load(env, back_model(), {"faulty:4"});
  EXPECT_TRUE(g_ok(g, 0));
  EXPECT_TRUE(f_ok(f, 0));
  EXPECT_TRUE(g_ok(g, 1));
}

TEST(Faulty, StaleReplayConcurrentRunsAreSafe) {
  // Wrong answers are the fault; crashes and races in the bookkeeping are not. The
  // recorder is always right; the other session gets one of the recorder's answers.
  Env env;
  Session rec = load(env, front_model(), {"faulty:stale-replay"});
  EXPECT_TRUE(f_ok(rec, 0));
  Session other = load(env, front_model(), {"faulty:stale-replay"});
  std::atomic<int> recorder_wrong{0}, other_unexplained{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 8; ++i) {
        int v = (t + i) % 2;
        if (t % 2 == 0) {
          if (!f_ok(rec, v)) ++recorder_wrong;
        } else {
          NamedTensors got = run(other, ref().f_in[v]);
          if (!close(got, ref().f_ref[0]) && !close(got, ref().f_ref[1])) ++other_unexplained;
        }
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(recorder_wrong.load(), 0);
  EXPECT_EQ(other_unexplained.load(), 0);
}

TEST(Faulty, SessionsDestroyedInAnyOrderCloseTheDevices) {
  for (const char* fault : {"none", "shared-scratch", "global-slot", "dropped-dependency", "stale-replay"}) {
    for (int order = 0; order < 3; ++order) {
      Env env;
      std::string dev = std::string("faulty:") + fault;
      std::vector<Session> s = {load(env, front_model(), {dev}), load(env, back_model(), {dev, "cpu"}),
                                load(env, front_model(), {dev})};
      run(s[0], ref().f_in[0]);
      run(s[1], ref().g_in[0]);
      run(s[2], ref().f_in[1]);
      EXPECT_EQ(env.open_device_count(), 2) << fault;  // the faulty device and the CPU
      if (order == 0) {
        s.clear();
      } else if (order == 1) {
        for (int i = 2; i >= 0; --i) s[i] = Session();
      } else {
        std::vector<std::thread> th;
        for (int i = 0; i < 3; ++i) th.emplace_back([&s, i] { s[i] = Session(); });
        for (auto& t : th) t.join();
      }
      EXPECT_EQ(env.open_device_count(), 0) << fault << " order " << order;
    }
  }
}

TEST(Faulty, OutputsKeepTheirDeviceAliveUntilDropped) {
  Env env;
  Tensor kept;
  {
    Session f = load(env, front_model(), {"faulty:shared-scratch"});
    auto r = f.run(ref().f_in[0]);
    ASSERT_TRUE(r.is_ok());
    kept = (*r)[1].second;
  }
  EXPECT_EQ(env.open_device_count(), 1);  // buffers keep their device (I4)
  EXPECT_TRUE(close({{"code", kept.clone_host()}}, {ref().f_ref[0][1]}));
  kept = Tensor();
  EXPECT_EQ(env.open_device_count(), 0);
}

}  // namespace
}  // namespace bulkhead::test
