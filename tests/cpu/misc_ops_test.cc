// CumProd, Det, the window functions, MelWeightMatrix, StringSplit, RegexFullMatch, TfIdfVectorizer, LabelEncoder, DeformConv, BitCast, NonMaxSuppression, CenterCropPad and
// MaxUnpool, NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss, Unique, Col2Im, AffineGrid, GridSample, TensorScatter, StringConcat, Binarizer, ArrayFeatureExtractor and MatMulInteger on the CPU: what the conformance cases do
// not cover — the refusals at session creation, each naming node, operator and the
// unsupported thing, and edge cases (a singular matrix, an empty window).
#include <gtest/gtest.h>

#include <cmath>

#include "bulkhead/bulkhead.hpp"
#include "support/test_util.h"

namespace bulkhead::test {
namespace {

TEST(MiscOps, RefusalsNameNodeOperatorAndWhat) {
  expect_text_model_refused(R"(<ir_version: 8, opset_import: ["" : 22]>
g (int32[2,2] x) => (int32 y) { y = Det(x) })", "node 'Det_0' (Det): Det takes floating-point matrices, not int32");
  expect_text_model_refused(R"(<ir_version: 10, opset_import: ["" : 26]>
g (float[2] x) => (int8[8] y) { y = BitCast <to = 3> (x) })", "node 'BitCast_0' (BitCast): BitCast from float32 to int8: only between element types of the same size");
  expect_text_model_refused(R"(<ir_version: 8, opset_import: ["" : 17]>
g (int64 n) => (string[N] y) { y = HannWindow <output_datatype = 8> (n) })", "node 'HannWindow_0' (HannWindow): output_datatype 8 is not supported");
}

TEST(MiscOps, NonMaxSuppressionRefusesABadBoxFormatAndMismatchedShapes) {
  expect_text_model_refused(R"(<ir_version: 8, opset_import: ["" : 11]>
g (float[1,2,4] b, float[1,1,2] s) => (int64[N,3] y) { y = NonMaxSuppression <center_point_box = 2> (b, s) })",
                 "node 'NonMaxSuppression_0' (NonMaxSuppression): center_point_box must be 0 or 1, got 2");
  Env env;
  auto s = load_text_model(env, R"(<ir_version: 8, opset_import: ["" : 11]>
g (float[1,N,4] b, float[1,1,M] s, int64[1] k) => (int64[K,3] y) { y = NonMaxSuppression(b, s, k) })");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  auto r = s->run({{"b", Tensor::host(DataType::kFloat32, {1, 2, 4})}, {"s", Tensor::host(DataType::kFloat32, {1, 1, 3})},
                   {"k", Tensor::from_vector<int64_t>(DataType::kInt64, {1}, {5})}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("expected boxes [batches, boxes, 4] and scores [batches, classes, boxes], got [1,2,4] and [1,1,3]"),
            std::string::npos) << r.status().to_string();
}

