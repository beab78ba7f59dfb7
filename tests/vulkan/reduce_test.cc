// Vulkan reductions and normalisations against the CPU backend: each op runs on
// vulkan:0 (placement checked) and matches the CPU within 1e-5 relative; what the Vulkan
// kernels do not take (non-contiguous axes, training outputs) falls back to the CPU.
#include <map>

#include "vulkan/vulkan_support.h"

namespace bulkhead::test {
namespace {

SessionOptions on(std::vector<std::string> devices) {
  SessionOptions o;
  o.devices = std::move(devices);
  o.threads = 1;
  return o;
}

class VulkanReduce : public VulkanFixture {
 protected:
  // Runs `text` on the CPU and on vulkan,cpu; returns how many nodes ran on Vulkan and
  // checks every output matches.
  int compare(const std::string& text, const NamedTensors& in) {
    std::string bytes = model_text_bytes(text);
    auto cpu = env_.load_bytes(bytes, "m", on({"cpu"}));
    auto gpu = env_.load_bytes(bytes, "m", on({"vulkan:0", "cpu"}));
    EXPECT_TRUE(cpu.is_ok()) << cpu.status().to_string();
    EXPECT_TRUE(gpu.is_ok()) << gpu.status().to_string();
    if (!cpu.is_ok() || !gpu.is_ok()) return -1;
    auto a = cpu->run(in);
    auto b = gpu->run(in);
    EXPECT_TRUE(a.is_ok() && b.is_ok()) << b.status().to_string();
    if (!a.is_ok() || !b.is_ok()) return -1;
    for (size_t i = 0; i < a->size(); ++i) EXPECT_LT(max_rel_diff((*b)[i].second, (*a)[i].second), 1e-5) << text;
    auto placement = gpu->placement();
    std::map<std::string, int> where(placement.begin(), placement.end());
    return where["vulkan:0"];
  }
};

TEST_F(VulkanReduce, ReductionsOverContiguousAxes) {
  NamedTensors in = {{"x", random_tensor({2, 3, 4, 5}, 1)}};
  auto list = [](const std::vector<int>& v, const char* open, const char* close) {
    std::string r = open;
    for (size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + std::to_string(v[i]);
    return r + close;
  };
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceSumSquare", "ReduceL1", "ReduceL2",
                         "ReduceLogSumExp"}) {
    for (const std::vector<int>& axes : {std::vector<int>{2, 3}, {-1}, {0}, {1, 2}}) {
      for (int keep : {0, 1}) {
        const std::string k = std::to_string(keep);
        std::string body = std::string("  y = ") + op + " <axes = " + list(axes, "[", "]") + ", keepdims = " + k + "> (x)\n";
        if (std::string(op) == "ReduceSum")  // opset 13: the axes are an input
          body = "  a = Constant <value = int64[" + std::to_string(axes.size()) + "] " + list(axes, "{", "}") + "> ()\n" +
                 "  y = ReduceSum <keepdims = " + k + "> (x, a)\n";
        std::string text = "<ir_version: 8, opset_import: [\"\" : 13]>\ng (float[2,3,4,5] x) => (float y) {\n" + body + "}";
        EXPECT_EQ(compare(text, in), 1) << op << " " << list(axes, "[", "]") << " keepdims " << keep;
      }
    }
  }
  // All axes (none given), and an axis set that is not contiguous: the CPU takes it.
  EXPECT_EQ(compare(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3,4,5] x) => (float y) { y = ReduceMax <keepdims = 0> (x) })", in), 1);
  EXPECT_EQ(compare(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3,4,5] x) => (float y) { y = ReduceMean <axes = [1, 3]> (x) })", in), 0);
}

TEST_F(VulkanReduce, SoftmaxAndLogSoftmax) {
  NamedTensors in = {{"x", random_tensor({3, 4, 50}, 2)}};
  for (const char* op : {"Softmax", "LogSoftmax"})
    for (const char* axis : {"-1", "1", "0"}) {
      for (int opset : {11, 13}) {
        std::string text = "<ir_version: 8, opset_import: [\"\" : " + std::to_string(opset) +
                           "]>\ng (float[3,4,50] x) => (float y) { y = " + op + " <axis = " + axis + "> (x) }";
        EXPECT_EQ(compare(text, in), 1) << op << " axis " << axis << " opset " << opset;
      }
    }
}

TEST_F(VulkanReduce, Normalisations) {
  NamedTensors in = {{"x", random_tensor({2, 3, 6, 7}, 3)},
                     {"s", random_tensor({3}, 4)},
                     {"b", random_tensor({3}, 5)},
                     {"m", random_tensor({3}, 6)},
                     {"v", Tensor::from_vector<float>(DataType::kFloat32, {3}, {0.5f, 1.0f, 2.0f})}};
  EXPECT_EQ(compare(R"(<ir_version: 8, opset_import: ["" : 15]>
g (float[2,3,6,7] x, float[3] s, float[3] b, float[3] m, float[3] v) => (float y) {
  y = BatchNormalization <epsilon = 0.001> (x, s, b, m, v)
})", in), 1);
  EXPECT_EQ(compare(R"(<ir_version: 8, opset_import: ["" : 15]>
g (float[2,3,6,7] x, float[3] s, float[3] b, float[3] m, float[3] v) => (float y) {
  y = InstanceNormalization <epsilon = 0.01> (x, s, b)
})", in), 1);
  NamedTensors ln = {{"x", random_tensor({2, 5, 16}, 7)}, {"s", random_tensor({16}, 8)}, {"b", random_tensor({16}, 9)}};
  EXPECT_EQ(compare(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2,5,16] x, float[16] s, float[16] b) => (float y) { y = LayerNormalization (x, s, b) })", ln), 1);
  EXPECT_EQ(compare(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2,5,16] x, float[16] s, float[16] b) => (float y) { y = LayerNormalization (x, s) })", ln), 1);
  // Mean / InvStdDev outputs wanted: the CPU kernel makes them.
  EXPECT_EQ(compare(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2,5,16] x, float[16] s, float[16] b) => (float y, float m) { y, m = LayerNormalization (x, s, b) })", ln), 0);
}

}  // namespace
}  // namespace bulkhead::test
