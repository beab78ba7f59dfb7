// The Vulkan layout kernels against the CPU, with the Khronos validation layer
// on: views (Reshape, Flatten, Squeeze, Unsqueeze, Identity), Transpose,
// Concat, Slice, Pad, Gather and Resize. Data movement must match bitwise
// (float32 and int64), Resize linear within 1e-5; every node must be placed on
// vulkan:0, and shape inputs that are not constants must send the node to the
// CPU.
#include <cmath>
#include <map>

#include "vulkan/vulkan_support.h"

namespace bulkhead::test {
namespace {

Tensor random_int64(const Shape& s, uint32_t seed) {
  Tensor t = Tensor::host(DataType::kInt64, s);
  std::mt19937 rng(seed);
  // Values whose high words are not plain sign extensions, so both words must
  // move.
  for (int64_t i = 0; i < t.numel(); ++i) t.data<int64_t>()[i] = static_cast<int64_t>(rng()) * 7919 - (1LL << 40);
  return t;
}

// Random bytes as a tensor of any fixed-size type (bool as 0/1).
Tensor random_bytes(DataType t, const Shape& s, uint32_t seed) {
  Tensor x = Tensor::host(t, s);
  std::mt19937 rng(seed);
  auto* p = static_cast<uint8_t*>(x.raw());
  for (size_t i = 0; i < x.nbytes(); ++i) p[i] = static_cast<uint8_t>(t == DataType::kBool ? rng() & 1 : rng() & 0x3f);
  return x;
}

std::string header(int opset) { return "<ir_version: 8, opset_import: [\"\" : " + std::to_string(opset) + "]>\n"; }

class VulkanLayout : public VulkanFixture {
 protected:

  // Runs `model` on the CPU and on Vulkan; expects `on_vulkan` nodes placed on vulkan:0
  // and every output bitwise equal, except the float32 outputs named in `tolerance`,
  // which must agree within theirs.
  void expect_same(const std::string& model, const NamedTensors& in, int on_vulkan,
                   const std::map<std::string, double>& tolerance = {}) {
    std::string bytes = model_text_bytes(model);
    auto cpu = env_.load_bytes(bytes, "cpu", cpu_options());
    auto gpu = env_.load_bytes(bytes, "gpu", vulkan_options());
    ASSERT_TRUE(cpu.is_ok()) << cpu.status().to_string();
    ASSERT_TRUE(gpu.is_ok()) << gpu.status().to_string();
    auto placement = gpu->placement();
    std::map<std::string, int> where(placement.begin(), placement.end());
    EXPECT_EQ(where["vulkan:0"], on_vulkan) << model;
    auto a = cpu->run(in);
    auto b = gpu->run(in);
    ASSERT_TRUE(a.is_ok()) << a.status().to_string();
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    ASSERT_EQ(a->size(), b->size());
    for (size_t i = 0; i < a->size(); ++i) {
      const Tensor& want = (*a)[i].second;
      const Tensor& got = (*b)[i].second;
      ASSERT_EQ(got.shape(), want.shape()) << (*a)[i].first;
      if (auto t = tolerance.find((*a)[i].first); t != tolerance.end())
        EXPECT_LT(max_rel_diff(got, want), t->second) << (*a)[i].first << "\n" << model;
      else
        EXPECT_TRUE(bitwise_equal(got, want)) << (*a)[i].first << "\n" << model;
    }
  }
};

TEST_F(VulkanLayout, ViewsMatchTheCpu) {
  const std::string model = header(17) +
                            R"(g (float[2,3,1,4] x) => (float[6,4] r, float[4,6] z, float[1,24] f, float[2,3,4] s,
                            float[2,3,4] t, float[1,2,3,1,4,1] u, float[2,3,1,4] i)
  <int64[2] shape = {6, -1}, int64[2] shape_z = {4, 6}, int64[1] sq = {-2}, int64[2] un = {0, -1}> {
  r = Reshape(x, shape)
  z = Reshape <allowzero = 1> (x, shape_z)
  f = Flatten <axis = 0> (x)
  s = Squeeze(x, sq)
  t = Squeeze(x)
  u = Unsqueeze(x, un)
  i = Identity(x)
})";
  expect_same(model, {{"x", random_tensor({2, 3, 1, 4}, 1)}}, 7);
}

