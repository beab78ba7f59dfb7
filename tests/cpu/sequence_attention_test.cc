// LinearAttention, CausalConvWithState and ai.onnx.preview FlexAttention on the CPU: what
// the conformance cases do not cover — the refusals at session creation, each naming node,
// operator and the unsupported thing, and edge cases (float64, the erase gate, a float32
// state beside float16 activations, an unused present_state, mask_mod and a fully masked
// row, a subgraph that gives the wrong shape).
#include <gtest/gtest.h>

#include <cmath>

#include "bulkhead/bulkhead.hpp"
#include "support/test_util.h"

namespace bulkhead::test {
namespace {

const char* kOpset27 = R"(<ir_version: 11, opset_import: ["" : 27]>
)";

TEST(SequenceAttention, LinearAttentionRefusals) {
  const std::string sig = "g (float[1,2,4] q, float[1,2,4] k, float[1,2,4] v, float[1,2,2] d, float[1,2,2] b) => "
                          "(float[1,2,4] y, float[1,2,2,2] s) ";
  expect_text_model_refused(kOpset27 + sig + R"({ y, s = LinearAttention <q_num_heads = 2, kv_num_heads = 2, update_rule = "fast"> (q, k, v, , d, b) })",
                 "node 'LinearAttention_0' (LinearAttention): update_rule must be linear, gated, delta or gated_delta, got 'fast'");
  expect_text_model_refused(kOpset27 + sig + R"({ y, s = LinearAttention <q_num_heads = 2, kv_num_heads = 2, update_rule = "gated"> (q, k, v) })",
                 "node 'LinearAttention_0' (LinearAttention): update_rule 'gated' requires the decay input");
  expect_text_model_refused(kOpset27 + sig + R"({ y, s = LinearAttention <q_num_heads = 2, kv_num_heads = 2, update_rule = "linear"> (q, k, v, , , b) })",
                 "node 'LinearAttention_0' (LinearAttention): update_rule 'linear' forbids the beta input");
  expect_text_model_refused(kOpset27 + sig + R"({ y, s = LinearAttention <q_num_heads = 3, kv_num_heads = 2> (q, k, v, , d, b) })",
                 "node 'LinearAttention_0' (LinearAttention): q_num_heads (3) must be a positive multiple of kv_num_heads (2)");
  expect_text_model_refused(kOpset27 + sig + R"({ y, s = LinearAttention <q_num_heads = 2> (q, k, v, , d, b) })",
                 "node 'LinearAttention_0' (LinearAttention): q_num_heads and kv_num_heads are required");
  expect_text_model_refused(kOpset27 + std::string(R"(g (int32[1,2,4] q, int32[1,2,4] k, int32[1,2,4] v) => (int32[1,2,4] y, int32[1,2,2,2] s) {
  y, s = LinearAttention <q_num_heads = 2, kv_num_heads = 2, update_rule = "linear"> (q, k, v) })"),
                 "node 'LinearAttention_0' (LinearAttention): LinearAttention takes float16, bfloat16, float32 or float64 "
                 "tensors, not int32 (input 'query')");
}

