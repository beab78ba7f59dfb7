// Element-wise groups of QDQ models fused into one pass (exec/qdq_eltwise.h): the outputs
// at optimisation level 2 (fused) are those of level 1 (the same ops one node at a time)
// bit for bit — det's activation chain, a residual Add → Relu of two quantised inputs,
// broadcast operands of every kind, every op; and what must not be fused is not.
#include <cstdlib>
#include <map>
#include <random>

#include "support/test_util.h"

namespace bulkhead::test {
namespace {

Tensor u8(const Shape& s, uint32_t seed) {
  Tensor t = Tensor::host(DataType::kUInt8, s);
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(rng() & 255);
  return t;
}

// The outputs at level 2 are level 1's bit for bit, at 1 and 2 threads (test_util.h).
std::map<std::string, int> expect_fused_same(const std::string& text, const NamedTensors& in) {
  return expect_level2_same_as_level1(text, in);
}

const char* kHeader = R"(<ir_version: 8, opset_import: ["" : 13]>
)";

TEST(QdqEltwise, DetsActivationChainIsOneNode) {
  // x·clip(x + 3, 0, 6)/6, then a scale and a shift (PP-LCNet's learnable affine).
  const std::string text = std::string(kHeader) + R"(g (uint8[2,16,9,7] xq) => (uint8[2,16,9,7] yq)
<float s = {0.05}, uint8 z = {120}, float ys = {0.03}, uint8 yz = {30}, float three = {3}, float zero = {0},
 float six = {6}, float k = {0.8}, float b = {-0.25}> {
  x = DequantizeLinear(xq, s, z)
  a = Add(x, three)
  c = Clip(a, zero, six)
  m = Mul(x, c)
  h = Div(m, six)
  sc = Mul(k, h)
  sh = Add(sc, b)
  yq = QuantizeLinear(sh, ys, yz)
})";
  auto ops = expect_fused_same(text, {{"xq", u8({2, 16, 9, 7}, 1)}});
  EXPECT_EQ(ops["QLinearEltwise"], 1);
  EXPECT_EQ(ops["DequantizeLinear"] + ops["QuantizeLinear"] + ops["Add"] + ops["Mul"] + ops["Div"] + ops["Clip"], 0);
}

TEST(QdqEltwise, ResidualAddReluOfTwoQuantisedInputsAndInt8Output) {
  const std::string text = std::string(kHeader) + R"(g (uint8[1,8,6,6] aq, int8[1,8,6,6] bq) => (int8[1,8,6,6] yq, float[1,8,6,6] a)
<float sa = {0.02}, uint8 za = {128}, float sb = {0.07}, int8 zb = {-3}, float ys = {0.04}, int8 yz = {-10}> {
  a = DequantizeLinear(aq, sa, za)
  b = DequantizeLinear(bq, sb, zb)
  s = Sum(a, b)
  r = Relu(s)
  yq = QuantizeLinear(r, ys, yz)
})";
  Tensor bq = Tensor::host(DataType::kInt8, {1, 8, 6, 6});
  std::mt19937 rng(5);
  for (int64_t i = 0; i < bq.numel(); ++i) bq.data<int8_t>()[i] = static_cast<int8_t>(rng() & 255);
  // `a` is also a graph output: its DequantizeLinear stays for it; the group still fuses.
  auto ops = expect_fused_same(text, {{"aq", u8({1, 8, 6, 6}, 3)}, {"bq", bq}});
  EXPECT_EQ(ops["QLinearEltwise"], 1);
  EXPECT_EQ(ops["DequantizeLinear"], 1);
  EXPECT_EQ(ops["Sum"] + ops["Relu"], 0);
}

