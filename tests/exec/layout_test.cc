// The channel-blocked layout pass (exec/layout.h): optimisation level 2 keeps CPU
// convolution chains in nChw16c and must give the outputs of level 1 (the same fusions,
// plain layout) within float rounding — with channel counts that are and are not multiples
// of 16, residual sums, pooling, broadcasting, concatenation and plain readers in between.
#include <cmath>
#include <map>
#include <random>
#include <sstream>

#include "support/test_util.h"

namespace bulkhead::test {
namespace {

std::string values(int64_t n, uint32_t seed, float lo = -0.5f, float hi = 0.5f) {
  return random_values_text(n, seed, lo, hi);
}

// "float[M,C,K,K] name = {...}, float[M] name_b = {...}"
std::string conv_weights(const std::string& name, int64_t M, int64_t C, int64_t K, uint32_t seed) {
  std::ostringstream os;
  os << "float[" << M << "," << C << "," << K << "," << K << "] " << name << " = {" << values(M * C * K * K, seed)
     << "}, float[" << M << "] " << name << "_b = {" << values(M, seed + 100) << "}";
  return os.str();
}

struct Outcome {
  NamedTensors outputs;
  std::map<std::string, int> ops;  // op type -> nodes run
  std::map<std::string, std::string> shapes;  // op type -> "first input -> first output" (the last such node)
};

Outcome run_level(const std::string& text, int level, int threads, const NamedTensors& in) {
  Env env;
  SessionOptions o;
  o.threads = threads;
  o.one_thread_when_small = false;  // the kernels' own threads, whatever the model's size
  o.optimization_level = level;
  auto s = env.load_bytes(model_text_bytes(text), "layout.onnx", o);
  EXPECT_TRUE(s.is_ok()) << s.status().to_string();
  if (!s.is_ok()) return {};
  std::vector<NodeProfile> prof;
  RunOptions ro;
  ro.profile = &prof;
  auto r = s->run(in, ro);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  if (!r.is_ok()) return {};
  Outcome out{*r, {}};
  for (const auto& p : prof) {
    out.ops[p.op_type]++;
    out.shapes[p.op_type] = p.shapes;
  }
  // A second run reuses the cached primitives and must agree bit for bit.
  auto r2 = s->run(in);
  EXPECT_TRUE(r2.is_ok());
  if (r2.is_ok()) {
    for (size_t k = 0; k < r2->size(); ++k) {
      EXPECT_TRUE(bitwise_equal((*r)[k].second, (*r2)[k].second)) << (*r)[k].first;
    }
  }
  return out;
}

// Runs `text` at level 1 and level 2 with 1 and 2 threads; the outputs must agree within
// 1e-4 relative to max(1, |x|) (Winograd rounds differently from a direct convolution).
// Returns the level-2, 1-thread outcome.
Outcome check_same(const std::string& text, const NamedTensors& in) {
  Outcome ref = run_level(text, 1, 1, in);
  Outcome got;
  for (int threads : {1, 2}) {
    Outcome o = run_level(text, 2, threads, in);
    EXPECT_EQ(o.outputs.size(), ref.outputs.size());
    for (size_t k = 0; k < o.outputs.size() && k < ref.outputs.size(); ++k) {
      const Tensor& a = ref.outputs[k].second;
      const Tensor& b = o.outputs[k].second;
      EXPECT_EQ(a.shape(), b.shape()) << ref.outputs[k].first;
      if (a.shape() != b.shape()) continue;
      double worst = 0;
      for (int64_t i = 0; i < a.numel(); ++i) {
        double x = a.data<float>()[i], y = b.data<float>()[i];
        worst = std::max(worst, std::fabs(x - y) / std::max(1.0, std::fabs(x)));
      }
      EXPECT_LE(worst, 1e-4) << "output " << ref.outputs[k].first << " threads " << threads;
    }
    if (threads == 1) got = o;
  }
  return got;
}

TEST(Layout, ConvChainWithUnalignedChannelsPoolingAndResidual) {
  // 3 -> 20 channels (padded to 32 in nChw16c), Relu and MaxPool on the blocked tensor, a
  // residual sum of a 3x3 and a 1x1 branch, a 32 -> 32 3x3 (a Winograd shape), global
  // pooling, then a plain Flatten.
  std::string text = "<ir_version: 8, opset_import: [\"\" : 17]>\n"
                     "g (float[1,3,12,12] x) => (float[1,32] y)\n<" +
                     conv_weights("w1", 20, 3, 3, 1) + ", " + conv_weights("w2", 32, 20, 3, 2) + ", " +
                     conv_weights("w3", 32, 20, 1, 3) + ", " + conv_weights("w4", 32, 32, 3, 4) +
                     ">\n{\n"
                     "  c1 = Conv <pads = [1, 1, 1, 1]> (x, w1, w1_b)\n"
                     "  r1 = Relu(c1)\n"
                     "  p1 = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (r1)\n"
                     "  c2 = Conv <pads = [1, 1, 1, 1]> (p1, w2, w2_b)\n"
                     "  c3 = Conv (p1, w3, w3_b)\n"
                     "  s = Add(c2, c3)\n"
                     "  h = HardSigmoid(s)\n"
                     "  c4 = Conv <pads = [1, 1, 1, 1]> (h, w4, w4_b)\n"
                     "  t = Tanh(c4)\n"
                     "  g = GlobalAveragePool(t)\n"
                     "  y = Flatten(g)\n"
                     "}";
  Outcome o = check_same(text, {{"x", random_tensor({1, 3, 12, 12}, 11)}});
  // One conversion, before the Flatten; the chain in between stays blocked.
  EXPECT_EQ(o.ops["FromBlocked16"], 1);
  EXPECT_EQ(o.ops["ToBlocked16"], 0);
}

TEST(Layout, DenseNetsPreActivationBatchNormRunsBlocked) {
  // DenseNet's layer: Concat → BatchNormalization → Relu → 1x1 Conv → BatchNormalization →
  // Relu → 3x3 Conv → Concat, and its transition's BatchNormalization before AveragePool;
  // 48 and 80 channels for the concatenations (whole blocks), 24 for a partial block's
  // BatchNormalization (after a Relu; its padded channels must stay finite).
  auto bn = [](const std::string& name, int64_t C, uint32_t seed) {
    return "float[" + std::to_string(C) + "] " + name + "_s = {" + values(C, seed, 0.5f, 1.5f) + "}, float[" +
           std::to_string(C) + "] " + name + "_b = {" + values(C, seed + 1) + "}, float[" + std::to_string(C) + "] " +
           name + "_m = {" + values(C, seed + 2) + "}, float[" + std::to_string(C) + "] " + name + "_v = {" +
           values(C, seed + 3, 0.1f, 2.f) + "}";
  };
  std::string text = "<ir_version: 8, opset_import: [\"\" : 13]>\n"
                     "g (float[1,3,12,12] x) => (float[1,80,6,6] y)\n<" +
                     conv_weights("w0", 48, 3, 3, 21) + ", " + bn("n1", 48, 22) + ", " + conv_weights("w1", 24, 48, 1, 23) +
                     ", " + bn("n2", 24, 24) + ", " + conv_weights("w2", 32, 24, 3, 25) + ", " + bn("n3", 80, 26) + ", " +
                     conv_weights("w3", 80, 80, 1, 27) +
                     ">\n{\n"
                     "  c0 = Conv <pads = [1, 1, 1, 1]> (x, w0, w0_b)\n"
                     "  b1 = BatchNormalization <epsilon = 0.001> (c0, n1_s, n1_b, n1_m, n1_v)\n"
                     "  r1 = Relu(b1)\n"
                     "  c1 = Conv (r1, w1, w1_b)\n"
                     "  q1 = Relu(c1)\n"  // (a BatchNormalization right after a Conv is folded into it)
                     "  b2 = BatchNormalization (q1, n2_s, n2_b, n2_m, n2_v)\n"
                     "  r2 = Relu(b2)\n"
                     "  c2 = Conv <pads = [1, 1, 1, 1]> (r2, w2, w2_b)\n"
                     "  cat = Concat <axis = 1> (c0, c2)\n"
                     "  b3 = BatchNormalization (cat, n3_s, n3_b, n3_m, n3_v)\n"
                     "  r3 = Relu(b3)\n"
                     "  c3 = Conv (r3, w3, w3_b)\n"
                     "  y = AveragePool <kernel_shape = [2, 2], strides = [2, 2]> (c3)\n"
                     "}";
  Outcome o = check_same(text, {{"x", random_tensor({1, 3, 12, 12}, 28)}});
  EXPECT_EQ(o.ops["BatchNormalization"], 3);  // each with its Relu
  EXPECT_EQ(o.ops["FromBlocked16"], 1);       // y, the graph output
  EXPECT_EQ(o.ops["ToBlocked16"], 0);
}

TEST(Layout, PartialBlockConversionsBothWays) {
  // 24 channels (a block and a half) over 9x13 pixels (not a multiple of 8), two images:
  // the residual summand z is converted to nChw16c for the fused sum (ToBlocked16) and
  // the blocked r0 back for the Transpose (FromBlocked16), both on the partial-block
  // path (kernels/dnnl_layout.cc), whose padded channels must come out as zeros.
  std::string text = "<ir_version: 8, opset_import: [\"\" : 17]>\n"
                     "g (float[2,3,9,13] x, float[2,24,9,13] z) => (float[2,9,13,24] t, float[2,24,9,13] y)\n<" +
                     conv_weights("w0", 24, 3, 3, 30) + ", " + conv_weights("w1", 24, 24, 3, 31) + ", " +
                     conv_weights("w2", 24, 24, 3, 32) +
                     ">\n{\n"
                     "  c0 = Conv <pads = [1, 1, 1, 1]> (x, w0, w0_b)\n"
                     "  r0 = Relu(c0)\n"
                     "  t = Transpose <perm = [0, 2, 3, 1]> (r0)\n"
                     "  c1 = Conv <pads = [1, 1, 1, 1]> (r0, w1, w1_b)\n"
                     "  s = Add(c1, z)\n"
                     "  r = Relu(s)\n"
                     "  y = Conv <pads = [1, 1, 1, 1]> (r, w2, w2_b)\n"
                     "}";
  Outcome o = check_same(text, {{"x", random_tensor({2, 3, 9, 13}, 33)}, {"z", random_tensor({2, 24, 9, 13}, 34)}});
  EXPECT_EQ(o.ops["FromBlocked16"], 1);
  EXPECT_EQ(o.ops["ToBlocked16"], 1);
}

TEST(Layout, ConcatSqueezeExciteAndPlainReaders) {
  // A channel Concat of 16 + 32 blocked channels, a squeeze-excite gate broadcast over
  // the spatial dims, a scalar Mul, AveragePool, a Conv writing a plain graph output,
  // and a Transpose (a plain reader) of the blocked Concat.
  std::string text = "<ir_version: 8, opset_import: [\"\" : 17]>\n"
                     "g (float[1,3,10,10] x) => (float[1,5,10,10] y, float[1,10,10,48] z)\n<" +
                     conv_weights("w1", 16, 3, 3, 5) + ", " + conv_weights("w2", 32, 3, 1, 6) + ", " +
                     conv_weights("w3", 48, 48, 1, 7) + ", " + conv_weights("w4", 5, 48, 1, 8) +
                     ", float[1] k = {1.75}>\n{\n"
                     "  c1 = Conv <pads = [1, 1, 1, 1]> (x, w1, w1_b)\n"
                     "  c2 = Conv (x, w2, w2_b)\n"
                     "  cat = Concat <axis = -3> (c1, c2)\n"
                     "  gp = GlobalAveragePool(cat)\n"
                     "  se = Conv (gp, w3, w3_b)\n"
                     "  sg = Sigmoid(se)\n"
                     "  m = Mul(cat, sg)\n"
                     "  m2 = Mul(k, m)\n"
                     "  ap = AveragePool <kernel_shape = [3, 3], pads = [1, 1, 1, 1], count_include_pad = 1> (m2)\n"
                     "  y = Conv (ap, w4, w4_b)\n"
                     "  z = Transpose <perm = [0, 2, 3, 1]> (cat)\n"
                     "}";
  Outcome o = check_same(text, {{"x", random_tensor({1, 3, 10, 10}, 12)}});
  EXPECT_EQ(o.ops["FromBlocked16"], 1);  // for the Transpose; the last Conv writes y plain
  EXPECT_EQ(o.ops["ToBlocked16"], 0);
}

TEST(Layout, GraphOutputReadByAConvStaysBlocked) {
  // c1 is a graph output and the input of a depthwise and a 3x3 Conv (a split model's front
  // part looks so): computed blocked, its plain output made by one FromBlocked16 — not
  // written plain for the Convs to read plain. c2 (read only by the graph) stays plain.
  std::string text = "<ir_version: 8, opset_import: [\"\" : 17]>\n"
                     "g (float[1,3,12,12] x) => (float[1,32,12,12] c1, float[1,20,12,12] y, float[1,32,12,12] d)\n<" +
                     conv_weights("w1", 32, 3, 3, 21) + ", " + conv_weights("w2", 20, 32, 3, 22) +
                     ", float[32,1,3,3] wd = {" + values(32 * 9, 23) + "}"
                     ">\n{\n"
                     "  c1 = Conv <pads = [1, 1, 1, 1]> (x, w1, w1_b)\n"
                     "  d = Conv <group = 32, pads = [1, 1, 1, 1]> (c1, wd)\n"
                     "  y = Conv <pads = [1, 1, 1, 1]> (c1, w2, w2_b)\n"
                     "}";
  Outcome o = check_same(text, {{"x", random_tensor({1, 3, 12, 12}, 24)}});
  EXPECT_EQ(o.ops["FromBlocked16"], 1);
  EXPECT_EQ(o.ops["ToBlocked16"], 0);
}

TEST(Layout, APlainValueThatSeveralConvsReadIsConvertedOnce) {
  // A graph input of 32 channels (a split model's back part takes its cut values so) read
  // by a 3x3 and a depthwise Conv, and an unaligned Concat (20 + 12 channels, plain) read
  // by two Convs: one ToBlocked16 each, after which the Convs read blocked. A graph input
  // that one Conv reads (z) and the 3-channel image (x) stay plain: the Conv reorders it
  // itself at the same cost, and oneDNN's first-layer kernels read plain NCHW.
  std::string text = "<ir_version: 8, opset_import: [\"\" : 17]>\n"
                     "g (float[1,3,8,8] x, float[1,32,8,8] u, float[1,32,8,8] z) => (float[1,16,8,8] y)\n<" +
                     conv_weights("w1", 20, 3, 3, 31) + ", " + conv_weights("w2", 12, 3, 3, 32) + ", " +
                     conv_weights("wa", 16, 32, 3, 33) + ", " + conv_weights("wb", 16, 32, 1, 34) + ", " +
                     conv_weights("wc", 16, 32, 3, 35) + ", " + conv_weights("we", 16, 32, 1, 36) + ", " +
                     conv_weights("wz", 16, 32, 1, 37) + ", float[32,1,3,3] wd = {" + values(32 * 9, 38) + "}" +
                     ">\n{\n"
                     "  a = Conv <pads = [1, 1, 1, 1]> (u, wa, wa_b)\n"
                     "  d = Conv <group = 32, pads = [1, 1, 1, 1]> (u, wd)\n"
                     "  b = Conv (d, wb, wb_b)\n"
                     "  c1 = Conv <pads = [1, 1, 1, 1]> (x, w1, w1_b)\n"
                     "  c2 = Conv <pads = [1, 1, 1, 1]> (x, w2, w2_b)\n"
                     "  cat = Concat <axis = 1> (c1, c2)\n"
                     "  c = Conv <pads = [1, 1, 1, 1]> (cat, wc, wc_b)\n"
                     "  e = Conv (cat, we, we_b)\n"
                     "  f = Conv (z, wz, wz_b)\n"
                     "  s1 = Add(a, b)\n"
                     "  s2 = Add(c, e)\n"
                     "  s3 = Add(s1, s2)\n"
                     "  y = Add(s3, f)\n"
                     "}";
  Outcome o = check_same(text, {{"x", random_tensor({1, 3, 8, 8}, 39)},
                                {"u", random_tensor({1, 32, 8, 8}, 40)},
                                {"z", random_tensor({1, 32, 8, 8}, 41)}});
  EXPECT_EQ(o.ops["ToBlocked16"], 2);  // u and cat
}

TEST(Layout, AnElementWiseChainThatOnlyAConversionReadsRunsInsideIt) {
  // A split model's back part: its input goes through the activation that the whole
  // model had fused into a Conv (HardSwish, then a scale and shift), and two Convs read
  // the result, so it is converted to nChw16c once. The chain runs inside that
  // ToBlocked16 — for whole and partial channel blocks (32 and 24 channels) — and gives
  // level 1's outputs. A chain whose values something else reads (a graph output, a
  // second reader) stays as it is.
  for (int64_t C : {32, 24}) {
    const std::string c = std::to_string(C);
    std::string text = "<ir_version: 8, opset_import: [\"\" : 17]>\n"
                       "g (float[1," + c + ",8,8] u, float[1," + c + ",8,8] v) => (float[1,16,8,8] y, float[1," + c +
                       ",8,8] lv)\n<" +
                       conv_weights("wa", 16, C, 3, 51) + ", " + conv_weights("wb", 16, C, 1, 52) + ", " +
                       conv_weights("wc", 16, C, 3, 53) + ", " + conv_weights("wd", 16, C, 1, 54) +
                       ", float[1] k = {0.75}, float k2 = {0.25}, float lo = {-1.5}, float hi = {2.5}>\n{\n"
                       "  h = HardSwish(u)\n"
                       "  m = Mul(k, h)\n"
                       "  s = Sub(m, k2)\n"
                       "  r = Clip(s, lo, hi)\n"
                       "  a = Conv <pads = [1, 1, 1, 1]> (r, wa, wa_b)\n"
                       "  b = Conv (r, wb, wb_b)\n"
                       "  lv = LeakyRelu <alpha = 0.1> (v)\n"
                       "  q = Relu(lv)\n"
                       "  cc = Conv <pads = [1, 1, 1, 1]> (q, wc, wc_b)\n"
                       "  d = Conv (q, wd, wd_b)\n"
                       "  s1 = Add(a, b)\n"
                       "  s2 = Add(cc, d)\n"
                       "  y = Add(s1, s2)\n"
                       "}";
    auto wide = [](Tensor t) {  // [-5, 5]: past HardSwish's and the Clip's bends
      for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] *= 5.f;
      return t;
    };
    Outcome o = check_same(text, {{"u", wide(random_tensor({1, C, 8, 8}, 55))}, {"v", wide(random_tensor({1, C, 8, 8}, 56))}});
    EXPECT_EQ(o.ops["ToBlocked16"], 2) << C;
    EXPECT_EQ(o.ops["HardSwish"], 0) << C;
    EXPECT_EQ(o.ops["Mul"], 0) << C;
    EXPECT_EQ(o.ops["Sub"], 0) << C;
    EXPECT_EQ(o.ops["Clip"], 0) << C;
    EXPECT_EQ(o.ops["Relu"], 0) << C;       // folded: lv is read only by it ...
    EXPECT_EQ(o.ops["LeakyRelu"], 1) << C;  // ... but lv is a graph output: stays
  }
}

TEST(Layout, NearestResizeBetweenBlockedValuesRunsBlocked) {
  // A feature pyramid's top-down step: c1 upsampled 2x (asymmetric, floor) and added to a
  // lateral Conv, the sum upsampled by 1.5 (half_pixel, round_prefer_ceil) into a Conv:
  // both Resizes run on nChw16c and nothing converts in between. A Resize whose only
  // reader is a graph output (y2) stays plain: its input is converted, not its 4x larger
  // output.
  std::string text = "<ir_version: 8, opset_import: [\"\" : 13]>\n"
                     "g (float[1,3,4,4] x, float[1,3,8,8] z) => (float[1,16,12,12] y, float[1,20,8,8] y2)\n<" +
                     conv_weights("w1", 20, 3, 3, 51) + ", " + conv_weights("w2", 20, 3, 3, 52) + ", " +
                     conv_weights("w3", 16, 20, 3, 53) +
                     ", float[4] s2 = {1.0, 1.0, 2.0, 2.0}, float[4] s15 = {1.0, 1.0, 1.5, 1.5}, float[0] roi = {}"
                     ">\n{\n"
                     "  c1 = Conv <pads = [1, 1, 1, 1]> (x, w1, w1_b)\n"
                     "  u = Resize <mode = \"nearest\", coordinate_transformation_mode = \"asymmetric\", "
                     "nearest_mode = \"floor\"> (c1, roi, s2)\n"
                     "  c2 = Conv <pads = [1, 1, 1, 1]> (z, w2, w2_b)\n"
                     "  s = Add(u, c2)\n"
                     "  v = Resize <mode = \"nearest\", nearest_mode = \"round_prefer_ceil\"> (s, roi, s15)\n"
                     "  y = Conv <pads = [1, 1, 1, 1]> (v, w3, w3_b)\n"
                     "  y2 = Resize <mode = \"nearest\"> (c1, roi, s2)\n"
                     "}";
  Outcome o = check_same(text, {{"x", random_tensor({1, 3, 4, 4}, 54)}, {"z", random_tensor({1, 3, 8, 8}, 55)}});
  EXPECT_EQ(o.ops["Resize"], 3);
  EXPECT_EQ(o.ops["FromBlocked16"], 1);  // c1, for the plain y2 (y is written plain by its Conv)
  EXPECT_EQ(o.ops["ToBlocked16"], 0);
}

TEST(Layout, NearestResizeOfOpset10AndTheBatchAxisRunBlocked) {
  // Resize-10 (X, scales), scaling the batch too (2x, as nearest allows), between Convs.
  std::string text = "<ir_version: 5, opset_import: [\"\" : 10]>\n"
                     "g (float[1,3,5,5] x) => (float[2,16,15,10] y)\n<" +
                     conv_weights("w1", 24, 3, 3, 61) + ", " + conv_weights("w2", 16, 24, 3, 62) +
                     ", float[4] sc = {2.0, 1.0, 3.0, 2.0}"
                     ">\n{\n"
                     "  c1 = Conv <pads = [1, 1, 1, 1]> (x, w1, w1_b)\n"
                     "  r = Resize <mode = \"nearest\"> (c1, sc)\n"
                     "  y = Conv <pads = [1, 1, 1, 1]> (r, w2, w2_b)\n"
                     "}";
  Outcome o = check_same(text, {{"x", random_tensor({1, 3, 5, 5}, 63)}});
  EXPECT_EQ(o.ops["FromBlocked16"], 0);
  EXPECT_EQ(o.ops["ToBlocked16"], 0);
  // 24 channels in two blocks of 16, on both sides of the Resize.
  EXPECT_NE(o.shapes["Resize"].find("float32[1,2,5,5,16] -> float32[2,2,15,10,16]"), std::string::npos) << o.shapes["Resize"];
}

TEST(Layout, UnalignedConcatAndMixedBinaryStayPlain) {
  // 20 + 12 channels cannot be concatenated in nChw16c, and a Mul of a blocked tensor
  // and a graph input runs plain: both get their inputs converted back, and the results
  // are still those of level 1.
  std::string text = "<ir_version: 8, opset_import: [\"\" : 17]>\n"
                     "g (float[1,3,8,8] x, float[1,32,8,8] z) => (float[1,32,8,8] y)\n<" +
                     conv_weights("w1", 20, 3, 3, 9) + ", " + conv_weights("w2", 12, 3, 3, 10) + ", " +
                     conv_weights("w3", 32, 32, 3, 13) +
                     ">\n{\n"
                     "  c1 = Conv <pads = [1, 1, 1, 1]> (x, w1, w1_b)\n"
                     "  c2 = Conv <pads = [1, 1, 1, 1]> (x, w2, w2_b)\n"
                     "  cat = Concat <axis = 1> (c1, c2)\n"
                     "  c3 = Conv <pads = [1, 1, 1, 1]> (cat, w3, w3_b)\n"
                     "  t = Tanh(c3)\n"
                     "  y = Mul(t, z)\n"
                     "}";
  Outcome o = check_same(text, {{"x", random_tensor({1, 3, 8, 8}, 14)}, {"z", random_tensor({1, 32, 8, 8}, 15)}});
  // c3 reads the plain Concat and writes blocked for the Tanh; the Mul reads it back.
  EXPECT_EQ(o.ops["FromBlocked16"], 1);
  EXPECT_EQ(o.ops["ToBlocked16"], 0);
}

TEST(Layout, BlockedPoolingOfEveryKindMatchesThePlainOne) {
  // Pooling on the blocked tensor between two convolutions, with padding, strides,
  // dilations, ceil mode and both average divisors (on a CPU without AVX-512 these run
  // on bulkhead's nChw16c loops, where oneDNN has only its reference implementation).
  const char* pools[] = {
      "MaxPool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]>",
      "MaxPool <kernel_shape = [2, 2], dilations = [2, 2], ceil_mode = 1>",
      "AveragePool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]>",
      "AveragePool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], count_include_pad = 1>",
      "AveragePool <kernel_shape = [3, 3], strides = [2, 2], pads = [0, 0, 1, 1], ceil_mode = 1, count_include_pad = 1>",
  };
  uint32_t seed = 40;
  for (const char* pool : pools) {
    seed += 2;
    std::string model = "<ir_version: 8, opset_import: [\"\" : 17]>\n"
                        "g (float[1,3,11,9] x) => (float[1,16,?,?] y)\n<" +
                        conv_weights("w1", 20, 3, 3, seed) + ", " + conv_weights("w2", 16, 20, 1, seed + 1) +
                        ">\n{\n"
                        "  c1 = Conv <pads = [1, 1, 1, 1]> (x, w1, w1_b)\n"
                        "  r1 = Relu(c1)\n"
                        "  p = " + std::string(pool) + " (r1)\n"
                        "  y = Conv (p, w2, w2_b)\n"
                        "}";
    SCOPED_TRACE(pool);
    Outcome o = check_same(model, {{"x", random_tensor({1, 3, 11, 9}, seed)}});
    EXPECT_EQ(o.ops["ToBlocked16"] + o.ops["FromBlocked16"], 0);  // the pool ran on the blocked tensor
  }
}

TEST(Layout, LevelOneAndOtherDevicesAreUntouched) {
  std::string text = "<ir_version: 8, opset_import: [\"\" : 17]>\n"
                     "g (float[1,3,8,8] x) => (float[1,16,4,4] y)\n<" +
                     conv_weights("w1", 16, 3, 3, 16) + ", " + conv_weights("w2", 16, 16, 3, 17) +
                     ">\n{\n"
                     "  c1 = Conv <pads = [1, 1, 1, 1]> (x, w1, w1_b)\n"
                     "  p = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (c1)\n"
                     "  y = Conv <pads = [1, 1, 1, 1]> (p, w2, w2_b)\n"
                     "}";
  NamedTensors in{{"x", random_tensor({1, 3, 8, 8}, 18)}};
  Outcome l1 = run_level(text, 1, 1, in);
  EXPECT_EQ(l1.ops["FromBlocked16"] + l1.ops["ToBlocked16"], 0);
  Outcome l2 = check_same(text, in);
  EXPECT_EQ(l2.ops["FromBlocked16"] + l2.ops["ToBlocked16"], 0);  // the last Conv writes y plain
  EXPECT_EQ(l2.ops["Conv"], 2);
}

}  // namespace
}  // namespace bulkhead::test
