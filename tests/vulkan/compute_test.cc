// Vulkan compute kernels (MatMul, Gemm, Conv, ConvTranspose, pooling) against the CPU
// backend on the same models: random inputs, deterministic weights as initializers
// (uploaded once to the device), each node placed on vulkan:0, results within
// 1e-4 * max(1, max |ref|), and no validation-layer messages.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>

#include "vulkan/vulkan_support.h"

namespace bulkhead::test {
namespace {

std::string with_weights(const std::string& text, const std::vector<demo::Weight>& weights) {
  auto r = demo::model_with_weights(text, weights);
  if (!r.is_ok()) throw std::runtime_error(r.status().to_string());
  return *r;
}

// max |a - b| / max(1, max |b|).
double scaled_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  if (a.shape() != b.shape()) return 1e9;
  double worst = 0, scale = 1;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.data<float>()[i], y = b.data<float>()[i];
    worst = std::max(worst, std::abs(x - y));
    scale = std::max(scale, std::abs(y));
    if (std::isnan(x) != std::isnan(y)) return 1e9;
  }
  return worst / scale;
}

class VulkanCompute : public VulkanFixture {
 protected:

  // Runs `bytes` on the CPU and on Vulkan with `in`; expects `on_vulkan` nodes on
  // vulkan:0 and every output to match.
  void expect_matches_cpu(const std::string& bytes, const NamedTensors& in, int on_vulkan,
                          SessionOptions gpu_opts = vulkan_options()) {
    SessionOptions cpu_opts = cpu_options();
    cpu_opts.optimization_level = gpu_opts.optimization_level;
    auto cpu = env_.load_bytes(bytes, "model", cpu_opts);
    auto gpu = env_.load_bytes(bytes, "model", gpu_opts);
    ASSERT_TRUE(cpu.is_ok()) << cpu.status().to_string();
    ASSERT_TRUE(gpu.is_ok()) << gpu.status().to_string();
    std::map<std::string, int> where;
    for (const auto& [dev, n] : gpu->placement()) where[dev] = n;
    EXPECT_EQ(where["vulkan:0"], on_vulkan) << "nodes on vulkan:0";
    auto a = cpu->run(in);
    auto b = gpu->run(in);
    ASSERT_TRUE(a.is_ok()) << a.status().to_string();
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    ASSERT_EQ(a->size(), b->size());
    for (size_t i = 0; i < a->size(); ++i)
      EXPECT_LE(scaled_diff((*b)[i].second, (*a)[i].second), 1e-4) << "output " << (*a)[i].first;
  }

};

// ---------------------------------------------------------------------------------------
// MatMul and Gemm

std::string matmul_model(const std::string& a, const std::string& b, const std::string& y) {
  return model_text_bytes("<ir_version: 8, opset_import: [\"\" : 17]>\ng (float" + a + " a, float" + b +
                          " b) => (float" + y + " y) {\n  y = MatMul(a, b)\n}");
}

TEST_F(VulkanCompute, MatMul2DMatchesTheCpu) {
  expect_matches_cpu(matmul_model("[37,50]", "[50,70]", "[37,70]"),
                     {{"a", random_tensor({37, 50}, 1)}, {"b", random_tensor({50, 70}, 2)}}, 1);
  expect_matches_cpu(matmul_model("[1,3]", "[3,1]", "[1,1]"),
                     {{"a", random_tensor({1, 3}, 3)}, {"b", random_tensor({3, 1}, 4)}}, 1);
}

TEST_F(VulkanCompute, MatMulBroadcastsBatchDimensions) {
  expect_matches_cpu(matmul_model("[2,1,5,33]", "[3,33,17]", "[2,3,5,17]"),
                     {{"a", random_tensor({2, 1, 5, 33}, 5)}, {"b", random_tensor({3, 33, 17}, 6)}}, 1);
  expect_matches_cpu(matmul_model("[4,9,20]", "[20,6]", "[4,9,6]"),
                     {{"a", random_tensor({4, 9, 20}, 7)}, {"b", random_tensor({20, 6}, 8)}}, 1);
  expect_matches_cpu(matmul_model("[2,8,3,2,5,4]", "[2,1,3,1,4,7]", "[2,8,3,2,5,7]"),
                     {{"a", random_tensor({2, 8, 3, 2, 5, 4}, 9)}, {"b", random_tensor({2, 1, 3, 1, 4, 7}, 10)}}, 1);
}