TEST(QdqEltwise, Uint8ResidualAddWithAndWithoutRelu) {
  // uint8 + uint8 -> uint8 of one shape (ResNet's residual), over more elements than one
  // thread's piece and a count no vector width divides: the same bits as the ops one node
  // at a time, with saturation at both ends. An output scale so small that the quotient
  // can leave the range the one-pass loop assumes (2^29) takes the general path: the same
  // bits too.
  for (const char* ys : {"0.029", "0.0000000001"})
  for (const char* tail : {"  r = Relu(s)\n  yq = QuantizeLinear(r, ys, yz)\n", "  yq = QuantizeLinear(s, ys, yz)\n"}) {
    const std::string text = std::string(kHeader) + R"(g (uint8[2,64,13,11] aq, uint8[2,64,13,11] bq) => (uint8[2,64,13,11] yq)
<float sa = {0.031}, uint8 za = {119}, float sb = {0.047}, uint8 zb = {131}, float ys = {)" + ys + R"(}, uint8 yz = {87}> {
  a = DequantizeLinear(aq, sa, za)
  b = DequantizeLinear(bq, sb, zb)
  s = Add(b, a)
)" + tail + "}";
    auto ops = expect_fused_same(text, {{"aq", u8({2, 64, 13, 11}, 7)}, {"bq", u8({2, 64, 13, 11}, 8)}});
    EXPECT_EQ(ops["QLinearEltwise"], 1) << tail << ys;
    EXPECT_EQ(ops["DequantizeLinear"] + ops["QuantizeLinear"] + ops["Add"] + ops["Relu"], 0) << tail << ys;
  }
}

TEST(QdqEltwise, BroadcastOperandsOfEveryKindAndEveryOp) {
  // A per-channel vector [1, C, 1, 1], a row [W] (repeated along the leading dims) and a
  // column [1, 1, H, 1] (walked index by index); Sub, Max, Min, HardSigmoid, HardSwish.
  const std::string text = std::string(kHeader) + R"(g (uint8[2,4,5,6] xq, uint8[1,4,1,1] cq, uint8[6] rq, uint8[1,1,5,1] hq) => (uint8[2,4,5,6] yq)
<float s = {0.05}, uint8 z = {100}, float s2 = {0.01}, uint8 z2 = {7}, float ys = {0.02}, uint8 yz = {64}, float one = {1}> {
  x = DequantizeLinear(xq, s, z)
  c = DequantizeLinear(cq, s2, z2)
  r = DequantizeLinear(rq, s2, z2)
  h = DequantizeLinear(hq, s, z)
  a = Sub(x, c)
  m = Max(a, r)
  n = Min(m, one)
  g = HardSigmoid <alpha = 0.3, beta = 0.4> (n)
  w = HardSwish(g)
  t = Mul(w, h)
  yq = QuantizeLinear(t, ys, yz)
})";
  auto ops = expect_fused_same(text, {{"xq", u8({2, 4, 5, 6}, 7)}, {"cq", u8({1, 4, 1, 1}, 8)}, {"rq", u8({6}, 9)},
                                      {"hq", u8({1, 1, 5, 1}, 10)}});
  EXPECT_EQ(ops["QLinearEltwise"], 1);
  EXPECT_EQ(ops["HardSigmoid"] + ops["HardSwish"] + ops["Max"] + ops["Min"] + ops["Sub"] + ops["Mul"], 0);
}

TEST(QdqEltwise, SigmoidTanhAndLeakyReluChainsAreOneNode) {
  // SiLU (x·sigmoid(x), YOLO's activation), tanh and a leaky ReLU between quantisations:
  // one QLinearEltwise each, the bits of the Sigmoid, Tanh and LeakyRelu kernels.
  const std::string text = std::string(kHeader) + R"(g (uint8[2,16,9,7] xq) => (uint8[2,16,9,7] sq, int8[2,16,9,7] tq, uint8[2,16,9,7] lq)
<float s = {0.06}, uint8 z = {128}, float ys = {0.03}, uint8 yz = {10}, float ts = {0.008}, int8 tz = {0}> {
  x = DequantizeLinear(xq, s, z)
  g = Sigmoid(x)
  m = Mul(x, g)
  sq = QuantizeLinear(m, ys, yz)
  t = Tanh(x)
  tq = QuantizeLinear(t, ts, tz)
  l = LeakyRelu <alpha = 0.1> (x)
  lq = QuantizeLinear(l, s, z)
})";
  auto ops = expect_fused_same(text, {{"xq", u8({2, 16, 9, 7}, 37)}});
  EXPECT_EQ(ops["QLinearEltwise"], 3);
  EXPECT_EQ(ops["Sigmoid"] + ops["Tanh"] + ops["LeakyRelu"] + ops["Mul"] + ops["DequantizeLinear"], 0);
}

