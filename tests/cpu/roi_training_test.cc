// RoiAlign, the ai.onnx.preview.training optimisers (Adagrad, Adam, Momentum) and Gradient on the
// CPU: what the conformance cases do not cover — the refusals at session creation and at
// run time, each naming node, operator and the unsupported thing, and edge cases (rois
// reaching outside the image with adaptive sampling, a second batch image, the opset 10
// default, optimiser steps with T > 0).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "bulkhead/bulkhead.hpp"
#include "support/test_util.h"

namespace bulkhead::test {
namespace {

void expect_near_all(const Tensor& t, const std::vector<float>& want, float tol) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size())) << t.describe();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(t.data<float>()[i], want[i], tol) << "element " << i;
}

// ---------------------------------------------------------------------------------------
// RoiAlign

TEST(RoiAlign, RefusesABadModeAndCoordinateTransformationMode) {
  expect_text_model_refused(R"(<ir_version: 8, opset_import: ["" : 16]>
g (float[1,1,4,4] x, float[1,4] r, int64[1] b) => (float[1,1,1,1] y) { y = RoiAlign <mode = "min"> (x, r, b) })",
                 "node 'RoiAlign_0' (RoiAlign): mode must be avg or max, got 'min'");
  expect_text_model_refused(R"(<ir_version: 8, opset_import: ["" : 16]>
g (float[1,1,4,4] x, float[1,4] r, int64[1] b) => (float[1,1,1,1] y) {
  y = RoiAlign <coordinate_transformation_mode = "align_corners"> (x, r, b) })",
                 "node 'RoiAlign_0' (RoiAlign): coordinate_transformation_mode must be half_pixel or output_half_pixel, got 'align_corners'");
  expect_text_model_refused(R"(<ir_version: 8, opset_import: ["" : 16]>
g (float[1,1,4,4] x, float[1,4] r, int64[1] b) => (float[1,1,0,1] y) { y = RoiAlign <output_height = 0> (x, r, b) })",
                 "node 'RoiAlign_0' (RoiAlign): output_height and output_width must be in [1, 2^31], got 0 and 1");
  expect_text_model_refused(R"(<ir_version: 8, opset_import: ["" : 16]>
g (float[1,1,4,4] x, float[1,4] r, int64[1] b) => (float[1,1,1,1] y) { y = RoiAlign <sampling_ratio = -1> (x, r, b) })",
                 "node 'RoiAlign_0' (RoiAlign): sampling_ratio must be in [0, 4096] (0: adaptive), got -1");
}

