// Static QDQ quantisation (check/quantize.h, `bulkhead quantize`): the model it writes is
// valid, close to the float model, and runs as int8 kernels; bad requests are refused with
// one clear line.
#include <gtest/gtest.h>

#include <cmath>

#include "check/quantize.h"
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
  EXPECT_EQ(r->activations, 5);  // x, c1, r1's producer output c1 is shared: x, c1, r1, c2, y
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
  expect(write_model(dir, "f9.onnx", float_model(9)), o, "imports opset 9 of the default domain; QDQ quantisation needs opset 10");
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
         o, "has no Conv or MatMul with constant float32 weights");
}

}  // namespace
}  // namespace bulkhead::test