TEST(MiscOps, CenterCropPadAndMaxUnpoolRefuseBadArguments) {
  Env env;
  auto c = load_text_model(env, R"(<ir_version: 8, opset_import: ["" : 18]>
g (float[4,4] x, int64[2] s) => (float[A,B] y) { y = CenterCropPad <axes = [0, -2]> (x, s) })");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  auto r = c->run({{"x", Tensor::host(DataType::kFloat32, {4, 4})}, {"s", Tensor::from_vector<int64_t>(DataType::kInt64, {2}, {2, 2})}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("axis -2 is listed twice"), std::string::npos) << r.status().to_string();
  expect_text_model_refused(R"(<ir_version: 8, opset_import: ["" : 11]>
g (float[1,1,2,2] x, int64[1,1,2,2] i) => (float[1,1,4,4] y) { y = MaxUnpool <kernel_shape = [2, 2], pads = [0, 0]> (x, i) })",
                 "node 'MaxUnpool_0' (MaxUnpool): pads must have 4 values");
  auto u = load_text_model(env, R"(<ir_version: 8, opset_import: ["" : 11]>
g (float[1,1,2,2] x, int64[1,1,2,2] i) => (float[1,1,4,4] y) { y = MaxUnpool <kernel_shape = [2, 2], strides = [2, 2]> (x, i) })");
  ASSERT_TRUE(u.is_ok()) << u.status().to_string();
  auto bad = u->run({{"x", Tensor::host(DataType::kFloat32, {1, 1, 2, 2})},
                     {"i", Tensor::from_vector<int64_t>(DataType::kInt64, {1, 1, 2, 2}, {0, 3, 8, 99})}});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("index 99 is outside the unpooled tensor of 16 elements"), std::string::npos) << bad.status().to_string();
  // output_shape: the unpooled 4x4 keeps its index space at the output's origin, so
  // index 5 (row 1, column 1 of 4x4) lands at row 1, column 1 of the 5x5 output.
  auto w = load_text_model(env, R"(<ir_version: 8, opset_import: ["" : 11]>
g (float[1,1,2,2] x, int64[1,1,2,2] i, int64[4] s) => (float[1,1,A,B] y) { y = MaxUnpool <kernel_shape = [2, 2], strides = [2, 2]> (x, i, s) })");
  ASSERT_TRUE(w.is_ok()) << w.status().to_string();
  Tensor x4 = Tensor::from_vector<float>(DataType::kFloat32, {1, 1, 2, 2}, {5, 6, 7, 8});
  Tensor i4 = Tensor::from_vector<int64_t>(DataType::kInt64, {1, 1, 2, 2}, {5, 7, 13, 15});
  auto big = w->run({{"x", x4}, {"i", i4}, {"s", Tensor::from_vector<int64_t>(DataType::kInt64, {4}, {1, 1, 5, 5})}});
  ASSERT_TRUE(big.is_ok()) << big.status().to_string();
  const float* y = (*big)[0].second.data<float>();
  EXPECT_EQ(y[1 * 5 + 1], 5.f);
  EXPECT_EQ(y[1 * 5 + 3], 6.f);
  EXPECT_EQ(y[3 * 5 + 1], 7.f);
  EXPECT_EQ(y[3 * 5 + 3], 8.f);
  auto small = w->run({{"x", x4}, {"i", i4}, {"s", Tensor::from_vector<int64_t>(DataType::kInt64, {4}, {1, 1, 3, 5})}});
  ASSERT_FALSE(small.is_ok());
  EXPECT_NE(small.status().message().find("output_shape [1,1,3,5] is smaller than the unpooled shape [1,1,4,4]"), std::string::npos)
      << small.status().to_string();
}

TEST(MiscOps, LossesRefuseABadReductionAndTargetsOutOfRange) {
  expect_text_model_refused(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x, int64[2] t) => (float y) { y = NegativeLogLikelihoodLoss <reduction = "max"> (x, t) })",
                 "node 'NegativeLogLikelihoodLoss_0' (NegativeLogLikelihoodLoss): reduction must be none, sum or mean, got 'max'");
  Env env;
  auto s = load_text_model(env, R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x, int64[2] t) => (float y) { y = SoftmaxCrossEntropyLoss <ignore_index = -1> (x, t) })");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  Tensor x = Tensor::from_vector<float>(DataType::kFloat32, {2, 3}, {0, 0, 0, 1, 2, 3});
  auto ok = s->run({{"x", x}, {"t", Tensor::from_vector<int64_t>(DataType::kInt64, {2}, {1, -1})}});
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_NEAR((*ok)[0].second.data<float>()[0], std::log(3.0), 1e-6);  // the ignored row counts for nothing
  auto bad = s->run({{"x", x}, {"t", Tensor::from_vector<int64_t>(DataType::kInt64, {2}, {1, 3})}});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("target 3 is outside [0, 3)"), std::string::npos) << bad.status().to_string();
}

TEST(MiscOps, UniqueGroupsNaNsAndKeepsFirstAppearanceOrderWhenUnsorted) {
  Env env;
  auto s = load_text_model(env, R"(<ir_version: 8, opset_import: ["" : 11]>
g (float[6] x) => (float[U] y, int64[U] i, int64[6] inv, int64[U] c) { y, i, inv, c = Unique <sorted = 0> (x) })");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  const float nan = std::nanf("");
  auto r = s->run({{"x", Tensor::from_vector<float>(DataType::kFloat32, {6}, {3, nan, 1, 3, nan, 1})}});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const Tensor& y = (*r)[0].second;
  ASSERT_EQ(y.numel(), 3);
  EXPECT_EQ(y.data<float>()[0], 3.0f);
  EXPECT_TRUE(std::isnan(y.data<float>()[1]));
  EXPECT_EQ(y.data<float>()[2], 1.0f);
  const int64_t* inv = (*r)[2].second.data<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(inv, inv + 6), (std::vector<int64_t>{0, 1, 2, 0, 1, 2}));
  const int64_t* c = (*r)[3].second.data<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(c, c + 3), (std::vector<int64_t>{2, 2, 2}));
}

