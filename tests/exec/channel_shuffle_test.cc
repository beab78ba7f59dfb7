// Channel shuffles read in place by the depthwise convolution after them
// (exec/channel_shuffle.h): at optimisation level 2 the Reshape → Transpose → Reshape of
// a ShuffleNet unit is gone and the outputs are those of level 1 (the shuffle computed,
// then the same convolution kernel) bit for bit — on the kernels that read the planes
// through the channel map (3x3 at stride 1 from 12 input columns, at stride 2 from 12
// output columns) and on the paths that take a shuffled copy (narrower planes), with a
// fused Relu, batch 2, 1 and 2 threads;
// and shuffles that must stay, stay.
#include <map>
#include <string>

#include "support/test_util.h"

namespace bulkhead::test {
namespace {

struct Case {
  int64_t C, G, H, W, stride, group;
  bool also_output;  // the shuffled tensor is a graph output too
};

std::string shuffle_model(const Case& c) {
  const std::string s = std::to_string(c.stride), CG = std::to_string(c.C / c.G), C = std::to_string(c.C),
                    G = std::to_string(c.G), H = std::to_string(c.H), W = std::to_string(c.W);
  const int64_t OH = (c.H + 2 - 3) / c.stride + 1, OW = (c.W + 2 - 3) / c.stride + 1;
  const int64_t cin = c.C / c.group;
  return R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[2,)" + C + "," + H + "," + W + R"(] x) => (float[2,)" + C + "," + std::to_string(OH) + "," + std::to_string(OW) +
         "] y" + (c.also_output ? ", float[2," + C + "," + H + "," + W + "] sh" : std::string()) + R"()
<int64[5] s5 = {2, )" + G + ", " + CG + ", " + H + ", " + W + R"(}, int64[4] s4 = {2, )" + C + ", " + H + ", " + W +
         R"(}, float[)" + C + "," + std::to_string(cin) + R"(,3,3] w = {)" + random_values_text(c.C * cin * 9, 7, -1.f, 1.f) +
         R"(}, float[)" + C + R"(] b = {)" + random_values_text(c.C, 8, -0.5f, 0.5f) + R"(}> {
  a = Reshape(x, s5)
  t = Transpose <perm = [0, 2, 1, 3, 4]> (a)
  sh = Reshape(t, s4)
  c = Conv <group = )" + std::to_string(c.group) + ", pads = [1, 1, 1, 1], strides = [" + s + ", " + s + R"(]> (sh, w, b)
  y = Relu(c)
})";
}

// Level 2 against level 1 at 1 and 2 threads; returns level 2's operator counts.
std::map<std::string, int> expect_same_as_level1(const Case& c) {
  return expect_level2_same_as_level1(shuffle_model(c), {{"x", random_tensor({2, c.C, c.H, c.W}, 11)}});
}

TEST(ChannelShuffle, DepthwiseReadsTheShuffleInPlace) {
  for (const Case& c : {Case{24, 4, 14, 14, 1, 24, false}, Case{24, 2, 28, 13, 1, 24, false}, Case{36, 3, 12, 16, 1, 36, false},
                        Case{24, 4, 28, 28, 2, 24, false}, Case{16, 2, 10, 25, 2, 16, false}}) {
    auto ops = expect_same_as_level1(c);
    EXPECT_EQ(ops["Transpose"] + ops["Reshape"], 0) << "C " << c.C << " G " << c.G << " W " << c.W;
    EXPECT_EQ(ops["Conv"], 1);
  }
}

TEST(ChannelShuffle, OtherDepthwisePathsTakeAShuffledCopy) {
  // Planes narrower than the in-place kernels take: folded all the same.
  for (const Case& c : {Case{24, 4, 14, 14, 2, 24, false}, Case{32, 4, 7, 7, 1, 32, false}}) {
    auto ops = expect_same_as_level1(c);
    EXPECT_EQ(ops["Transpose"] + ops["Reshape"], 0) << "stride " << c.stride << " W " << c.W;
  }
}

TEST(ChannelShuffle, ShufflesThatMustStayStay) {
  // The shuffled tensor is also a graph output; the convolution is not depthwise.
  for (const Case& c : {Case{24, 4, 14, 14, 1, 24, true}, Case{24, 4, 14, 14, 1, 4, false}}) {
    auto ops = expect_same_as_level1(c);
    EXPECT_EQ(ops["Transpose"], 1) << (c.also_output ? "graph output" : "grouped, not depthwise");
  }
}

}  // namespace
}  // namespace bulkhead::test