TEST_F(VulkanCompute, MatMulWithVectorOperands) {
  expect_matches_cpu(matmul_model("[33]", "[4,33,9]", "[4,9]"),
                     {{"a", random_tensor({33}, 11)}, {"b", random_tensor({4, 33, 9}, 12)}}, 1);
  expect_matches_cpu(matmul_model("[3,7,12]", "[12]", "[3,7]"),
                     {{"a", random_tensor({3, 7, 12}, 13)}, {"b", random_tensor({12}, 14)}}, 1);
}

TEST_F(VulkanCompute, MatMulWithConstantWeightsMatchesTheCpu) {
  std::string bytes = with_weights(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[3,70,40] a) => (float[3,70,66] y) {
  y = MatMul(a, w)
})",
                                   {{"w", {40, 66}, 0.3f, 0.5f}});
  expect_matches_cpu(bytes, {{"a", random_tensor({3, 70, 40}, 15)}}, 1);
}

TEST_F(VulkanCompute, GemmTransposesScalesAndBroadcastsC) {
  struct Case {
    const char* attrs;
    const char* a;
    Shape as;
    const char* c;  // C's shape, or "" for no C
    Shape cs;
  };
  const Case cases[] = {
      {"", "[19,30]", {19, 30}, "[21]", {21}},
      {"transA = 1, alpha = 0.5", "[30,19]", {30, 19}, "[19,21]", {19, 21}},
      {"transB = 1, beta = 2.0", "[19,30]", {19, 30}, "[19,1]", {19, 1}},
      {"transA = 1, transB = 1, alpha = -1.5, beta = 0.25", "[30,19]", {30, 19}, "[1]", {1}},
      {"transB = 1", "[19,30]", {19, 30}, "", {}},
  };
  // A fully connected layer: constant weight and bias.
  expect_matches_cpu(with_weights(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[5,40] a) => (float[5,12] y) {
  y = Gemm <transB = 1> (a, w, c)
})",
                                  {{"w", {12, 40}, 0.3f, 0.2f}, {"c", {12}, 0.5f, 0.9f}}),
                     {{"a", random_tensor({5, 40}, 18)}}, 1);
  for (const Case& k : cases) {
    const bool tb = std::string(k.attrs).find("transB") != std::string::npos;
    const bool has_c = *k.c != '\0';
    std::string text = std::string("<ir_version: 8, opset_import: [\"\" : 17]>\ng (float") + k.a + " a" +
                       (has_c ? std::string(", float") + k.c + " c" : "") + ") => (float[19,21] y) {\n  y = Gemm <" +
                       k.attrs + (*k.attrs ? "" : "alpha = 1.0") + "> (a, w" + (has_c ? ", c" : "") + ")\n}";
    std::vector<int64_t> wdims = tb ? std::vector<int64_t>{21, 30} : std::vector<int64_t>{30, 21};
    NamedTensors in = {{"a", random_tensor(k.as, 16)}};
    if (has_c) in.push_back({"c", random_tensor(k.cs, 17)});
    SCOPED_TRACE(k.attrs);
    expect_matches_cpu(with_weights(text, {{"w", wdims, 0.4f, 0.1f}}), in, 1);
  }
}

// ---------------------------------------------------------------------------------------
// Conv and ConvTranspose

// A one-node model `y = op <attrs> (x, w[, b])` with weights W (and B when `bias`).
std::string conv_model(const char* op, const std::string& attrs, const Shape& x, const std::vector<int64_t>& w,
                       bool bias, int64_t bias_size) {
  std::string xs = shape_to_string(x);
  std::string text = std::string("<ir_version: 8, opset_import: [\"\" : 17]>\ng (float") + xs + " x) => (float y) {\n  y = " +
                     op + (attrs.empty() ? "" : " <" + attrs + ">") + " (x, w" + (bias ? ", b" : "") + ")\n}";
  std::vector<demo::Weight> ws = {{"w", w, 0.3f, 0.7f}};
  if (bias) ws.push_back({"b", {bias_size}, 0.5f, 1.9f});
  return with_weights(text, ws);
}

struct ConvCase {
  const char* attrs;
  Shape x;
  std::vector<int64_t> w;
  bool bias;
};