TEST(MiscOps, Col2ImAndAffineGridNameWhatIsWrong) {
  Env env;
  auto c = load_text_model(env, R"(<ir_version: 8, opset_import: ["" : 18]>
g (float[1,4,5] x, int64[2] im, int64[2] bl) => (float[1,1,A,B] y) { y = Col2Im(x, im, bl) })");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  auto r = c->run({{"x", Tensor::host(DataType::kFloat32, {1, 4, 5})},
                   {"im", Tensor::from_vector<int64_t>(DataType::kInt64, {2}, {3, 3})},
                   {"bl", Tensor::from_vector<int64_t>(DataType::kInt64, {2}, {2, 2})}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("input [1,4,5] does not hold 4 blocks of 4 values per channel"), std::string::npos)
      << r.status().to_string();
  auto a = load_text_model(env, R"(<ir_version: 8, opset_import: ["" : 20]>
g (float[1,3,3] t, int64[4] sz) => (float[1,H,W,2] y) { y = AffineGrid(t, sz) })");
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  auto bad = a->run({{"t", Tensor::host(DataType::kFloat32, {1, 3, 3})},
                     {"sz", Tensor::from_vector<int64_t>(DataType::kInt64, {4}, {1, 1, 2, 2})}});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("theta must be [1,2,3], got [1,3,3]"), std::string::npos) << bad.status().to_string();
}

TEST(MiscOps, GridSampleRefusesUnknownModesAndCubicIn3d) {
  expect_text_model_refused(R"(<ir_version: 8, opset_import: ["" : 20]>
g (float[1,1,2,2] x, float[1,2,2,2] gr) => (float[1,1,2,2] y) { y = GridSample <mode = "bilinear"> (x, gr) })",
                 "node 'GridSample_0' (GridSample): unknown mode 'bilinear'");
  Env env;
  auto s = load_text_model(env, R"(<ir_version: 8, opset_import: ["" : 20]>
g (float[1,1,2,2,2] x, float[1,2,2,2,3] gr) => (float[1,1,2,2,2] y) { y = GridSample <mode = "cubic"> (x, gr) })");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  auto r = s->run({{"x", Tensor::host(DataType::kFloat32, {1, 1, 2, 2, 2})}, {"gr", Tensor::host(DataType::kFloat32, {1, 2, 2, 2, 3})}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("cubic GridSample is implemented for 2 spatial dims, not 3"), std::string::npos)
      << r.status().to_string();
}

TEST(MiscOps, TensorScatterRefusesWritesPastTheCacheUnlessCircular) {
  expect_text_model_refused(R"(<ir_version: 10, opset_import: ["" : 24]>
g (float[1,4,2] c, float[1,2,2] u) => (float[1,4,2] y) { y = TensorScatter <mode = "ring"> (c, u) })",
                 "node 'TensorScatter_0' (TensorScatter): mode must be linear or circular, got 'ring'");
  Env env;
  for (std::string mode : {"linear", "circular"}) {
    auto s = load_text_model(env, R"(<ir_version: 10, opset_import: ["" : 24]>
g (float[1,4,2] c, float[1,2,2] u, int64[1] w) => (float[1,4,2] y) { y = TensorScatter <mode = ")" + mode + R"("> (c, u, w) })");
    ASSERT_TRUE(s.is_ok()) << s.status().to_string();
    Tensor c = Tensor::from_vector<float>(DataType::kFloat32, {1, 4, 2}, {0, 0, 1, 1, 2, 2, 3, 3});
    Tensor u = Tensor::from_vector<float>(DataType::kFloat32, {1, 2, 2}, {8, 8, 9, 9});
    auto r = s->run({{"c", c}, {"u", u}, {"w", Tensor::from_vector<int64_t>(DataType::kInt64, {1}, {3})}});
    if (mode == "linear") {
      ASSERT_FALSE(r.is_ok());
      EXPECT_NE(r.status().message().find("write index 3 of batch 0 does not fit 2 positions in 4"), std::string::npos)
          << r.status().to_string();
    } else {
      ASSERT_TRUE(r.is_ok()) << r.status().to_string();
      const float* y = (*r)[0].second.data<float>();
      EXPECT_EQ(std::vector<float>(y, y + 8), (std::vector<float>{9, 9, 1, 1, 2, 2, 8, 8}));
    }
  }
}

