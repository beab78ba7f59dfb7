// The gRPC binding's request checks and response encoding (serve/grpc_service.h), on
// protobuf messages built as a client builds them.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "grpc_predict_v2.pb.h"
#include "serve/grpc_service.h"
#include "support/test_util.h"

namespace bulkhead::serve {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;
using test::bitwise_equal;

IoInfo io(const std::string& name, DataType dt, std::vector<int64_t> shape) {
  IoInfo i;
  i.name = name;
  i.dtype = dt;
  i.shape = std::move(shape);
  i.has_shape = true;
  return i;
}

void expect_error(const Result<GrpcInferRequest>& r, std::initializer_list<std::string> parts) {
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().to_string();
  for (const auto& p : parts) EXPECT_NE(r.status().message().find(p), std::string::npos) << r.status().message();
  EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
}

// One tensor of every datatype, with the extremes of its range.
std::vector<Tensor> every_datatype() {
  std::vector<Tensor> v;
  v.push_back(Tensor::from_vector<uint8_t>(DataType::kBool, {3}, {1, 0, 1}));
  v.push_back(Tensor::from_vector<uint8_t>(DataType::kUInt8, {2}, {0, 255}));
  v.push_back(Tensor::from_vector<uint16_t>(DataType::kUInt16, {2}, {0, 65535}));
  v.push_back(Tensor::from_vector<uint32_t>(DataType::kUInt32, {2}, {0, 4294967295u}));
  v.push_back(Tensor::from_vector<uint64_t>(DataType::kUInt64, {2}, {0, std::numeric_limits<uint64_t>::max()}));
  v.push_back(Tensor::from_vector<int8_t>(DataType::kInt8, {2}, {-128, 127}));
  v.push_back(Tensor::from_vector<int16_t>(DataType::kInt16, {2}, {-32768, 32767}));
  v.push_back(Tensor::from_vector<int32_t>(DataType::kInt32, {2}, {std::numeric_limits<int32_t>::min(), 7}));
  v.push_back(Tensor::from_vector<int64_t>(DataType::kInt64, {2}, {std::numeric_limits<int64_t>::min(), 9}));
  v.push_back(Tensor::from_vector<uint16_t>(DataType::kFloat16, {2}, {0x3c00, 0xfc00}));
  v.push_back(Tensor::from_vector<float>(DataType::kFloat32, {2, 2}, {1.5f, -0.0f, FLT_MAX, 1e-40f}));
  v.push_back(Tensor::from_vector<double>(DataType::kFloat64, {1}, {-2.25}));
  v.push_back(Tensor::from_vector<uint16_t>(DataType::kBFloat16, {1}, {0x3f80}));
  Tensor s = Tensor::host(DataType::kString, {3});
  s.strings()[0] = "";
  s.strings()[1] = std::string("a\0b", 3);
  s.strings()[2] = "\xff\xfe not utf-8";
  v.push_back(s);
  return v;
}

// The tensor's elements in the InferTensorContents field of its datatype.
void put_typed(const Tensor& t, inference::InferTensorContents* c) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (t.dtype()) {
      case DataType::kBool: c->add_bool_contents(t.data<uint8_t>()[i] != 0); break;
      case DataType::kUInt8: c->add_uint_contents(t.data<uint8_t>()[i]); break;
      case DataType::kUInt16: c->add_uint_contents(t.data<uint16_t>()[i]); break;
      case DataType::kUInt32: c->add_uint_contents(t.data<uint32_t>()[i]); break;
      case DataType::kUInt64: c->add_uint64_contents(t.data<uint64_t>()[i]); break;
      case DataType::kInt8: c->add_int_contents(t.data<int8_t>()[i]); break;
      case DataType::kInt16: c->add_int_contents(t.data<int16_t>()[i]); break;
      case DataType::kInt32: c->add_int_contents(t.data<int32_t>()[i]); break;
      case DataType::kInt64: c->add_int64_contents(t.data<int64_t>()[i]); break;
      case DataType::kFloat32: c->add_fp32_contents(t.data<float>()[i]); break;
      case DataType::kFloat64: c->add_fp64_contents(t.data<double>()[i]); break;
      case DataType::kString: c->add_bytes_contents(t.strings()[i]); break;
      default: break;
    }
  }
}

TEST(GrpcCodec, EveryDatatypeRoundTripsRawAndTyped) {
  for (const Tensor& t : every_datatype()) {
    const std::string dt = oip_datatype(t.dtype());
    const std::vector<IoInfo> inputs = {io("x", t.dtype(), t.shape())};
    // The server's response encoding, read back as a client's raw input.
    ModelInferResponse resp;
    ASSERT_TRUE(encode_grpc_infer_response("m", "1", "id7", {{"x", t}}, &resp).is_ok()) << dt;
    EXPECT_EQ(resp.id(), "id7");
    ASSERT_EQ(resp.outputs_size(), 1);
    EXPECT_EQ(resp.outputs(0).datatype(), dt);
    ModelInferRequest raw;
    auto* in = raw.add_inputs();
    in->set_name("x");
    in->set_datatype(dt);
    for (int64_t d : t.shape()) in->add_shape(d);
    raw.add_raw_input_contents(resp.raw_output_contents(0));
    auto r = parse_grpc_infer_request(raw, inputs, inputs);
    ASSERT_TRUE(r.is_ok()) << dt << ": " << r.status().to_string();
    EXPECT_TRUE(bitwise_equal(r->inputs[0].second, t)) << dt;

    ModelInferRequest typed;
    auto* tin = typed.add_inputs();
    tin->CopyFrom(*in);
    put_typed(t, tin->mutable_contents());
    auto r2 = parse_grpc_infer_request(typed, inputs, inputs);
    if (t.dtype() == DataType::kFloat16 || t.dtype() == DataType::kBFloat16) {
      expect_error(r2, {"'x'", dt, "raw_input_contents"});
      continue;
    }
    ASSERT_TRUE(r2.is_ok()) << dt << ": " << r2.status().to_string();
    EXPECT_TRUE(bitwise_equal(r2->inputs[0].second, t)) << dt;
  }
}