TEST_F(VulkanCompute, ConvMatchesTheCpu) {
  const ConvCase cases[] = {
      {"pads = [1, 1, 1, 1]", {2, 8, 11, 13}, {16, 8, 3, 3}, true},                               // implicit GEMM
      {"strides = [2, 1], dilations = [2, 1], pads = [1, 0, 2, 1]", {1, 6, 12, 9}, {20, 6, 3, 2}, false},
      {"group = 2, strides = [1, 2]", {1, 8, 9, 9}, {12, 4, 3, 3}, true},                          // direct
      {"group = 2, pads = [0, 1, 2, 1]", {2, 8, 7, 10}, {32, 4, 3, 3}, true},                      // grouped GEMM
      {"group = 6, pads = [1, 1, 1, 1]", {2, 6, 10, 10}, {6, 1, 3, 3}, true},                      // depthwise
      {"group = 6, strides = [2, 2], dilations = [2, 2]", {1, 6, 13, 12}, {12, 1, 3, 3}, false},  // depthwise x2
      {"", {1, 70, 5, 6}, {66, 70, 1, 1}, true},                                                   // pointwise
  };
  for (const ConvCase& k : cases) {
    SCOPED_TRACE(std::string(k.attrs) + " x " + shape_to_string(k.x));
    expect_matches_cpu(conv_model("Conv", k.attrs, k.x, k.w, k.bias, k.w[0]), {{"x", random_tensor(k.x, 21)}}, 1);
  }
}

TEST_F(VulkanCompute, ConvAutoPadMatchesTheCpu) {
  for (const char* pad : {"SAME_UPPER", "SAME_LOWER", "VALID"}) {
    for (const char* strides : {"[1, 1]", "[2, 3]"}) {
      std::string attrs = std::string("auto_pad = \"") + pad + "\", strides = " + strides;
      SCOPED_TRACE(attrs);
      expect_matches_cpu(conv_model("Conv", attrs, {1, 3, 10, 11}, {16, 3, 4, 3}, true, 16),
                         {{"x", random_tensor({1, 3, 10, 11}, 22)}}, 1);
      expect_matches_cpu(conv_model("Conv", attrs, {1, 3, 10, 11}, {4, 3, 4, 3}, false, 4),
                         {{"x", random_tensor({1, 3, 10, 11}, 23)}}, 1);
    }
  }
}

TEST_F(VulkanCompute, Conv1DRunsAsOneRow) {
  expect_matches_cpu(conv_model("Conv", "pads = [2, 1], strides = [2]", {2, 4, 20}, {8, 4, 5}, true, 8),
                     {{"x", random_tensor({2, 4, 20}, 24)}}, 1);
  expect_matches_cpu(conv_model("Conv", "dilations = [3]", {1, 16, 30}, {32, 16, 3}, false, 32),
                     {{"x", random_tensor({1, 16, 30}, 25)}}, 1);
}

// Weights that are graph inputs (not constants): the spatial rank comes from kernel_shape.
TEST_F(VulkanCompute, ConvWithRuntimeWeightsMatchesTheCpu) {
  std::string bytes = model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2,5,9,8] x, float[18,5,3,3] w, float[18] b) => (float[2,18,5,4] y) {
  y = Conv <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 0, 1, 0]> (x, w, b)
})");
  expect_matches_cpu(bytes,
                     {{"x", random_tensor({2, 5, 9, 8}, 35)}, {"w", random_tensor({18, 5, 3, 3}, 36)},
                      {"b", random_tensor({18}, 37)}},
                     1);
}

// Element-wise chains the graph optimiser fuses into the Conv: one node on Vulkan.
TEST_F(VulkanCompute, ConvAppliesFusedPostOps) {
  std::string variance = "  v = Constant <value = float[16] {";
  for (int i = 0; i < 16; ++i) variance += (i ? ", " : "") + std::to_string(0.5 + 0.1 * i);
  variance += "}> ()\n";
  const std::string chains[] = {
      // an activation after a BatchNormalization folded into the weights
      variance + "  c = Conv <pads = [1, 1, 1, 1]> (x, w, b)\n  n = BatchNormalization (c, s, t, mu, v)\n"
                 "  y = Relu(n)\n",
      // linear, clip, a residual of the same shape, then sigmoid
      "  c = Conv <pads = [1, 1, 1, 1]> (x, w, b)\n  k = Constant <value = float {0.5}> ()\n  m = Mul(c, k)\n"
      "  e = Clip <min = -0.3, max = 0.8> (m)\n  f = Add(e, r)\n  y = Sigmoid(f)\n",
      // leaky relu, hard swish, hard sigmoid on the direct (depthwise) path
      "  c = Conv <group = 16, pads = [1, 1, 1, 1]> (x, dw, b)\n  l = LeakyRelu <alpha = 0.2> (c)\n"
      "  h = HardSwish(l)\n  y = HardSigmoid <alpha = 0.3, beta = 0.4> (h)\n",
  };
  for (const std::string& chain : chains) {
    SCOPED_TRACE(chain);
    std::string text = "<ir_version: 8, opset_import: [\"\" : 17]>\n"
                       "g (float[2,16,8,9] x, float[2,16,8,9] r) => (float[2,16,8,9] y) {\n" + chain + "}";
    std::string bytes = with_weights(text, {{"w", {16, 16, 3, 3}, 0.2f, 0.3f},
                                            {"dw", {16, 1, 3, 3}, 0.4f, 0.1f},
                                            {"b", {16}, 0.5f, 1.0f},
                                            {"s", {16}, 0.5f, 2.0f},
                                            {"t", {16}, 0.5f, 3.0f},
                                            {"mu", {16}, 0.5f, 4.0f}});
    expect_matches_cpu(bytes, {{"x", random_tensor({2, 16, 8, 9}, 26)}, {"r", random_tensor({2, 16, 8, 9}, 27)}}, 1);
  }
}