TEST(RoiAlign, ABatchIndexOutOfRangeOrOfTheWrongCountIsAnError) {
  Env env;
  auto s = load_text_model(env, R"(<ir_version: 8, opset_import: ["" : 16]>
g (float[2,1,4,4] x, float[R,4] r, int64[B] b) => (float[R,1,2,2] y) { y = RoiAlign <output_height = 2, output_width = 2> (x, r, b) })");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  Tensor x = Tensor::host(DataType::kFloat32, {2, 1, 4, 4});
  Tensor rois = Tensor::from_vector<float>(DataType::kFloat32, {2, 4}, {0, 0, 3, 3, 1, 1, 2, 2});
  for (int64_t bad : {2, -1}) {
    auto r = s->run({{"x", x}, {"r", rois}, {"b", Tensor::from_vector<int64_t>(DataType::kInt64, {2}, {0, bad})}});
    ASSERT_FALSE(r.is_ok());
    EXPECT_NE(r.status().message().find("node 'RoiAlign_0' (RoiAlign): batch_indices[1] = " + std::to_string(bad) +
                                        " is out of range for X's batch of 2"),
              std::string::npos)
        << r.status().to_string();
  }
  auto r = s->run({{"x", x}, {"r", rois}, {"b", Tensor::from_vector<int64_t>(DataType::kInt64, {3}, {0, 1, 1})}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("batch_indices must be [2] (one per roi), got int64[3]"), std::string::npos)
      << r.status().to_string();
  auto nan = s->run({{"x", x},
                     {"r", Tensor::from_vector<float>(DataType::kFloat32, {1, 4}, {0, 0, std::nanf(""), 3})},
                     {"b", Tensor::from_vector<int64_t>(DataType::kInt64, {1}, {0})}});
  ASSERT_FALSE(nan.is_ok());
  EXPECT_NE(nan.status().message().find("roi 0 has a non-finite coordinate"), std::string::npos) << nan.status().to_string();
  // An adaptive grid (sampling_ratio 0) for a vast roi is refused, not attempted.
  auto vast = s->run({{"x", x},
                      {"r", Tensor::from_vector<float>(DataType::kFloat32, {1, 4}, {0, 0, 1e7f, 1e7f})},
                      {"b", Tensor::from_vector<int64_t>(DataType::kInt64, {1}, {0})}});
  ASSERT_FALSE(vast.is_ok());
  EXPECT_NE(vast.status().message().find("roi 0 needs a sampling grid of 5000000 x 5000000 per bin; at most 2^20 samples per bin are supported"),
            std::string::npos)
      << vast.status().to_string();
}

// X [2, 1, 3, 4]: image 0 holds 0, 0.5, ..., 5.5; image 1 holds -3, -3.5, ..., -8.5. Roi 0
// (of image 1) reaches left of the image; sampling_ratio 0 makes 2 x 2, then 2 x 1,
// samples per bin. Expected values from the ONNX reference algorithm (in double).
Tensor roi_x() {
  std::vector<float> v(24);
  for (int i = 0; i < 12; ++i) v[i] = 0.5f * i, v[12 + i] = -3.0f - 0.5f * i;
  return Tensor::from_vector<float>(DataType::kFloat32, {2, 1, 3, 4}, v);
}

std::vector<float> run_roi_align(const std::string& opset, const std::string& attrs) {
  Env env;
  auto s = load_text_model(env, R"(<ir_version: 8, opset_import: ["" : )" + opset + R"(]>
g (float[2,1,3,4] x, float[2,4] r, int64[2] b) => (float[2,1,2,3] y) { y = RoiAlign <output_height = 2, output_width = 3, )" +
                         attrs + R"(> (x, r, b) })");
  EXPECT_TRUE(s.is_ok()) << s.status().to_string();
  if (!s.is_ok()) return {};
  auto r = s->run({{"x", roi_x()},
                   {"r", Tensor::from_vector<float>(DataType::kFloat32, {2, 4}, {-1.5f, 0.5f, 2.5f, 3.5f, 1, 0, 3.9f, 2.2f})},
                   {"b", Tensor::from_vector<int64_t>(DataType::kInt64, {2}, {1, 0})}});
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  if (!r.is_ok()) return {};
  const Tensor& y = (*r)[0].second;
  return std::vector<float>(y.data<float>(), y.data<float>() + y.numel());
}

void expect_near_vec(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5f) << "element " << i;
}

TEST(RoiAlign, AdaptiveSamplingOutsideTheImageAndTheSecondBatchImage) {
  const std::vector<float> out_avg = {-2.75f, -5.75f, -6.416667f, -1.75f, -3.625f, -3.958333f,
                                      1.841667f, 2.325f, 2.6f, 4.041667f, 4.525f, 4.8f};
  const std::vector<float> out_max = {0, -0.0625f, -0.09375f, 0, 0, 0, 1.19625f, 1.36125f, 2.8875f, 2.235417f, 2.54375f, 5.0875f};
  const std::vector<float> half_avg = {-3.25f, -3.25f, -3.458333f, -4.75f, -4.75f, -4.958333f,
                                       0.1208333f, 0.3625f, 0.6041667f, 0.7708334f, 1.0125f, 1.254167f};
  const std::vector<float> half_max = {0, 0, -0.2864583f, 0, 0, -0.1822917f,
                                       0.1208333f, 0.3625f, 0.3958333f, 0.4929167f, 0.5890626f, 0.6432292f};
  expect_near_vec(run_roi_align("16", R"(coordinate_transformation_mode = "output_half_pixel")"), out_avg);
  expect_near_vec(run_roi_align("22", R"(coordinate_transformation_mode = "output_half_pixel", mode = "max")"), out_max);
  // Opset 10 has no coordinate_transformation_mode: it behaves as output_half_pixel.
  expect_near_vec(run_roi_align("10", R"(mode = "avg")"), out_avg);
  // From opset 16 the default is half_pixel.
  expect_near_vec(run_roi_align("16", R"(spatial_scale = 0.5)"), half_avg);
  expect_near_vec(run_roi_align("16", R"(spatial_scale = 0.5, mode = "max")"), half_max);
}

// ---------------------------------------------------------------------------------------
// Optimisers

constexpr const char* kTraining = R"(<ir_version: 8, opset_import: ["ai.onnx.preview.training" : 1]>
)";

