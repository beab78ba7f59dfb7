// Session::threads(): a CPU session whose every node is small (exec/work.h) times its
// first runs at one thread and at the threads asked for, keeps the faster and says so; a session with a node worth splitting keeps its threads; one
// thread asked for is one thread; nodes whose work is unknown before a run (a subgraph)
// keep the threads asked for; SessionOptions::one_thread_when_small = false and
// BULKHEAD_CPU_SERIAL_BYTES=0 keep them too.
#include <cstdlib>
#include <string>

#include "session/threads_probe.h"
#include "support/test_util.h"

namespace bulkhead::test {
namespace {

std::string conv_model(int64_t C, int64_t HW) {
  const std::string c = std::to_string(C), hw = std::to_string(HW);
  return R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,)" + c + "," + hw + "," + hw + R"(] x) => (float[1,)" + c + "," + hw + "," + hw + R"(] y)
<float[)" + c + "," + c + R"(,3,3] w = {)" + random_values_text(C * C * 9, 3, -0.1f, 0.1f) + R"(}> {
  y = Conv <pads = [1, 1, 1, 1]> (x, w)
})";
}

// Two small convolutions in a chain: the first's output lives only during the run, in
// the session's planned arena.
std::string conv_chain_model() {
  return R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,8,16,16] x) => (float[1,8,16,16] y)
<float[8,8,3,3] w = {)" + random_values_text(8 * 8 * 9, 3, -0.1f, 0.1f) + R"(}> {
  h = Conv <pads = [1, 1, 1, 1]> (x, w)
  r = Relu (h)
  y = Conv <pads = [1, 1, 1, 1]> (r, w)
})";
}

Session::ThreadUse threads_of(const std::string& text, int threads, bool one_when_small = true) {
  Env env;
  SessionOptions o;
  o.threads = threads;
  o.one_thread_when_small = one_when_small;
  auto s = env.load_bytes(model_text_bytes(text), "m.onnx", o);
  EXPECT_TRUE(s.is_ok()) << s.status().to_string();
  if (!s.is_ok()) return {};
  return s->threads();
}

TEST(SessionThreads, EveryNodeSmallTimesItsFirstRunsAndKeepsTheFaster) {
  // 8 -> 8 channels, 3x3 at 16x16: 147 K multiply-adds.
  Env env;
  SessionOptions two, one;
  two.threads = 2;
  one.threads = 1;
  auto s = env.load_bytes(model_text_bytes(conv_chain_model()), "m.onnx", two);
  auto ref = env.load_bytes(model_text_bytes(conv_chain_model()), "m.onnx", one);
  ASSERT_TRUE(s.is_ok() && ref.is_ok()) << s.status().to_string();
  const auto before = s->threads();
  EXPECT_EQ(before.requested, 2);
  EXPECT_EQ(before.effective, 1);
  EXPECT_NE(before.note.find("fewer than 16 M multiply-adds"), std::string::npos) << before.note;
  EXPECT_NE(before.note.find("the first runs are timed at 1 and 2 threads"), std::string::npos) << before.note;
  // Runs at either count (alternating, then the one kept) give a one-thread session's results.
  const NamedTensors in{{"x", random_tensor({1, 8, 16, 16}, 5)}};
  auto want = ref->run(in);
  ASSERT_TRUE(want.is_ok());
  for (int r = 0; r < 2 * (ThreadsProbe::kWarm + ThreadsProbe::kSamples) + 2; ++r) {
    auto got = s->run(in);
    ASSERT_TRUE(got.is_ok()) << got.status().to_string();
    EXPECT_TRUE(bitwise_equal((*got)[0].second, (*want)[0].second)) << "run " << r;
  }
  const auto after = s->threads();
  EXPECT_TRUE(after.effective == 1 || after.effective == 2) << after.effective;
  EXPECT_NE(after.note.find("timed faster over the first runs"), std::string::npos) << after.note;
  EXPECT_EQ(ref->threads().note, "");
}

TEST(SessionThreads, OnceACountIsKeptTheRunMemoryIsPlannedAgain) {
  // ShuffleNet's runs allocate differently at one thread and at two (oneDNN's scratch is
  // per thread), so the arena plan gives up while they alternate; once a count is kept,
  // the session plans again, as one that never alternated.
  Env env;
  SessionOptions two, one;
  two.threads = 2;
  one.threads = 1;
  const std::string path = shared_dir() + "/onnx-backend-data/light/light_shufflenet.onnx";
  auto s = env.load(path, two);
  auto ref = env.load(path, one);
  ASSERT_TRUE(s.is_ok() && ref.is_ok()) << s.status().to_string();
  const NamedTensors in{{"gpu_0/data_0", random_tensor({1, 3, 224, 224}, 9)}};
  auto want = ref->run(in);
  ASSERT_TRUE(want.is_ok()) << want.status().to_string();
  for (int r = 0; r < 2 * (ThreadsProbe::kWarm + ThreadsProbe::kSamples) + 2; ++r) {
    auto got = s->run(in);
    ASSERT_TRUE(got.is_ok()) << got.status().to_string();
    EXPECT_TRUE(bitwise_equal((*got)[0].second, (*want)[0].second)) << "run " << r;
  }
  EXPECT_NE(s->threads().note.find("timed faster"), std::string::npos) << s->threads().note;
  ASSERT_GT(ref->memory()[0].stats.arena, 0u);
  EXPECT_GT(s->memory()[0].stats.arena, 0u) << "planning gave up for good";
}

