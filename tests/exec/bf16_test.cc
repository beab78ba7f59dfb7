// SessionOptions::precision "bf16" (exec/layout.h): convolutions and products with
// constant weights compute on bfloat16, blocked values between convolutions are stored as
// bfloat16, and the results stay within bfloat16's rounding of the float32 ones. Where the
// CPU has no bf16 units the session says so once and runs fp32, bit for bit.
//
// On a CPU without bf16 units the bf16 tests run with BULKHEAD_CPU_BF16=force (oneDNN
// emulates bfloat16, or the kernels convert to float32 where it offers only reference
// kernels): the graph marking, the bfloat16 storage and the conversions are the same.
#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>

#include "session/env_impl.h"
#include "support/test_util.h"

namespace bulkhead::test {
namespace {

// Sets an environment variable for one scope (the CPU backend reads BULKHEAD_CPU_BF16 when
// a device opens: each Env made inside the scope sees it).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_.c_str(), old_.c_str(), 1);
    else unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

bool cpu_has_bf16() {
  ScopedEnv off("BULKHEAD_CPU_BF16", "");
  for (const auto& d : Env().devices())
    if (d.backend == "cpu") return !d.bf16_units.empty();
  return false;
}

// "force" where the CPU lacks bf16 units, so the bf16 path runs everywhere.
const char* bf16_mode() { return cpu_has_bf16() ? "" : "force"; }

std::string weights(const std::string& name, const Shape& s, uint32_t seed, bool bias = true) {
  int64_t n = 1;
  std::ostringstream os;
  os << "float[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? "," : "") << s[i], n *= s[i];
  os << "] " << name << " = {" << random_values_text(n, seed, -0.5f, 0.5f) << "}";
  if (bias) os << ", float[" << s[0] << "] " << name << "_b = {" << random_values_text(s[0], seed + 100, -0.5f, 0.5f) << "}";
  return os.str();
}

// A chain with unaligned channels (3 -> 20), a residual sum, a 1x1 branch, a depthwise
// convolution, HardSwish, two ConvTransposes (a 2x2 stride-2 upsampling, which the CPU
// computes as a float32 product and interleave, and a 3x3 one in bf16), global pooling
// and two products.
const std::string& chain_model() {
  static const std::string text = "<ir_version: 8, opset_import: [\"\" : 17]>\n"
                                  "g (float[1,3,16,16] x) => (float[1,10] y, float[1,8,32,32] up, float[1,8,31,31] up3)\n<" +
                                  weights("w1", {20, 3, 3, 3}, 1) + ", " + weights("w2", {32, 20, 3, 3}, 2) + ", " +
                                  weights("w3", {32, 20, 1, 1}, 3) + ", " + weights("w4", {32, 32, 3, 3}, 4) + ", " +
                                  weights("wd", {32, 1, 3, 3}, 5) + ", " + weights("wt", {32, 8, 2, 2}, 6, false) +
                                  ", float[8] wt_b = {" + random_values_text(8, 61, -0.5f, 0.5f) + "}, " +
                                  weights("w3t", {32, 8, 3, 3}, 9, false) + ", " +
                                  weights("wm", {32, 16}, 7, false) + ", " + weights("wg", {10, 16}, 8) +
                                  ">\n{\n"
                                  "  c1 = Conv <pads = [1, 1, 1, 1]> (x, w1, w1_b)\n"
                                  "  r1 = Relu(c1)\n"
                                  "  c2 = Conv <pads = [1, 1, 1, 1]> (r1, w2, w2_b)\n"
                                  "  c3 = Conv (r1, w3, w3_b)\n"
                                  "  s = Add(c2, c3)\n"
                                  "  c4 = Conv <pads = [1, 1, 1, 1]> (s, w4, w4_b)\n"
                                  "  d = Conv <group = 32, pads = [1, 1, 1, 1]> (c4, wd, wd_b)\n"
                                  "  h = HardSwish(d)\n"
                                  "  up = ConvTranspose <strides = [2, 2]> (h, wt, wt_b)\n"
                                  "  up3 = ConvTranspose <strides = [2, 2], pads = [1, 1, 1, 1]> (h, w3t)\n"
                                  "  p = GlobalAveragePool(h)\n"
                                  "  f = Flatten(p)\n"
                                  "  m = MatMul(f, wm)\n"
                                  "  y = Gemm <transB = 1> (m, wg, wg_b)\n"
                                  "}";
  return text;
}

// Products alone: a batched MatMul ([2,5,16] by a constant [16,24]) and a Gemm with
// transA, alpha, beta and a broadcast C.
const std::string& product_model() {
  static const std::string text = "<ir_version: 8, opset_import: [\"\" : 17]>\n"
                                  "g (float[2,5,16] a, float[16,7] at) => (float[2,5,24] y, float[7,12] z)\n<" +
                                  weights("b", {16, 24}, 11, false) + ", " + weights("gb", {16, 12}, 12, false) +
                                  ", float[12] gc = {" + random_values_text(12, 13, -1, 1) +
                                  "}>\n{\n"
                                  "  y = MatMul(a, b)\n"
                                  "  z = Gemm <transA = 1, alpha = 0.75, beta = 1.5> (at, gb, gc)\n"
                                  "}";
  return text;
}

struct Outcome {
  NamedTensors outputs;
  Session::PrecisionUse precision;
  std::map<std::string, int> ops;  // op type -> nodes run
  bool bf16_value = false;         // a node read or wrote a bfloat16 tensor
};

Outcome run(const std::string& text, const std::string& precision, const NamedTensors& in, int threads = 1) {
  Env env;
  SessionOptions o;
  o.threads = threads;
  o.one_thread_when_small = false;  // the kernels' own threads, whatever the model's size
  o.precision = precision;
  auto s = env.load_bytes(model_text_bytes(text), "bf16.onnx", o);
  EXPECT_TRUE(s.is_ok()) << s.status().to_string();
  if (!s.is_ok()) return {};
  std::vector<NodeProfile> prof;
  RunOptions ro;
  ro.profile = &prof;
  auto r = s->run(in, ro);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  if (!r.is_ok()) return {};
  Outcome out{*r, s->precision(), {}, false};
  for (const auto& p : prof) {
    out.ops[p.op_type]++;
    out.bf16_value = out.bf16_value || p.shapes.find("bfloat16") != std::string::npos;
  }
  // The same inputs again: the cached primitives and packed weights give the same bits.
  auto r2 = s->run(in);
  EXPECT_TRUE(r2.is_ok());
  if (r2.is_ok()) {
    for (size_t k = 0; k < r2->size(); ++k) EXPECT_TRUE(bitwise_equal((*r)[k].second, (*r2)[k].second)) << (*r)[k].first;
  }
  return out;
}

// bf16 against fp32: within a few bfloat16 steps of the output's magnitude, and pointing
// the same way; `rounded`: and not the float32 bits (bfloat16 did round something).
void expect_close(const NamedTensors& fp32, const NamedTensors& bf16, bool rounded = true) {
  ASSERT_EQ(fp32.size(), bf16.size());
  for (size_t k = 0; k < fp32.size(); ++k) {
    const Tensor& a = fp32[k].second;
    const Tensor& b = bf16[k].second;
    ASSERT_EQ(a.shape(), b.shape()) << fp32[k].first;
    ASSERT_EQ(b.dtype(), DataType::kFloat32) << fp32[k].first;
    double peak = 0, worst = 0, dot = 0, na = 0, nb = 0;
    for (int64_t i = 0; i < a.numel(); ++i) {
      double x = a.data<float>()[i], y = b.data<float>()[i];
      peak = std::max(peak, std::fabs(x));
      worst = std::max(worst, std::fabs(x - y));
      dot += x * y, na += x * x, nb += y * y;
    }
    const double cosine = dot / std::sqrt(na * nb);
    EXPECT_LE(worst, 0.03 * peak) << fp32[k].first << ": max error " << worst << " of " << peak;
    EXPECT_GE(cosine, 0.999) << fp32[k].first;
    if (rounded) {
      EXPECT_FALSE(bitwise_equal(a, b)) << fp32[k].first;
    }
  }
}

TEST(Bf16, OptionParsesAndRefusesWhatItCannotDo) {
  auto o = SessionOptions::parse("precision=bf16");
  ASSERT_TRUE(o.is_ok()) << o.status().to_string();
  EXPECT_EQ(o->precision, "bf16");
  EXPECT_EQ(SessionOptions{}.precision, "fp32");
  auto bad = SessionOptions::parse("precision=fp16");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("'precision'"), std::string::npos) << bad.status().to_string();
  EXPECT_NE(bad.status().message().find("fp32 or bf16"), std::string::npos) << bad.status().to_string();
  SessionOptions level1;
  level1.precision = "bf16";
  level1.optimization_level = 1;
  Status st = level1.validate();
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("optimization_level 2"), std::string::npos) << st.to_string();
  Env env;
  auto s = env.load_bytes(model_text_bytes(chain_model()), "bf16.onnx", level1);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find("precision"), std::string::npos) << s.status().to_string();
  SessionOptions junk;
  junk.precision = "half";
  EXPECT_FALSE(junk.validate().is_ok());
}

