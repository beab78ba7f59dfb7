// Backends agree on errors and on answers: every conformance case, and models whose
// indices are out of range for Gather, GatherElements, GatherND, ScatterElements,
// ScatterND and OneHot, run on `cpu` and on `vulkan,cpu` (Mesa's lavapipe in tests) and
// must have the same outcome — the same outputs within the case's tolerance, or an error
// on both. (Before, a Vulkan Gather with an index out of range returned zeros where the
// CPU reported the error.)
//
// Three light models are left to `ctest -L conformance-vulkan` (the whole suite on
// lavapipe): VGG-19, ZFNet-512 and AlexNet take 113, 26 and 16 s there on 2 cores, two
// thirds of this test's time, and are plain Conv/Relu/LRN/MaxPool/Gemm chains whose
// operators the light models kept here (ResNet-50, DenseNet-121, the two Inceptions,
// SqueezeNet, ShuffleNet) and the node cases run on Vulkan too.
#include <chrono>
#include <cstdio>
#include <set>

#include "backend/backend.h"
#include "conformance/conformance.h"
#include "support/test_util.h"

namespace bulkhead::test {
namespace {

struct Outcome {
  bool ok = false;
  std::string error;
  NamedValues outputs;
};

Outcome run_on(const Env& env, const std::string& device_list, const std::string& path, const std::string& bytes,
               const conformance::Case* c, const NamedValues& given) {
  Outcome o;
  SessionOptions so;
  so.devices = device_list == "cpu" ? std::vector<std::string>{"cpu"} : std::vector<std::string>{"vulkan", "cpu"};
  so.threads = 1;
  auto s = path.empty() ? env.load_bytes(bytes, "case.onnx", so) : env.load(path, so);
  if (!s.is_ok()) {
    o.error = s.status().to_string();
    return o;
  }
  NamedValues inputs = given;
  if (c) {
    auto d = conformance::load_case_data(*c, *s);
    if (!d.is_ok()) {
      o.error = "case data: " + d.status().to_string();
      return o;
    }
    inputs = d->inputs;
  }
  auto r = s->run_values(inputs);
  if (!r.is_ok()) {
    o.error = r.status().to_string();
    return o;
  }
  o.ok = true;
  o.outputs = std::move(r).value();
  return o;
}

// "" when the outcomes agree; otherwise what differs.
std::string disagreement(const Outcome& cpu, const Outcome& vk, double rtol, double atol) {
  if (!cpu.ok && !vk.ok) return "";
  if (cpu.ok != vk.ok) return cpu.ok ? "vulkan,cpu fails (" + vk.error + ") where cpu runs" : "cpu fails (" + cpu.error + ") where vulkan,cpu runs";
  if (cpu.outputs.size() != vk.outputs.size()) return "different numbers of outputs";
  for (size_t i = 0; i < cpu.outputs.size(); ++i) {
    std::string m = conformance::compare(vk.outputs[i].second, cpu.outputs[i].second, rtol, atol);
    if (!m.empty()) return "output '" + vk.outputs[i].first + "': " + m;
  }
  return "";
}

bool have_vulkan(const Env& env) {
  for (auto& d : env.devices())
    if (d.backend == "vulkan") return true;
  return false;
}

TEST(BackendsAgree, OnEveryConformanceCase) {
  Env env;
  if (!have_vulkan(env)) GTEST_FAIL() << "no Vulkan device: install mesa-vulkan-drivers (scripts/install-deps.sh)";
  conformance::Options opts;
  opts.data_dir = shared_dir() + "/onnx-backend-data";
  auto cases = conformance::discover(opts);
  ASSERT_TRUE(cases.is_ok()) << cases.status().to_string();
  ASSERT_GT(cases->size(), 1900u);
  const std::set<std::string> left_out = {"light_vgg19", "light_zfnet512", "light_bvlc_alexnet"};
  int agree = 0, both_errors = 0, skipped = 0;
  std::vector<std::string> differ;
  auto t0 = std::chrono::steady_clock::now();
  for (const auto& c : *cases) {
    if (c.folder == "light" && left_out.count(c.name)) {
      ++skipped;
      continue;
    }
    const std::string path = conformance::model_path(c);
    Outcome a = run_on(env, "cpu", path, "", &c, {});
    Outcome b = run_on(env, "vulkan,cpu", path, "", &c, {});
    // The same tolerance the reference comparison uses, twice over: each side may be
    // that far from the reference.
    double rtol = 2e-3, atol = 2e-7;
    if (c.folder == "light") rtol = 2e-2, atol = 2e-4;
    std::string d = disagreement(a, b, rtol, atol);
    if (d.empty()) {
      ++agree;
      both_errors += !a.ok;
    } else {
      differ.push_back(c.folder + "/" + c.name + ": " + d);
    }
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(skipped, 3) << "a light model left out is missing from the data";
  std::printf("%d of %zu cases agree (%d of them an error on both; %d light models left to conformance_vulkan) in %.0f s\n",
              agree, cases->size() - skipped, both_errors, skipped, s);
  std::string list;
  for (auto& d : differ) list += "  " + d.substr(0, 300) + "\n";
  EXPECT_TRUE(differ.empty()) << differ.size() << " cases disagree:\n" << list;
}

TEST(BackendsAgree, OnIndicesOutOfRange) {
  Env env;
  if (!have_vulkan(env)) GTEST_FAIL() << "no Vulkan device: install mesa-vulkan-drivers (scripts/install-deps.sh)";
  auto i64 = [](Shape s, std::vector<int64_t> v) { return Tensor::from_vector<int64_t>(DataType::kInt64, std::move(s), v); };
  auto f32 = [](Shape s, std::vector<float> v) { return Tensor::from_vector<float>(DataType::kFloat32, std::move(s), v); };
  const Tensor data32 = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  struct Case {
    const char* what;
    std::string model;  // ONNX text; inputs x (data) and i (indices), constant indices where noted
    NamedValues inputs;
    bool error;  // what the ONNX specification says: an error, or a defined result
  };
  const std::string h = R"(<ir_version: 8, opset_import: ["" : 17]>)";
  std::vector<Case> cases = {
      {"Gather, constant index = dim", h + "g (float[3,2] x) => (float[1,2] y) <int64[1] i = {3}> { y = Gather <axis = 0> (x, i) }",
       {{"x", Value(data32)}}, true},
      {"Gather, constant index < -dim", h + "g (float[3,2] x) => (float[1,2] y) <int64[1] i = {-4}> { y = Gather <axis = 0> (x, i) }",
       {{"x", Value(data32)}}, true},
      {"Gather, constant index -dim (valid)", h + "g (float[3,2] x) => (float[1,2] y) <int64[1] i = {-3}> { y = Gather <axis = 0> (x, i) }",
       {{"x", Value(data32)}}, false},
      {"Gather, run-time index = dim", h + "g (float[3,2] x, int64[1] i) => (float[1,2] y) { y = Gather <axis = 0> (x, i) }",
       {{"x", Value(data32)}, {"i", Value(i64({1}, {3}))}}, true},
      {"Gather, run-time index on axis 1", h + "g (float[3,2] x, int64[2] i) => (float[3,2] y) { y = Gather <axis = 1> (x, i) }",
       {{"x", Value(data32)}, {"i", Value(i64({2}, {0, -3}))}}, true},
      {"GatherElements", h + "g (float[3,2] x, int64[3,2] i) => (float[3,2] y) { y = GatherElements <axis = 0> (x, i) }",
       {{"x", Value(data32)}, {"i", Value(i64({3, 2}, {0, 1, 2, 3, 0, 0}))}}, true},
      {"GatherND", h + "g (float[3,2] x, int64[1,2] i) => (float[1] y) { y = GatherND (x, i) }",
       {{"x", Value(data32)}, {"i", Value(i64({1, 2}, {1, 2}))}}, true},
      {"ScatterElements", h + "g (float[3,2] x, int64[1,2] i, float[1,2] u) => (float[3,2] y) { y = ScatterElements <axis = 0> (x, i, u) }",
       {{"x", Value(data32)}, {"i", Value(i64({1, 2}, {0, 3}))}, {"u", Value(f32({1, 2}, {9, 9}))}}, true},
      {"ScatterND", h + "g (float[3,2] x, int64[1,1] i, float[1,2] u) => (float[3,2] y) { y = ScatterND (x, i, u) }",
       {{"x", Value(data32)}, {"i", Value(i64({1, 1}, {-4}))}, {"u", Value(f32({1, 2}, {9, 9}))}}, true},
      {"OneHot (out of range gives the off value)",
       h + "g (int64[3] i) => (float[3,3] y) <int64 d = {3}, float[2] v = {0.0, 1.0}> { y = OneHot <axis = -1> (i, d, v) }",
       {{"i", Value(i64({3}, {0, 5, -7}))}}, false},
  };
  for (const auto& c : cases) {
    std::string bytes = model_text_bytes(c.model);
    Outcome a = run_on(env, "cpu", "", bytes, nullptr, c.inputs);
    Outcome b = run_on(env, "vulkan,cpu", "", bytes, nullptr, c.inputs);
    EXPECT_EQ(disagreement(a, b, 0, 0), "") << c.what;
    EXPECT_EQ(!a.ok, c.error) << c.what << ": cpu " << (a.ok ? "ran" : a.error);
    if (c.error) {
      EXPECT_NE(a.error.find("out of range"), std::string::npos) << c.what << ": " << a.error;
      EXPECT_NE(b.error.find("out of range"), std::string::npos) << c.what << ": " << b.error;
    }
  }
}

}  // namespace
}  // namespace bulkhead::test