// Level 2 against level 1 within `step` quantisation steps, at 1 and 2 threads; the ops
// level 2 ran.
std::map<std::string, int> expect_fused_within(const std::string& text, const NamedTensors& in, int step) {
  SessionOptions plain;
  plain.optimization_level = 1;
  const ProfiledRun ref = run_profiled(text, plain, in);
  std::map<std::string, int> ops;
  for (int threads : {1, 2}) {
    SessionOptions o;
    o.threads = threads;
    o.one_thread_when_small = false;
    const ProfiledRun got = run_profiled(text, o, in);
    EXPECT_EQ(got.outputs.size(), ref.outputs.size());
    for (size_t k = 0; k < got.outputs.size() && k < ref.outputs.size(); ++k) {
      const Tensor &a = ref.outputs[k].second, &b = got.outputs[k].second;
      EXPECT_EQ(a.shape(), b.shape());
      EXPECT_EQ(a.dtype(), b.dtype());
      if (a.shape() != b.shape() || a.dtype() != b.dtype()) continue;
      for (int64_t i = 0; i < a.numel(); ++i) {
        const int va = a.dtype() == DataType::kUInt8 ? a.data<uint8_t>()[i] : a.data<int8_t>()[i];
        const int vb = b.dtype() == DataType::kUInt8 ? b.data<uint8_t>()[i] : b.data<int8_t>()[i];
        EXPECT_LE(std::abs(va - vb), step) << "output " << k << " element " << i << ", threads " << threads;
      }
    }
    ops = got.ops;
  }
  return ops;
}

TEST(QdqEltwise, GlobalAveragePoolRunsOnTheQuantisedTensorWithinOneStep) {
  // A graph input (NCHW) and a QDQ convolution's channels-last output (a squeeze-and-
  // excitation block's pooling), pooled to another scale, zero point and type: one
  // QLinearGlobalAveragePool each.
  std::string weights;
  std::mt19937 rng(41);
  for (int i = 0; i < 24 * 8 * 9; ++i) weights += (i ? "," : "") + std::to_string(static_cast<int>(rng() % 255) - 127);
  const std::string text = std::string(kHeader) + R"(g (uint8[2,8,13,11] xq) => (uint8[2,8,1,1] pq, int8[2,24,1,1] cq)
<float s = {0.05}, uint8 z = {100}, float ps = {0.02}, uint8 pz = {110}, int8[24,8,3,3] w = {)" + weights +
                           R"(}, float ws = {0.004}, float hs = {0.09}, uint8 hz = {0}, float cs = {0.03}, int8 cz = {-20}> {
  x = DequantizeLinear(xq, s, z)
  p = GlobalAveragePool(x)
  pq = QuantizeLinear(p, ps, pz)
  wf = DequantizeLinear(w, ws)
  c = Conv <pads = [1,1,1,1]> (x, wf)
  r = Relu(c)
  hq = QuantizeLinear(r, hs, hz)
  h = DequantizeLinear(hq, hs, hz)
  g = GlobalAveragePool(h)
  gq = QuantizeLinear(g, cs, cz)
  gd = DequantizeLinear(gq, cs, cz)
  e = Sigmoid(gd)
  cq = QuantizeLinear(e, cs, cz)
})";
  auto ops = expect_fused_within(text, {{"xq", u8({2, 8, 13, 11}, 42)}}, 1);
  EXPECT_EQ(ops["QLinearGlobalAveragePool"], 2);
  EXPECT_EQ(ops["GlobalAveragePool"] + ops["QuantizeLinear"], 0);
}

