// Channels-last int8 chains (exec/layout.h nhwc_int8_chains): at optimisation level 2 the
// QLinearConvs of a QDQ model and the element-wise ops between them run on [N, H, W, C]
// tensors, and the results are those of level 1 (the same kernels on NCHW) bit for bit —
// with symbolic dimensions, a constant to permute, a [N, C, 1, 1] operand, a plain
// operand to convert, plain readers, and the reference loops (BULKHEAD_CPU_INT8=0).
#include <cstdlib>
#include <map>
#include <random>
#include <sstream>

#include "support/test_util.h"

namespace bulkhead::test {
namespace {

std::string int8_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-60, 60);
  std::ostringstream os;
  for (int64_t i = 0; i < n; ++i) os << (i ? ", " : "") << d(rng);
  return os.str();
}

const std::string& model() {
  static const std::string text = R"(<ir_version: 8, opset_import: ["" : 13]>
g (uint8[N,8,H,W] xq) => (float[N,16,H,W] y, float[N,16,1,1] pooled)
<int8[16,8,3,3] w1 = {)" + int8_values(16 * 8 * 9, 1) + R"(}, int8[16,16,1,1] w2 = {)" + int8_values(256, 2) +
                                  R"(}, float xs = {0.02}, uint8 xz = {128}, float w1s = {0.01}, int8 w1z = {0},
 float s1 = {0.05}, uint8 z1 = {20}, float w2s = {0.02}, int8 w2z = {0}, float s2 = {0.04}, uint8 z2 = {100},
 float three = {3}, float[16,1,1] k = {)" + random_values_text(16, 3, 0.5f, 1.5f) + R"(}> {
  c1 = QLinearConv <pads = [1, 1, 1, 1]> (xq, xs, xz, w1, w1s, w1z, s1, z1)
  d1 = DequantizeLinear(c1, s1, z1)
  a1 = Add(d1, three)
  m1 = Mul(a1, k)
  h1 = HardSwish(m1)
  q1 = QuantizeLinear(h1, s1, z1)
  c2 = QLinearConv (q1, s1, z1, w2, w2s, w2z, s2, z2)
  d2 = DequantizeLinear(c2, s2, z2)
  pooled = GlobalAveragePool(d1)
  sg = Sigmoid(pooled)
  yv = Mul(d2, sg)
  t = Transpose <perm = [0, 1, 3, 2]> (d1)
  t2 = Transpose <perm = [0, 1, 3, 2]> (t)
  rr = Add(d1, t2)
  y = Add(yv, rr)
})";
  return text;
}

using Outcome = ProfiledRun;

Outcome run_level(int level, int threads, const Tensor& x) {
  SessionOptions o;
  o.threads = threads;
  o.one_thread_when_small = false;  // the kernels' own threads, whatever the model's size
  o.optimization_level = level;
  return run_profiled(model(), o, {{"xq", x}});
}

Tensor input(const Shape& s, uint32_t seed) {
  Tensor t = Tensor::host(DataType::kUInt8, s);
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(rng() & 255);
  return t;
}

void expect_same(const Outcome& a, const Outcome& b, const std::string& what) {
  ASSERT_EQ(a.outputs.size(), b.outputs.size()) << what;
  for (size_t k = 0; k < a.outputs.size(); ++k)
    EXPECT_TRUE(bitwise_equal(a.outputs[k].second, b.outputs[k].second)) << what << ": output " << a.outputs[k].first;
}