TEST_F(VulkanCompute, ConvAddsABroadcastResidual) {
  std::string text = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,16,7,7] x, float[2,16,1,7] r) => (float[2,16,7,7] y) {
  c = Conv <pads = [1, 1, 1, 1]> (x, w, b)
  e = Relu(c)
  f = Add(e, r)
  y = Clip <min = -0.5, max = 0.5> (f)
})";
  std::string bytes = with_weights(text, {{"w", {16, 16, 3, 3}, 0.2f, 0.3f}, {"b", {16}, 0.5f, 1.0f}});
  expect_matches_cpu(bytes, {{"x", random_tensor({1, 16, 7, 7}, 28)}, {"r", random_tensor({2, 16, 1, 7}, 29)}}, 1);
}

TEST_F(VulkanCompute, ConvWithTooManyPostOpsFallsBackToTheCpu) {
  std::string chain;
  std::string cur = "c";
  for (int i = 0; i < 7; ++i) {
    std::string next = "p" + std::to_string(i);
    chain += "  " + next + (i % 2 ? " = Relu(" : " = LeakyRelu <alpha = 0.5> (") + cur + ")\n";
    cur = next;
  }
  std::string text = "<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[1,4,6,6] x) => (float[1,8,4,4] " + cur +
                     ") {\n  c = Conv (x, w)\n" + chain + "}";
  expect_matches_cpu(with_weights(text, {{"w", {8, 4, 3, 3}, 0.3f, 0.2f}}), {{"x", random_tensor({1, 4, 6, 6}, 30)}}, 0);
}

TEST_F(VulkanCompute, ConvTransposeMatchesTheCpu) {
  const ConvCase cases[] = {
      {"strides = [2, 2], pads = [1, 0, 1, 2], output_padding = [1, 0]", {1, 4, 5, 6}, {4, 6, 3, 3}, true},
      {"group = 2, dilations = [2, 2], strides = [1, 2]", {2, 4, 4, 5}, {4, 3, 3, 2}, false},
      {"strides = [2, 2], output_shape = [9, 8]", {1, 2, 4, 4}, {2, 3, 3, 3}, true},
      {"strides = [2, 2], auto_pad = \"SAME_UPPER\"", {1, 3, 4, 5}, {3, 2, 3, 3}, false},
      {"strides = [3], pads = [1, 2]", {2, 3, 7}, {3, 5, 4}, true},
  };
  for (const ConvCase& k : cases) {
    SCOPED_TRACE(std::string(k.attrs) + " x " + shape_to_string(k.x));
    int64_t group = std::string(k.attrs).find("group = 2") != std::string::npos ? 2 : 1;
    expect_matches_cpu(conv_model("ConvTranspose", k.attrs, k.x, k.w, k.bias, k.w[1] * group),
                       {{"x", random_tensor(k.x, 31)}}, 1);
  }
}

// ---------------------------------------------------------------------------------------
// Pooling

std::string pool_model(const std::string& op, const std::string& attrs, const Shape& x) {
  return model_text_bytes(std::string("<ir_version: 8, opset_import: [\"\" : 19]>\ng (float") + shape_to_string(x) +
                          " x) => (float y) {\n  y = " + op + (attrs.empty() ? "" : " <" + attrs + ">") + " (x)\n}");
}