TEST(SequenceAttention, LinearAttentionShapeErrorsNameTheTensor) {
  Env env;
  auto s = load_text_model(env, kOpset27 + std::string(R"(g (float[1,2,4] q, float[1,2,4] k, float[1,2,4] v, float[1,2,3] b) => (float[1,2,4] y, float[1,2,2,2] s) {
  y, s = LinearAttention <q_num_heads = 2, kv_num_heads = 2, update_rule = "delta"> (q, k, v, , , b) })"));
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  auto r = s->run({{"q", Tensor::host(DataType::kFloat32, {1, 2, 4})}, {"k", Tensor::host(DataType::kFloat32, {1, 2, 4})},
                   {"v", Tensor::host(DataType::kFloat32, {1, 2, 4})}, {"b", Tensor::host(DataType::kFloat32, {1, 2, 3})}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("beta must be [1,2,2] or [1,2,1], got float32[1,2,3]"), std::string::npos)
      << r.status().to_string();
}

// The delta rule retrieves with erase_gate ⊙ k (and writes with k), in float64 throughout.
// One head, dk 2, dv 1, scale 1:
//   t0: k [1,0], v 2, gate [1,1]:   v' = 2 - 0 = 2,        S = [2,0],  o = [1,0].S = 2
//   t1: k [1,1], v 3, gate [.5,0]:  v' = 3 - S.[.5,0] = 2, S = [4,2],  o = [0,1].S = 2
// (without the gate t1 would retrieve S.k = 2, giving S = [3,1] and o = 1).
TEST(SequenceAttention, LinearAttentionEraseGateInFloat64) {
  Env env;
  auto s = load_text_model(env, kOpset27 + std::string(R"(g (double[1,2,2] q, double[1,2,2] k, double[1,2,1] v, double[1,2,1] b, double[1,2,2] e) => (double[1,2,1] y, double[1,1,2,1] s) {
  y, s = LinearAttention <q_num_heads = 1, kv_num_heads = 1, update_rule = "delta", scale = 1.0> (q, k, v, , , b, e) })"));
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  auto r = s->run({{"q", Tensor::from_vector<double>(DataType::kFloat64, {1, 2, 2}, {1, 0, 0, 1})},
                   {"k", Tensor::from_vector<double>(DataType::kFloat64, {1, 2, 2}, {1, 0, 1, 1})},
                   {"v", Tensor::from_vector<double>(DataType::kFloat64, {1, 2, 1}, {2, 3})},
                   {"b", Tensor::from_vector<double>(DataType::kFloat64, {1, 2, 1}, {1, 1})},
                   {"e", Tensor::from_vector<double>(DataType::kFloat64, {1, 2, 2}, {1, 1, 0.5, 0})}});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const Tensor& y = (*r)[0].second;
  const Tensor& st = (*r)[1].second;
  ASSERT_EQ(y.dtype(), DataType::kFloat64);
  EXPECT_EQ(std::vector<double>(y.data<double>(), y.data<double>() + 2), (std::vector<double>{2, 2}));
  EXPECT_EQ(std::vector<double>(st.data<double>(), st.data<double>() + 2), (std::vector<double>{4, 2}));
}

// present_state keeps past_state's element type (float32) when the activations are float16.
TEST(SequenceAttention, LinearAttentionStateKeepsItsOwnType) {
  Env env;
  auto s = load_text_model(env, kOpset27 + std::string(R"(g (float16[1,1,1] q, float16[1,1,1] k, float16[1,1,1] v, float[1,1,1,1] p) => (float16[1,1,1] y, float[1,1,1,1] s) {
  y, s = LinearAttention <q_num_heads = 1, kv_num_heads = 1, update_rule = "linear"> (q, k, v, p) })"));
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  Tensor one = Tensor::from_vector<uint16_t>(DataType::kFloat16, {1, 1, 1}, {float_to_half(1.0f)});
  auto r = s->run({{"q", one}, {"k", one}, {"v", one}, {"p", Tensor::from_vector<float>(DataType::kFloat32, {1, 1, 1, 1}, {0.25f})}});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ((*r)[0].second.dtype(), DataType::kFloat16);
  EXPECT_EQ(half_to_float((*r)[0].second.data<uint16_t>()[0]), 1.25f);
  ASSERT_EQ((*r)[1].second.dtype(), DataType::kFloat32);
  EXPECT_EQ((*r)[1].second.data<float>()[0], 1.25f);
}

TEST(SequenceAttention, CausalConvWithStateRefusals) {
  expect_text_model_refused(kOpset27 + std::string(R"(g (float[1,2,4] x, float[2,1,3] w) => (float[1,2,4] y, float[1,2,2] s) {
  y, s = CausalConvWithState <activation = "gelu"> (x, w) })"),
                 "node 'CausalConvWithState_0' (CausalConvWithState): activation must be none, silu or swish, got 'gelu'");
  expect_text_model_refused(kOpset27 + std::string(R"(g (int64[1,2,4] x, int64[2,1,3] w) => (int64[1,2,4] y, int64[1,2,2] s) {
  y, s = CausalConvWithState (x, w) })"),
                 "node 'CausalConvWithState_0' (CausalConvWithState): CausalConvWithState takes float16, bfloat16, float32 or "
                 "float64 tensors, not int64 (input 'input')");
  Env env;
  auto s = load_text_model(env, kOpset27 + std::string(R"(g (float[1,2,4] x, float[1,2,3] w) => (float[1,2,4] y, float[1,2,2] s) {
  y, s = CausalConvWithState (x, w) })"));
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  auto r = s->run({{"x", Tensor::host(DataType::kFloat32, {1, 2, 4})}, {"w", Tensor::host(DataType::kFloat32, {1, 2, 3})}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("weight must be [2,1,k] with k >= 1 (one filter per channel), got float32[1,2,3]"),
            std::string::npos) << r.status().to_string();
}