TEST(Nhwc, Int8ChainsGiveWhatNchwGives) {
  for (const Shape& s : {Shape{1, 8, 9, 13}, Shape{2, 8, 16, 5}}) {
    const Tensor x = input(s, 7);
    const Outcome plain = run_level(1, 1, x);
    for (int threads : {1, 2}) {
      Outcome cl = run_level(2, threads, x);
      expect_same(plain, cl, "threads " + std::to_string(threads));
      // Back to NCHW: d1 for the pooling and the Transposes, and yv and rr for the graph
      // output's Add; to NHWC: the Transposes' result for rr's Add (a plain operand of
      // full shape). The pooled [N, 16, 1, 1] operand of yv's Mul is read through a
      // Reshape, the [16, 1, 1] constant of m1's Mul permuted once.
      EXPECT_EQ(cl.ops["FromNhwc"], 3);
      EXPECT_EQ(cl.ops["ToNhwc"], 1);
      EXPECT_EQ(cl.ops["Reshape"], 1);
      EXPECT_EQ(cl.ops["QLinearConv"], 2);
    }
  }
  // The reference loops (no oneDNN) on channels-last tensors: through NCHW copies.
  const char* old = std::getenv("BULKHEAD_CPU_INT8");
  const std::string saved = old ? old : "";
  setenv("BULKHEAD_CPU_INT8", "0", 1);
  const Tensor x = input({1, 8, 7, 6}, 8);
  const Outcome ref_plain = run_level(1, 1, x);
  const Outcome ref_cl = run_level(2, 1, x);
  if (old) setenv("BULKHEAD_CPU_INT8", saved.c_str(), 1);
  else unsetenv("BULKHEAD_CPU_INT8");
  expect_same(ref_plain, ref_cl, "reference loops");
}

TEST(Nhwc, Int8MaxPoolsBetweenConvolutionsRunChannelsLast) {
  // A QDQ stem: QLinearConv → (DequantizeLinear → MaxPool → QuantizeLinear) twice →
  // QLinearConv, 24 channels (no vector width divides them), pads, strides, ceil_mode and
  // dilations: the pools run on the uint8 tensors channels-last between the convolutions,
  // with no conversion, and give level 1's bits.
  const std::string text = R"(<ir_version: 8, opset_import: ["" : 13]>
g (uint8[N,8,H,W] xq) => (float[N,16,P,Q] y)
<int8[24,8,3,3] w1 = {)" + int8_values(24 * 8 * 9, 4) + R"(}, int8[16,24,1,1] w2 = {)" + int8_values(16 * 24, 5) +
                           R"(}, float xs = {0.02}, uint8 xz = {128}, float w1s = {0.01}, int8 w1z = {0},
 float s1 = {0.05}, uint8 z1 = {20}, float w2s = {0.02}, int8 w2z = {0}, float s2 = {0.04}, uint8 z2 = {100}> {
  c1 = QLinearConv <pads = [1, 1, 1, 1], strides = [2, 2]> (xq, xs, xz, w1, w1s, w1z, s1, z1)
  d1 = DequantizeLinear(c1, s1, z1)
  p1 = MaxPool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]> (d1)
  q1 = QuantizeLinear(p1, s1, z1)
  e1 = DequantizeLinear(q1, s1, z1)
  p2 = MaxPool <kernel_shape = [2, 2], dilations = [2, 1], ceil_mode = 1, strides = [1, 2]> (e1)
  q2 = QuantizeLinear(p2, s1, z1)
  c2 = QLinearConv (q2, s1, z1, w2, w2s, w2z, s2, z2)
  y = DequantizeLinear(c2, s2, z2)
})";
  for (const Shape& s : {Shape{1, 8, 29, 23}, Shape{2, 8, 40, 17}}) {
    const Tensor x = input(s, 9);
    SessionOptions o;
    o.optimization_level = 1;
    Outcome plain = run_profiled(text, o, {{"xq", x}});
    EXPECT_EQ(plain.ops["MaxPool"], 2);
    for (int threads : {1, 2}) {
      o.optimization_level = 2;
      o.threads = threads;
      o.one_thread_when_small = false;  // the kernels' own threads, whatever the model's size
      Outcome cl = run_profiled(text, o, {{"xq", x}});
      expect_same(plain, cl, "threads " + std::to_string(threads));
      EXPECT_EQ(cl.ops["MaxPool"], 2);
      EXPECT_EQ(cl.ops["FromNhwc"], 1);  // c2's output, for the last DequantizeLinear
      EXPECT_EQ(cl.ops["ToNhwc"], 0);
      EXPECT_EQ(cl.ops["DequantizeLinear"] + cl.ops["QuantizeLinear"], 1);
    }
  }
}

}  // namespace
}  // namespace bulkhead::test