TEST(Bf16, ConvolutionChainsAndProductsMatchFloat32) {
  ScopedEnv mode("BULKHEAD_CPU_BF16", bf16_mode());
  const NamedTensors in{{"x", random_tensor({1, 3, 16, 16}, 21)}};
  Outcome fp32 = run(chain_model(), "fp32", in);
  EXPECT_EQ(fp32.precision.effective, "fp32");
  EXPECT_EQ(fp32.precision.bf16_nodes, 0);
  EXPECT_FALSE(fp32.bf16_value);
  for (int threads : {1, 2}) {
    Outcome bf16 = run(chain_model(), "bf16", in, threads);
    EXPECT_EQ(bf16.precision.requested, "bf16");
    EXPECT_EQ(bf16.precision.effective, "bf16") << bf16.precision.note;
    EXPECT_EQ(bf16.precision.note, "");
    // Every convolution and product but the pixel-product ConvTranspose: the optimiser's
    // fusions change how many run, so count them from the profile.
    EXPECT_EQ(bf16.ops["ConvTranspose"], 2);
    EXPECT_EQ(bf16.precision.bf16_nodes, bf16.ops["Conv"] + 1 + bf16.ops["MatMul"] + bf16.ops["Gemm"]);
    EXPECT_GE(bf16.precision.bf16_nodes, 7);
    // The blocked values between convolutions are bfloat16 tensors.
    EXPECT_TRUE(bf16.bf16_value);
    expect_close(fp32.outputs, bf16.outputs);
  }
}