TEST(MiscOps, StringConcatBroadcastsAndNamesShapesThatDoNot) {
  Env env;
  auto s = load_text_model(env, R"(<ir_version: 9, opset_import: ["" : 20]>
g (string[A] x, string[B] z) => (string[C] y) { y = StringConcat(x, z) })");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  auto strings = [](std::vector<std::string> v) {
    Tensor t = Tensor::host(DataType::kString, {static_cast<int64_t>(v.size())});
    std::copy(v.begin(), v.end(), t.strings());
    return t;
  };
  auto r = s->run({{"x", strings({"a", "é"})}, {"z", strings({"!"})}});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].second.strings()[0], "a!");
  EXPECT_EQ((*r)[0].second.strings()[1], "é!");
  auto bad = s->run({{"x", strings({"a", "b"})}, {"z", strings({"c", "d", "e"})}});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("shapes [2] and [3] cannot be broadcast"), std::string::npos) << bad.status().to_string();
}

TEST(MiscOps, ArrayFeatureExtractorNamesAnIndexOutsideTheLastAxis) {
  Env env;
  auto s = load_text_model(env, R"(<ir_version: 8, opset_import: ["" : 17, "ai.onnx.ml" : 1]>
g (float[2,3] x, int64[1] i) => (float[2,1] y) { y = ai.onnx.ml.ArrayFeatureExtractor(x, i) })");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  auto r = s->run({{"x", Tensor::host(DataType::kFloat32, {2, 3})}, {"i", Tensor::from_vector<int64_t>(DataType::kInt64, {1}, {3})}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("index 3 is outside the last axis of 3"), std::string::npos) << r.status().to_string();
}

TEST(MiscOps, MatMulIntegerWithPerRowZeroPointsAndItsRefusals) {
  Env env;
  auto s = load_text_model(env, R"(<ir_version: 8, opset_import: ["" : 10]>
g (uint8[2,2] a, int8[2,1] b, uint8[2] za) => (int32[2,1] y) { y = MatMulInteger(a, b, za) })");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  auto r = s->run({{"a", Tensor::from_vector<uint8_t>(DataType::kUInt8, {2, 2}, {10, 20, 200, 255})},
                   {"b", Tensor::from_vector<int8_t>(DataType::kInt8, {2, 1}, {-1, 2})},
                   {"za", Tensor::from_vector<uint8_t>(DataType::kUInt8, {2}, {10, 250})}});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const int32_t* y = (*r)[0].second.data<int32_t>();
  EXPECT_EQ(y[0], 0 * -1 + 10 * 2);    // (10-10, 20-10) . (-1, 2)
  EXPECT_EQ(y[1], -50 * -1 + 5 * 2);  // (200-250, 255-250) . (-1, 2)
  auto f = load_text_model(env, R"(<ir_version: 8, opset_import: ["" : 10]>
g (float[2,2] a, uint8[2,1] b) => (int32[2,1] y) { y = MatMulInteger(a, b) })");
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  auto bad = f->run({{"a", Tensor::host(DataType::kFloat32, {2, 2})}, {"b", Tensor::host(DataType::kUInt8, {2, 1})}});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("MatMulInteger takes int8/uint8 A and B, got float32 and uint8"), std::string::npos)
      << bad.status().to_string();
}

TEST(MiscOps, DetOfASingularMatrixIsZeroAndPivotsFlipTheSign) {
  Env env;
  auto s = load_text_model(env, R"(<ir_version: 8, opset_import: ["" : 22]>
g (float[3,2,2] x) => (float[3] y) { y = Det(x) })");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  Tensor x = Tensor::from_vector<float>(DataType::kFloat32, {3, 2, 2}, {1, 2, 2, 4, 0, 1, 1, 0, 3, 0, 0, 2});
  auto r = s->run({{"x", x}});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const float* y = (*r)[0].second.data<float>();
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], -1.0f);
  EXPECT_EQ(y[2], 6.0f);
}

