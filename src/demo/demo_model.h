// A small image classifier built in code from ONNX's text format, used by `bulkhead
// demo` and by tests that need a model without files. Deterministic weights.
#pragma once

#include <string>
#include <vector>

#include "bulkhead/status.h"
#include "bulkhead/tensor.h"

namespace bulkhead::demo {

// Serialized ModelProto: image float32[1,3,32,32] -> probs float32[1,10]; 9 nodes.
Result<std::string> classifier_model_bytes();
// A split pipeline F -> G in the shape of the field report's split model (`bulkhead demo`
// and the checker's tests). F: image float32[1,3,32,32] -> main [1,8,16,16], mean and
// std [1,8,1,1]; G: those three -> probs float32[1,10]. Different weights in each part.
Result<std::string> pipeline_front_bytes();
Result<std::string> pipeline_back_bytes();
// A deterministic input image; different phases give different images.
Tensor classifier_image(float phase);
// A deterministic float32 initializer: element i is scale * sin(0.37 i + phase), or
// `values` when given (as many as the dims hold).
struct Weight {
  std::string name;
  std::vector<int64_t> dims;
  float scale = 1, phase = 0;
  std::vector<float> values;
};
// Serialized ModelProto of an ONNX text-format model with these initializers added.
Result<std::string> model_with_weights(const std::string& text, const std::vector<Weight>& weights);
// Serialized ModelProto of an ONNX text-format model.
Result<std::string> model_from_text(const std::string& text);

}  // namespace bulkhead::demo
