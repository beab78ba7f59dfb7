// Constant folding at compile time must not change answers, and must not fold an
// initializer the caller is allowed to override (IR >= 4 graph inputs with defaults).
#include "support/test_util.h"

namespace bulkhead::test {
namespace {

TEST(Folding, OverridableDefaultsAreNotFolded) {
  Env env;
  auto s = env.load_bytes(model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x, float[2] w) => (float[2] y)
<float[2] w = {1.0, 2.0}>
{ w2 = Mul(w, w) y = Add(x, w2) })"), "defaults.onnx");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  ASSERT_EQ(s->inputs().size(), 1u);  // w has a default
  Tensor x = Tensor::from_vector<float>(DataType::kFloat32, {2}, {0, 0});
  auto with_default = s->run({{"x", x}});
  ASSERT_TRUE(with_default.is_ok()) << with_default.status().to_string();
  EXPECT_EQ((*with_default)[0].second.data<float>()[1], 4.f);
  auto overridden = s->run({{"x", x}, {"w", Tensor::from_vector<float>(DataType::kFloat32, {2}, {3, 5})}});
  ASSERT_TRUE(overridden.is_ok()) << overridden.status().to_string();
  EXPECT_EQ((*overridden)[0].second.data<float>()[1], 25.f);
}

TEST(Folding, ConstantChainsGiveTheSameAnswer) {
  Env env;
  // Shape arithmetic on constants, as exporters write it; folded at compile time.
  auto s = env.load_bytes(model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] x) => (float[3,2] y) {
  c = Constant <value = int64[2] {3, 2}> ()
  one = Constant <value = int64[1] {1}> ()
  z = ConstantOfShape <value = float[1] {0.5}> (c)
  r = Reshape(x, c)
  y = Add(r, z)
})"), "chain.onnx");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  Tensor x = Tensor::from_vector<float>(DataType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto r = s->run({{"x", x}});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].second.shape(), (Shape{3, 2}));
  EXPECT_EQ((*r)[0].second.data<float>()[5], 6.5f);
  // Only Reshape and Add are left to run; ConstantOfShape was folded.
  EXPECT_EQ(s->placement()[0].second, 2);
}

TEST(Folding, Ir3InitializerInputsAreConstants) {
  Env env;
  auto s = env.load_bytes(model_text_bytes(R"(<ir_version: 3, opset_import: ["" : 9]>
g (float[2] x, float[2] w) => (float[2] y)
<float[2] w = {1.0, 2.0}>
{ y = Add(x, w) })"), "ir3.onnx");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  Tensor x = Tensor::from_vector<float>(DataType::kFloat32, {2}, {1, 1});
  auto r = s->run({{"x", x}, {"w", x}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("unknown input 'w'"), std::string::npos) << r.status().message();
  auto ok = s->run({{"x", x}});
  ASSERT_TRUE(ok.is_ok());
  EXPECT_EQ((*ok)[0].second.data<float>()[1], 3.f);
}

}  // namespace
}  // namespace bulkhead::test
