// Static post-training quantisation to the standard QDQ form (`bulkhead quantize`).
//
// Every Conv and ConvTranspose (group 1) with constant float32 weights, every MatMul with a constant 2-D float32
// right-hand side and every Gemm that is a fully connected layer (transA 0, alpha 1, a
// constant 2-D float32 B, a bias of one value per output column with beta 1, or none) —
// unless named in `keep_float` — gets:
//   - its activation input and its output quantised to uint8, per tensor, with ranges
//     from running the float model on the calibration samples (min-max, or the given
//     percentile of the values at each end): QuantizeLinear → DequantizeLinear pairs,
//     read by every consumer of the tensor (graph outputs stay float);
//   - its weights as int8, symmetric, per output channel (Conv axis 0, ConvTranspose 1,
//     MatMul 1, Gemm 1, or 0 with transB)
//     where the model's opset has per-axis DequantizeLinear (13+), else per tensor, with
//     a DequantizeLinear node;
//   - Conv's, ConvTranspose's and Gemm's bias as int32 with scale x_scale·w_scale and
//     zero point 0.
// The result is a valid ONNX model that any runtime with QDQ support runs (ONNX Runtime
// included); bulkhead's optimiser turns each DQ → Conv/MatMul/Gemm → Q group, and each
// upsampling ConvTranspose (kernel = stride), into one int8 kernel. Before any of this the float model is prepared (quantize_prepare.h): a model
// below opset 10 (no QuantizeLinear) is moved to opset 10, and BatchNormalization / Mul /
// Add nodes that only rescale a Conv's output channels are folded into its weights.
//
// Pure function apart from reading `path` and running calibration sessions in an Env of
// its own; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "bulkhead/bulkhead.hpp"

namespace bulkhead::check {

struct QuantizeOptions {
  std::vector<NamedTensors> samples;    // calibration inputs, one set per sample (≥ 1)
  std::string method = "minmax";        // "minmax" or "percentile"
  double percentile = 99.99;            // for "percentile": the share of values kept, (50, 100]
  std::vector<std::string> keep_float;  // node names left in float
  int threads = 0;                      // for the calibration runs
};

struct QuantizeResult {
  std::string model;  // the serialized QDQ ModelProto
  int convs = 0, conv_transposes = 0, matmuls = 0, gemms = 0, kept = 0;
  bool per_channel = false;
  int activations = 0;  // tensors given a Q/DQ pair
  int folded = 0;       // BatchNormalization / Mul / Add nodes folded into Conv / ConvTranspose weights first
  int64_t opset_before = 0, opset = 0;  // the default domain's opset, before and after
};

Result<QuantizeResult> quantize_model(const std::string& path, const QuantizeOptions& options);

}  // namespace bulkhead::check