TEST(Bf16, BatchedMatMulAndGemmWithTransposeAlphaBetaAndBroadcastC) {
  ScopedEnv mode("BULKHEAD_CPU_BF16", bf16_mode());
  const NamedTensors in{{"a", random_tensor({2, 5, 16}, 31)}, {"at", random_tensor({16, 7}, 32)}};
  Outcome fp32 = run(product_model(), "fp32", in);
  Outcome bf16 = run(product_model(), "bf16", in);
  EXPECT_EQ(bf16.precision.effective, "bf16");
  EXPECT_EQ(bf16.precision.bf16_nodes, 2);
  // Without bf16 units (forced) oneDNN has only reference kernels for bfloat16 products:
  // the kernel computes those in float32 (convolutions above still store bfloat16).
  expect_close(fp32.outputs, bf16.outputs, cpu_has_bf16());
}

TEST(Bf16, WithoutBf16UnitsTheSessionSaysSoOnceAndRunsFp32) {
  ScopedEnv none("BULKHEAD_CPU_BF16", "0");
  const NamedTensors in{{"x", random_tensor({1, 3, 16, 16}, 22)}};
  Outcome fp32 = run(chain_model(), "fp32", in);
  Env env;
  SessionOptions o;
  o.threads = 1;
  o.precision = "bf16";
  testing::internal::CaptureStderr();
  auto a = env.load_bytes(model_text_bytes(chain_model()), "bf16.onnx", o);
  auto b = env.load_bytes(model_text_bytes(chain_model()), "bf16.onnx", o);
  const std::string said = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  ASSERT_TRUE(b.is_ok()) << b.status().to_string();
  // One line for the Env, not one per session.
  const std::string line = "precision bf16: this CPU";
  ASSERT_NE(said.find(line), std::string::npos) << said;
  EXPECT_EQ(said.find(line, said.find(line) + 1), std::string::npos) << said;
  EXPECT_NE(said.find("running fp32"), std::string::npos) << said;
  for (const Session* s : {&*a, &*b}) {
    const Session::PrecisionUse p = s->precision();
    EXPECT_EQ(p.requested, "bf16");
    EXPECT_EQ(p.effective, "fp32");
    EXPECT_EQ(p.bf16_nodes, 0);
    EXPECT_NE(p.note.find("no bf16 units"), std::string::npos) << p.note;
    auto r = s->run(in);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    for (size_t k = 0; k < r->size(); ++k) EXPECT_TRUE(bitwise_equal((*r)[k].second, fp32.outputs[k].second));
  }
}