// The decision itself, on times given to it.
TEST(ThreadsProbe, AlternatesSkipsEachCountsFirstRunAndKeepsTheFaster) {
  auto decide = [](double at_many, double at_one) {
    ThreadsProbe p(2, "small");
    for (int i = 0; i < ThreadsProbe::kWarm; ++i) {  // each count's first runs: not counted
      EXPECT_EQ(p.next_run(), 2);
      p.ran(2, 500.0);
      EXPECT_EQ(p.next_run(), 1);
      p.ran(1, 500.0);
    }
    for (int i = 0; i < ThreadsProbe::kSamples; ++i) {
      EXPECT_EQ(p.decided(), 0);
      EXPECT_EQ(p.next_run(), 2);
      p.ran(2, at_many + 0.01 * i);
      EXPECT_EQ(p.next_run(), 1);
      p.ran(1, at_one + 0.01 * i);
    }
    return std::make_pair(p.decided(), p.note());
  };
  auto [many, many_note] = decide(1.0, 2.0);
  EXPECT_EQ(many, 2);
  EXPECT_NE(many_note.find("small: 2 threads, timed faster over the first runs (median 1.025 ms against 2.025 at 1)"),
            std::string::npos)
      << many_note;
  auto [one, one_note] = decide(2.0, 1.0);
  EXPECT_EQ(one, 1);
  EXPECT_NE(one_note.find("small: 1 thread, timed faster"), std::string::npos) << one_note;
  EXPECT_EQ(decide(0.99, 1.0).first, 1);  // within 3%: one thread, a core left free
  EXPECT_EQ(decide(0.95, 1.0).first, 2);
  // Once kept, every run asks for it and later times change nothing.
  ThreadsProbe p(4, "small");
  for (int i = 0; i < 2 * (ThreadsProbe::kWarm + ThreadsProbe::kSamples); ++i) {
    const int t = p.next_run();
    p.ran(t, t == 4 ? 1.0 : 3.0);
  }
  EXPECT_EQ(p.decided(), 4);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(p.next_run(), 4);
    p.ran(4, 100.0);
  }
  EXPECT_EQ(p.decided(), 4);
}

TEST(SessionThreads, ANodeWorthSplittingKeepsTheThreads) {
  // 64 -> 64 channels, 3x3 at 56x56: 116 M multiply-adds.
  const auto t = threads_of(conv_model(64, 56), 2);
  EXPECT_EQ(t.effective, 2);
  EXPECT_TRUE(t.note.empty()) << t.note;
  EXPECT_EQ(threads_of(conv_model(8, 16), 1).effective, 1);
  EXPECT_TRUE(threads_of(conv_model(8, 16), 1).note.empty());
}

TEST(SessionThreads, WorkUnknownBeforeARunKeepsTheThreads) {
  // A node with a subgraph: its work is not counted, so the threads stay.
  const std::string text = R"(<ir_version: 8, opset_import: ["" : 13]>
g (bool c, float[4] x) => (float[4] y) {
  y = If (c) <then_branch = t () => (float[4] a) { a = Relu(x) }, else_branch = e () => (float[4] b) { b = Neg(x) }>
})";
  EXPECT_EQ(threads_of(text, 2).effective, 2);
}

TEST(SessionThreads, TheOptionOffKeepsTheThreads) {
  const auto t = threads_of(conv_model(8, 16), 2, false);
  EXPECT_EQ(t.effective, 2);
  EXPECT_TRUE(t.note.empty());
  auto o = SessionOptions::parse("threads=2;one_thread_when_small=0");
  ASSERT_TRUE(o.is_ok()) << o.status().to_string();
  EXPECT_FALSE(o->one_thread_when_small);
  auto bad = SessionOptions::parse("one_thread_when_small=maybe");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("one_thread_when_small"), std::string::npos) << bad.status().message();
}

TEST(SessionThreads, PolicyOffKeepsTheThreads) {
  // Only sessions are made here (no run), so the kernels' own reading of the variable,
  // once per process at their first run, is not affected.
  ASSERT_EQ(setenv("BULKHEAD_CPU_SERIAL_BYTES", "0", 1), 0);
  const auto t = threads_of(conv_model(8, 16), 2);
  unsetenv("BULKHEAD_CPU_SERIAL_BYTES");
  EXPECT_EQ(t.effective, 2);
  EXPECT_TRUE(t.note.empty());
}

}  // namespace
}  // namespace bulkhead::test
