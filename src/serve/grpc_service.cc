#include "serve/grpc_service.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <climits>
#include <limits>
#include <mutex>
#include <type_traits>
#include <utility>

#include "common/text.h"
#include "grpc_predict_v2.grpc.pb.h"
#include "serve/server.h"

namespace bulkhead::serve {
namespace {

namespace pb = inference;

std::string quoted(const std::string& s) { return "'" + printable(s) + "'"; }

Status input_error(const std::string& name, const std::string& what) {
  return invalid_argument("input " + quoted(name) + ": " + what);
}

// The InferTensorContents field each datatype's elements travel in.
const char* contents_field(DataType t) {
  switch (t) {
    case DataType::kBool: return "bool_contents";
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32: return "int_contents";
    case DataType::kInt64: return "int64_contents";
    case DataType::kUInt8:
    case DataType::kUInt16:
    case DataType::kUInt32: return "uint_contents";
    case DataType::kUInt64: return "uint64_contents";
    case DataType::kFloat32: return "fp32_contents";
    case DataType::kFloat64: return "fp64_contents";
    case DataType::kString: return "bytes_contents";
    default: return nullptr;  // FP16, BF16: raw only
  }
}

// Copies `from` (a repeated field) into a new tensor of element type T, each value checked
// to fit T.
template <typename T, typename Field>
Result<Tensor> typed_tensor(const Field& from, const std::string& name, const CheckedInput& in) {
  Tensor t = Tensor::host(in.dtype, in.shape);
  T* out = t.data<T>();
  for (int i = 0; i < from.size(); ++i) {
    const auto v = from.Get(i);
    using From = std::remove_cv_t<decltype(v)>;
    if constexpr (std::is_integral_v<From> && !std::is_same_v<From, bool> && !std::is_same_v<From, T>) {
      if (!std::in_range<T>(v))
        return input_error(name, "element " + std::to_string(i) + " (" + std::to_string(v) + ") is out of " +
                                     oip_datatype(in.dtype) + "'s range");
    }
    out[i] = static_cast<T>(v);
  }
  return t;
}

// An input's tensor from its InferTensorContents.
Result<Tensor> tensor_from_contents(const pb::InferTensorContents& c, const std::string& name, const CheckedInput& in) {
  const char* want = contents_field(in.dtype);
  if (!want)
    return input_error(name, oip_datatype(in.dtype) + " data must be sent in raw_input_contents");
  struct Count {
    const char* field;
    int n;
  };
  const Count counts[] = {{"bool_contents", c.bool_contents_size()},   {"int_contents", c.int_contents_size()},
                          {"int64_contents", c.int64_contents_size()}, {"uint_contents", c.uint_contents_size()},
                          {"uint64_contents", c.uint64_contents_size()}, {"fp32_contents", c.fp32_contents_size()},
                          {"fp64_contents", c.fp64_contents_size()},   {"bytes_contents", c.bytes_contents_size()}};
  int given = -1;
  for (const Count& k : counts) {
    if (std::string(k.field) == want) {
      given = k.n;
    } else if (k.n > 0) {
      return input_error(name, "its data is in " + std::string(k.field) + ", but " + oip_datatype(in.dtype) +
                                   " data goes in " + want);
    }
  }
  if (given != in.numel)
    return input_error(name, std::string(want) + " has " + std::to_string(given) + " elements, but shape " +
                                 shape_to_string(in.shape) + " has " + std::to_string(in.numel));
  switch (in.dtype) {
    case DataType::kBool: return typed_tensor<uint8_t>(c.bool_contents(), name, in);
    case DataType::kInt8: return typed_tensor<int8_t>(c.int_contents(), name, in);
    case DataType::kInt16: return typed_tensor<int16_t>(c.int_contents(), name, in);
    case DataType::kInt32: return typed_tensor<int32_t>(c.int_contents(), name, in);
    case DataType::kInt64: return typed_tensor<int64_t>(c.int64_contents(), name, in);
    case DataType::kUInt8: return typed_tensor<uint8_t>(c.uint_contents(), name, in);
    case DataType::kUInt16: return typed_tensor<uint16_t>(c.uint_contents(), name, in);
    case DataType::kUInt32: return typed_tensor<uint32_t>(c.uint_contents(), name, in);
    case DataType::kUInt64: return typed_tensor<uint64_t>(c.uint64_contents(), name, in);
    case DataType::kFloat32: return typed_tensor<float>(c.fp32_contents(), name, in);
    case DataType::kFloat64: return typed_tensor<double>(c.fp64_contents(), name, in);
    case DataType::kString: {
      Tensor t = Tensor::host(in.dtype, in.shape);
      for (int i = 0; i < c.bytes_contents_size(); ++i) t.strings()[i] = c.bytes_contents(i);
      return t;
    }
    default: return internal_error("no contents field for " + oip_datatype(in.dtype));
  }
}

grpc::Status to_grpc(const Status& st) {
  if (st.is_ok()) return grpc::Status::OK;
  grpc::StatusCode code = grpc::StatusCode::INTERNAL;
  switch (st.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kUnsupported: code = grpc::StatusCode::INVALID_ARGUMENT; break;
    case StatusCode::kNotFound: code = grpc::StatusCode::NOT_FOUND; break;
    case StatusCode::kResourceExhausted:
    case StatusCode::kUnavailable: code = grpc::StatusCode::UNAVAILABLE; break;
    case StatusCode::kDeadlineExceeded: code = grpc::StatusCode::DEADLINE_EXCEEDED; break;
    case StatusCode::kFailedPrecondition: code = grpc::StatusCode::FAILED_PRECONDITION; break;
    default: break;
  }
  return grpc::Status(code, valid_utf8(st.message()));
}

void fill_tensor_metadata(const std::vector<IoInfo>& ios,
                          google::protobuf::RepeatedPtrField<pb::ModelMetadataResponse::TensorMetadata>* out) {
  for (const IoInfo& io : ios) {
    auto* t = out->Add();
    t->set_name(io.name);
    const std::string dt = io.is_tensor ? oip_datatype(io.dtype) : "";
    t->set_datatype(dt.empty() ? "UNSUPPORTED" : dt);
    if (io.has_shape)
      for (int64_t d : io.shape) t->add_shape(d);
  }
}

// The repository extension takes no parameters here: refuse them rather than ignore them.
template <typename Request>
Status no_repository_parameters(const Request& r) {
  // repository_name: bulkhead serves one repository, which any name selects.
  if (r.parameters_size() > 0)
    return invalid_argument("parameter '" + printable(r.parameters().begin()->first) +
                            "' is not understood (bulkhead loads a model from its folder's config.json)");
  return Status::ok();
}

class Service final : public pb::GRPCInferenceService::Service {
 public:
  explicit Service(Server& server) : server_(server) {}

