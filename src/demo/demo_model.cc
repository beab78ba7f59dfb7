#include "demo/demo_model.h"

#include <cmath>
#include <vector>

#include "onnx/defs/parser.h"
#include "onnx/onnx_pb.h"

namespace bulkhead::demo {
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

// A two-part pipeline in the shape of the field report's split model: F turns an image
// into a feature map and its per-channel mean and spread, G turns those into class
// probabilities. F is long enough (11 nodes) for submission-ordering faults to bite.
const char* kPipelineFront = R"ONNX(
<
  ir_version: 8,
  opset_import: ["" : 17]
>
pipeline_front (float[1,3,32,32] image) => (float[1,8,16,16] main, float[1,8,1,1] mean, float[1,8,1,1] std)
{
  c1 = Conv <pads = [1,1,1,1], strides = [2,2]> (image, fw1, fb1)
  r1 = Relu (c1)
  c2 = Conv <pads = [1,1,1,1]> (r1, fw2, fb2)
  h2 = HardSwish (c2)
  s2 = Add (h2, r1)
  c3 = Conv <pads = [1,1,1,1]> (s2, fw3, fb3)
  r3 = Relu (c3)
  main = Conv <pads = [1,1,1,1]> (r3, fw4, fb4)
  mean = ReduceMean <axes = [2,3], keepdims = 1> (main)
  d = Sub (main, mean)
  std = ReduceL2 <axes = [2,3], keepdims = 1> (d)
}
)ONNX";

const char* kPipelineBack = R"ONNX(
<
  ir_version: 8,
  opset_import: ["" : 17]
>
pipeline_back (float[1,8,16,16] main, float[1,8,1,1] mean, float[1,8,1,1] std) => (float[1,10] probs)
{
  d = Sub (main, mean)
  e = Add (std, eps)
  n = Div (d, e)
  c1 = Conv <pads = [1,1,1,1]> (n, gw1, gb1)
  r1 = Relu (c1)
  p = GlobalAveragePool (r1)
  f = Flatten (p)
  g = Gemm <transB = 1> (f, gw2, gb2)
  probs = Softmax <axis = 1> (g)
}
)ONNX";

Result<onnx::ModelProto> parse(const char* text) {
  onnx::ModelProto model;
  auto st = onnx::OnnxParser::Parse(model, text);
  if (!st.IsOK()) return internal_error("built-in model text does not parse: " + st.ErrorMessage());
  return model;
}

std::string serialize(const onnx::ModelProto& m) {
  std::string bytes;
  m.SerializeToString(&bytes);
  return bytes;
}

}  // namespace

Result<std::string> model_with_weights(const std::string& text, const std::vector<Weight>& weights) {
  BH_ASSIGN_OR_RETURN(auto model, parse(text.c_str()));
  for (const auto& w : weights) {
    if (w.values.empty()) {
      add_weight(*model.mutable_graph(), w.name, w.dims, w.scale, w.phase);
      continue;
    }
    int64_t n = 1;
    for (auto d : w.dims) n *= d;
    if (n != static_cast<int64_t>(w.values.size()))
      return invalid_argument("weight '" + w.name + "': " + std::to_string(w.values.size()) + " values for " +
                              std::to_string(n) + " elements");
    auto* t = model.mutable_graph()->add_initializer();
    t->set_name(w.name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (auto d : w.dims) t->add_dims(d);
    for (float v : w.values) t->add_float_data(v);
  }
  return serialize(model);
}

Result<std::string> pipeline_front_bytes() {
  return model_with_weights(kPipelineFront, {{"fw1", {8, 3, 3, 3}, 0.3f, 1.1f},
                                             {"fb1", {8}, 0.05f, 1.2f},
                                             {"fw2", {8, 8, 3, 3}, 0.2f, 1.3f},
                                             {"fb2", {8}, 0.05f, 1.4f},
                                             {"fw3", {8, 8, 3, 3}, 0.2f, 1.5f},
                                             {"fb3", {8}, 0.05f, 1.6f},
                                             {"fw4", {8, 8, 3, 3}, 0.2f, 1.7f},
                                             {"fb4", {8}, 0.05f, 1.8f}});
}

Result<std::string> pipeline_back_bytes() {
  BH_ASSIGN_OR_RETURN(auto model, parse(kPipelineBack));
  auto* g = model.mutable_graph();
  add_weight(*g, "gw1", {16, 8, 3, 3}, 0.2f, 2.1f);
  add_weight(*g, "gb1", {16}, 0.05f, 2.2f);
  add_weight(*g, "gw2", {10, 16}, 0.5f, 2.3f);
  add_weight(*g, "gb2", {10}, 0.1f, 2.4f);
  auto* eps = g->add_initializer();
  eps->set_name("eps");
  eps->set_data_type(onnx::TensorProto::FLOAT);
  eps->add_float_data(1e-3f);
  return serialize(model);
}

Result<std::string> classifier_model_bytes() {
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

Tensor classifier_image(float phase) {
  Tensor t = Tensor::host(DataType::kFloat32, {1, 3, 32, 32});
  float* p = t.data<float>();
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 32; ++y)
      for (int x = 0; x < 32; ++x)
        p[(c * 32 + y) * 32 + x] = std::cos(0.2f * x + phase * (c + 1)) * std::sin(0.15f * y - phase);
  return t;
}

Result<std::string> model_from_text(const std::string& text) {
  onnx::ModelProto model;
  auto st = onnx::OnnxParser::Parse(model, text.c_str());
  if (!st.IsOK()) return invalid_model("model text does not parse: " + st.ErrorMessage());
  std::string bytes;
  model.SerializeToString(&bytes);
  return bytes;
}

}  // namespace bulkhead::demo