// float64 with bias, past_state and SiLU: padded [0.5, 1, 2, 3], weight [2, 1], bias -1
// -> convolution [1, 3, 6], then x * sigmoid(x); present_state is the last input, 3.
TEST(SequenceAttention, CausalConvWithStateSiluInFloat64) {
  Env env;
  auto s = load_text_model(env, kOpset27 + std::string(R"(g (double[1,1,3] x, double[1,1,2] w, double[1] b, double[1,1,1] p) => (double[1,1,3] y, double[1,1,1] s) {
  y, s = CausalConvWithState <activation = "silu"> (x, w, b, p) })"));
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  auto r = s->run({{"x", Tensor::from_vector<double>(DataType::kFloat64, {1, 1, 3}, {1, 2, 3})},
                   {"w", Tensor::from_vector<double>(DataType::kFloat64, {1, 1, 2}, {2, 1})},
                   {"b", Tensor::from_vector<double>(DataType::kFloat64, {1}, {-1})},
                   {"p", Tensor::from_vector<double>(DataType::kFloat64, {1, 1, 1}, {0.5})}});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const double* y = (*r)[0].second.data<double>();
  const double conv[3] = {1, 3, 6};
  for (int i = 0; i < 3; ++i) EXPECT_DOUBLE_EQ(y[i], conv[i] / (1 + std::exp(-conv[i]))) << i;
  EXPECT_EQ((*r)[1].second.data<double>()[0], 3.0);
}

// A model that does not ask for present_state still gets the convolution.
TEST(SequenceAttention, CausalConvWithStateWithoutPresentState) {
  Env env;
  auto s = load_text_model(env, kOpset27 + std::string(R"(g (float[1,1,2] x, float[1,1,3] w) => (float[1,1,2] y) {
  y, = CausalConvWithState (x, w) })"));
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  auto r = s->run({{"x", Tensor::from_vector<float>(DataType::kFloat32, {1, 1, 2}, {1, 2})},
                   {"w", Tensor::from_vector<float>(DataType::kFloat32, {1, 1, 3}, {1, 10, 100})}});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->size(), 1u);
  const float* y = (*r)[0].second.data<float>();
  EXPECT_EQ(y[0], 100.0f);        // [0, 0, 1] . [1, 10, 100]
  EXPECT_EQ(y[1], 10.0f + 200.0f);  // [0, 1, 2] . [1, 10, 100]
}

const char* kPreview = R"(<ir_version: 10, opset_import: ["" : 26, "ai.onnx.preview" : 1]>
)";