TEST(TrainingOptimizers, RefuseMismatchedGroupCountsAndBadAttributes) {
  expect_text_model_refused(std::string(kTraining) + R"(g (float r, int64 t, float[1] x1, float[1] x2, float[1] g1, float[1] g2) => (float[1] y1, float[1] y2) {
  y1, y2 = ai.onnx.preview.training.Adagrad(r, t, x1, x2, g1, g2) })",
                 "node 'Adagrad_0' (ai.onnx.preview.training.Adagrad): expects R, T and then n each of X, G, H (2 + 3n inputs, n >= 1), got 6 inputs");
  expect_text_model_refused(std::string(kTraining) + R"(g (float r, int64 t, float[1] x, float[1] g, float[1] v, float[1] h) => (float[1] y, float[1] v2, float[1] h2, float[1] z) {
  y, v2, h2, z = ai.onnx.preview.training.Adam(r, t, x, g, v, h) })",
                 "node 'Adam_0' (ai.onnx.preview.training.Adam): has 4 outputs, but 1 optimised tensor give at most 3");
  expect_text_model_refused(std::string(kTraining) + R"(g (float r, int64 t, float[1] x, float[1] g, float[1] v) => (float[1] y, float[1] v2) {
  y, v2 = ai.onnx.preview.training.Momentum <alpha = 0.9, beta = 0.1, norm_coefficient = 0.0, mode = "heavy"> (r, t, x, g, v) })",
                 "node 'Momentum_0' (ai.onnx.preview.training.Momentum): mode must be standard or nesterov, got 'heavy'");
  expect_text_model_refused(std::string(kTraining) + R"(g (float r, int64 t, float[1] x, float[1] g, float[1] v) => (float[1] y, float[1] v2) {
  y, v2 = ai.onnx.preview.training.Momentum <alpha = 0.9, norm_coefficient = 0.0, mode = "standard"> (r, t, x, g, v) })",
                 "node 'Momentum_0' (ai.onnx.preview.training.Momentum): missing required attribute 'beta'");
}

TEST(TrainingOptimizers, AGroupWhoseShapesDisagreeAndANegativeCountAreErrors) {
  Env env;
  auto s = load_text_model(env, std::string(kTraining) + R"(g (float r, int64 t, float[A] x, float[B] g, float[C] h) => (float[A] y, float[A] h2) {
  y, h2 = ai.onnx.preview.training.Adagrad(r, t, x, g, h) })");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  Tensor r = Tensor::from_vector<float>(DataType::kFloat32, {}, {0.1f});
  Tensor x = Tensor::from_vector<float>(DataType::kFloat32, {2}, {1, 2});
  auto bad = s->run({{"r", r}, {"t", Tensor::from_vector<int64_t>(DataType::kInt64, {}, {0})}, {"x", x},
                     {"g", Tensor::from_vector<float>(DataType::kFloat32, {3}, {1, 2, 3})}, {"h", x}});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("node 'Adagrad_0' (ai.onnx.preview.training.Adagrad): G of tensor 1 is float32[3], its X is "
                                        "float32[2] (they must match)"),
            std::string::npos)
      << bad.status().to_string();
  auto neg = s->run({{"r", r}, {"t", Tensor::from_vector<int64_t>(DataType::kInt64, {}, {-1})}, {"x", x}, {"g", x}, {"h", x}});
  ASSERT_FALSE(neg.is_ok());
  EXPECT_NE(neg.status().message().find("T (the update count) must be >= 0, got -1"), std::string::npos) << neg.status().to_string();
}

// The conformance cases all run the first step (T = 0); these take step 3, where Adagrad's
// decay, Momentum's beta and Adam's bias correction apply. Expected values computed in
// double from the ONNX reference formulas.
struct Step {
  Tensor r = Tensor::from_vector<float>(DataType::kFloat32, {}, {0.1f});
  Tensor t = Tensor::from_vector<int64_t>(DataType::kInt64, {}, {3});
  Tensor x = Tensor::from_vector<float>(DataType::kFloat32, {2}, {1.0f, -2.0f});
  Tensor g = Tensor::from_vector<float>(DataType::kFloat32, {2}, {0.5f, -1.5f});
  Tensor s1 = Tensor::from_vector<float>(DataType::kFloat32, {2}, {0.25f, 1.0f});
  Tensor s2 = Tensor::from_vector<float>(DataType::kFloat32, {2}, {2.0f, 0.5f});
};