ModelInferRequest typed_request(const std::string& datatype, std::vector<int64_t> shape) {
  ModelInferRequest q;
  auto* in = q.add_inputs();
  in->set_name("x");
  in->set_datatype(datatype);
  for (int64_t d : shape) in->add_shape(d);
  return q;
}

TEST(GrpcCodec, NumbersOutOfTheirDatatypesRangeAreRefused) {
  struct Case {
    DataType dt;
    bool is_signed;
    int64_t bad;
  };
  for (const Case& c : {Case{DataType::kInt8, true, 128}, Case{DataType::kInt8, true, -129},
                        Case{DataType::kInt16, true, 40000}, Case{DataType::kUInt8, false, 256},
                        Case{DataType::kUInt16, false, 70000}}) {
    const std::string dt = oip_datatype(c.dt);
    const std::vector<IoInfo> inputs = {io("x", c.dt, {2})};
    ModelInferRequest q = typed_request(dt, {2});
    auto* contents = q.mutable_inputs(0)->mutable_contents();
    if (c.is_signed) {
      contents->add_int_contents(1);
      contents->add_int_contents(static_cast<int32_t>(c.bad));
    } else {
      contents->add_uint_contents(1);
      contents->add_uint_contents(static_cast<uint32_t>(c.bad));
    }
    expect_error(parse_grpc_infer_request(q, inputs, inputs), {"'x'", "element 1", std::to_string(c.bad), dt});
  }
}

TEST(GrpcCodec, BadRequestsNameTheirProblem) {
  const std::vector<IoInfo> inputs = {io("x", DataType::kFloat32, {1, -1}), io("s", DataType::kString, {-1})};
  const std::vector<IoInfo> outputs = {io("y", DataType::kFloat32, {1})};
  auto both = [&] {
    ModelInferRequest q;
    auto* x = q.add_inputs();
    x->set_name("x");
    x->set_datatype("FP32");
    x->add_shape(1);
    x->add_shape(2);
    auto* s = q.add_inputs();
    s->set_name("s");
    s->set_datatype("BYTES");
    s->add_shape(1);
    std::string xb(8, '\0');
    q.add_raw_input_contents(xb);
    q.add_raw_input_contents(std::string("\x02\0\0\0ab", 6));
    return q;
  };
  ASSERT_TRUE(parse_grpc_infer_request(both(), inputs, outputs).is_ok());
  {
    auto q = both();
    q.set_raw_input_contents(1, std::string("\x09\0\0\0ab", 6));  // says 9 bytes, has 2
    expect_error(parse_grpc_infer_request(q, inputs, outputs), {"'s'", "says it has 9 bytes"});
  }
  {
    auto q = both();
    q.set_raw_input_contents(1, std::string("\x01\0\0\0ab", 6));  // a byte left over
    expect_error(parse_grpc_infer_request(q, inputs, outputs), {"'s'", "take 5 bytes"});
  }
  {
    auto q = both();
    q.mutable_raw_input_contents()->RemoveLast();
    expect_error(parse_grpc_infer_request(q, inputs, outputs), {"1 entries", "2 inputs"});
  }
  {
    auto q = both();
    q.mutable_inputs(0)->set_shape(1, std::numeric_limits<int64_t>::max());
    expect_error(parse_grpc_infer_request(q, inputs, outputs), {"'x'"});
  }
  {
    auto q = both();
    q.mutable_inputs(1)->set_name("x");
    expect_error(parse_grpc_infer_request(q, inputs, outputs), {"'x'", "twice"});
  }
  {
    auto q = both();
    q.mutable_inputs()->RemoveLast();
    q.mutable_raw_input_contents()->RemoveLast();
    expect_error(parse_grpc_infer_request(q, inputs, outputs), {"missing input 's'"});
  }
  {
    auto q = both();
    q.add_outputs()->set_name("y");
    q.add_outputs()->set_name("y");
    expect_error(parse_grpc_infer_request(q, inputs, outputs), {"'y'", "twice"});
  }
  {
    // BOOL raw bytes must be 0 or 1.
    const std::vector<IoInfo> b = {io("b", DataType::kBool, {2})};
    ModelInferRequest q = typed_request("BOOL", {2});
    q.mutable_inputs(0)->set_name("b");
    q.add_raw_input_contents(std::string("\x01\x02", 2));
    expect_error(parse_grpc_infer_request(q, b, b), {"'b'", "not 0 or 1"});
  }
  {
    ModelInferRequest q = typed_request("FP32", {1, 3});
    q.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1);
    q.mutable_inputs(0)->mutable_contents()->add_fp64_contents(1);
    expect_error(parse_grpc_infer_request(q, {inputs[0]}, outputs), {"fp64_contents", "fp32_contents"});
  }
  {
    ModelInferRequest q = typed_request("FP32", {1, 3});
    expect_error(parse_grpc_infer_request(q, {inputs[0]}, outputs), {"no contents"});
  }
}

TEST(GrpcCodec, AnOutputOfATypeTheProtocolCannotCarryIsAnError) {
  ModelInferResponse resp;
  Status st = encode_grpc_infer_response("m", "1", "", {{"q", Tensor::host(DataType::kFloat8E4M3FN, {2})}}, &resp);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("'q'"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace bulkhead::serve
