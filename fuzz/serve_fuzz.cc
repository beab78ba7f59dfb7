// libFuzzer harness: what a client of `bulkhead serve` may send — an inference request in
// the REST binding's JSON form, in its binary tensor data form (a JSON header of a given
// length, then raw bytes), and in the gRPC binding's ModelInferRequest message — checked
// against a model with inputs of several kinds (fixed and free dimensions, BYTES, BOOL,
// INT8, FP16, an input of unknown rank). Each must be refused with an error or decoded; a
// decoded request's tensors are encoded back as a response in both bindings' forms.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "grpc_predict_v2.pb.h"
#include "serve/grpc_service.h"
#include "serve/oip.h"

using namespace bulkhead;
using namespace bulkhead::serve;

namespace {

IoInfo io(const std::string& name, DataType dt, std::vector<int64_t> shape, bool has_shape = true) {
  IoInfo i;
  i.name = name;
  i.dtype = dt;
  i.shape = std::move(shape);
  i.has_shape = has_shape;
  return i;
}

const std::vector<IoInfo>& model_inputs() {
  static const std::vector<IoInfo> v = {io("x", DataType::kFloat32, {1, -1, 2}), io("s", DataType::kString, {-1}),
                                        io("b", DataType::kBool, {2}), io("i", DataType::kInt8, {-1}),
                                        io("h", DataType::kFloat16, {-1}), io("u", DataType::kInt64, {}, false)};
  return v;
}
const std::vector<IoInfo>& model_outputs() {
  static const std::vector<IoInfo> v = {io("x", DataType::kFloat32, {1, -1, 2}), io("s", DataType::kString, {-1})};
  return v;
}
// Small limits, so that a hostile shape cannot ask for gigabytes.
RequestLimits limits() {
  RequestLimits l;
  l.max_elements = 1 << 16;
  return l;
}

void put(const std::string& dir, const std::string& name, uint8_t which, const std::string& payload) {
  std::string bytes(1, static_cast<char>(which));
  bytes += payload;
  if (FILE* f = std::fopen((dir + "/" + name).c_str(), "wb")) {
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
}

void write_seeds(const std::string& dir) {
  const std::string json =
      R"({"id":"a","inputs":[{"name":"x","shape":[1,2,2],"datatype":"FP32","data":[1,2.5,-3,"NaN"]},)"
      R"({"name":"s","shape":[2],"datatype":"BYTES","data":["ab",""]},)"
      R"({"name":"b","shape":[2],"datatype":"BOOL","data":[true,false]},)"
      R"({"name":"i","shape":[3],"datatype":"INT8","data":[[-128],[0],[127]]},)"
      R"({"name":"h","shape":[1],"datatype":"FP16","data":[0.5]},)"
      R"({"name":"u","shape":[],"datatype":"INT64","data":[7]}],"outputs":[{"name":"s"}]})";
  put(dir, "json", 0, json);
  const std::string header =
      R"({"inputs":[{"name":"x","shape":[1,1,2],"datatype":"FP32","parameters":{"binary_data_size":8}},)"
      R"({"name":"s","shape":[1],"datatype":"BYTES","parameters":{"binary_data_size":6}},)"
      R"({"name":"b","shape":[2],"datatype":"BOOL","data":[1,0]},)"
      R"({"name":"i","shape":[1],"datatype":"INT8","data":[1]},)"
      R"({"name":"h","shape":[1],"datatype":"FP16","parameters":{"binary_data_size":2}},)"
      R"({"name":"u","shape":[1],"datatype":"INT64","data":[1]}],"parameters":{"binary_data_output":true}})";
  std::string binary(8, '\0');
  binary += std::string("\x02\0\0\0ab", 6);
  binary += std::string("\x00\x3c", 2);
  std::string len(2, '\0');
  len[0] = static_cast<char>(header.size() & 0xff);
  len[1] = static_cast<char>(header.size() >> 8);
  put(dir, "binary", 1, len + header + binary);
  inference::ModelInferRequest q;
  q.set_model_name("m");
  q.set_id("g");
  auto add = [&](const char* name, const char* dt, std::vector<int64_t> shape, const std::string& raw) {
    auto* in = q.add_inputs();
    in->set_name(name);
    in->set_datatype(dt);
    for (int64_t d : shape) in->add_shape(d);
    q.add_raw_input_contents(raw);
  };
  add("x", "FP32", {1, 1, 2}, std::string(8, '\0'));
  add("s", "BYTES", {1}, std::string("\x02\0\0\0ab", 6));
  add("b", "BOOL", {2}, std::string("\x01\x00", 2));
  add("i", "INT8", {1}, std::string("\x80", 1));
  add("h", "FP16", {1}, std::string("\x00\x3c", 2));
  add("u", "INT64", {}, std::string(8, '\x01'));
  q.add_outputs()->set_name("x");
  put(dir, "grpc_raw", 2, q.SerializeAsString());
  // The same inputs in typed contents (FP16 stays raw only: refused, also worth a seed).
  inference::ModelInferRequest t = q;
  t.clear_raw_input_contents();
  t.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1.5f);
  t.mutable_inputs(0)->mutable_contents()->add_fp32_contents(-2);
  t.mutable_inputs(1)->mutable_contents()->add_bytes_contents("xy");
  t.mutable_inputs(2)->mutable_contents()->add_bool_contents(true);
  t.mutable_inputs(2)->mutable_contents()->add_bool_contents(false);
  t.mutable_inputs(3)->mutable_contents()->add_int_contents(-5);
  t.mutable_inputs(5)->mutable_contents()->add_int64_contents(3);
  put(dir, "grpc_typed", 2, t.SerializeAsString());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* d = std::getenv("BULKHEAD_FUZZ_SEEDS")) {
    write_seeds(d);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t which = data[0] % 3;
  std::string payload(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (which == 0 || which == 1) {
    std::optional<uint64_t> header_length;
    if (which == 1) {
      if (payload.size() < 2) return 0;
      header_length = static_cast<uint8_t>(payload[0]) | (uint64_t{static_cast<uint8_t>(payload[1])} << 8);
      payload.erase(0, 2);
    }
    auto r = parse_infer_request(payload, header_length, model_inputs(), model_outputs(), limits());
    if (r.is_ok()) {
      NamedTensors outs(r->inputs.begin(), r->inputs.end());
      InferRequest as_all = *r;
      as_all.outputs.clear();
      (void)encode_infer_response("m", "1", as_all, outs);
    }
    return 0;
  }
  inference::ModelInferRequest q;
  if (!q.ParseFromString(payload)) return 0;
  auto r = parse_grpc_infer_request(q, model_inputs(), model_outputs(), limits());
  if (r.is_ok()) {
    inference::ModelInferResponse resp;
    (void)encode_grpc_infer_response("m", "1", q.id(), r->inputs, &resp);
  }
  return 0;
}