TEST(SequenceAttention, FlexAttentionRefusals) {
  const std::string sig = "g (float16[1,1,2,4] q, float16[1,1,2,4] k, float16[1,1,2,4] v) => (float16[1,1,2,4] y) ";
  expect_text_model_refused(kPreview + sig + "{ y = ai.onnx.preview.FlexAttention <enable_gqa = 1> (q, k, v) }",
                 "node 'FlexAttention_0' (ai.onnx.preview.FlexAttention): attribute 'enable_gqa' is not supported");
  expect_text_model_refused(kPreview + sig + R"({ y = ai.onnx.preview.FlexAttention <score_mod = m (float s, int64 b, int64 h, int64 i, int64 j) => (float o) { o = Identity(s) }> (q, k, v) })",
                 "node 'FlexAttention_0' (ai.onnx.preview.FlexAttention): score_mod must take one input (the whole score "
                 "tensor) and give one output; it takes 5 and gives 1");
  expect_text_model_refused(kPreview + sig + R"({ y = ai.onnx.preview.FlexAttention <prob_mod = m (double[1,1,2,2] p) => (double[1,1,2,2] o) { o = Identity(p) }> (q, k, v) })",
                 "node 'FlexAttention_0' (ai.onnx.preview.FlexAttention): prob_mod declares float64 input, but takes float32 "
                 "probabilities for float16 Q and K");
}

// score_mod, then mask_mod, then Softmax, then prob_mod. Q is zero, so every score is 0;
// score_mod adds 1, mask_mod keeps only (0, 0): row 0 puts all its mass on key 0, row 1 is
// masked entirely and gets no mass (zeros, as Softmax does here); prob_mod doubles.
TEST(SequenceAttention, FlexAttentionMaskModAndAFullyMaskedRow) {
  Env env;
  auto s = load_text_model(env, kPreview + std::string(R"(g (float[1,1,2,2] q, float[1,1,2,2] k, float[1,1,2,2] v) => (float[1,1,2,2] y) {
  y = ai.onnx.preview.FlexAttention <
      score_mod = sm (float[1,1,2,2] s) => (float[1,1,2,2] o) { one = Constant <value = float[1] {1.0}> () o = Add(s, one) },
      mask_mod = mm (float[1,1,2,2] s) => (float[1,1,2,2] o) {
        keep = Constant <value = bool[2,2] {1, 0, 0, 0}> ()
        zero = Constant <value = float[1] {0.0}> ()
        ninf = Log(zero)
        o = Where(keep, s, ninf) },
      prob_mod = pm (float[1,1,2,2] p) => (float[1,1,2,2] o) { two = Constant <value = float[1] {2.0}> () o = Mul(p, two) }>
    (q, k, v) })"));
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  Tensor zero = Tensor::from_vector<float>(DataType::kFloat32, {1, 1, 2, 2}, {0, 0, 0, 0});
  auto r = s->run({{"q", zero}, {"k", zero}, {"v", Tensor::from_vector<float>(DataType::kFloat32, {1, 1, 2, 2}, {1, 2, 3, 4})}});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const float* y = (*r)[0].second.data<float>();
  EXPECT_EQ(std::vector<float>(y, y + 4), (std::vector<float>{2, 4, 0, 0}));
}

TEST(SequenceAttention, FlexAttentionNamesASubgraphResultOfTheWrongShape) {
  Env env;
  auto s = load_text_model(env, kPreview + std::string(R"(g (float[1,1,2,2] q, float[1,1,2,2] k, float[1,1,2,2] v) => (float[1,1,2,2] y) {
  y = ai.onnx.preview.FlexAttention <score_mod = sm (float[1,1,2,2] s) => (float[2] o) { o = Constant <value = float[2] {1.0, 2.0}> () }>
    (q, k, v) })"));
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  Tensor x = Tensor::from_vector<float>(DataType::kFloat32, {1, 1, 2, 2}, {0, 0, 0, 0});
  auto r = s->run({{"q", x}, {"k", x}, {"v", x}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("score_mod must give a float tensor of the shape it takes, float32[1,1,2,2], got float32[2]"),
            std::string::npos) << r.status().to_string();
}

}  // namespace
}  // namespace bulkhead::test
