// The Open Inference Protocol (KServe "v2") inference messages in their REST form: the
// JSON request and response bodies, with the binary tensor data extension.
//
// A request body is JSON, or — with the binary extension — `header_length` bytes of JSON
// followed by the raw bytes of the inputs whose "parameters" carry "binary_data_size",
// in the order those inputs are listed. Every field is checked against the model before a
// byte is copied: the input's name, its datatype (the model's, exactly), its shape (rank
// and every fixed dimension), the element count of "data" or the byte count of its binary
// part, the range of each number for its datatype, and that the binary sizes add up to the
// body's binary part exactly. Errors are one line naming the input and what is wrong;
// they are the client's (HTTP 400).
//
// Datatypes: BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64, FP16, FP32,
// FP64, BF16 (binary only, as in Triton) and BYTES (strings: JSON strings, or in binary
// each element as a 4-byte little-endian length and its bytes).
//
// Free functions and plain structs; thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include "bulkhead/bulkhead.hpp"

namespace bulkhead::serve {

// "FP32" for kFloat32, ...; "" for a type the protocol cannot carry.
std::string oip_datatype(DataType t);
// The DataType of a protocol datatype name; kUndefined when unknown.
DataType from_oip_datatype(const std::string& name);

struct RequestedOutput {
  std::string name;
  bool binary = false;  // "parameters": {"binary_data": true}
};

struct InferRequest {
  std::string id;                        // echoed in the response ("" = none given)
  NamedTensors inputs;                   // in the model's order of declaration
  std::vector<RequestedOutput> outputs;  // empty = every output, each as binary_output says
  bool binary_output = false;            // request "parameters": {"binary_data_output": true}
};

// Limits on what one request may ask for (the server's options).
struct RequestLimits {
  uint64_t max_elements = uint64_t{1} << 31;  // per input
};

// Parses and checks an inference request for a model with these inputs and outputs.
// `body` is the whole HTTP body; `header_length` is the Inference-Header-Content-Length
// header's value when present (the JSON part's length), else nullopt (all JSON).
// `owner`, when given, is a host buffer holding `body`'s bytes and left unchanged from now
// on: a numeric input sent with the binary extension whose bytes lie 64-byte aligned in it
// is then a view of it (the tensor shares `owner`) instead of a copy. Without it, or for an
// input that is not aligned, BOOL or BYTES, the input is copied.
Result<InferRequest> parse_infer_request(std::string_view body, std::optional<uint64_t> header_length,
                                         const std::vector<IoInfo>& inputs, const std::vector<IoInfo>& outputs,
                                         const RequestLimits& limits = {},
                                         const std::shared_ptr<Buffer>& owner = nullptr);

// The pieces both bindings (REST here, gRPC in serve/grpc_service.h) check requests with.

// One input's name, datatype and shape, checked against the model's inputs: a known name
// not given before (`seen`: a flag per model input, set here), the model's datatype exactly,
// the model's rank and fixed dimensions, no negative dimension, at most limits.max_elements.
struct CheckedInput {
  size_t model_index = 0;
  DataType dtype = DataType::kUndefined;
  Shape shape;
  int64_t numel = 0;
};
Result<CheckedInput> check_input(const std::string& name, const std::string& datatype, const Shape& shape,
                                 const std::vector<IoInfo>& model_inputs, const RequestLimits& limits,
                                 std::vector<bool>& seen);
// That a checked input's raw data (or its announced size) has `size` bytes: numel times the
// element size, or for BYTES at least 4 bytes an element. `what` names the size in the error.
Status check_raw_size(const std::string& name, const CheckedInput& in, uint64_t size, const char* what);
// A checked input's tensor from its raw bytes (little-endian elements; BYTES elements each a
// 4-byte little-endian length and the bytes), copied; BOOL bytes must be 0 or 1.
Result<Tensor> tensor_from_raw(const void* data, size_t size, const std::string& name, const CheckedInput& in);
// A requested output: one the model has, not among `earlier` requests.
Status check_requested_output(const std::string& name, const std::vector<IoInfo>& model_outputs,
                              const std::vector<std::string>& earlier);
// Appends a tensor's raw bytes (the form tensor_from_raw reads) to `out`; fails for a type
// the protocol cannot carry or a BYTES element over 4 GiB.
Status append_raw(std::string& out, const std::string& name, const Tensor& t);

// A response body: `json` first, then the binary part (the outputs sent as binary, in
// order). When the binary part is not empty the reply carries
// Inference-Header-Content-Length: json.size() and Content-Type application/octet-stream.
// The binary part is kept in pieces, so that a large output goes out without a copy: a
// numeric output's piece is a view of the tensor's own bytes (the tensor is held in `held`
// for as long as the response lives); a BYTES output's is its encoding, in `owned`.
struct EncodedResponse {
  std::string json;
  std::vector<std::string_view> pieces;
  std::vector<Tensor> held;
  std::vector<std::unique_ptr<std::string>> owned;

  size_t binary_size() const;
  std::string binary() const;  // the binary part in one string (a copy: for tests)
};

// Encodes the outputs of a run (`outputs` in the order the request asked for them).
// Numbers are written as the shortest text that reads back to the same value.
Result<EncodedResponse> encode_infer_response(const std::string& model, const std::string& version,
                                              const InferRequest& request, const NamedTensors& outputs);

// {"error": "<message>"} (the message made valid UTF-8).
std::string error_json(const std::string& message);

}  // namespace bulkhead::serve