TEST(QdqEltwise, AveragePoolRunsOnTheQuantisedTensorWithinOneStep) {
  // Pads counted and not, ceil_mode, strides, another output scale, zero point and type,
  // int8 in: one QLinearAveragePool each, within a step of the float path.
  const std::string text = std::string(kHeader) + R"(g (uint8[2,5,11,9] xq, int8[1,3,8,8] wq) => (uint8[2,5,6,5] aq, int8[2,5,4,3] bq, uint8[1,3,4,4] cq)
<float s = {0.05}, uint8 z = {100}, float as = {0.04}, uint8 az = {90}, float bs = {0.03}, int8 bz = {-7}, float ws = {0.2}, int8 wz = {3}> {
  x = DequantizeLinear(xq, s, z)
  a = AveragePool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], count_include_pad = 1> (x)
  aq = QuantizeLinear(a, as, az)
  b = AveragePool <kernel_shape = [3, 2], strides = [3, 3], pads = [1, 0, 0, 1], ceil_mode = 1> (x)
  bq = QuantizeLinear(b, bs, bz)
  w = DequantizeLinear(wq, ws, wz)
  c = AveragePool <kernel_shape = [2, 2], strides = [2, 2]> (w)
  cq = QuantizeLinear(c, as, az)
})";
  Tensor w = Tensor::host(DataType::kInt8, {1, 3, 8, 8});
  std::mt19937 rng(43);
  for (int64_t i = 0; i < w.numel(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>(rng() & 255);
  auto ops = expect_fused_within(text, {{"xq", u8({2, 5, 11, 9}, 44)}, {"wq", w}}, 1);
  EXPECT_EQ(ops["QLinearAveragePool"], 3);
  EXPECT_EQ(ops["AveragePool"] + ops["DequantizeLinear"] + ops["QuantizeLinear"], 0);
}

TEST(QdqEltwise, SqueezeAndExcitationStaysChannelsLastAndPerChannelVectorsRunFast) {
  // h·sigmoid(pool(h)) + e, h and e two QDQ convolutions' outputs (an SE block and a
  // residual): the QLinearEltwise of three inputs reads both channels-last outputs and the
  // pooled [N, C, 1, 1] vector as they are, with no conversion; and a per-channel vector
  // [N, C, 1, 1] against an NCHW input (read in runs of H·W) gives level 1's bits.
  std::string weights;
  std::mt19937 rng(45);
  for (int i = 0; i < 8 * 8 * 9; ++i) weights += (i ? "," : "") + std::to_string(static_cast<int>(rng() % 255) - 127);
  const std::string se = std::string(kHeader) + R"(g (uint8[1,8,9,10] xq) => (uint8[1,8,9,10] yq)
<float s = {0.05}, uint8 z = {100}, int8[8,8,3,3] w = {)" + weights +
                         R"(}, float ws = {0.004}, float hs = {0.06}, uint8 hz = {0}, float ps = {0.03}, uint8 pz = {0},
 float ys = {0.08}, uint8 yz = {10}> {
  x = DequantizeLinear(xq, s, z)
  wf = DequantizeLinear(w, ws)
  c = Conv <pads = [1,1,1,1]> (x, wf)
  r = Relu(c)
  hq = QuantizeLinear(r, hs, hz)
  h = DequantizeLinear(hq, hs, hz)
  p = GlobalAveragePool(h)
  pq = QuantizeLinear(p, ps, pz)
  pd = DequantizeLinear(pq, ps, pz)
  g = Sigmoid(pd)
  m = Mul(h, g)
  c1 = Conv <pads = [1,1,1,1]> (x, wf)
  e1 = Relu(c1)
  eq = QuantizeLinear(e1, hs, hz)
  e = DequantizeLinear(eq, hs, hz)
  a = Add(m, e)
  aq = QuantizeLinear(a, ys, yz)
  ad = DequantizeLinear(aq, ys, yz)
  c2 = Conv <pads = [1,1,1,1]> (ad, wf)
  yq = QuantizeLinear(c2, ys, yz)
})";
  auto ops = expect_fused_within(se, {{"xq", u8({1, 8, 9, 10}, 46)}}, 1);
  EXPECT_EQ(ops["QLinearEltwise"], 1);
  EXPECT_EQ(ops["FromNhwc"] + ops["ToNhwc"], 0);
  const std::string vec = std::string(kHeader) + R"(g (uint8[2,4,5,6] xq, uint8[2,4,1,1] cq) => (uint8[2,4,5,6] yq)
<float s = {0.05}, uint8 z = {100}, float s2 = {0.01}, uint8 z2 = {7}, float ys = {0.02}, uint8 yz = {64}> {
  x = DequantizeLinear(xq, s, z)
  c = DequantizeLinear(cq, s2, z2)
  t = Mul(x, c)
  yq = QuantizeLinear(t, ys, yz)
})";
  ops = expect_fused_same(vec, {{"xq", u8({2, 4, 5, 6}, 47)}, {"cq", u8({2, 4, 1, 1}, 48)}});
  EXPECT_EQ(ops["QLinearEltwise"], 1);
}

