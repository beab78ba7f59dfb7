// Session::threads(): a CPU session whose every node is small runs on one thread
// (exec/work.h) and says so; a session with a node worth splitting keeps its threads; one
// thread asked for is one thread; nodes whose work is unknown before a run (a subgraph)
// keep the threads asked for; SessionOptions::one_thread_when_small = false and
// BULKHEAD_CPU_SERIAL_BYTES=0 keep them too.
#include <cstdlib>
#include <string>

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

TEST(SessionThreads, EveryNodeSmallRunsOnOneThreadAndSaysWhy) {
  // 8 -> 8 channels, 3x3 at 16x16: 147 K multiply-adds.
  const auto t = threads_of(conv_model(8, 16), 2);
  EXPECT_EQ(t.requested, 2);
  EXPECT_EQ(t.effective, 1);
  EXPECT_NE(t.note.find("fewer than 16 M multiply-adds"), std::string::npos) << t.note;
  // The results are those of a one-thread session.
  const NamedTensors in{{"x", random_tensor({1, 8, 16, 16}, 5)}};
  SessionOptions one, two;
  one.threads = 1;
  two.threads = 2;
  const auto a = run_profiled(conv_model(8, 16), one, in), b = run_profiled(conv_model(8, 16), two, in);
  ASSERT_EQ(a.outputs.size(), 1u);
  ASSERT_EQ(b.outputs.size(), 1u);
  EXPECT_TRUE(bitwise_equal(a.outputs[0].second, b.outputs[0].second));
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