  grpc::Status ServerLive(grpc::ServerContext*, const pb::ServerLiveRequest*, pb::ServerLiveResponse* r) override {
    r->set_live(true);
    return grpc::Status::OK;
  }
  grpc::Status ServerReady(grpc::ServerContext*, const pb::ServerReadyRequest*, pb::ServerReadyResponse* r) override {
    r->set_ready(server_.ready());
    return grpc::Status::OK;
  }
  grpc::Status ModelReady(grpc::ServerContext*, const pb::ModelReadyRequest* q, pb::ModelReadyResponse* r) override {
    auto host = server_.lookup(q->name(), q->version());
    if (!host.is_ok()) {
      if (host.status().code() == StatusCode::kUnavailable) {  // loading
        r->set_ready(false);
        return grpc::Status::OK;
      }
      return to_grpc(host.status());
    }
    r->set_ready((*host)->ready());
    return grpc::Status::OK;
  }
  grpc::Status ServerMetadata(grpc::ServerContext*, const pb::ServerMetadataRequest*,
                              pb::ServerMetadataResponse* r) override {
    r->set_name("bulkhead");
    r->set_version(BULKHEAD_VERSION);
    r->add_extensions("model_repository");
    return grpc::Status::OK;
  }
  grpc::Status ModelMetadata(grpc::ServerContext*, const pb::ModelMetadataRequest* q,
                             pb::ModelMetadataResponse* r) override {
    auto host = server_.lookup(q->name(), q->version());
    if (!host.is_ok()) return to_grpc(host.status());
    r->set_name((*host)->name());
    for (const auto& v : server_.versions((*host)->name())) r->add_versions(v);
    r->set_platform("onnx");
    fill_tensor_metadata((*host)->inputs(), r->mutable_inputs());
    fill_tensor_metadata((*host)->outputs(), r->mutable_outputs());
    return grpc::Status::OK;
  }
  grpc::Status ModelInfer(grpc::ServerContext*, const pb::ModelInferRequest* q, pb::ModelInferResponse* r) override {
    auto host = server_.lookup(q->model_name(), q->model_version());
    if (!host.is_ok()) return to_grpc(host.status());
    ModelHost& h = **host;
    auto parsed = parse_grpc_infer_request(*q, h.inputs(), h.outputs());
    if (!parsed.is_ok()) return to_grpc(parsed.status().with_context("model '" + h.name() + "': "));
    auto out = server_.run(h, parsed->inputs, parsed->outputs);
    if (!out.is_ok()) return to_grpc(out.status());
    // The run returns the requested outputs in the order asked (all of them when none was).
    Status st = encode_grpc_infer_response(h.name(), std::to_string(h.version()), q->id(), *out, r);
    if (!st.is_ok()) return to_grpc(st);
    return grpc::Status::OK;
  }
  grpc::Status RepositoryIndex(grpc::ServerContext*, const pb::RepositoryIndexRequest* q,
                               pb::RepositoryIndexResponse* r) override {
    for (const auto& e : server_.index(q->ready())) {
      auto* m = r->add_models();
      m->set_name(e.name);
      m->set_version(e.version);
      m->set_state(e.state);
      m->set_reason(valid_utf8(e.reason));
    }
    return grpc::Status::OK;
  }
  grpc::Status RepositoryModelLoad(grpc::ServerContext*, const pb::RepositoryModelLoadRequest* q,
                                   pb::RepositoryModelLoadResponse*) override {
    if (Status st = no_repository_parameters(*q); !st.is_ok()) return to_grpc(st);
    if (!valid_model_name(q->model_name()))
      return to_grpc(invalid_argument("'" + printable(q->model_name()) + "' is not a valid model name"));
    Status st = server_.load_model(q->model_name());
    if (!st.is_ok()) {
      server_.log("error", "load_failed", q->model_name(), st.message());
      return to_grpc(st.code() == StatusCode::kNotFound ? st : Status(StatusCode::kInvalidArgument, st.message()));
    }
    return grpc::Status::OK;
  }
  grpc::Status RepositoryModelUnload(grpc::ServerContext*, const pb::RepositoryModelUnloadRequest* q,
                                     pb::RepositoryModelUnloadResponse*) override {
    if (Status st = no_repository_parameters(*q); !st.is_ok()) return to_grpc(st);
    return to_grpc(server_.unload_model(q->model_name()));
  }