TEST_F(VulkanLayout, ReshapeCopiesDimensionsAndFlattensAtNegativeAxes) {
  const std::string model = header(17) +
                            R"(g (float[2,3,4] x) => (float[2,3,4] r, float[6,4] f, float[2,12] v)
  <int64[3] shape = {0, -1, 4}> {
  a = Relu(x)
  r = Reshape(a, shape)
  f = Flatten <axis = -1> (a)
  v = Reshape(a, shape2)
  shape2 = Constant <value = int64[2] {0, -1}> ()
})";
  expect_same(model, {{"x", random_tensor({2, 3, 4}, 2)}}, 4);
}

TEST_F(VulkanLayout, LegacyAttributeViewsRunOnVulkan) {
  const std::string model = header(11) + R"(g (float[3,1,5] x) => (float[3,5] s, float[3,1,1,5] u) {
  s = Squeeze <axes = [-2]> (x)
  u = Unsqueeze <axes = [2]> (x)
})";
  expect_same(model, {{"x", random_tensor({3, 1, 5}, 3)}}, 2);
}

TEST_F(VulkanLayout, Int64ViewsAndCopiesMoveBothWords) {
  const std::string model = header(17) +
                            R"(g (int64[2,3,4] x, int64[2,2,4] y) => (int64[4,3,2] t, int64[2,5,4] c,
                                                   int64[2,2,4] s, int64[24] r, int64[2,3,7] p)
  <int64[2] starts = {-1, 0}, int64[2] ends = {-4, 4}, int64[2] axes = {1, 2}, int64[2] steps = {-2, 1},
   int64[1] flat = {-1}, int64[6] pads = {0, 0, 2, 0, 0, 1}, int64 v = {-5}> {
  t = Transpose(x)
  c = Concat <axis = 1> (x, y)
  s = Slice(x, starts, ends, axes, steps)
  r = Reshape(x, flat)
  p = Pad(x, pads, v)
})";
  expect_same(model, {{"x", random_int64({2, 3, 4}, 4)}, {"y", random_int64({2, 2, 4}, 5)}}, 5);
}

TEST_F(VulkanLayout, Float64AndUnsignedCopiesAreBitwise) {
  const std::string model = header(17) + R"(g (double[3,4,5] x, uint32[3,4] u, uint64[4,3] w, int64[2] i) =>
      (double[5,4,3] t, double[3,6,5] p, double[3,2,5] g, double[3,4,2] s, uint32[4,3] ut, uint64[4,6] wc)
  <int64[6] pads = {0, 1, 0, 0, 1, 0}, double v = {-0.125}, int64[1] s0 = {-1}, int64[1] e0 = {-4},
   int64[1] a0 = {-1}, int64[1] p0 = {-2}> {
  t = Transpose(x)
  p = Pad(x, pads, v)
  g = Gather <axis = 1> (x, i)
  s = Slice(x, s0, e0, a0, p0)
  ut = Transpose(u)
  wc = Concat <axis = -1> (w, w)
})";
  expect_same(model,
              {{"x", random_bytes(DataType::kFloat64, {3, 4, 5}, 22)},
               {"u", random_bytes(DataType::kUInt32, {3, 4}, 23)},
               {"w", random_bytes(DataType::kUInt64, {4, 3}, 24)},
               {"i", Tensor::from_vector<int64_t>(DataType::kInt64, {2}, {-1, 1})}},
              6);
}