TEST(QdqEltwise, OneInputProgramsGiveTheirBytesForEveryInputByte) {
  // A one-input group is a function of one byte (the kernel runs it as a 256-entry table):
  // every uint8 and int8 value, through a chain that saturates, one that divides by zero
  // (infinities and a NaN, which quantises to the zero point) and a sigmoid, gives level 1's
  // bytes.
  const std::string text = std::string(kHeader) + R"(g (uint8[2,256] uq, int8[2,256] iq) => (int8[2,256] aq, uint8[2,256] bq, uint8[2,256] cq)
<float s = {0.07}, uint8 z = {100}, float si = {0.5}, int8 zi = {-3}, float two = {2}, float zero = {0},
 float ys = {0.03}, int8 yz = {5}, float bs = {0.01}, uint8 bz = {128}> {
  u = DequantizeLinear(uq, s, z)
  h = HardSwish(u)
  a = Mul(h, two)
  aq = QuantizeLinear(a, ys, yz)
  x = DequantizeLinear(iq, si, zi)
  d = Div(x, zero)
  bq = QuantizeLinear(d, bs, bz)
  g = Sigmoid(x)
  cq = QuantizeLinear(g, bs, bz)
})";
  Tensor u = Tensor::host(DataType::kUInt8, {2, 256});
  Tensor i = Tensor::host(DataType::kInt8, {2, 256});
  for (int k = 0; k < 512; ++k) {
    u.data<uint8_t>()[k] = static_cast<uint8_t>(k % 256);
    i.data<int8_t>()[k] = static_cast<int8_t>(255 - k % 256);
  }
  auto ops = expect_fused_same(text, {{"uq", u}, {"iq", i}});
  EXPECT_EQ(ops["QLinearEltwise"], 3);
}

TEST(QdqEltwise, MaxPoolBetweenEqualQuantisationRunsOnTheQuantisedTensor) {
  // DequantizeLinear → MaxPool → QuantizeLinear with one scale, zero point and type: the
  // MaxPool alone on the quantised tensor, the same bits (uint8 with pads, strides and
  // ceil_mode; int8 with dilations and a negative zero point).
  const std::string u = std::string(kHeader) + R"(g (uint8[2,5,13,11] xq) => (uint8[2,5,7,6] yq)
<float s = {0.037}, uint8 z = {131}> {
  x = DequantizeLinear(xq, s, z)
  m = MaxPool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 0, 0], ceil_mode = 1> (x)
  yq = QuantizeLinear(m, s, z)
})";
  auto ops = expect_fused_same(u, {{"xq", u8({2, 5, 13, 11}, 21)}});
  EXPECT_EQ(ops["MaxPool"], 1);
  EXPECT_EQ(ops["DequantizeLinear"] + ops["QuantizeLinear"], 0);

  const std::string i = std::string(kHeader) + R"(g (int8[1,3,9,10] xq) => (int8[1,3,5,6] yq)
<float s = {0.5}, int8 z = {-7}> {
  x = DequantizeLinear(xq, s, z)
  m = MaxPool <kernel_shape = [2, 3], dilations = [2, 2], pads = [0, 1, 0, 1]> (x)
  yq = QuantizeLinear(m, s, z)
})";
  Tensor xi = Tensor::host(DataType::kInt8, {1, 3, 9, 10});
  std::mt19937 rng(22);
  for (int64_t k = 0; k < xi.numel(); ++k) xi.data<int8_t>()[k] = static_cast<int8_t>(rng() & 255);
  ops = expect_fused_same(i, {{"xq", xi}});
  EXPECT_EQ(ops["MaxPool"], 1);
  EXPECT_EQ(ops["DequantizeLinear"] + ops["QuantizeLinear"], 0);
}

