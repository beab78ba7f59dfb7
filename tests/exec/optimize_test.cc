// The graph optimiser (exec/optimize.h): every rewrite gives the outputs of the graph as
// written (within 1e-5), and fires only where it is safe.
#include <cmath>
#include <random>
#include <sstream>

#include "support/test_util.h"

namespace bulkhead::test {
namespace {

std::string values(int64_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  return random_values_text(n, seed, lo, hi);
}

struct ConvShape {
  const char* name;
  int64_t C, M, H, W, K, group;  // pads K/2, stride 1
};

// 3x3 runs on oneDNN, 1x1 on sgemm, depthwise on the row-wise NCHW path (width >= 16).
const ConvShape kShapes[] = {
    {"dnnl3x3", 3, 4, 8, 8, 3, 1},
    {"sgemm1x1", 6, 5, 7, 9, 1, 1},
    {"depthwise", 4, 4, 6, 20, 3, 4},
};

// A model with x [1,C,H,W] and z [1,M,H,W] as inputs, conv weights `w` [M,C/g,K,K],
// bias `b` [M] and the given extra initializers and body (the Conv writes `c`).
std::string model(const ConvShape& s, const std::string& extra_inits, const std::string& body,
                  const std::string& outputs = "float[1,M,H,W] y") {
  auto dims = [&](std::string t) {
    auto put = [&](const std::string& k, int64_t v) {
      for (size_t p; (p = t.find(k)) != std::string::npos;) t.replace(p, k.size(), std::to_string(v));
    };
    put("M", s.M);
    put("H", s.H);
    put("W", s.W);
    return t;
  };
  int64_t wn = s.M * (s.C / s.group) * s.K * s.K;
  std::ostringstream os;
  os << "<ir_version: 8, opset_import: [\"\" : 17]>\n"
     << "g (float[1," << s.C << "," << s.H << "," << s.W << "] x, " << dims("float[1,M,H,W] z") << ") => ("
     << dims(outputs) << ")\n"
     << "<float[" << s.M << "," << s.C / s.group << "," << s.K << "," << s.K << "] w = {" << values(wn, 1) << "}, "
     << "float[" << s.M << "] b = {" << values(s.M, 2) << "}" << (extra_inits.empty() ? "" : ", ") << extra_inits
     << ">\n{\n"
     << "  c = Conv <group = " << s.group << ", pads = [" << s.K / 2 << ", " << s.K / 2 << ", " << s.K / 2 << ", "
     << s.K / 2 << "]> (x, w, b)\n"
     << body << "\n}";
  return os.str();
}

int node_count(const Session& s) {
  int n = 0;
  for (auto& [dev, count] : s.placement()) n += count;
  return n;
}

// Loads `text` with and without optimisation, runs both on the same inputs and compares
// every output. Returns the node count of the optimised session.
int check_same(const std::string& text, const ConvShape& s, const Shape& zshape = {}) {
  Env env;
  std::string bytes = model_text_bytes(text);
  SessionOptions plain, opt;
  plain.threads = opt.threads = 1;
  plain.optimization_level = 0;
  opt.optimization_level = 1;  // the fusions alone (node counts); layout_test covers level 2
  auto a = env.load_bytes(bytes, "plain.onnx", plain);
  auto b = env.load_bytes(bytes, "opt.onnx", opt);
  EXPECT_TRUE(a.is_ok()) << a.status().to_string();
  EXPECT_TRUE(b.is_ok()) << b.status().to_string();
  if (!a.is_ok() || !b.is_ok()) return -1;
  NamedTensors in = {{"x", random_tensor({1, s.C, s.H, s.W}, 7)},
                     {"z", random_tensor(zshape.empty() ? Shape{1, s.M, s.H, s.W} : zshape, 8)}};
  auto ra = a->run(in);
  auto rb = b->run(in);
  EXPECT_TRUE(ra.is_ok()) << ra.status().to_string();
  EXPECT_TRUE(rb.is_ok()) << rb.status().to_string();
  if (!ra.is_ok() || !rb.is_ok()) return -1;
  EXPECT_EQ(ra->size(), rb->size());
  for (size_t k = 0; k < ra->size() && k < rb->size(); ++k) {
    const Tensor& ta = (*ra)[k].second;
    const Tensor& tb = (*rb)[k].second;
    EXPECT_EQ(ta.shape(), tb.shape()) << (*ra)[k].first;
    if (ta.shape() != tb.shape()) continue;
    double worst = 0;
    for (int64_t i = 0; i < ta.numel(); ++i) {
      double x = ta.data<float>()[i], y = tb.data<float>()[i];
      worst = std::max(worst, std::fabs(x - y) / std::max(1.0, std::fabs(x)));
    }
    EXPECT_LE(worst, 1e-5) << "output " << (*ra)[k].first;
  }
  return node_count(*b);
}

class Optimize : public ::testing::TestWithParam<ConvShape> {};

TEST_P(Optimize, ConvBatchNormRelu) {
  const ConvShape& s = GetParam();
  std::string inits = "float[M] g1 = {" + values(s.M, 3, 0.5f, 2.f) + "}, float[M] b1 = {" + values(s.M, 4) +
                      "}, float[M] m1 = {" + values(s.M, 5) + "}, float[M] v1 = {" + values(s.M, 6, 0.1f, 3.f) + "}";
  for (size_t p; (p = inits.find("[M]")) != std::string::npos;) inits.replace(p, 3, "[" + std::to_string(s.M) + "]");
  EXPECT_EQ(check_same(model(s, inits, "  n = BatchNormalization <epsilon = 0.001> (c, g1, b1, m1, v1)\n"
                                       "  y = Relu(n)"),
                       s),
            1);
}

// BatchNormalization folds into weights that something else also reads (a second Conv, a
// graph output): those readers keep the weights as written (the fold goes into a copy;
// weights nothing else reads are scaled in place).
TEST_P(Optimize, FoldingLeavesSharedWeightsAlone) {
  const ConvShape& s = GetParam();
  std::string inits = "float[M] g1 = {" + values(s.M, 3, 0.5f, 2.f) + "}, float[M] b1 = {" + values(s.M, 4) +
                      "}, float[M] m1 = {" + values(s.M, 5) + "}, float[M] v1 = {" + values(s.M, 6, 0.1f, 3.f) + "}";
  for (size_t p; (p = inits.find("[M]")) != std::string::npos;) inits.replace(p, 3, "[" + std::to_string(s.M) + "]");
  const std::string pads = std::to_string(s.K / 2);
  const std::string conv2 = "  c2 = Conv <group = " + std::to_string(s.group) + ", pads = [" + pads + ", " + pads + ", " +
                            pads + ", " + pads + "]> (x, w, b)\n";
  EXPECT_GT(check_same(model(s, inits, "  n = BatchNormalization <epsilon = 0.001> (c, g1, b1, m1, v1)\n" + conv2 +
                                           "  r = Relu(c2)\n  y = Add(n, r)"),
                       s),
            0);
  const std::string wshape = "float[" + std::to_string(s.M) + "," + std::to_string(s.C / s.group) + "," +
                             std::to_string(s.K) + "," + std::to_string(s.K) + "] w";
  EXPECT_EQ(check_same(model(s, inits, "  y = BatchNormalization <epsilon = 0.001> (c, g1, b1, m1, v1)",
                             "float[1,M,H,W] y, " + wshape),
                       s),
            1);
}

// Inception v2's pattern: BatchNormalization, then a per-channel Mul and Add whose
// operands are Unsqueezes of constants (one built by ConstantOfShape): all of it folds
// into the Conv's weights and bias, and the Relu into its epilogue.
TEST_P(Optimize, ConvBatchNormThenScaleAndShiftFromUnsqueezes) {
  const ConvShape& s = GetParam();
  const std::string M = std::to_string(s.M);
  std::string inits = "float[M] g1 = {" + values(s.M, 3, 0.5f, 2.f) + "}, float[M] b1 = {" + values(s.M, 4) +
                      "}, float[M] m1 = {" + values(s.M, 5) + "}, float[M] v1 = {" + values(s.M, 6, 0.1f, 3.f) +
                      "}, float[M] sc = {" + values(s.M, 9, 0.5f, 1.5f) + "}, int64[1] mshape = {" + M +
                      "}, int64[2] axes = {1, 2}";
  for (size_t p; (p = inits.find("[M]")) != std::string::npos;) inits.replace(p, 3, "[" + M + "]");
  EXPECT_EQ(check_same(model(s, inits,
                             "  n = BatchNormalization <epsilon = 0.001> (c, g1, b1, m1, v1)\n"
                             "  sw = Unsqueeze(sc, axes)\n"
                             "  m = Mul(n, sw)\n"
                             "  sh = ConstantOfShape <value = float[1] {0.25}> (mshape)\n"
                             "  shu = Unsqueeze(sh, axes)\n"
                             "  a = Add(m, shu)\n"
                             "  y = Relu(a)"),
                       s),
            1);
}

// A BatchNormalization no Conv absorbs (DenseNet's, on concatenated features): the Mul,
// Add and Relu after it fold into it.
TEST_P(Optimize, BatchNormScaleShiftReluFoldIntoTheBatchNorm) {
  const ConvShape& s = GetParam();
  const std::string M = std::to_string(s.M);
  std::string inits = "float[M] g1 = {" + values(s.M, 3, 0.5f, 2.f) + "}, float[M] b1 = {" + values(s.M, 4) +
                      "}, float[M] m1 = {" + values(s.M, 5) + "}, float[M] v1 = {" + values(s.M, 6, 0.1f, 3.f) +
                      "}, float[M,1,1] sc = {" + values(s.M, 9, -1.5f, 1.5f) + "}, float[M,1,1] sh = {" +
                      values(s.M, 10) + "}";
  for (size_t p; (p = inits.find("[M")) != std::string::npos;) inits.replace(p, 2, "[" + M);
  // z -> BatchNormalization -> Mul -> Add -> Relu, added to the Conv's output: the Conv
  // (with the sum fused) and one BatchNormalization are left.
  EXPECT_EQ(check_same(model(s, inits,
                             "  n = BatchNormalization <epsilon = 0.001> (z, g1, b1, m1, v1)\n"
                             "  m = Mul(sc, n)\n"
                             "  a = Add(m, sh)\n"
                             "  r = Relu(a)\n"
                             "  y = Add(c, r)"),
                       s),
            2);
  // Read twice, the BatchNormalization's output keeps its own node; the Mul is not folded.
  EXPECT_EQ(check_same(model(s, inits,
                             "  n = BatchNormalization <epsilon = 0.001> (z, g1, b1, m1, v1)\n"
                             "  m = Mul(n, sc)\n"
                             "  y = Add(m, n)"),
                       s),
            4);
}

TEST_P(Optimize, ConvRelu) { EXPECT_EQ(check_same(model(GetParam(), "", "  y = Relu(c)"), GetParam()), 1); }

TEST_P(Optimize, ConvClip) {
  EXPECT_EQ(check_same(model(GetParam(), "float lo = {-0.25}, float hi = {0.5}", "  y = Clip(c, lo, hi)"), GetParam()),
            1);
}

TEST_P(Optimize, ConvAffineHardSwishAffine) {
  // The PP-OCR pattern: scalar Mul/Add folded into the weights, HardSwish written out,
  // scalar Mul/Add after it as a linear post-op.
  EXPECT_EQ(check_same(model(GetParam(),
                             "float[1] s1 = {1.5}, float[1] t1 = {0.25}, float three = {3.0}, float zero = {0.0}, "
                             "float six = {6.0}, float[1] s2 = {0.75}, float[1] t2 = {-0.125}",
                             "  m1 = Mul(s1, c)\n  a1 = Add(m1, t1)\n  a2 = Add(a1, three)\n"
                             "  cl = Clip(a2, zero, six)\n  hm = Mul(a1, cl)\n  hs = Div(hm, six)\n"
                             "  m2 = Mul(s2, hs)\n  y = Add(m2, t2)"),
                       GetParam()),
            1);
}

TEST_P(Optimize, ConvHardSwishOpAndHardSigmoid) {
  EXPECT_EQ(check_same(model(GetParam(), "", "  h = HardSwish(c)\n  y = HardSigmoid <alpha = 0.3, beta = 0.4> (h)"),
                       GetParam()),
            1);
}

TEST_P(Optimize, ConvResidualAddRelu) {
  EXPECT_EQ(check_same(model(GetParam(), "", "  s = Add(z, c)\n  y = Relu(s)"), GetParam()), 1);
}

TEST_P(Optimize, ConvReluResidualSumSigmoid) {
  EXPECT_EQ(check_same(model(GetParam(), "", "  r = Relu(c)\n  s = Sum(r, z)\n  y = Sigmoid(s)"), GetParam()), 1);
}

TEST_P(Optimize, ResidualThatBroadcasts) {
  const ConvShape& s = GetParam();
  // z [1,1,1,W] broadcasts into the Conv's output; z [2,M,H,W] makes the sum larger.
  std::string m1 = model(s, "", "  s = Add(c, z)\n  y = Relu(s)");
  std::string zs = "float[1," + std::to_string(s.M) + "," + std::to_string(s.H) + "," + std::to_string(s.W) + "] z";
  auto with_z = [&](std::string t, const std::string& z) { return t.replace(t.find(zs), zs.size(), z); };
  EXPECT_EQ(check_same(with_z(m1, "float[1,1,1," + std::to_string(s.W) + "] z"), s, {1, 1, 1, s.W}), 1);
  std::string big = "float[2," + std::to_string(s.M) + "," + std::to_string(s.H) + "," + std::to_string(s.W) + "]";
  std::string m2 = model(s, "", "  s = Add(c, z)\n  y = Relu(s)", big + " y");
  EXPECT_EQ(check_same(with_z(m2, big + " z"), s, {2, s.M, s.H, s.W}), 1);
}

TEST_P(Optimize, IntermediateWithTwoConsumersIsNotFused) {
  const ConvShape& s = GetParam();
  // c feeds both Relu and Add: nothing fuses.
  EXPECT_EQ(check_same(model(s, "", "  r = Relu(c)\n  y = Add(c, r)"), s), 3);
  // c is also a graph output: the Relu stays.
  EXPECT_EQ(check_same(model(s, "", "  y = Relu(c)", "float[1,M,H,W] y, float[1,M,H,W] c"), s), 2);
}

TEST_P(Optimize, StandaloneHardSwishBecomesOneNode) {
  const ConvShape& s = GetParam();
  // Written out on a graph input (no Conv to fuse into): Add, Clip, Mul, Div -> HardSwish.
  EXPECT_EQ(check_same(model(s, "float three = {3.0}, float zero = {0.0}, float six = {6.0}",
                             "  a = Add(z, three)\n  cl = Clip(a, zero, six)\n  m = Mul(z, cl)\n  h = Div(m, six)\n"
                             "  y = Add(c, h)"),
                       s),
            2);
  // x*HardSigmoid(x) on an Add's output: Add, HardSwish, Conv.
  EXPECT_EQ(check_same(model(s, "", "  t = Add(z, z)\n  g = HardSigmoid <alpha = 0.16666667> (t)\n"
                                    "  h = Mul(t, g)\n  y = Add(c, h)"),
                       s),
            3);
  // Not the pattern: Clip to 5, or the gate read again — every node stays.
  EXPECT_EQ(check_same(model(s, "float three = {3.0}, float zero = {0.0}, float five = {5.0}, float six = {6.0}",
                             "  a = Add(z, three)\n  cl = Clip(a, zero, five)\n  m = Mul(z, cl)\n  h = Div(m, six)\n"
                             "  y = Add(c, h)"),
                       s),
            5);
  EXPECT_EQ(check_same(model(s, "float three = {3.0}, float zero = {0.0}, float six = {6.0}",
                             "  a = Add(z, three)\n  cl = Clip(a, zero, six)\n  m = Mul(z, cl)\n  h = Div(m, six)\n"
                             "  q = Add(h, cl)\n  y = Add(c, q)"),
                       s),
            6);
}

TEST_P(Optimize, IdentityAndDropoutAreRemoved) {
  EXPECT_EQ(check_same(model(GetParam(), "", "  i = Identity(c)\n  d = Dropout(i)\n  y = Relu(d)"), GetParam()), 1);
  // A chain, and an Identity whose input is read elsewhere too.
  EXPECT_EQ(check_same(model(GetParam(), "", "  i = Identity(c)\n  j = Identity(i)\n  d = Dropout(j)\n  y = Relu(d)"),
                       GetParam()),
            1);
  EXPECT_EQ(check_same(model(GetParam(), "", "  i = Identity(c)\n  j = Identity(i)\n  r = Relu(j)\n  y = Add(i, r)"),
                       GetParam()),
            3);
}

INSTANTIATE_TEST_SUITE_P(Paths, Optimize, ::testing::ValuesIn(kShapes),
                         [](const ::testing::TestParamInfo<ConvShape>& i) { return std::string(i.param.name); });

TEST(Optimize, OptionParses) {
  auto o = SessionOptions::parse("threads=1;optimization_level=0");
  ASSERT_TRUE(o.is_ok());
  EXPECT_EQ(o->optimization_level, 0);
  EXPECT_EQ(SessionOptions{}.optimization_level, 2);
  EXPECT_EQ(SessionOptions::parse("optimization_level=2")->optimization_level, 2);
  EXPECT_FALSE(SessionOptions::parse("optimization_level=7").is_ok());
}

}  // namespace
}  // namespace bulkhead::test
