// Static QDQ quantisation (check/quantize.h, `bulkhead quantize`): the model it writes is
// valid, close to the float model, and runs as int8 kernels; bad requests are refused with
// one clear line.
#include <gtest/gtest.h>

#include <cmath>

#include <map>

#include "check/quantize.h"
#include "check/quantize_prepare.h"
#include "onnx/onnx_pb.h"
#include "support/test_util.h"

namespace bulkhead::test {
namespace {

// Two convolutions (weights as a Constant node and as an initializer, with a bias) and a
// MatMul, at opset 13 (per-channel weights).
std::string float_model(int opset) {
  return R"(<ir_version: 8, opset_import: ["" : )" + std::to_string(opset) + R"(]>
g (float[1,3,12,12] x) => (float[1,8,12,6] y) <float[8,3,3,3] w1 = {)" + random_values_text(8 * 27, 71, -0.5f, 0.5f) +
         R"(}, float[8] b1 = {)" + random_values_text(8, 72, -0.2f, 0.2f) + R"(}, float[12,6] m = {)" +
         random_values_text(72, 74, -0.4f, 0.4f) + R"(}> {
  w2 = Constant <value = float[8,8,1,1] {)" + random_values_text(64, 73, -0.5f, 0.5f) + R"(}> ()
  c1 = Conv <pads = [1,1,1,1]> (x, w1, b1)
  r1 = Relu(c1)
  c2 = Conv (r1, w2)
  y = MatMul(c2, m)
})";
}

std::string write_model(const TempDir& dir, const std::string& name, const std::string& text) {
  dir.write(name, model_text_bytes(text));
  return dir.file(name);
}

NamedTensors sample(uint32_t seed) { return {{"x", random_tensor({1, 3, 12, 12}, seed)}}; }

TEST(Quantize, WritesAQdqModelCloseToTheFloatOneThatRunsOnInt8Kernels) {
  TempDir dir;
  const std::string path = write_model(dir, "f.onnx", float_model(13));
  check::QuantizeOptions o;
  for (uint32_t s = 1; s <= 4; ++s) o.samples.push_back(sample(s));
  auto r = check::quantize_model(path, o);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->convs, 2);
  EXPECT_EQ(r->matmuls, 1);
  EXPECT_TRUE(r->per_channel);
  // x, r1 (c1 is quantised past its Relu: Conv → Relu → Q is one int8 kernel), c2; not y,
  // a graph output.
  EXPECT_EQ(r->activations, 3);
  EXPECT_EQ(r->opset_before, 13);
  EXPECT_EQ(r->folded, 0);
  Env env;
  auto fq = env.load(path);
  auto q = env.load_bytes(r->model, "q.onnx");
  ASSERT_TRUE(fq.is_ok() && q.is_ok()) << q.status().to_string();
  SessionOptions plain;
  plain.optimization_level = 0;
  auto unfused = env.load_bytes(r->model, "q.onnx", plain);
  ASSERT_TRUE(unfused.is_ok()) << unfused.status().to_string();
  const NamedTensors in = sample(9);
  std::vector<NodeProfile> prof;
  RunOptions ro;
  ro.profile = &prof;
  auto want = fq->run(in);
  auto got = q->run(in, ro);
  int qlinear_conv = 0;
  for (const auto& p : prof) qlinear_conv += p.op_type == "QLinearConv";
  EXPECT_EQ(qlinear_conv, 2) << "both convolutions run as int8";
  auto ref = unfused->run(in);
  ASSERT_TRUE(want.is_ok() && got.is_ok() && ref.is_ok()) << got.status().to_string();
  const Tensor &a = (*want)[0].second, &b = (*got)[0].second, &c = (*ref)[0].second;
  ASSERT_EQ(a.shape(), b.shape());
  double dot = 0, na = 0, nb = 0, worst = 0, top = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.data<float>()[i], y = b.data<float>()[i];
    dot += x * y, na += x * x, nb += y * y;
    top = std::max(top, std::fabs(x));
    worst = std::max(worst, std::fabs(static_cast<double>(y) - c.data<float>()[i]));
  }
  EXPECT_GT(dot / std::sqrt(na * nb), 0.99) << "int8 against float";
  // Fused and unfused QDQ agree to a step of y's quantisation (its range over 255).
  EXPECT_LE(worst, 2.5 * top / 255 + 1e-6);
}

// The cosine of two float32 tensors of one shape.
double cosine(const Tensor& a, const Tensor& b) {
  double dot = 0, na = 0, nb = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double u = a.data<float>()[i], v = b.data<float>()[i];
    dot += u * v, na += u * u, nb += v * v;
  }
  return dot / std::sqrt(na * nb);
}