TEST(QdqEltwise, MaxPoolWithOtherQuantisationOrItsIndicesStaysInFloat) {
  // Another scale after the pool, another zero point, the Indices output read, the
  // pooled float value also a graph output: each keeps its DequantizeLinear and
  // QuantizeLinear, and the outputs are still those of level 1.
  const char* cases[] = {
      R"(g (uint8[1,4,6,6] xq) => (uint8[1,4,3,3] yq) <float s = {0.05}, uint8 z = {100}, float s2 = {0.06}> {
  x = DequantizeLinear(xq, s, z)
  m = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (x)
  yq = QuantizeLinear(m, s2, z)
})",
      R"(g (uint8[1,4,6,6] xq) => (uint8[1,4,3,3] yq) <float s = {0.05}, uint8 z = {100}, uint8 z2 = {101}> {
  x = DequantizeLinear(xq, s, z)
  m = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (x)
  yq = QuantizeLinear(m, s, z2)
})",
      R"(g (uint8[1,4,6,6] xq) => (uint8[1,4,3,3] yq, int64[1,4,3,3] idx) <float s = {0.05}, uint8 z = {100}> {
  x = DequantizeLinear(xq, s, z)
  m, idx = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (x)
  yq = QuantizeLinear(m, s, z)
})",
      R"(g (uint8[1,4,6,6] xq) => (uint8[1,4,3,3] yq, float[1,4,3,3] m) <float s = {0.05}, uint8 z = {100}> {
  x = DequantizeLinear(xq, s, z)
  m = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (x)
  yq = QuantizeLinear(m, s, z)
})"};
  for (const char* c : cases) {
    auto ops = expect_fused_same(std::string(kHeader) + c, {{"xq", u8({1, 4, 6, 6}, 23)}});
    EXPECT_EQ(ops["DequantizeLinear"], 1) << c;
    EXPECT_EQ(ops["QuantizeLinear"], 1) << c;
  }
}

TEST(QdqEltwise, OpsThatMoveValuesRunOnTheQuantisedTensor) {
  // Between equal quantisations, Reshape, Transpose, a nearest Resize, a Slice and a
  // Concat run on the quantised tensors: no DequantizeLinear or QuantizeLinear is left,
  // and the bits are level 1's.
  const std::string text = std::string(kHeader) + R"(g (uint8[1,4,6,6] xq, uint8[1,2,12,12] wq) => (uint8[1,6,12,12] yq, uint8[1,36,4] tq)
<float s = {0.05}, uint8 z = {100}, float[4] scales = {1, 1, 2, 2}, int64[3] shape = {1, 4, 36},
 int64[1] st = {1}, int64[1] en = {5}, int64[1] ax = {1}> {
  x = DequantizeLinear(xq, s, z)
  r = Resize <mode = "nearest"> (x, , scales)
  rq = QuantizeLinear(r, s, z)
  rd = DequantizeLinear(rq, s, z)
  w = DequantizeLinear(wq, s, z)
  c = Concat <axis = 1> (rd, w)
  yq = QuantizeLinear(c, s, z)
  x2 = DequantizeLinear(xq, s, z)
  f = Reshape(x2, shape)
  fq = QuantizeLinear(f, s, z)
  fd = DequantizeLinear(fq, s, z)
  t = Transpose <perm = [0, 2, 1]> (fd)
  tq = QuantizeLinear(t, s, z)
})";
  auto ops = expect_fused_same(text, {{"xq", u8({1, 4, 6, 6}, 31)}, {"wq", u8({1, 2, 12, 12}, 32)}});
  EXPECT_EQ(ops["Resize"], 1);
  EXPECT_EQ(ops["Concat"], 1);
  EXPECT_EQ(ops["Reshape"], 1);
  EXPECT_EQ(ops["Transpose"], 1);
  EXPECT_EQ(ops["DequantizeLinear"] + ops["QuantizeLinear"], 0);
}

