// The Open Inference Protocol's gRPC binding (src/serve/grpc_predict_v2.proto) for
// `bulkhead serve --grpc-port N`: the same models, queues, checks and errors as the REST
// binding (serve/server.h), answered from the same Server.
//
// Requests are checked exactly as REST ones are (serve/oip.h: name, datatype, shape,
// element count, each number's range for its datatype) before a byte is copied. Data comes
// in the InferTensorContents field of the input's datatype, or for all inputs in
// raw_input_contents; outputs go back in raw_output_contents. Errors are a gRPC status with
// one line: INVALID_ARGUMENT (the client's mistake), NOT_FOUND (unknown model or version),
// UNAVAILABLE (queue full, model loading or not ready), DEADLINE_EXCEEDED (request timeout),
// RESOURCE_EXHAUSTED (a message over --max-body, from gRPC itself), INTERNAL (a failed run).
//
// Ownership: the Server owns its GrpcFrontend, which borrows the Server. Thread-safety:
// RPCs run on gRPC's threads at once; shutdown() may be called from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bulkhead/bulkhead.hpp"
#include "serve/oip.h"

namespace inference {
class ModelInferRequest;
class ModelInferResponse;
}  // namespace inference

namespace bulkhead::serve {

class Server;

// A gRPC inference request, checked against the model (as parse_infer_request does for REST).
struct GrpcInferRequest {
  NamedTensors inputs;               // in the model's order of declaration
  std::vector<std::string> outputs;  // requested, in order; empty = every output
};
Result<GrpcInferRequest> parse_grpc_infer_request(const inference::ModelInferRequest& request,
                                                  const std::vector<IoInfo>& inputs,
                                                  const std::vector<IoInfo>& outputs,
                                                  const RequestLimits& limits = {});
// Fills `response` (model name and version, `id`, the outputs with raw_output_contents).
// `outputs` are the run's, in the order to send.
Status encode_grpc_infer_response(const std::string& model, const std::string& version, const std::string& id,
                                  const NamedTensors& outputs, inference::ModelInferResponse* response);

class GrpcFrontend {
 public:
  explicit GrpcFrontend(Server& server);
  ~GrpcFrontend();
  // Listens on host:port (0: any free port) with at most `threads` RPC threads and messages
  // up to `max_message_bytes`; returns the port bound.
  Result<int> start(const std::string& host, int port, int threads, uint64_t max_message_bytes);
  // Stops accepting; in-flight RPCs finish (up to `grace_ms`, then they are cancelled).
  void shutdown(int grace_ms = 30000);
  // Returns once shut down.
  void wait();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace bulkhead::serve