// The float model at `path` and its quantised form `qdq` run on `in`: both outputs, and
// how many nodes of each operator the quantised session ran.
struct FloatAndInt8 {
  NamedTensors want, got;
  std::map<std::string, int> ops;
};
FloatAndInt8 run_float_and_int8(const std::string& path, const std::string& qdq, const NamedTensors& in) {
  FloatAndInt8 r;
  Env env;
  auto fq = env.load(path);
  auto q = env.load_bytes(qdq, "q.onnx");
  EXPECT_TRUE(fq.is_ok() && q.is_ok()) << q.status().to_string();
  if (!fq.is_ok() || !q.is_ok()) return r;
  std::vector<NodeProfile> prof;
  RunOptions ro;
  ro.profile = &prof;
  auto want = fq->run(in);
  auto got = q->run(in, ro);
  EXPECT_TRUE(want.is_ok() && got.is_ok()) << got.status().to_string();
  if (!want.is_ok() || !got.is_ok()) return r;
  r.want = std::move(*want);
  r.got = std::move(*got);
  for (const auto& p : prof) ++r.ops[p.op_type];
  return r;
}

// A fully connected classifier head: Flatten → Gemm (transB 1, with a bias) → Softmax, and
// a Gemm the int8 kernels do not take (alpha 0.5), left in float.
TEST(Quantize, FullyConnectedGemmsBecomeInt8WithTheirBias) {
  TempDir dir;
  const std::string path = write_model(dir, "fc.onnx", R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[4,3,4,4] x) => (float[4,10] y, float[4,10] z) <float[10,48] w = {)" +
                                                            random_values_text(480, 91, -0.3f, 0.3f) + R"(}, float[10] b = {)" +
                                                            random_values_text(10, 92, -0.5f, 0.5f) + R"(}> {
  f = Flatten(x)
  l = Gemm <transB = 1> (f, w, b)
  y = Softmax(l)
  z = Gemm <transB = 1, alpha = 0.5> (f, w, b)
})");
  check::QuantizeOptions o;
  for (uint32_t s = 1; s <= 4; ++s) o.samples.push_back({{"x", random_tensor({4, 3, 4, 4}, s)}});
  auto r = check::quantize_model(path, o);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->gemms, 1);
  EXPECT_EQ(r->convs + r->matmuls, 0);
  const FloatAndInt8 run = run_float_and_int8(path, r->model, {{"x", random_tensor({4, 3, 4, 4}, 9)}});
  ASSERT_EQ(run.got.size(), 2u);
  EXPECT_EQ(run.ops.count("QLinearGemm") ? run.ops.at("QLinearGemm") : 0, 1);
  auto worst = [&](int k) {
    const Tensor &a = run.want[k].second, &b = run.got[k].second;
    EXPECT_EQ(a.shape(), b.shape());
    double w = 0;
    for (int64_t i = 0; i < a.numel() && a.shape() == b.shape(); ++i)
      w = std::max(w, std::fabs(static_cast<double>(a.data<float>()[i]) - b.data<float>()[i]));
    return w;
  };
  // Probabilities from logits quantised in steps of their range over 255, bias included
  // (a Gemm without its bias is off by up to 0.5 here).
  EXPECT_LE(worst(0), 0.02);
  // The float Gemm reads the dequantised input (steps of 1/255 of its range).
  EXPECT_LE(worst(1), 0.05);
}

// det's head: Conv → ConvTranspose (2x2, stride 2) → BatchNormalization → Relu → Conv.
// The normalisation folds into the ConvTranspose's weights (its output channels are the
// weight's axis 1), which are quantised per output channel on that axis; the upsampling
// runs as one int8 kernel.
TEST(Quantize, UpsamplingConvTransposeWithItsNormalisationBecomesInt8) {
  TempDir dir;
  const std::string path = write_model(dir, "up.onnx", R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,3,8,8] x) => (float[1,2,16,16] y) <float[6,3,3,3] w0 = {)" + random_values_text(162, 101, -0.4f, 0.4f) +
                                                             R"(}, float[6,4,2,2] wd = {)" + random_values_text(96, 102, -0.4f, 0.4f) +
                                                             R"(}, float[4] bd = {)" + random_values_text(4, 103, -0.2f, 0.2f) +
                                                             R"(}, float[4] g = {)" + random_values_text(4, 104, 0.5f, 1.5f) +
                                                             R"(}, float[4] be = {)" + random_values_text(4, 105, -0.3f, 0.3f) +
                                                             R"(}, float[4] mu = {)" + random_values_text(4, 106, -0.2f, 0.2f) +
                                                             R"(}, float[4] va = {)" + random_values_text(4, 107, 0.5f, 2.f) +
                                                             R"(}, float[2,4,1,1] w2 = {)" + random_values_text(8, 108, -0.5f, 0.5f) + R"(}> {
  c0 = Conv <pads = [1,1,1,1]> (x, w0)
  r0 = Relu(c0)
  d = ConvTranspose <strides = [2, 2]> (r0, wd, bd)
  n = BatchNormalization (d, g, be, mu, va)
  r = Relu(n)
  y = Conv (r, w2)
})");
  check::QuantizeOptions o;
  for (uint32_t s = 1; s <= 4; ++s) o.samples.push_back({{"x", random_tensor({1, 3, 8, 8}, s)}});
  auto r = check::quantize_model(path, o);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->conv_transposes, 1);
  EXPECT_EQ(r->convs, 2);
  EXPECT_EQ(r->folded, 1);
  FloatAndInt8 run = run_float_and_int8(path, r->model, {{"x", random_tensor({1, 3, 8, 8}, 9)}});
  ASSERT_EQ(run.got.size(), 1u);
  EXPECT_EQ(run.ops["QLinearConvTranspose"], 1);
  EXPECT_EQ(run.ops["ConvTranspose"] + run.ops["BatchNormalization"], 0);
  const Tensor &a = run.want[0].second, &b = run.got[0].second;
  ASSERT_EQ(a.shape(), b.shape());
  EXPECT_GT(cosine(a, b), 0.995) << "int8 against float (a wrong fold gives 0.97)";
}