TEST(QdqEltwise, ConcatOfOtherQuantisationsRequantisesItsInputs) {
  // Inputs quantised with another scale, zero point or type than the Concat's output: each
  // is requantised (one QLinearEltwise each) and the Concat runs on the quantised tensors,
  // the bits of DequantizeLinear → Concat → QuantizeLinear.
  const std::string text = std::string(kHeader) + R"(g (uint8[2,3,5] aq, uint8[2,4,5] bq, int8[2,2,5] cq) => (uint8[2,9,5] yq)
<float s = {0.05}, uint8 z = {100}, float sb = {0.031}, uint8 zb = {90}, float sc = {0.2}, int8 zc = {-3}> {
  a = DequantizeLinear(aq, s, z)
  b = DequantizeLinear(bq, sb, zb)
  c = DequantizeLinear(cq, sc, zc)
  k = Concat <axis = 1> (a, b, c)
  yq = QuantizeLinear(k, s, z)
})";
  Tensor c = Tensor::host(DataType::kInt8, {2, 2, 5});
  std::mt19937 rng(35);
  for (int64_t i = 0; i < c.numel(); ++i) c.data<int8_t>()[i] = static_cast<int8_t>(rng() & 255);
  auto ops = expect_fused_same(text, {{"aq", u8({2, 3, 5}, 33)}, {"bq", u8({2, 4, 5}, 34)}, {"cq", c}});
  EXPECT_EQ(ops["Concat"], 1);
  EXPECT_EQ(ops["QLinearEltwise"], 2);
  EXPECT_EQ(ops["DequantizeLinear"] + ops["QuantizeLinear"], 0);
}

TEST(QdqEltwise, ValueMixingOpsAndOtherQuantisationsStayInFloat) {
  // A linear Resize mixes values; a tf_crop_and_resize one writes its float
  // extrapolation_value outside the input; a Transpose to another scale needs arithmetic:
  // each keeps its DequantizeLinear and QuantizeLinear.
  const char* cases[] = {
      R"(g (uint8[1,2,4,4] xq) => (uint8[1,2,8,8] yq) <float s = {0.05}, uint8 z = {100}, float[4] scales = {1, 1, 2, 2},
 float[8] roi = {0, 0, -0.5, -0.5, 1, 1, 1.5, 1.5}> {
  x = DequantizeLinear(xq, s, z)
  r = Resize <mode = "nearest", coordinate_transformation_mode = "tf_crop_and_resize", extrapolation_value = 0.0> (x, roi, scales)
  yq = QuantizeLinear(r, s, z)
})",
      R"(g (uint8[1,2,4,4] xq) => (uint8[1,2,8,8] yq) <float s = {0.05}, uint8 z = {100}, float[4] scales = {1, 1, 2, 2}> {
  x = DequantizeLinear(xq, s, z)
  r = Resize <mode = "linear"> (x, , scales)
  yq = QuantizeLinear(r, s, z)
})",
      R"(g (uint8[1,2,4,4] xq) => (uint8[1,4,4,2] yq) <float s = {0.05}, uint8 z = {100}, float s2 = {0.07}> {
  x = DequantizeLinear(xq, s, z)
  t = Transpose <perm = [0, 2, 3, 1]> (x)
  yq = QuantizeLinear(t, s2, z)
})"};
  for (const char* c : cases) {
    auto ops = expect_fused_same(std::string(kHeader) + c, {{"xq", u8({1, 2, 4, 4}, 36)}});
    EXPECT_EQ(ops["DequantizeLinear"], 1) << c;
    EXPECT_EQ(ops["QuantizeLinear"], 1) << c;
  }
}

TEST(QdqEltwise, WhatMustStayUnfusedStays) {
  // An intermediate that is also a graph output, and an op the pass does not know (Exp):
  // neither group is fused, and the outputs are still those of level 1.
  const std::string text = std::string(kHeader) + R"(g (uint8[1,4,3,3] xq) => (uint8[1,4,3,3] yq, float[1,4,3,3] a, uint8[1,4,3,3] eq)
<float s = {0.05}, uint8 z = {100}, float ys = {0.02}, uint8 yz = {64}, float three = {3}> {
  x = DequantizeLinear(xq, s, z)
  a = Add(x, three)
  yq = QuantizeLinear(a, ys, yz)
  e = Exp(x)
  eq = QuantizeLinear(e, ys, yz)
})";
  auto ops = expect_fused_same(text, {{"xq", u8({1, 4, 3, 3}, 11)}});
  EXPECT_EQ(ops["QLinearEltwise"], 0);
  EXPECT_EQ(ops["QuantizeLinear"], 2);
}

}  // namespace
}  // namespace bulkhead::test