 private:
  Server& server_;
};

}  // namespace

Result<GrpcInferRequest> parse_grpc_infer_request(const pb::ModelInferRequest& request,
                                                  const std::vector<IoInfo>& inputs,
                                                  const std::vector<IoInfo>& outputs, const RequestLimits& limits) {
  if (request.inputs_size() == 0) return invalid_argument("the request has no inputs");
  const bool raw = request.raw_input_contents_size() > 0;
  if (raw && request.raw_input_contents_size() != request.inputs_size())
    return invalid_argument("raw_input_contents has " + std::to_string(request.raw_input_contents_size()) +
                            " entries, but the request has " + std::to_string(request.inputs_size()) +
                            " inputs (one each, in order)");
  // Everything is checked before any data is copied.
  std::vector<bool> seen(inputs.size(), false);
  std::vector<CheckedInput> checked;
  checked.reserve(static_cast<size_t>(request.inputs_size()));
  for (const auto& in : request.inputs()) {
    Shape shape(in.shape().begin(), in.shape().end());
    BH_ASSIGN_OR_RETURN(CheckedInput c, check_input(in.name(), in.datatype(), shape, inputs, limits, seen));
    if (raw) {
      if (in.has_contents())
        return input_error(in.name(), "it has contents, but the request sends raw_input_contents (use one or the other)");
      BH_RETURN_IF_ERROR(check_raw_size(in.name(), c, request.raw_input_contents(static_cast<int>(checked.size())).size(),
                                        "its raw_input_contents"));
    } else if (!in.has_contents()) {
      return input_error(in.name(), "it has no contents, and the request no raw_input_contents");
    }
    checked.push_back(std::move(c));
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!seen[i]) return invalid_argument("missing input " + quoted(inputs[i].name));
  GrpcInferRequest r;
  for (const auto& o : request.outputs()) {
    BH_RETURN_IF_ERROR(check_requested_output(o.name(), outputs, r.outputs));
    r.outputs.push_back(o.name());
  }
  std::vector<Tensor> tensors(inputs.size());
  for (int i = 0; i < request.inputs_size(); ++i) {
    const auto& in = request.inputs(i);
    const CheckedInput& c = checked[static_cast<size_t>(i)];
    if (raw) {
      const std::string& bytes = request.raw_input_contents(i);
      BH_ASSIGN_OR_RETURN(tensors[c.model_index], tensor_from_raw(bytes.data(), bytes.size(), in.name(), c));
    } else {
      BH_ASSIGN_OR_RETURN(tensors[c.model_index], tensor_from_contents(in.contents(), in.name(), c));
    }
  }
  r.inputs.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) r.inputs.emplace_back(inputs[i].name, std::move(tensors[i]));
  return r;
}