TEST(TrainingOptimizers, LaterStepsApplyDecayBetaAndBiasCorrection) {
  Env env;
  Step in;
  auto ada = load_text_model(env, std::string(kTraining) + R"(g (float r, int64 t, float[2] x, float[2] g, float[2] h) => (float[2] y, float[2] h2) {
  y, h2 = ai.onnx.preview.training.Adagrad <decay_factor = 0.1, epsilon = 0.00001, norm_coefficient = 0.001> (r, t, x, g, h) })");
  ASSERT_TRUE(ada.is_ok()) << ada.status().to_string();
  auto a = ada->run({{"r", in.r}, {"t", in.t}, {"x", in.x}, {"g", in.g}, {"h", in.s1}});
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  expect_near_all((*a)[0].second, {0.94555363f, -1.93597026f}, 1e-5f);
  expect_near_all((*a)[1].second, {0.501001f, 3.256004f}, 1e-5f);

  for (const char* mode : {"standard", "nesterov"}) {
    auto mom = load_text_model(env, std::string(kTraining) + R"(g (float r, int64 t, float[2] x, float[2] g, float[2] v) => (float[2] y, float[2] v2) {
  y, v2 = ai.onnx.preview.training.Momentum <alpha = 0.9, beta = 0.5, norm_coefficient = 0.001, mode = ")" + mode +
                               R"("> (r, t, x, g, v) })");
    ASSERT_TRUE(mom.is_ok()) << mom.status().to_string();
    auto m = mom->run({{"r", in.r}, {"t", in.t}, {"x", in.x}, {"g", in.g}, {"v", in.s1}});
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    if (std::string(mode) == "standard") expect_near_all((*m)[0].second, {0.95245f, -2.0149f}, 1e-5f);
    else expect_near_all((*m)[0].second, {0.907105f, -1.86321f}, 1e-5f);
    expect_near_all((*m)[1].second, {0.4755f, 0.149f}, 1e-5f);
  }

  // Adam in float64, with norm_coefficient_post; only X_new and V_new are asked for.
  auto adam = load_text_model(env, std::string(kTraining) + R"(g (double r, int64 t, double[2] x, double[2] g, double[2] v, double[2] h) => (double[2] y, double[2] v2) {
  y, v2 = ai.onnx.preview.training.Adam <alpha = 0.9, beta = 0.999, epsilon = 0.0000001, norm_coefficient = 0.001, norm_coefficient_post = 0.01> (r, t, x, g, v, h) })");
  ASSERT_TRUE(adam.is_ok()) << adam.status().to_string();
  auto as_double = [](const Tensor& f) {
    std::vector<double> d(f.data<float>(), f.data<float>() + f.numel());
    return Tensor::from_vector<double>(DataType::kFloat64, f.shape(), d);
  };
  auto d = adam->run({{"r", as_double(in.r)}, {"t", in.t}, {"x", as_double(in.x)}, {"g", as_double(in.g)}, {"v", as_double(in.s1)},
                      {"h", as_double(in.s2)}});
  ASSERT_TRUE(d.is_ok()) << d.status().to_string();
  ASSERT_EQ(d->size(), 2u);
  const double* y = (*d)[0].second.data<double>();
  const double* v = (*d)[1].second.data<double>();
  EXPECT_NEAR(y[0], 0.98610798, 1e-6);
  EXPECT_NEAR(y[1], -2.00116939, 1e-6);
  EXPECT_NEAR(v[0], 0.2751, 1e-6);
  EXPECT_NEAR(v[1], 0.7498, 1e-6);
}

// ---------------------------------------------------------------------------------------
// Gradient (expanded at import into ordinary nodes, ir/gradient.h)

Tensor floats(Shape shape, std::vector<float> v) { return Tensor::from_vector<float>(DataType::kFloat32, shape, v); }