TEST_F(VulkanLayout, ViewsPassEveryFixedSizeType) {
  const std::string model = header(17) + R"(g (bool[2,3] b, uint8[3,1] u, float16[1,5] h, int8[4] c) =>
      (bool[6] rb, uint8[3] su, float16[1,1,5] uh, int8[4,1] fc, bool[2,3] ib)
  <int64[1] flat = {-1}, int64[1] ax = {1}> {
  rb = Reshape(b, flat)
  su = Squeeze(u, ax)
  uh = Unsqueeze(h, ax)
  fc = Flatten(c)
  ib = Identity(b)
})";
  expect_same(model,
              {{"b", random_bytes(DataType::kBool, {2, 3}, 25)},
               {"u", random_bytes(DataType::kUInt8, {3, 1}, 26)},
               {"h", random_bytes(DataType::kFloat16, {1, 5}, 27)},
               {"c", random_bytes(DataType::kInt8, {4}, 28)}},
              5);
}

TEST_F(VulkanLayout, EmptyTensorsKeepTheirZerosAndPadFromNothing) {
  const std::string model = header(17) + R"(g (float[0,3] x) => (float[3,0] r, float[3,0] t, float[0,1] s, float[2,3] p)
  <int64[2] shape = {3, 0}, int64[1] s0 = {1}, int64[1] e0 = {2}, int64[1] a0 = {1}, int64[4] pads = {1, 0, 1, 0},
   float v = {2.5}> {
  r = Reshape <allowzero = 1> (x, shape)
  t = Transpose(x)
  s = Slice(x, s0, e0, a0)
  p = Pad(x, pads, v)
})";
  expect_same(model, {{"x", Tensor::host(DataType::kFloat32, {0, 3})}}, 4);
}

TEST_F(VulkanLayout, ShapeInputsThatAreNotConstantFallBackToTheCpu) {
  const std::string model = header(17) +
                            R"(g (float[2,6] x, int64[2] shape, int64[1] axes) => (float[3,4] r, float[1,2,6] u) {
  r = Reshape(x, shape)
  u = Unsqueeze(x, axes)
})";
  expect_same(model,
              {{"x", random_tensor({2, 6}, 6)},
               {"shape", Tensor::from_vector<int64_t>(DataType::kInt64, {2}, {3, 4})},
               {"axes", Tensor::from_vector<int64_t>(DataType::kInt64, {1}, {0})}},
              0);
}

TEST_F(VulkanLayout, TransposeAnyPermutationUpToRankSix) {
  const std::string model = header(17) + R"(g (float[2,3,4,5] x, float[2,3,2,3,2,2] z, float[7] v) =>
      (float[5,4,3,2] d, float[2,4,5,3] a, float[3,2,2,2,3,2] b, float[2,3,2,2,2,3] m, float[7] w) {
  d = Transpose(x)
  a = Transpose <perm = [0, 2, -1, 1]> (x)
  b = Transpose <perm = [1, 0, 5, 2, 3, 4]> (z)
  m = Transpose <perm = [0, 1, 4, 5, 2, 3]> (z)
  w = Transpose(v)
})";
  expect_same(model,
              {{"x", random_tensor({2, 3, 4, 5}, 7)},
               {"z", random_tensor({2, 3, 2, 3, 2, 2}, 8)},
               {"v", random_tensor({7}, 9)}},
              5);
}

// Above rank 6: axes of size 1 merge away (the default-perm Transpose runs on Vulkan);
// an explicit rank-7 perm and rank-7 pads go to the CPU.
TEST_F(VulkanLayout, RankSevenMergesOrFallsBackToTheCpu) {
  const std::string model = header(17) + R"(g (float[1,2,1,2,1,2,3] x) =>
      (float[3,2,1,2,1,2,1] t, float[3,2,1,2,1,2,1] e, float[1,2,1,2,1,2,5] p)
  <int64[14] pads = {0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1}> {
  t = Transpose(x)
  e = Transpose <perm = [6, 5, 4, 3, 2, 1, 0]> (x)
  p = Pad(x, pads)
})";
  expect_same(model, {{"x", random_tensor({1, 2, 1, 2, 1, 2, 3}, 24)}}, 1);
}