TEST(MiscOps, WindowsOfSizeZeroAndOne) {
  Env env;
  auto s = load_text_model(env, R"(<ir_version: 8, opset_import: ["" : 17]>
g (int64 n) => (float[N] y) { y = HammingWindow <periodic = 0> (n) })");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  for (int64_t n : {0, 1}) {
    auto r = s->run({{"n", Tensor::from_vector<int64_t>(DataType::kInt64, {}, {n})}});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    ASSERT_EQ((*r)[0].second.numel(), n);
    if (n == 1) {
      EXPECT_EQ((*r)[0].second.data<float>()[0], 1.0f);  // as NumPy's hamming(1)
    }
  }
  auto bad = s->run({{"n", Tensor::from_vector<int64_t>(DataType::kInt64, {}, {-3})}});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("size must be >= 0, got -3"), std::string::npos) << bad.status().to_string();
}

TEST(MiscOps, TextOperatorsRefuseBadAttributes) {
  expect_text_model_refused(R"(<ir_version: 8, opset_import: ["" : 20]>
g (string[2] x) => (string[2,N] y, int64[2] z) { y, z = StringSplit <maxsplit = -2> (x) })",
                 "node 'StringSplit_0' (StringSplit): maxsplit must be >= 0, got -2");
  expect_text_model_refused(R"(<ir_version: 8, opset_import: ["" : 9]>
g (int64[4] x) => (float[N] y) { y = TfIdfVectorizer <mode = "BM25", min_gram_length = 1, max_gram_length = 1, max_skip_count = 0, ngram_counts = [0], ngram_indexes = [0], pool_int64s = [1]> (x) })",
                 "node 'TfIdfVectorizer_0' (TfIdfVectorizer): mode must be TF, IDF or TFIDF, got 'BM25'");
  expect_text_model_refused(R"(<ir_version: 8, opset_import: ["" : 9]>
g (int64[4] x) => (float[N] y) { y = TfIdfVectorizer <mode = "TF", min_gram_length = 2, max_gram_length = 2, max_skip_count = 0, ngram_counts = [0, 0], ngram_indexes = [0], pool_int64s = [1, 2, 3]> (x) })",
                 "do not split the pool into 2-grams");
  expect_text_model_refused(R"(<ir_version: 8, opset_import: ["" : 17]>
g (int64 m, int64 d, int64 r, float lo, float hi) => (string[A,B] y) { y = MelWeightMatrix <output_datatype = 8> (m, d, r, lo, hi) })",
                 "node 'MelWeightMatrix_0' (MelWeightMatrix): output_datatype 8 is not supported");
}

TEST(MiscOps, StringSplitFollowsPython) {
  Env env;
  auto s = load_text_model(env, R"(<ir_version: 8, opset_import: ["" : 20]>
g (string[3] x) => (string[3,N] y, int64[3] z) { y, z = StringSplit <maxsplit = 1> (x) })");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  Tensor x = Tensor::host(DataType::kString, {3});
  x.strings()[0] = "  a b  c ";
  x.strings()[1] = "";
  x.strings()[2] = "one";
  auto r = s->run({{"x", x}});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const Tensor& y = (*r)[0].second;
  ASSERT_EQ(y.shape(), (Shape{3, 2}));
  // " a b  c ".split(maxsplit=1) == ['a', 'b  c']; ''.split() == []
  EXPECT_EQ(y.strings()[0], "a");
  EXPECT_EQ(y.strings()[1], "b  c");
  EXPECT_EQ(y.strings()[2], "");
  EXPECT_EQ(y.strings()[4], "one");
  const int64_t* z = (*r)[1].second.data<int64_t>();
  EXPECT_EQ(z[0], 2);
  EXPECT_EQ(z[1], 0);
  EXPECT_EQ(z[2], 1);
}

TEST(MiscOps, RegexLabelEncoderAndDeformConvRefusals) {
  expect_text_model_refused(R"(<ir_version: 8, opset_import: ["" : 20]>
g (string[2] x) => (bool[2] y) { y = RegexFullMatch <pattern = "(a"> (x) })",
                 "node 'RegexFullMatch_0' (RegexFullMatch): pattern '(a' is not a valid RE2 expression: missing )");
  expect_text_model_refused(R"(<ir_version: 8, opset_import: ["" : 20, "ai.onnx.ml" : 4]>
g (string[2] x) => (int64[2] y) { y = ai.onnx.ml.LabelEncoder <keys_strings = ["a", "b"]> (x) })",
                 "(ai.onnx.ml.LabelEncoder): needs keys (keys_floats, keys_int64s, keys_strings or keys_tensor) and values");
  expect_text_model_refused(R"(<ir_version: 8, opset_import: ["" : 20, "ai.onnx.ml" : 4]>
g (string[2] x) => (int64[2] y) { y = ai.onnx.ml.LabelEncoder <keys_strings = ["a", "b"], values_int64s = [1]> (x) })",
                 "has 2 keys and 1 values");
  Env env;
  auto s = load_text_model(env, R"(<ir_version: 8, opset_import: ["" : 22]>
g (float[1,1,2,2,2] x, float[1,1,1,1,1] w, float[1,3,2,2,2] o) => (float[1,1,2,2,2] y) { y = DeformConv(x, w, o) })");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  auto r = s->run({{"x", Tensor::host(DataType::kFloat32, {1, 1, 2, 2, 2})}, {"w", Tensor::host(DataType::kFloat32, {1, 1, 1, 1, 1})},
                   {"o", Tensor::host(DataType::kFloat32, {1, 3, 2, 2, 2})}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("node 'DeformConv_0' (DeformConv): only 2-D deformable convolution is supported"),
            std::string::npos)
      << r.status().to_string();
}