TEST(Quantize, PercentileKeepFloatAndPerTensorBelowOpset13) {
  TempDir dir;
  const std::string path = write_model(dir, "f11.onnx", float_model(11));
  check::QuantizeOptions o;
  o.samples.push_back(sample(1));
  o.method = "percentile";
  o.percentile = 99.9;
  o.keep_float = {"Conv_3"};  // the second Conv (nodes: Constant, Conv, Relu, Conv, MatMul)
  auto r = check::quantize_model(path, o);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_FALSE(r->per_channel);
  EXPECT_EQ(r->convs, 1);
  EXPECT_EQ(r->kept, 1);
  Env env;
  auto q = env.load_bytes(r->model, "q.onnx");
  ASSERT_TRUE(q.is_ok()) << q.status().to_string();
  EXPECT_TRUE(q->run(sample(2)).is_ok());
}

TEST(Quantize, RefusesWhatItCannotDoInOneLine) {
  TempDir dir;
  check::QuantizeOptions o;
  o.samples.push_back(sample(1));
  auto expect = [&](const std::string& path, const check::QuantizeOptions& opts, const std::string& part) {
    auto r = check::quantize_model(path, opts);
    ASSERT_FALSE(r.is_ok());
    EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status().to_string();
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
  };
  const std::string good = write_model(dir, "f.onnx", float_model(13));
  check::QuantizeOptions none;
  expect(good, none, "at least one calibration sample");
  check::QuantizeOptions bad = o;
  bad.method = "entropy";
  expect(good, bad, "unknown calibration method 'entropy'");
  bad = o;
  bad.method = "percentile";
  bad.percentile = 20;
  expect(good, bad, "percentile must be in (50, 100]");
  bad = o;
  bad.keep_float = {"nosuch"};
  expect(good, bad, "--keep-float: no node named 'nosuch'");
  bad = o;
  bad.samples = {{{"x", random_tensor({1, 3, 5, 5}, 1)}}};
  expect(good, bad, "calibration sample 1: ");
  dir.write("junk.onnx", "not a model");
  expect(dir.file("junk.onnx"), o, "is not a valid ONNX model");
  expect(write_model(dir, "nothing.onnx", R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x) => (float[2] y) { y = Relu(x) })"),
         o, "has no Conv, ConvTranspose, MatMul or Gemm with constant float32 weights");
}

// An opset 9 model (no QuantizeLinear there) with what changed form on the way to opset
// 10 — Slice, TopK, Upsample — and what the quantiser folds first: weights built by
// ConstantOfShape and given as Constant nodes, a BatchNormalization and a per-channel Mul
// after convolutions.
std::string opset9_model() {
  return R"(<ir_version: 8, opset_import: ["" : 9]>
g (float[1,3,12,12] x) => (float[1,4,8,24] y, float[1,4,3,24] top) <float[4] g1 = {)" + random_values_text(4, 81, 0.5f, 1.5f) +
         R"(}, float[4] be1 = {)" + random_values_text(4, 82, -0.3f, 0.3f) + R"(}, float[4] mu1 = {)" +
         random_values_text(4, 83, -0.2f, 0.2f) + R"(}, float[4] va1 = {)" + random_values_text(4, 84, 0.5f, 2.f) +
         R"(}, float[4,1,1] k = {)" + random_values_text(4, 85, 0.5f, 2.f) + R"(}, float[4] scales = {1, 1, 1, 2}> {
  shape = Constant <value = int64[4] {4, 3, 3, 3}> ()
  w1 = ConstantOfShape <value = float[1] {0.07}> (shape)
  w2 = Constant <value = float[4,4,1,1] {)" + random_values_text(16, 86, -0.5f, 0.5f) + R"(}> ()
  c1 = Conv <pads = [1,1,1,1]> (x, w1)
  n1 = BatchNormalization <epsilon = 0.001> (c1, g1, be1, mu1, va1)
  r1 = Relu(n1)
  c2 = Conv (r1, w2)
  m2 = Mul(c2, k)
  s = Slice <starts = [2, 0], ends = [10, 12], axes = [2, 3]> (m2)
  y = Upsample <mode = "nearest"> (s, scales)
  top, idx = TopK <axis = 2, k = 3> (y)
})";
}