TEST_F(VulkanLayout, ConcatAlongAnyAxis) {
  const std::string model = header(17) +
                            R"(g (float[2,3,4] a, float[2,1,4] b, float[2,5,4] c, float[2,3,2] d) =>
      (float[2,9,4] m, float[2,3,6] l, float[4,3,4] f, float[2,3,4] one) {
  m = Concat <axis = 1> (a, b, c)
  l = Concat <axis = -1> (a, d)
  f = Concat <axis = 0> (a, a)
  one = Concat <axis = 2> (a)
})";
  expect_same(model,
              {{"a", random_tensor({2, 3, 4}, 10)},
               {"b", random_tensor({2, 1, 4}, 11)},
               {"c", random_tensor({2, 5, 4}, 12)},
               {"d", random_tensor({2, 3, 2}, 13)}},
              4);
}

TEST_F(VulkanLayout, SliceWithNegativeStepsAxesAndClamping) {
  const std::string model = header(17) +
                            R"(g (float[6,7,8] x) => (float[3,7,8] a, float[6,4,2] b, float[5,7,4] c,
                                               float[6,7,8] d, float[0,7,8] e, float[2,7,4] f)
  <int64[1] s1 = {1}, int64[1] e1 = {4},
   int64[2] s2 = {-1, 100}, int64[2] e2 = {-8, 5}, int64[2] a2 = {1, -1}, int64[2] p2 = {-2, -1},
   int64[2] s3 = {-1000, 1}, int64[2] e3 = {5, 1000}, int64[2] a3 = {0, 2}, int64[2] p3 = {1, 2},
   int64[1] s4 = {0}, int64[1] e4 = {9223372036854775807},
   int64[1] s5 = {4}, int64[1] e5 = {2},
   int64[2] s6 = {5, -2}, int64[2] e6 = {1, -100}, int64[2] a6 = {0, -1}, int64[2] p6 = {-3, -2}> {
  a = Slice(x, s1, e1)
  b = Slice(x, s2, e2, a2, p2)
  c = Slice(x, s3, e3, a3, p3)
  d = Slice(x, s4, e4)
  e = Slice(x, s5, e5)
  f = Slice(x, s6, e6, a6, p6)
})";
  expect_same(model, {{"x", random_tensor({6, 7, 8}, 14)}}, 6);
}

TEST_F(VulkanLayout, PadConstantReflectEdgeWrapAndNegativePads) {
  const std::string model = header(19) +
                            R"(g (float[2,3,4,5] x) => (float[2,3,7,8] c, float[2,3,8,7] r, float[2,5,6,5] e,
                                                  float[2,3,6,9] w, float[2,2,5,4] n, float[2,3,4,7] a)
  <int64[8] pc = {0, 0, 1, 2, 0, 0, 2, 1}, float v = {1.5},
   int64[8] pr = {0, 0, 2, 1, 0, 0, 2, 1},
   int64[8] pe = {0, 1, 1, 0, 0, 1, 1, 0},
   int64[8] pw = {0, 0, 1, 4, 0, 0, 1, 0},
   int64[8] pn = {0, -1, 2, -1, 0, 0, -1, 0},
   int64[1] aa = {-1}, int64[2] pa2 = {1, 1}> {
  c = Pad(x, pc, v)
  r = Pad <mode = "reflect"> (x, pr)
  e = Pad <mode = "edge"> (x, pe)
  w = Pad <mode = "wrap"> (x, pw)
  n = Pad(x, pn)
  a = Pad(x, pa2, , aa)
})";
  expect_same(model, {{"x", random_tensor({2, 3, 4, 5}, 15)}}, 6);
}

TEST_F(VulkanLayout, LegacyPadAttributes) {
  const std::string model = header(9) + R"(g (float[3,4] x) => (float[5,9] c, float[5,8] r) {
  c = Pad <pads = [1, 2, 1, 3], value = -2.5> (x)
  r = Pad <pads = [1, 2, 1, 2], mode = "reflect"> (x)
})";
  expect_same(model, {{"x", random_tensor({3, 4}, 16)}}, 2);
}