TEST(MiscOps, LabelEncoderMatchesFloatKeysByValueAndUsesTheDefault) {
  Env env;
  auto s = load_text_model(env, R"(<ir_version: 8, opset_import: ["" : 20, "ai.onnx.ml" : 2]>
g (float[3] x) => (string[3] y) { y = ai.onnx.ml.LabelEncoder <keys_floats = [1.5, 0.0], values_strings = ["one", "zero"], default_string = "?"> (x) })");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  auto r = s->run({{"x", Tensor::from_vector<float>(DataType::kFloat32, {3}, {1.5f, 2.0f, -0.0f})}});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const Tensor& y = (*r)[0].second;
  EXPECT_EQ(y.strings()[0], "one");
  EXPECT_EQ(y.strings()[1], "?");
  EXPECT_EQ(y.strings()[2], "zero");  // -0.0 == 0.0
}

TEST(MiscOps, DftAndStftRefuseBadArguments) {
  expect_text_model_refused(R"(<ir_version: 8, opset_import: ["" : 20]>
g (float[1,8,1] x) => (float[1,8,2] y) { y = DFT <inverse = 2> (x) })",
                 "node 'DFT_0' (DFT): inverse and onesided must be 0 or 1");
  Env env;
  auto s = load_text_model(env, R"(<ir_version: 8, opset_import: ["" : 20]>
g (float[1,L,C] x, int64 n) => (float[1,N,2] y) { y = DFT(x, n) })");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  auto bad = s->run({{"x", Tensor::host(DataType::kFloat32, {1, 8, 3})}, {"n", Tensor::from_vector<int64_t>(DataType::kInt64, {}, {8})}});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("input must be [..., signal, 1] (real) or [..., signal, 2] (complex), got float32[1,8,3]"),
            std::string::npos) << bad.status().to_string();
  auto zero = s->run({{"x", Tensor::host(DataType::kFloat32, {1, 8, 1})}, {"n", Tensor::from_vector<int64_t>(DataType::kInt64, {}, {0})}});
  ASSERT_FALSE(zero.is_ok());
  EXPECT_NE(zero.status().message().find("dft_length must be between 1 and 2^30, got 0"), std::string::npos) << zero.status().to_string();
  // A transform of a length FFTW factors badly (a prime) still gives the plain sum.
  Tensor x = Tensor::from_vector<float>(DataType::kFloat32, {1, 7, 1}, {1, 2, 3, 4, 5, 6, 7});
  auto r = s->run({{"x", x}, {"n", Tensor::from_vector<int64_t>(DataType::kInt64, {}, {7})}});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_FLOAT_EQ((*r)[0].second.data<float>()[0], 28.0f);
  auto st = load_text_model(env, R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,16,1] x, int64 step, int64 len) => (float[1,F,B,2] y) { y = STFT(x, step, , len) })");
  ASSERT_TRUE(st.is_ok()) << st.status().to_string();
  auto longer = st->run({{"x", Tensor::host(DataType::kFloat32, {1, 16, 1})}, {"step", Tensor::from_vector<int64_t>(DataType::kInt64, {}, {4})},
                         {"len", Tensor::from_vector<int64_t>(DataType::kInt64, {}, {32})}});
  ASSERT_FALSE(longer.is_ok());
  EXPECT_NE(longer.status().message().find("frame_length 32 is longer than the signal (16)"), std::string::npos)
      << longer.status().to_string();
}

}  // namespace
}  // namespace bulkhead::test