TEST(Quantize, MovesOpset9ModelsToOpset10AndFoldsNormalisationsFirst) {
  TempDir dir;
  const std::string path = write_model(dir, "f9.onnx", opset9_model());
  check::QuantizeOptions o;
  for (uint32_t s = 1; s <= 3; ++s) o.samples.push_back(sample(s));
  auto r = check::quantize_model(path, o);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->opset_before, 9);
  EXPECT_EQ(r->opset, 10);
  EXPECT_EQ(r->folded, 2);  // the BatchNormalization and the per-channel Mul
  EXPECT_EQ(r->convs, 2);
  EXPECT_FALSE(r->per_channel);
  Env env;
  auto f = env.load(path);
  auto q = env.load_bytes(r->model, "q.onnx");
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  ASSERT_TRUE(q.is_ok()) << q.status().to_string();
  std::vector<NodeProfile> prof;
  RunOptions ro;
  ro.profile = &prof;
  const NamedTensors in = sample(7);
  auto want = f->run(in);
  auto got = q->run(in, ro);
  ASSERT_TRUE(want.is_ok() && got.is_ok()) << got.status().to_string();
  std::map<std::string, int> ops;
  for (const auto& p : prof) ops[p.op_type]++;
  EXPECT_EQ(ops["QLinearConv"], 2);
  EXPECT_EQ(ops["BatchNormalization"], 0);
  EXPECT_EQ(ops["Relu"], 0);  // in the first int8 kernel
  for (size_t k = 0; k < want->size(); ++k) {
    const Tensor &a = (*want)[k].second, &b = (*got)[k].second;
    ASSERT_EQ(a.shape(), b.shape()) << (*want)[k].first;
    double top = 0, worst = 0;
    for (int64_t i = 0; i < a.numel(); ++i) {
      top = std::max(top, std::fabs(static_cast<double>(a.data<float>()[i])));
      worst = std::max(worst, std::fabs(static_cast<double>(a.data<float>()[i]) - b.data<float>()[i]));
    }
    EXPECT_LE(worst, 0.05 * top) << (*want)[k].first;
  }
  // ONNX's own checker of the opset-10 result is not at hand (Debian's libonnx is 1.12,
  // older than most models); the upgraded Slice, TopK and Resize read as opset 10 here.
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(r->model));
  for (const auto& n : m.graph().node()) {
    if (n.op_type() == "Slice") {
      EXPECT_EQ(n.input_size(), 4) << "data, starts, ends, axes";
    }
    if (n.op_type() == "TopK") {
      EXPECT_EQ(n.input_size(), 2) << "X, K";
    }
    EXPECT_NE(n.op_type(), "Upsample");
  }
}

TEST(Quantize, TheOpsetUpgradeAloneComputesTheSameFunction) {
  TempDir dir;
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(model_text_bytes(opset9_model())));
  auto before = check::upgrade_to_opset10(m);
  ASSERT_TRUE(before.is_ok()) << before.status().to_string();
  EXPECT_EQ(*before, 9);
  std::string bytes;
  ASSERT_TRUE(m.SerializeToString(&bytes));
  Env env;
  auto a = env.load_bytes(model_text_bytes(opset9_model()), "9.onnx");
  auto b = env.load_bytes(bytes, "10.onnx");
  ASSERT_TRUE(a.is_ok() && b.is_ok()) << b.status().to_string();
  auto ya = a->run(sample(3));
  auto yb = b->run(sample(3));
  ASSERT_TRUE(ya.is_ok() && yb.is_ok()) << yb.status().to_string();
  for (size_t k = 0; k < ya->size(); ++k) EXPECT_TRUE(bitwise_equal((*ya)[k].second, (*yb)[k].second)) << (*ya)[k].first;
  // A Slice of opset 9 without its attributes cannot move: one clear line.
  onnx::ModelProto bad;
  ASSERT_TRUE(bad.ParseFromString(model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 9]>
g (float[4] x) => (float[4] y) { y = Slice <axes = [0]> (x) })")));
  auto r = check::upgrade_to_opset10(bad);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("needs its starts and ends"), std::string::npos) << r.status().to_string();
}

}  // namespace
}  // namespace bulkhead::test