TEST_F(VulkanLayout, GatherRunTimeIndicesNegativeAndBothWidths) {
  const std::string model = header(17) +
                            R"(g (float[5,4,3] x, int64[2,3] i, int32[4] j, int64[5,2] y) =>
      (float[2,3,4,3] a, float[5,4,4] b, float[5,3] s, int64[2,3,2] l) {
  a = Gather(x, i)
  b = Gather <axis = -1> (x, j)
  s = Gather <axis = 1> (x, k)
  k = Constant <value = int64 {-1}> ()
  l = Gather(y, i)
})";
  // b gathers along the last axis (3): indices of j stay in [-3, 3).
  expect_same(model,
              {{"x", random_tensor({5, 4, 3}, 17)},
               {"i", Tensor::from_vector<int64_t>(DataType::kInt64, {2, 3}, {0, -1, 4, -5, 2, 3})},
               {"j", Tensor::from_vector<int32_t>(DataType::kInt32, {4}, {-3, 2, 0, -1})},
               {"y", random_int64({5, 2}, 18)}},
              4);
}

// Tensors over thousands of workgroups, flowing between Vulkan nodes without leaving the
// device.
TEST_F(VulkanLayout, LargeTensorsChainedOnTheDevice) {
  const std::string model =
      header(17) + R"(g (float[2,16,96,96] x, int64[40] i) => (float[2,96,96,32] t, float[2,16,48,96] s,
                                                         float[2,16,40,96] g, float[2,16,192,192] r, float[2,16,98,98] p)
  <int64[1] s0 = {95}, int64[1] e0 = {-1000}, int64[1] a0 = {2}, int64[1] p0 = {-2}, float[4] sc = {1, 1, 2, 2},
   int64[8] pads = {0, 0, 1, 1, 0, 0, 1, 1}> {
  a = Relu(x)
  c = Concat <axis = 1> (a, x)
  t = Transpose <perm = [0, 2, 3, 1]> (c)
  s = Slice(a, s0, e0, a0, p0)
  g = Gather <axis = 2> (a, i)
  r = Resize <mode = "linear"> (a, , sc)
  p = Pad <mode = "reflect"> (a, pads)
})";
  std::vector<int64_t> idx(40);
  for (int k = 0; k < 40; ++k) idx[k] = (k * 37) % 96 - 48;
  expect_same(
      model,
      {{"x", random_tensor({2, 16, 96, 96}, 21)}, {"i", Tensor::from_vector<int64_t>(DataType::kInt64, {40}, idx)}}, 7,
      {{"r", 1e-5}});
}