TEST_F(VulkanCompute, PoolsMatchTheCpu) {
  struct Case {
    const char* op;
    const char* attrs;
    Shape x;
  };
  const Case cases[] = {
      {"MaxPool", "kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], ceil_mode = 1", {2, 3, 10, 11}},
      {"MaxPool", "kernel_shape = [2, 3], dilations = [2, 2], strides = [1, 2]", {1, 4, 9, 12}},
      {"MaxPool", "kernel_shape = [3, 3], strides = [2, 2], auto_pad = \"SAME_LOWER\"", {1, 2, 8, 7}},
      {"MaxPool", "kernel_shape = [4], strides = [3], pads = [1, 2]", {2, 3, 15}},
      {"AveragePool", "kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]", {2, 3, 10, 11}},
      {"AveragePool", "kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], count_include_pad = 1",
       {2, 3, 10, 11}},
      {"AveragePool", "kernel_shape = [3, 2], strides = [2, 2], pads = [0, 1, 1, 0], ceil_mode = 1, count_include_pad = 1",
       {1, 3, 9, 8}},
      {"AveragePool", "kernel_shape = [2, 2], strides = [2, 2], auto_pad = \"SAME_UPPER\"", {1, 2, 7, 9}},
      {"GlobalMaxPool", "", {2, 5, 7, 9}},
      {"GlobalAveragePool", "", {2, 5, 7, 9}},
      {"GlobalAveragePool", "", {1, 3, 1000}},
      {"GlobalMaxPool", "", {1, 3, 600}},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(std::string(k.op) + " " + k.attrs + " x " + shape_to_string(k.x));
    expect_matches_cpu(pool_model(k.op, k.attrs, k.x), {{"x", random_tensor(k.x, 32)}}, 1);
  }
}

TEST_F(VulkanCompute, MaxPoolWithIndicesFallsBackToTheCpu) {
  std::string bytes = model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,2,6,6] x) => (float[1,2,3,3] y, int64[1,2,3,3] i) {
  y, i = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (x)
})");
  auto cpu = env_.load_bytes(bytes, "model", cpu_options());
  auto gpu = env_.load_bytes(bytes, "model", vulkan_options());
  ASSERT_TRUE(cpu.is_ok() && gpu.is_ok()) << gpu.status().to_string();
  std::map<std::string, int> where;
  for (const auto& [dev, n] : gpu->placement()) where[dev] = n;
  EXPECT_EQ(where["vulkan:0"], 0) << "Indices have no Vulkan kernel";
  NamedTensors in = {{"x", random_tensor({1, 2, 6, 6}, 33)}};
  auto a = cpu->run(in);
  auto b = gpu->run(in);
  ASSERT_TRUE(a.is_ok() && b.is_ok()) << b.status().to_string();
  EXPECT_TRUE(bitwise_equal((*a)[0].second, (*b)[0].second));
  EXPECT_TRUE(bitwise_equal((*a)[1].second, (*b)[1].second));
}

// ---------------------------------------------------------------------------------------
// Timing, reported only: a 1x32x64x64 3x3 convolution on Vulkan and on the CPU.

TEST_F(VulkanCompute, Conv3x3TimingIsReported) {
  std::string bytes = conv_model("Conv", "pads = [1, 1, 1, 1]", {1, 32, 64, 64}, {32, 32, 3, 3}, true, 32);
  auto cpu = env_.load_bytes(bytes, "model", cpu_options());
  auto gpu = env_.load_bytes(bytes, "model", vulkan_options());
  ASSERT_TRUE(cpu.is_ok() && gpu.is_ok()) << gpu.status().to_string();
  NamedTensors in = {{"x", random_tensor({1, 32, 64, 64}, 34)}};
  auto time_ms = [&](const Session& s) {
    EXPECT_TRUE(s.run(in).is_ok());  // warm-up
    const int reps = 5;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) EXPECT_TRUE(s.run(in).is_ok());
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
  };
  // The fixed cost of a Vulkan run on this input (upload, submit, download): one Relu.
  auto relu = env_.load_bytes(pool_model("Relu", "", {1, 32, 64, 64}), "relu", vulkan_options());
  ASSERT_TRUE(relu.is_ok()) << relu.status().to_string();
  const double v = time_ms(*gpu), c = time_ms(*cpu), r = time_ms(*relu);
  RecordProperty("vulkan_ms", std::to_string(v));
  RecordProperty("cpu_ms", std::to_string(c));
  std::printf("1x32x64x64 3x3 conv: vulkan %.2f ms (a Relu run on the same input: %.2f ms), cpu %.2f ms (1 thread)\n",
              v, r, c);
}

}  // namespace
}  // namespace bulkhead::test
