// Cuts an ONNX model in two at a point in its topological order: F computes the values
// that cross the cut (its outputs), G takes them as inputs and computes the model's
// outputs. Used to build split pipelines for `bulkhead check` and its benchmark, the
// way field users split a model across two accelerator sessions.
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "bulkhead/status.h"

namespace onnx {
class TensorProto;
}

namespace bulkhead::check {

struct SplitResult {
  std::string front, back;              // serialized ModelProtos (F and G)
  std::vector<std::string> boundary;    // F's outputs that feed G, in order
  int front_nodes = 0, back_nodes = 0;
};

// Splits the model at `path` after `fraction` (0 < f < 1) of its nodes, or, when `at` is
// not empty, right after the nodes that produce the named values (F computes exactly what
// those need). External data is read into the parts (they are self-contained).
// Reads an initializer stored in an external file (inside `dir`) into its raw_data.
Status inline_external(onnx::TensorProto& t, const std::string& dir);

Result<SplitResult> split_model(const std::string& path, double fraction, const std::vector<std::string>& at = {});

}  // namespace bulkhead::check
