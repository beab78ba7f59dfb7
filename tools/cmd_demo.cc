// `bulkhead demo`: needs no files. Builds a small image classifier in code from ONNX's
// text format, runs it in two sessions on two threads at once, and shows that each got
// exactly the answer it gets alone.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>

#include "bulkhead/bulkhead.hpp"
#include "cli.h"
#include "onnx/defs/parser.h"
#include "onnx/onnx_pb.h"

namespace bulkhead::cli {
namespace {

const char* kDemoModel = R"ONNX(
<
  ir_version: 8,
  opset_import: ["" : 17]
>
demo_classifier (float[1,3,32,32] image) => (float[1,10] probs)
{
  c1 = Conv <pads = [1,1,1,1], strides = [2,2]> (image, w1, b1)
  r1 = Relu (c1)
  c2 = Conv <pads = [1,1,1,1]> (r1, w2, b2)
  h2 = HardSwish (c2)
  s = Add (h2, r1)
  p = GlobalAveragePool (s)
  f = Flatten (p)
  g = Gemm <transB = 1> (f, w3, b3)
  probs = Softmax <axis = 1> (g)
}
)ONNX";

void add_weight(onnx::GraphProto& g, const std::string& name, std::vector<int64_t> dims, float scale, float phase) {
  auto* t = g.add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  int64_t n = 1;
  for (auto d : dims) {
    t->add_dims(d);
    n *= d;
  }
  for (int64_t i = 0; i < n; ++i) t->add_float_data(scale * std::sin(0.37f * static_cast<float>(i) + phase));
}

Result<std::string> demo_model_bytes() {
  onnx::ModelProto model;
  auto st = onnx::OnnxParser::Parse(model, kDemoModel);
  if (!st.IsOK()) return internal_error("demo model text does not parse: " + st.ErrorMessage());
  auto* g = model.mutable_graph();
  add_weight(*g, "w1", {8, 3, 3, 3}, 0.3f, 0.1f);
  add_weight(*g, "b1", {8}, 0.05f, 0.2f);
  add_weight(*g, "w2", {8, 8, 3, 3}, 0.2f, 0.3f);
  add_weight(*g, "b2", {8}, 0.05f, 0.4f);
  add_weight(*g, "w3", {10, 8}, 0.5f, 0.5f);
  add_weight(*g, "b3", {10}, 0.1f, 0.6f);
  std::string bytes;
  model.SerializeToString(&bytes);
  return bytes;
}

Tensor demo_image(float phase) {
  Tensor t = Tensor::host(DataType::kFloat32, {1, 3, 32, 32});
  float* p = t.data<float>();
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 32; ++y)
      for (int x = 0; x < 32; ++x)
        p[(c * 32 + y) * 32 + x] = std::cos(0.2f * x + phase * (c + 1)) * std::sin(0.15f * y - phase);
  return t;
}

int demo_cmd() {
  const std::string cmd = "demo";
  auto bytes = demo_model_bytes();
  if (!bytes.is_ok()) return fail(cmd, bytes.status());
  Env env;
  SessionOptions opts;
  opts.threads = 1;
  auto a = env.load_bytes(*bytes, "demo_classifier", opts);
  if (!a.is_ok()) return fail(cmd, a.status());
  auto b = env.load_bytes(*bytes, "demo_classifier", opts);
  if (!b.is_ok()) return fail(cmd, b.status());
  std::printf("bulkhead %s demo: a 9-node image classifier built in code (Conv, Relu, HardSwish, Add,\n"
              "GlobalAveragePool, Flatten, Gemm, Softmax), input %s, on ", version(), a->inputs()[0].type_string.c_str());
  for (auto& [dev, n] : a->placement()) std::printf("%s (%d nodes)\n\n", dev.c_str(), n);

  Tensor img_a = demo_image(0.3f), img_b = demo_image(1.7f);
  // Each session alone, for reference.
  auto ref_a = a->run({{"image", img_a}});
  auto ref_b = b->run({{"image", img_b}});
  if (!ref_a.is_ok()) return fail(cmd, ref_a.status());
  if (!ref_b.is_ok()) return fail(cmd, ref_b.status());

  // Then both at once, 200 runs each, from two threads.
  int mismatches = 0;
  std::string err;
  auto hammer = [&](const Session& s, const Tensor& img, const Tensor& ref, int& bad) {
    for (int i = 0; i < 200; ++i) {
      auto r = s.run({{"image", img}});
      if (!r.is_ok()) { err = r.status().message(); ++bad; return; }
      if (std::memcmp((*r)[0].second.raw(), ref.raw(), ref.nbytes()) != 0) ++bad;
    }
  };
  int bad_a = 0, bad_b = 0;
  std::thread ta(hammer, std::cref(*a), std::cref(img_a), std::cref((*ref_a)[0].second), std::ref(bad_a));
  std::thread tb(hammer, std::cref(*b), std::cref(img_b), std::cref((*ref_b)[0].second), std::ref(bad_b));
  ta.join();
  tb.join();
  mismatches = bad_a + bad_b;
  if (!err.empty()) return fail(cmd, err);

  for (auto* r : {&*ref_a, &*ref_b}) {
    const Tensor& p = (*r)[0].second;
    int best = 0;
    for (int i = 1; i < 10; ++i)
      if (p.data<float>()[i] > p.data<float>()[best]) best = i;
    std::printf("session %c: probs =", r == &*ref_a ? 'A' : 'B');
    for (int i = 0; i < 10; ++i) std::printf(" %.4f", p.data<float>()[i]);
    std::printf("  -> class %d\n", best);
  }
  std::printf("\n2 sessions x 200 concurrent runs on 2 threads: %d of 400 results differed from the solo run%s\n",
              mismatches, mismatches ? "  <-- CONTAMINATION" : " (watertight)");
  return mismatches ? 2 : 0;
}

}  // namespace

void add_demo(CLI::App& app) {
  auto* cmd = app.add_subcommand("demo", "Build a small model in code and run it (needs no files)");
  cmd->callback([]() {
    int rc = demo_cmd();
    if (rc) throw CLI::RuntimeError(rc);
  });
}

}  // namespace bulkhead::cli