Status encode_grpc_infer_response(const std::string& model, const std::string& version, const std::string& id,
                                  const NamedTensors& outputs, pb::ModelInferResponse* response) {
  response->set_model_name(model);
  response->set_model_version(version);
  if (!id.empty()) response->set_id(id);
  for (const auto& [name, t] : outputs) {
    const std::string datatype = t.defined() ? oip_datatype(t.dtype()) : "";
    if (datatype.empty())
      return unsupported("output " + quoted(name) + ": its type " + dtype_name(t.dtype()) +
                         " cannot be sent through the protocol");
    auto* o = response->add_outputs();
    o->set_name(name);
    o->set_datatype(datatype);
    for (int64_t d : t.shape()) o->add_shape(d);
    std::string* bytes = response->add_raw_output_contents();
    if (t.dtype() != DataType::kString) bytes->reserve(t.nbytes());
    BH_RETURN_IF_ERROR(append_raw(*bytes, name, t));
  }
  return Status::ok();
}

struct GrpcFrontend::Impl {
  explicit Impl(Server& s) : service(s) {}
  Service service;
  std::unique_ptr<grpc::Server> server;
  std::mutex mu;
  bool shut = false;
};

GrpcFrontend::GrpcFrontend(Server& server) : impl_(std::make_unique<Impl>(server)) {}

GrpcFrontend::~GrpcFrontend() {
  shutdown(0);
  wait();
}

Result<int> GrpcFrontend::start(const std::string& host, int port, int threads, uint64_t max_message_bytes) {
  grpc::ServerBuilder b;
  int bound = 0;
  // An IPv6 literal needs brackets in the address.
  const std::string addr = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
  b.AddListeningPort(addr, grpc::InsecureServerCredentials(), &bound);
  // Not SO_REUSEPORT (gRPC's default): a port another server holds is an error here, not a
  // port shared with it.
  b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  b.RegisterService(&impl_->service);
  b.SetMaxReceiveMessageSize(static_cast<int>(std::min<uint64_t>(max_message_bytes, INT_MAX)));
  b.SetMaxSendMessageSize(INT_MAX);
  grpc::ResourceQuota quota("bulkhead-grpc");
  quota.SetMaxThreads(std::max(2, threads));
  b.SetResourceQuota(quota);
  impl_->server = b.BuildAndStart();
  if (!impl_->server || bound <= 0)
    return Status(StatusCode::kUnavailable, "cannot listen for gRPC on " + printable(addr) +
                                                " (in use, or not an address here)");
  return bound;
}

void GrpcFrontend::shutdown(int grace_ms) {
  std::lock_guard lock(impl_->mu);
  if (!impl_->server || impl_->shut) return;
  impl_->shut = true;
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(grace_ms));
}

void GrpcFrontend::wait() {
  if (impl_->server) impl_->server->Wait();
}

}  // namespace bulkhead::serve
