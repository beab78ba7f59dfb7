// ONNX protobuf → Graph IR. Reads models of IR 3 and later, initializers in raw, typed
// and external form, Constant nodes (folded into initializers), attributes and
// subgraphs; sorts nodes topologically; records the names each subgraph reads from the
// graphs that enclose it.
#pragma once

#include <string>

#include "bulkhead/status.h"
#include "io/file.h"
#include "ir/graph.h"

namespace onnx {
class TensorProto;
class ModelProto;
}  // namespace onnx

namespace bulkhead::ir {

// Where a model's external data may be read from: regular files inside `dir` (real paths,
// symlinks resolved, must stay inside it), each at most `max_file_bytes`. An empty `dir`
// means the model did not come from a file, and external data is an error.
struct DataFolder {
  std::string dir;
  uint64_t max_file_bytes = io::kDefaultMaxFileBytes;
};

// Loads and converts the model file at `path`, a regular file of at most
// `max_file_bytes`, as are its external data files. Errors name the file.
Result<Model> load_model(const std::string& path, uint64_t max_file_bytes = io::kDefaultMaxFileBytes);
// Converts serialized ModelProto bytes; `name` is used in messages.
Result<Model> load_model_from_bytes(const void* data, size_t size, const std::string& name, const DataFolder& data_folder);
Result<Model> convert_model(const onnx::ModelProto& proto, const std::string& name, const DataFolder& data_folder);
// A TensorProto → host Tensor (external data read from `data_folder`).
Result<Tensor> tensor_from_proto(const onnx::TensorProto& t, const DataFolder& data_folder);
// Reads a file holding a serialized TensorProto, SequenceProto or OptionalProto (the ONNX
// test-data .pb files) as a Value. `hint` picks the message type: 't', 's' or 'o'.
Result<Value> load_value_pb(const std::string& path, char hint, uint64_t max_file_bytes = io::kDefaultMaxFileBytes);

}  // namespace bulkhead::ir
