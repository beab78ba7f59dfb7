// ONNX protobuf → Graph IR. Reads models of IR 3 and later, initializers in raw, typed
// and external form, Constant nodes (folded into initializers), attributes and
// subgraphs; sorts nodes topologically; records the names each subgraph reads from the
// graphs that enclose it.
#pragma once

#include <string>

#include "bulkhead/status.h"
#include "ir/graph.h"

namespace onnx {
class TensorProto;
class ModelProto;
}  // namespace onnx

namespace bulkhead::ir {

// Loads and converts the model file at `path`. Errors name the file.
Result<Model> load_model(const std::string& path);
// Converts serialized ModelProto bytes; `name` is used in messages, `base_dir` resolves
// external data files (empty: external data is an error).
Result<Model> load_model_from_bytes(const void* data, size_t size, const std::string& name, const std::string& base_dir);
Result<Model> convert_model(const onnx::ModelProto& proto, const std::string& name, const std::string& base_dir);
// A TensorProto → host Tensor (external data resolved against base_dir).
Result<Tensor> tensor_from_proto(const onnx::TensorProto& t, const std::string& base_dir);
// Reads a file holding a serialized TensorProto, SequenceProto or OptionalProto (the ONNX
// test-data .pb files) as a Value. `hint` picks the message type: 't', 's' or 'o'.
Result<Value> load_value_pb(const std::string& path, char hint);

}  // namespace bulkhead::ir
