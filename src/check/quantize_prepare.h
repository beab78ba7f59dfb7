// What `bulkhead quantize` does to the float model before it places Q/DQ pairs, each a
// rewrite that keeps the model standard ONNX and computes the same function:
//
//  - upgrade_to_opset10: a model importing opset 9 or below of the default domain (no
//    QuantizeLinear there) is moved to opset 10, rewriting the operators whose form changed
//    on the way — Slice (starts/ends/axes from attributes to inputs), TopK (k to an input),
//    Upsample (to Resize) — in subgraphs too; the IR version becomes at least 5, and
//    initializers an IR < 4 model listed as graph inputs stop being inputs (they were
//    constants there and stay constants).
//  - fold_into_convs: a BatchNormalization, or a Mul / Add by a constant of one value per
//    output channel (or one value), that is the only reader of a Conv's output (or of a
//    ConvTranspose's, group 1) is folded into that node's float weights and bias. Quantising first would put a Q/DQ pair and a
//    float op between every convolution and its normalisation, costing accuracy and a
//    pass over memory each; ONNX Runtime's quantiser expects this done beforehand too.
//
// Functions of the proto alone; thread-compatible.
#pragma once

#include <string>

#include "bulkhead/status.h"
#include "onnx/onnx_pb.h"

namespace bulkhead::check {

// Returns the opset the model had (and now has 10 or more). Fails, naming the node, for an
// operator it cannot move (a Slice whose attributes are missing, ...).
Result<int64_t> upgrade_to_opset10(onnx::ModelProto& model);

// Folds as described above; returns how many nodes were folded away. `dir`: the model's
// folder, for weights in external files.
Result<int> fold_into_convs(onnx::ModelProto& model, const std::string& dir);

}  // namespace bulkhead::check