// Resize: every supported mode, coordinate transformation and rounding, from
// scales and from sizes, upsampling and downsampling by awkward factors.
TEST_F(VulkanLayout, ResizeMatchesTheCpu) {
  const char* coords[] = {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"};
  const char* roundings[] = {"round_prefer_floor", "floor", "ceil", "round_prefer_ceil"};
  const char* targets[] = {"float[4] s = {1, 1, 2, 0.6}", "float[4] s = {1, 1, 0.5, 1.7}", "int64[4] z = {2, 3, 11, 4}",
                           "int64[4] z = {2, 3, 3, 1}"};
  for (const char* target : targets) {
    const bool sizes = std::string(target).find("int64") == 0;
    const std::string call = sizes ? "(x, , , z)" : "(x, , s)";
    for (const char* coord : coords) {
      for (const char* rounding : roundings) {
        const std::string model = header(19) + "g (float[2,3,5,7] x) => (n, l) <" + target + "> {\n" +
                                  "  n = Resize <mode = \"nearest\", coordinate_transformation_mode "
                                  "= \"" +
                                  coord + "\", nearest_mode = \"" + rounding + "\"> " + call + "\n" +
                                  "  l = Resize <mode = \"linear\", coordinate_transformation_mode = "
                                  "\"" +
                                  coord + "\"> " + call + "\n}";
        SCOPED_TRACE(model);
        std::string bytes = model_text_bytes(model);
        auto cpu = env_.load_bytes(bytes, "cpu", cpu_options());
        auto gpu = env_.load_bytes(bytes, "gpu", vulkan_options());
        ASSERT_TRUE(cpu.is_ok() && gpu.is_ok()) << gpu.status().to_string();
        auto placement = gpu->placement();
        std::map<std::string, int> where(placement.begin(), placement.end());
        EXPECT_EQ(where["vulkan:0"], 2);
        NamedTensors in = {{"x", random_tensor({2, 3, 5, 7}, 19)}};
        auto a = cpu->run(in);
        auto b = gpu->run(in);
        ASSERT_TRUE(a.is_ok() && b.is_ok()) << b.status().to_string();
        ASSERT_EQ((*b)[0].second.shape(), (*a)[0].second.shape());
        EXPECT_TRUE(bitwise_equal((*b)[0].second, (*a)[0].second)) << "nearest";
        ASSERT_EQ((*b)[1].second.shape(), (*a)[1].second.shape());
        EXPECT_LT(max_rel_diff((*b)[1].second, (*a)[1].second), 1e-5) << "linear";
      }
    }
  }
}

// Kernels that record several dispatches (Concat's slabs, Resize's table then its gather)
// give the same bytes under every submission policy.
TEST_F(VulkanLayout, MultiDispatchKernelsAgreeUnderEveryPolicy) {
  std::string bytes = model_text_bytes(header(19) + R"(g (float[2,3,40,40] x) => (float[2,9,40,40] c, n)
  <float[4] s = {1, 1, 1.5, 0.7}> {
  c = Concat <axis = 1> (x, x, x)
  n = Resize <mode = "nearest"> (x, , s)
})");
  NamedTensors in = {{"x", random_tensor({2, 3, 40, 40}, 25)}};
  auto cpu = env_.load_bytes(bytes, "cpu", cpu_options());
  ASSERT_TRUE(cpu.is_ok()) << cpu.status().to_string();
  auto want = cpu->run(in);
  ASSERT_TRUE(want.is_ok()) << want.status().to_string();
  for (const char* policy : {"single", "per-dispatch", "split", "auto:1"}) {
    auto gpu = env_.load_bytes(bytes, "gpu", vulkan_options(policy));
    ASSERT_TRUE(gpu.is_ok()) << policy << ": " << gpu.status().to_string();
    auto got = gpu->run(in);
    ASSERT_TRUE(got.is_ok()) << policy << ": " << got.status().to_string();
    for (size_t i = 0; i < want->size(); ++i)
      EXPECT_TRUE(bitwise_equal((*got)[i].second, (*want)[i].second)) << policy << " " << (*want)[i].first;
  }
}

TEST_F(VulkanLayout, ResizeNearestOverEveryAxisAndType) {
  const std::string model = header(19) + R"(g (float[2,3,5,7] x, int64[2,3,4,2] y) => (c, z, w)
  <float[4] s = {1.5, 2, 1, 0.75}, int64[4] sz = {3, 2, 9, 3}> {
  c = Resize <mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"> (x, , s)
  z = Resize <mode = "nearest"> (x, , , sz)
  w = Resize <mode = "nearest", nearest_mode = "ceil"> (y, , s)
})";
  expect_same(model, {{"x", random_tensor({2, 3, 5, 7}, 20)}, {"y", random_int64({2, 3, 4, 2}, 21)}}, 3);
}

TEST_F(VulkanLayout, ResizeOfOtherAxesOrModesFallsBackToTheCpu) {
  const std::string model = header(19) + R"(g (float[2,3,5,7] x, float[2,3,5] v) => (c, k, t, r)
  <float[4] s = {1, 2, 1, 1}, float[4] t2 = {1, 1, 2, 2}, float[3] s3 = {1, 2, 2}> {
  c = Resize <mode = "linear"> (x, , s)
  k = Resize <mode = "cubic"> (x, , t2)
  t = Resize <mode = "nearest", coordinate_transformation_mode = "tf_half_pixel_for_nn"> (x, , t2)
  r = Resize <mode = "nearest"> (v, , s3)
})";
  expect_same(model, {{"x", random_tensor({2, 3, 5, 7}, 22)}, {"v", random_tensor({2, 3, 5}, 23)}}, 0);
}

}  // namespace
}  // namespace bulkhead::test