TEST(Gradient, BroadcastOperandsSumBackAndUnusedInputsGetZero) {
  // y = a * b + relu(a) - exp(c), with b [3] broadcast against a [2,3]; u is unused.
  Env env;
  auto s = load_text_model(env, R"(<ir_version: 8, opset_import: ["" : 12, "ai.onnx.preview.training" : 1]>
g (float[2,3] a, float[3] b, float[1] c, float[2] u) => (float[2,3] y, float[2,3] da, float[3] db, float[1] dc, float[2] du) {
  m = Mul (a, b)
  r = Relu (a)
  s = Add (m, r)
  e = Exp (c)
  y = Sub (s, e)
  da, db, dc, du = ai.onnx.preview.training.Gradient <xs = ["a", "b", "c", "u"], y = "y"> (a, b, c, u)
})");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  std::vector<float> a = {1, -2, 3, -4, 5, -6}, b = {0.5f, 2, -1};
  auto r = s->run({{"a", floats({2, 3}, a)}, {"b", floats({3}, b)}, {"c", floats({1}, {0.25f})}, {"u", floats({2}, {7, 8})}});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  std::vector<float> da, db = {a[0] + a[3], a[1] + a[4], a[2] + a[5]};
  for (int i = 0; i < 6; ++i) da.push_back(b[i % 3] + (a[i] > 0 ? 1.f : 0.f));
  expect_near_all((*r)[1].second, da, 1e-6f);
  expect_near_all((*r)[2].second, db, 1e-6f);
  expect_near_all((*r)[3].second, {-6 * std::exp(0.25f)}, 1e-5f);  // exp(c) broadcast over 6 elements
  expect_near_all((*r)[4].second, {0, 0}, 0);
}

TEST(Gradient, MatMulSigmoidAndAValueUsedTwice) {
  // y = Sigmoid(A @ B) + A @ B: z feeds two nodes, so its gradients add up.
  Env env;
  auto s = load_text_model(env, R"(<ir_version: 8, opset_import: ["" : 13, "ai.onnx.preview.training" : 1]>
g (float[2,2] A, float[2,1] B) => (float[2,1] dz, float[2,2] dA, float[2,1] dB) {
  z = MatMul (A, B)
  q = Sigmoid (z)
  y = Add (q, z)
  dA, dB = ai.onnx.preview.training.Gradient <xs = ["A", "B"], y = "y"> (A, B)
  dz = ai.onnx.preview.training.Gradient <xs = ["z"], y = "y"> (z)
})");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  std::vector<float> A = {1, 2, -1, 0.5f}, B = {0.3f, -0.2f};
  auto r = s->run({{"A", floats({2, 2}, A)}, {"B", floats({2, 1}, B)}});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  float g[2];
  for (int i = 0; i < 2; ++i) {
    float z = A[2 * i] * B[0] + A[2 * i + 1] * B[1], q = 1 / (1 + std::exp(-z));
    g[i] = q * (1 - q) + 1;  // dy/dz
  }
  expect_near_all((*r)[0].second, {g[0], g[1]}, 1e-6f);
  expect_near_all((*r)[1].second, {g[0] * B[0], g[0] * B[1], g[1] * B[0], g[1] * B[1]}, 1e-6f);
  expect_near_all((*r)[2].second, {A[0] * g[0] + A[2] * g[1], A[1] * g[0] + A[3] * g[1]}, 1e-6f);
}

TEST(Gradient, RefusesOperatorsWithoutARuleAndInputsThatAreNotXs) {
  expect_text_model_refused(R"(<ir_version: 8, opset_import: ["" : 12, "ai.onnx.preview.training" : 1]>
g (float[2] a) => (float[2] da) {
  y = Sin (a)
  da = ai.onnx.preview.training.Gradient <xs = ["a"], y = "y"> (a)
})",
                            "node 'Gradient_1' (ai.onnx.preview.training.Gradient): no gradient rule for node 'Sin_0' (Sin)");
  expect_text_model_refused(R"(<ir_version: 8, opset_import: ["" : 12, "ai.onnx.preview.training" : 1]>
g (float[2] a, float[2] b) => (float[2] da) {
  y = Neg (a)
  da = ai.onnx.preview.training.Gradient <xs = ["a"], y = "y"> (b)
})",
                            "node 'Gradient_1' (ai.onnx.preview.training.Gradient): the inputs must be the values named by xs and then zs");
  expect_text_model_refused(R"(<ir_version: 8, opset_import: ["" : 12, "ai.onnx.preview.training" : 1]>
g (int64[2] a) => (int64[2] da) {
  y = Neg (a)
  da = ai.onnx.preview.training.Gradient <xs = ["a"], y = "y"> (a)
})",
                            "y 'y' is int64; only float32 and float64 are differentiated");
  expect_text_model_refused(R"(<ir_version: 8, opset_import: ["" : 12, "ai.onnx.preview.training" : 1]>
g (float[N] a, float[M] b) => (float[2] da) {
  y = Add (a, b)
  da = ai.onnx.preview.training.Gradient <xs = ["a"], y = "y"> (a)
})",
                            "are not known at import, so its gradient cannot be summed over broadcast axes");
}

}  // namespace
}  // namespace bulkhead::test