TEST(Bf16, AModelWithNothingToConvertSaysSo) {
  ScopedEnv mode("BULKHEAD_CPU_BF16", bf16_mode());
  Env env;
  SessionOptions o;
  o.precision = "bf16";
  testing::internal::CaptureStderr();
  auto s = env.load_bytes(model_text_bytes("<ir_version: 8, opset_import: [\"\" : 17]>\n"
                                           "g (float[4] x) => (float[4] y) { y = Relu(x) }"),
                          "relu.onnx", o);
  const std::string said = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  EXPECT_EQ(s->precision().effective, "fp32");
  EXPECT_NE(s->precision().note.find("no convolution or matrix product"), std::string::npos) << s->precision().note;
  EXPECT_NE(said.find("no convolution or matrix product"), std::string::npos) << said;
}

TEST(Bf16, PackedWeightsAreSharedAndNeverWritten) {
  ScopedEnv mode("BULKHEAD_CPU_BF16", bf16_mode());
  const std::string det = shared_dir() + "/models/ppocrv4_det/model.onnx";
  Env env;
  SessionOptions bf;
  bf.threads = 1;
  bf.precision = "bf16";
  SessionOptions fp = bf;
  fp.precision = "fp32";
  auto a = env.load(det, bf);
  auto b = env.load(det, bf);
  auto f = env.load(det, fp);
  ASSERT_TRUE(a.is_ok() && b.is_ok() && f.is_ok());
  const Tensor x = random_tensor({1, 3, 64, 96}, 41);
  auto run1 = [&](const Session& s) {
    auto r = s.run({{"x", x}});
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    return r.is_ok() ? r->begin()->second : Tensor();
  };
  const Tensor ya = run1(*a);
  const Env::SharedWeights w = env.shared_weights();
  const Tensor yb = run1(*b);
  const Tensor yf = run1(*f);
  const Env::SharedWeights after = env.shared_weights();
  EXPECT_TRUE(bitwise_equal(ya, yb));
  EXPECT_GE(after.packed_hits, w.packed);  // b found every bf16 packing a made
  const uint64_t digest = env.impl()->shared_constants()->digest();
  for (int i = 0; i < 2; ++i) run1(*a), run1(*b), run1(*f);
  EXPECT_EQ(env.impl()->shared_constants()->digest(), digest);
  // The fp32 session in the same Env gives what a private fp32 session gives: no bf16
  // packing was handed to it.
  Env other;
  auto p = other.load(det, fp);
  ASSERT_TRUE(p.is_ok());
  EXPECT_TRUE(bitwise_equal(run1(*p), yf));
  EXPECT_FALSE(bitwise_equal(ya, yf));
}

}  // namespace
}  // namespace bulkhead::test
