#include "serve/oip.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "support/test_util.h"

namespace bulkhead::serve {
namespace {

using json = nlohmann::json;
using test::bitwise_equal;

IoInfo io(const std::string& name, DataType dt, std::vector<int64_t> shape, bool has_shape = true) {
  IoInfo i;
  i.name = name;
  i.dtype = dt;
  i.shape = std::move(shape);
  i.has_shape = has_shape;
  return i;
}

// One input's JSON: {"name", "datatype", "shape", "data"}.
json input_json(const std::string& name, const std::string& datatype, const json& shape, const json& data) {
  return {{"name", name}, {"datatype", datatype}, {"shape", shape}, {"data", data}};
}
json binary_input_json(const std::string& name, const std::string& datatype, const json& shape, uint64_t size) {
  return {{"name", name}, {"datatype", datatype}, {"shape", shape}, {"parameters", {{"binary_data_size", size}}}};
}
// (A vector: `{x}` for a json x would be x itself, not [x].)
std::string request(const std::vector<json>& inputs) { return json{{"inputs", json(inputs)}}.dump(); }

// The error's message contains every part, is one line, and is the client's.
void expect_error(const Result<InferRequest>& r, std::initializer_list<std::string> parts) {
  ASSERT_FALSE(r.is_ok()) << "expected an error containing '" << (parts.size() ? *parts.begin() : "") << "'";
  const std::string m = r.status().message();
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  for (const auto& p : parts) EXPECT_NE(m.find(p), std::string::npos) << "'" << p << "' not in: " << m;
}

std::string le32(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

template <typename T>
Tensor make(DataType dt, Shape shape, std::vector<T> v) {
  return Tensor::from_vector(dt, std::move(shape), v);
}

Tensor strings(Shape shape, const std::vector<std::string>& v) {
  Tensor t = Tensor::host(DataType::kString, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) t.strings()[i] = v[i];
  return t;
}

bool same_tensor(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  if (a.dtype() != DataType::kString) return bitwise_equal(a, b);
  for (int64_t i = 0; i < a.numel(); ++i)
    if (a.strings()[i] != b.strings()[i]) return false;
  return true;
}

// `t` written as a JSON output, its "data" sent back as an input of the same model type.
Result<InferRequest> through_json(const Tensor& t) {
  InferRequest none;
  auto enc = encode_infer_response("m", "1", none, {{"x", t}});
  if (!enc.is_ok()) return enc.status();
  EXPECT_EQ(enc->binary_size(), 0u);
  json out = json::parse(enc->json)["outputs"][0];
  EXPECT_EQ(out["datatype"], oip_datatype(t.dtype()));
  EXPECT_EQ(out["shape"], json(t.shape()));
  return parse_infer_request(request({input_json("x", out["datatype"], out["shape"], out["data"])}), std::nullopt,
                             {io("x", t.dtype(), t.shape())}, {});
}

// `t` written as a binary output, sent back as a binary input.
Result<InferRequest> through_binary(const Tensor& t) {
  InferRequest want;
  want.binary_output = true;
  auto enc = encode_infer_response("m", "1", want, {{"x", t}});
  if (!enc.is_ok()) return enc.status();
  json out = json::parse(enc->json)["outputs"][0];
  EXPECT_FALSE(out.contains("data"));
  EXPECT_EQ(out["parameters"]["binary_data_size"], enc->binary_size());
  std::string head = request({binary_input_json("x", out["datatype"], out["shape"], enc->binary_size())});
  return parse_infer_request(head + enc->binary(), head.size(), {io("x", t.dtype(), t.shape())}, {});
}

// One tensor of every datatype, with the extremes of its range.
std::vector<Tensor> every_datatype() {
  const Shape s = {2, 2};
  return {
      make<uint8_t>(DataType::kBool, s, {1, 0, 1, 1}),
      make<uint8_t>(DataType::kUInt8, s, {0, 1, 127, 255}),
      make<uint16_t>(DataType::kUInt16, s, {0, 1, 300, 65535}),
      make<uint32_t>(DataType::kUInt32, s, {0, 7, 65536, 4294967295u}),
      make<uint64_t>(DataType::kUInt64, s, {0, 42, (uint64_t{1} << 53) + 1, std::numeric_limits<uint64_t>::max()}),
      make<int8_t>(DataType::kInt8, s, {-128, 127, 0, -1}),
      make<int16_t>(DataType::kInt16, s, {-32768, 32767, 0, -1}),
      make<int32_t>(DataType::kInt32, s,
                    {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), 0, -1}),
      make<int64_t>(
          DataType::kInt64, s,
          {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), (int64_t{1} << 53) + 1, -1}),
      // -0, 65504 (the largest), the smallest subnormal, ~1/3
      make<uint16_t>(DataType::kFloat16, s, {0x8000, 0x7bff, 0x0001, 0x3555}),
      make<float>(DataType::kFloat32, s, {0.1f, -0.0f, FLT_MAX, std::numeric_limits<float>::denorm_min()}),
      make<double>(DataType::kFloat64, s, {0.1, -0.0, DBL_MAX, std::numeric_limits<double>::denorm_min()}),
      // 1, the most negative finite, the smallest subnormal, -0
      make<uint16_t>(DataType::kBFloat16, s, {0x3f80, 0xff7f, 0x0001, 0x8000}),
      strings(s, {"", "hello", "quote \" backslash \\ newline \n tab \t \x01", "\xc3\xbcn\xc3\xaf \xe2\x82\xac"}),
  };
}

TEST(Oip, DatatypeNames) {
  const std::vector<std::pair<DataType, std::string>> names = {
      {DataType::kBool, "BOOL"},     {DataType::kUInt8, "UINT8"},   {DataType::kUInt16, "UINT16"},
      {DataType::kUInt32, "UINT32"}, {DataType::kUInt64, "UINT64"}, {DataType::kInt8, "INT8"},
      {DataType::kInt16, "INT16"},   {DataType::kInt32, "INT32"},   {DataType::kInt64, "INT64"},
      {DataType::kFloat16, "FP16"},  {DataType::kFloat32, "FP32"},  {DataType::kFloat64, "FP64"},
      {DataType::kBFloat16, "BF16"}, {DataType::kString, "BYTES"},
  };
  for (const auto& [t, n] : names) {
    EXPECT_EQ(oip_datatype(t), n);
    EXPECT_EQ(from_oip_datatype(n), t) << n;
  }
  EXPECT_EQ(oip_datatype(DataType::kFloat8E4M3FN), "");
  EXPECT_EQ(oip_datatype(DataType::kInt4), "");
  EXPECT_EQ(oip_datatype(DataType::kUndefined), "");
  EXPECT_EQ(from_oip_datatype("fp32"), DataType::kUndefined);
  EXPECT_EQ(from_oip_datatype("FLOAT"), DataType::kUndefined);
  EXPECT_EQ(from_oip_datatype(""), DataType::kUndefined);
}

TEST(Oip, JsonRoundTripEveryDatatype) {
  for (const Tensor& t : every_datatype()) {
    if (t.dtype() == DataType::kBFloat16) continue;  // binary only (BF16InJsonIsRefused)
    auto r = through_json(t);
    ASSERT_TRUE(r.is_ok()) << oip_datatype(t.dtype()) << ": " << r.status().to_string();
    ASSERT_EQ(r->inputs.size(), 1u);
    EXPECT_EQ(r->inputs[0].first, "x");
    EXPECT_TRUE(same_tensor(r->inputs[0].second, t)) << oip_datatype(t.dtype());
  }
}

TEST(Oip, BinaryRoundTripEveryDatatype) {
  std::vector<Tensor> all = every_datatype();
  // Binary BYTES carry any bytes: NULs and invalid UTF-8 too.
  all.push_back(strings({3}, {std::string("a\0b", 3), "\xff\xfe", std::string(300, 'z')}));
  for (const Tensor& t : all) {
    auto r = through_binary(t);
    ASSERT_TRUE(r.is_ok()) << oip_datatype(t.dtype()) << ": " << r.status().to_string();
    ASSERT_EQ(r->inputs.size(), 1u);
    EXPECT_TRUE(same_tensor(r->inputs[0].second, t)) << oip_datatype(t.dtype());
  }
}

TEST(Oip, JsonValuesAreReadAsWritten) {
  const std::string body = request({
      input_json("u8", "UINT8", {3}, {0, 200, 255}),
      input_json("i64", "INT64", {2}, {json(-9223372036854775807LL - 1), json(9223372036854775807LL)}),
      input_json("u64", "UINT64", {1}, json::array({json(18446744073709551615ULL)})),
      input_json("b", "BOOL", {2}, {true, false}),
      input_json("f", "FP32", {3}, {1, 0.5, -2.25}),
      input_json("h", "FP16", {2}, {1.5, -2}),
      input_json("i32", "INT32", {2}, {3.0, -7.0}),  // integral floats are integers
      input_json("s", "BYTES", {2}, {"a", ""}),
  });
  std::vector<IoInfo> in = {io("u8", DataType::kUInt8, {3}),   io("i64", DataType::kInt64, {2}),
                            io("u64", DataType::kUInt64, {1}), io("b", DataType::kBool, {2}),
                            io("f", DataType::kFloat32, {3}),  io("h", DataType::kFloat16, {2}),
                            io("i32", DataType::kInt32, {2}),  io("s", DataType::kString, {2})};
  auto r = parse_infer_request(body, std::nullopt, in, {});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const auto& v = r->inputs;
  ASSERT_EQ(v.size(), 8u);
  EXPECT_EQ(v[0].second.data<uint8_t>()[1], 200);
  EXPECT_EQ(v[1].second.data<int64_t>()[0], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(v[1].second.data<int64_t>()[1], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(v[2].second.data<uint64_t>()[0], std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(v[3].second.data<uint8_t>()[0], 1);
  EXPECT_EQ(v[3].second.data<uint8_t>()[1], 0);
  EXPECT_EQ(v[4].second.data<float>()[0], 1.f);
  EXPECT_EQ(v[4].second.data<float>()[2], -2.25f);
  EXPECT_EQ(v[5].second.data<uint16_t>()[0], float_to_half(1.5f));
  EXPECT_EQ(v[5].second.data<uint16_t>()[1], float_to_half(-2.f));
  EXPECT_EQ(v[6].second.data<int32_t>()[0], 3);
  EXPECT_EQ(v[6].second.data<int32_t>()[1], -7);
  EXPECT_EQ(v[7].second.strings()[0], "a");
}

TEST(Oip, EveryHalfAndManyFloatsRoundTripThroughJson) {
  Tensor h = Tensor::host(DataType::kFloat16, {65536});
  for (uint32_t i = 0; i < 65536; ++i) h.data<uint16_t>()[i] = static_cast<uint16_t>(i);
  auto r = through_json(h);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const uint16_t* back = r->inputs[0].second.data<uint16_t>();
  for (uint32_t i = 0; i < 65536; ++i) {
    if (std::isnan(half_to_float(static_cast<uint16_t>(i)))) {
      EXPECT_TRUE(std::isnan(half_to_float(back[i]))) << i;
    } else {
      ASSERT_EQ(back[i], i);
    }
  }

  std::mt19937_64 rng(7);
  const int n = 100000;
  Tensor f = Tensor::host(DataType::kFloat32, {n});
  Tensor d = Tensor::host(DataType::kFloat64, {n});
  for (int i = 0; i < n; ++i) {
    uint32_t fb;
    uint64_t db;
    do fb = static_cast<uint32_t>(rng());
    while ((fb & 0x7f800000u) == 0x7f800000u);  // finite only: NaN payloads are not kept
    do db = rng();
    while ((db & 0x7ff0000000000000ull) == 0x7ff0000000000000ull);
    if (i < 1000) fb &= 0x807fffffu, db &= 0x800fffffffffffffull;  // subnormals
    std::memcpy(f.data<float>() + i, &fb, 4);
    std::memcpy(d.data<double>() + i, &db, 8);
  }
  // The one float whose shortest text does not read back through a double.
  Tensor odd = make<float>(DataType::kFloat32, {2}, {0x1.5c87fap-84f, -0x1.5c87fap-84f});
  for (const Tensor& t : {f, d, odd}) {
    auto rt = through_json(t);
    ASSERT_TRUE(rt.is_ok()) << rt.status().to_string();
    EXPECT_TRUE(bitwise_equal(rt->inputs[0].second, t)) << oip_datatype(t.dtype());
  }
}

TEST(Oip, NestedData) {
  std::vector<IoInfo> in = {io("x", DataType::kInt32, {2, 3})};
  auto flat =
      parse_infer_request(request({input_json("x", "INT32", {2, 3}, {1, 2, 3, 4, 5, 6})}), std::nullopt, in, {});
  auto nested = parse_infer_request(request({input_json("x", "INT32", {2, 3}, json::parse("[[1,2,3],[4,5,6]]"))}),
                                    std::nullopt, in, {});
  ASSERT_TRUE(flat.is_ok()) << flat.status().to_string();
  ASSERT_TRUE(nested.is_ok()) << nested.status().to_string();
  EXPECT_TRUE(bitwise_equal(flat->inputs[0].second, nested->inputs[0].second));
  EXPECT_EQ(nested->inputs[0].second.data<int32_t>()[3], 4);

  std::vector<IoInfo> in3 = {io("x", DataType::kFloat32, {2, 1, 2})};
  auto deep = parse_infer_request(request({input_json("x", "FP32", {2, 1, 2}, json::parse("[[[1,2]],[[3,4]]]"))}),
                                  std::nullopt, in3, {});
  ASSERT_TRUE(deep.is_ok()) << deep.status().to_string();
  EXPECT_EQ(deep->inputs[0].second.data<float>()[2], 3.f);

  // A scalar: shape [], data [v].
  auto scalar = parse_infer_request(request({input_json("x", "INT64", json::array(), {7})}), std::nullopt,
                                    {io("x", DataType::kInt64, {})}, {});
  ASSERT_TRUE(scalar.is_ok()) << scalar.status().to_string();
  EXPECT_EQ(scalar->inputs[0].second.rank(), 0);
  EXPECT_EQ(*scalar->inputs[0].second.data<int64_t>(), 7);

  // Empty tensors.
  auto empty = parse_infer_request(request({input_json("x", "FP32", {0, 3}, json::array())}), std::nullopt,
                                   {io("x", DataType::kFloat32, {-1, 3})}, {});
  ASSERT_TRUE(empty.is_ok()) << empty.status().to_string();
  EXPECT_EQ(empty->inputs[0].second.numel(), 0);
}

TEST(Oip, DataNestedDeeperThanItsShapeIsRefused) {
  expect_error(parse_infer_request(request({input_json("x", "INT32", {2}, json::parse("[[[1]],[[2]]]"))}), std::nullopt,
                                   {io("x", DataType::kInt32, {2})}, {}),
               {"input 'x'", "nests"});
  expect_error(parse_infer_request(request({input_json("x", "INT32", {2, 2}, json::parse("[[[1,2]],[[3,4]]]"))}),
                                   std::nullopt, {io("x", DataType::kInt32, {2, 2})}, {}),
               {"input 'x'", "nests"});
}

TEST(Oip, NestingBombIsAnErrorNotACrash) {
  const int levels = 100000;
  const std::string bomb = std::string(levels, '[') + "1" + std::string(levels, ']');
  std::vector<IoInfo> in = {io("x", DataType::kFloat32, {1})};
  // In "data", as a whole body, in "parameters", unclosed, and for an input of unknown rank.
  const std::string in_data = R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":)" + bomb + "}]}";
  expect_error(parse_infer_request(in_data, std::nullopt, in, {}), {"nests"});
  expect_error(parse_infer_request(bomb, std::nullopt, in, {}), {"nests"});
  expect_error(parse_infer_request(R"({"parameters":{"p":)" + bomb + "}}", std::nullopt, in, {}), {"nests"});
  expect_error(parse_infer_request(std::string(levels, '['), std::nullopt, in, {}), {});
  expect_error(parse_infer_request(std::string(levels, '{'), std::nullopt, in, {}), {});
  expect_error(parse_infer_request(in_data, std::nullopt, {io("x", DataType::kFloat32, {}, false)}, {}), {});
  // Brackets inside strings do not count.
  const std::string quoted = R"({"id":")" + std::string(levels, '[') +
                             R"(","inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]}]})";
  auto r = parse_infer_request(quoted, std::nullopt, in, {});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->id.size(), static_cast<size_t>(levels));
}

TEST(Oip, UnknownInput) {
  std::vector<IoInfo> in = {io("x", DataType::kFloat32, {1})};
  expect_error(parse_infer_request(request({input_json("x", "FP32", {1}, {1}), input_json("z", "FP32", {1}, {1})}),
                                   std::nullopt, in, {}),
               {"unknown input 'z'", "'x'"});
  // A name with a newline stays on one line.
  expect_error(parse_infer_request(request({input_json("a\nb", "FP32", {1}, {1})}), std::nullopt, in, {}),
               {"unknown input 'a"});
}

TEST(Oip, DuplicateInput) {
  std::vector<IoInfo> in = {io("x", DataType::kFloat32, {1})};
  expect_error(parse_infer_request(request({input_json("x", "FP32", {1}, {1}), input_json("x", "FP32", {1}, {2})}),
                                   std::nullopt, in, {}),
               {"input 'x' is given twice"});
}

TEST(Oip, MissingInput) {
  std::vector<IoInfo> in = {io("x", DataType::kFloat32, {1}), io("y", DataType::kFloat32, {1})};
  expect_error(parse_infer_request(request({input_json("x", "FP32", {1}, {1})}), std::nullopt, in, {}),
               {"missing input 'y'"});
  expect_error(parse_infer_request(R"({"inputs":[]})", std::nullopt, in, {}), {"inputs"});
  expect_error(parse_infer_request(R"({"id":"a"})", std::nullopt, in, {}), {"inputs"});
}

TEST(Oip, InputsAreInTheModelsOrder) {
  std::vector<IoInfo> in = {io("a", DataType::kInt32, {1}), io("b", DataType::kFloat32, {1}),
                            io("c", DataType::kBool, {1})};
  auto r = parse_infer_request(request({input_json("c", "BOOL", {1}, {true}), input_json("a", "INT32", {1}, {5}),
                                        input_json("b", "FP32", {1}, {2.5})}),
                               std::nullopt, in, {});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->inputs.size(), 3u);
  EXPECT_EQ(r->inputs[0].first, "a");
  EXPECT_EQ(r->inputs[1].first, "b");
  EXPECT_EQ(r->inputs[2].first, "c");
  EXPECT_EQ(r->inputs[0].second.data<int32_t>()[0], 5);
  EXPECT_EQ(r->inputs[1].second.data<float>()[0], 2.5f);
  EXPECT_EQ(r->inputs[2].second.data<uint8_t>()[0], 1);
}

TEST(Oip, WrongDatatype) {
  std::vector<IoInfo> in = {io("x", DataType::kFloat32, {1})};
  auto r = parse_infer_request(request({input_json("x", "FP64", {1}, {1})}), std::nullopt, in, {});
  expect_error(r, {"input 'x': datatype FP64 does not match the model's FP32"});
  expect_error(parse_infer_request(request({input_json("x", "fp32", {1}, {1})}), std::nullopt, in, {}),
               {"input 'x'", "fp32"});
  expect_error(parse_infer_request(request({input_json("x", "FLOAT32", {1}, {1})}), std::nullopt, in, {}),
               {"input 'x'", "FLOAT32"});
  // A model type the protocol cannot carry.
  expect_error(parse_infer_request(request({input_json("x", "UINT8", {1}, {1})}), std::nullopt,
                                   {io("x", DataType::kFloat8E4M3FN, {1})}, {}),
               {"input 'x'", "cannot be sent"});
}

TEST(Oip, WrongRank) {
  std::vector<IoInfo> in = {io("x", DataType::kFloat32, {-1, 3})};
  expect_error(parse_infer_request(request({input_json("x", "FP32", {3}, {1, 2, 3})}), std::nullopt, in, {}),
               {"input 'x'", "rank 1", "rank 2"});
  // Unknown rank: any rank goes.
  auto r = parse_infer_request(request({input_json("x", "FP32", {1, 1, 3}, {1, 2, 3})}), std::nullopt,
                               {io("x", DataType::kFloat32, {}, false)}, {});
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
}

TEST(Oip, WrongFixedDimension) {
  std::vector<IoInfo> in = {io("x", DataType::kFloat32, {-1, 3})};
  expect_error(parse_infer_request(request({input_json("x", "FP32", {1, 4}, {1, 2, 3, 4})}), std::nullopt, in, {}),
               {"input 'x'", "dimension 1", "is 4", "model's is 3"});
  // The free dimension takes any size.
  auto r = parse_infer_request(request({input_json("x", "FP32", {2, 3}, {1, 2, 3, 4, 5, 6})}), std::nullopt, in, {});
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
}

TEST(Oip, BadDimensions) {
  std::vector<IoInfo> in = {io("x", DataType::kFloat32, {-1, -1})};
  expect_error(parse_infer_request(request({input_json("x", "FP32", {-1, 2}, {1, 2})}), std::nullopt, in, {}),
               {"input 'x'", "negative"});
  expect_error(parse_infer_request(request({input_json("x", "FP32", {1.5, 2}, {1, 2})}), std::nullopt, in, {}),
               {"input 'x'", "dimension 0"});
  expect_error(parse_infer_request(request({input_json("x", "FP32", {1, "2"}, {1, 2})}), std::nullopt, in, {}),
               {"input 'x'", "dimension 1"});
  expect_error(parse_infer_request(request({input_json("x", "FP32", {json(18446744073709551615ULL), 1}, {1})}),
                                   std::nullopt, in, {}),
               {"input 'x'", "too large"});
  json no_shape = input_json("x", "FP32", {1}, {1});
  no_shape.erase("shape");
  expect_error(parse_infer_request(request({no_shape}), std::nullopt, in, {}), {"input 'x'", "shape"});
}

TEST(Oip, ElementCountOverflowAndLimit) {
  std::vector<IoInfo> in = {io("x", DataType::kFloat32, {}, false)};
  expect_error(parse_infer_request(request({input_json("x", "FP32", {int64_t{1} << 40, int64_t{1} << 40}, {1})}),
                                   std::nullopt, in, {}),
               {"input 'x'", "overflows"});
  // Within int64 but past the limit: refused before the data is looked at.
  expect_error(parse_infer_request(request({input_json("x", "FP32", {int64_t{1} << 40}, {1})}), std::nullopt, in, {}),
               {"input 'x'", "limit"});
  RequestLimits small;
  small.max_elements = 10;
  expect_error(parse_infer_request(request({input_json("x", "FP32", {11}, json(std::vector<int>(11, 1)))}),
                                   std::nullopt, in, {}, small),
               {"input 'x'", "11 elements", "limit of 10"});
  EXPECT_TRUE(parse_infer_request(request({input_json("x", "FP32", {10}, json(std::vector<int>(10, 1)))}), std::nullopt,
                                  in, {}, small)
                  .is_ok());
  // A binary input of the overflowing shape.
  std::string head = request({binary_input_json("x", "FP32", {int64_t{1} << 40, int64_t{1} << 40}, 4)});
  expect_error(parse_infer_request(head + "abcd", head.size(), in, {}), {"input 'x'", "overflows"});
}

TEST(Oip, ElementCountMismatch) {
  std::vector<IoInfo> in = {io("x", DataType::kFloat32, {2, 3})};
  expect_error(parse_infer_request(request({input_json("x", "FP32", {2, 3}, {1, 2, 3, 4, 5})}), std::nullopt, in, {}),
               {"input 'x'", "\"data\" has 5 elements", "6"});
  expect_error(parse_infer_request(request({input_json("x", "FP32", {2, 3}, json::parse("[[1,2,3],[4,5,6,7]]"))}),
                                   std::nullopt, in, {}),
               {"input 'x'", "7 elements"});
  // A huge shape with a little data is refused without allocating the shape's size.
  expect_error(parse_infer_request(request({input_json("x", "FP32", {1 << 30}, {1})}), std::nullopt,
                                   {io("x", DataType::kFloat32, {-1})}, {}),
               {"input 'x'", "1 elements"});
  expect_error(parse_infer_request(request({input_json("x", "FP32", {2, 3}, 5)}), std::nullopt, in, {}),
               {"input 'x'", "array"});
}

TEST(Oip, IntegerOutOfRange) {
  auto one = [](const std::string& dt, DataType t, const json& data) {
    return parse_infer_request(request({input_json("x", dt, {3}, data)}), std::nullopt, {io("x", t, {3})}, {});
  };
  expect_error(one("UINT8", DataType::kUInt8, {1, 2, 300}), {"input 'x'", "element 2", "300", "out of range", "UINT8"});
  expect_error(one("UINT8", DataType::kUInt8, {-1, 2, 3}), {"input 'x'", "element 0", "-1", "UINT8"});
  expect_error(one("INT8", DataType::kInt8, {0, -129, 0}), {"input 'x'", "element 1", "-129", "INT8"});
  expect_error(one("INT8", DataType::kInt8, {0, 128, 0}), {"element 1", "128"});
  expect_error(one("UINT16", DataType::kUInt16, {0, 0, 65536}), {"element 2", "UINT16"});
  expect_error(one("INT16", DataType::kInt16, {0, 0, -32769}), {"element 2", "INT16"});
  expect_error(one("UINT32", DataType::kUInt32, {0, 4294967296LL, 0}), {"element 1", "UINT32"});
  expect_error(one("INT32", DataType::kInt32, {0, 2147483648LL, 0}), {"element 1", "INT32"});
  expect_error(one("INT64", DataType::kInt64, {0, 0, json(9223372036854775808ULL)}), {"element 2", "INT64"});
  expect_error(one("UINT64", DataType::kUInt64, {0, 0, -1}), {"element 2", "UINT64"});
  // Past uint64: parsed as a double, still out of range.
  expect_error(
      parse_infer_request(R"({"inputs":[{"name":"x","datatype":"UINT64","shape":[1],"data":[18446744073709551616]}]})",
                          std::nullopt, {io("x", DataType::kUInt64, {1})}, {}),
      {"input 'x'", "element 0", "out of range"});
  expect_error(one("INT32", DataType::kInt32, {0, 0, 1e10}), {"element 2", "out of range"});
  // Floats past FP32 and FP16.
  expect_error(one("FP32", DataType::kFloat32, {0, 1e39, 0}), {"input 'x'", "element 1", "FP32"});
  expect_error(one("FP16", DataType::kFloat16, {0, 70000, 0}), {"input 'x'", "element 1", "FP16"});
  EXPECT_TRUE(one("FP16", DataType::kFloat16, {0, 65504, -65504}).is_ok());
  EXPECT_TRUE(one("FP32", DataType::kFloat32, {0, 3.4028235e38, -3.4028235e38}).is_ok());
}

TEST(Oip, NonIntegralAndNonNumericElements) {
  auto one = [](const std::string& dt, DataType t, const json& data) {
    return parse_infer_request(request({input_json("x", dt, {2}, data)}), std::nullopt, {io("x", t, {2})}, {});
  };
  expect_error(one("INT32", DataType::kInt32, {1, 1.5}), {"input 'x'", "element 1", "1.5", "not an integer"});
  expect_error(one("UINT8", DataType::kUInt8, {0.25, 1}), {"input 'x'", "element 0", "not an integer"});
  expect_error(one("INT32", DataType::kInt32, {1, "2"}), {"input 'x'", "element 1", "string"});
  expect_error(one("INT32", DataType::kInt32, {nullptr, 2}), {"input 'x'", "element 0", "null"});
  expect_error(one("FP32", DataType::kFloat32, {1, "one"}), {"input 'x'", "element 1", "not a number"});
  expect_error(one("FP32", DataType::kFloat32, {json::object(), 1}), {"input 'x'", "element 0", "object"});
  // BOOL takes true and false only.
  expect_error(one("BOOL", DataType::kBool, {true, 1}), {"input 'x'", "element 1", "not true or false"});
  expect_error(one("BYTES", DataType::kString, {"a", 1}), {"input 'x'", "element 1", "not a string"});
}

TEST(Oip, Bf16InJsonIsRefused) {
  expect_error(parse_infer_request(request({input_json("x", "BF16", {1}, {1.0})}), std::nullopt,
                                   {io("x", DataType::kBFloat16, {1})}, {}),
               {"input 'x': BF16 data must be sent as binary"});
}

TEST(Oip, MalformedJson) {
  std::vector<IoInfo> in = {io("x", DataType::kFloat32, {1})};
  for (const std::string& body :
       std::vector<std::string>{"", "{", "{\"inputs\": [}", "not json", "{\"inputs\":[{\"name\":\"x\"\n\n,}]}",
                                std::string("{\"id\":\"\xff\"}")}) {
    auto r = parse_infer_request(body, std::nullopt, in, {});
    expect_error(r, {"the request body is not valid JSON: "});
    if (!r.is_ok()) {
      EXPECT_LT(r.status().message().size(), 400u) << r.status().message();
    }
  }
  expect_error(parse_infer_request("[1,2]", std::nullopt, in, {}), {"JSON object"});
  expect_error(parse_infer_request(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]}],"id":5})",
                                   std::nullopt, in, {}),
               {"\"id\""});
  expect_error(
      parse_infer_request(
          R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]}],"parameters":{"binary_data_output":1}})",
          std::nullopt, in, {}),
      {"binary_data_output"});
  expect_error(parse_infer_request(R"({"inputs":[5]})", std::nullopt, in, {}), {"inputs[0]"});
  expect_error(parse_infer_request(R"({"inputs":[{"datatype":"FP32","shape":[1],"data":[1]}]})", std::nullopt, in, {}),
               {"inputs[0]", "name"});
  json neither = input_json("x", "FP32", {1}, {1});
  neither.erase("data");
  expect_error(parse_infer_request(request({neither}), std::nullopt, in, {}), {"input 'x'", "neither"});
}

TEST(Oip, HeaderLengthLargerThanBody) {
  const std::string body = request({input_json("x", "FP32", {1}, {1})});
  expect_error(parse_infer_request(body, body.size() + 1, {io("x", DataType::kFloat32, {1})}, {}),
               {"Inference-Header-Content-Length", std::to_string(body.size() + 1), std::to_string(body.size())});
  // Exactly the body: no binary part.
  EXPECT_TRUE(parse_infer_request(body, body.size(), {io("x", DataType::kFloat32, {1})}, {}).is_ok());
}

TEST(Oip, BinaryAndJsonInputsMixed) {
  std::vector<IoInfo> in = {io("a", DataType::kFloat32, {2}), io("b", DataType::kInt64, {1}),
                            io("c", DataType::kString, {2}), io("d", DataType::kUInt8, {3})};
  const float a[2] = {1.5f, -2.f};
  const int64_t b = -42;
  std::string bin;
  bin.append(reinterpret_cast<const char*>(a), 8);
  bin += le32(3) + "abc" + le32(0);
  bin.append(reinterpret_cast<const char*>(&b), 8);
  // Binary parts follow the request's order of inputs: a, c, b.
  std::string head = request({binary_input_json("a", "FP32", {2}, 8), input_json("d", "UINT8", {3}, {1, 2, 3}),
                              binary_input_json("c", "BYTES", {2}, 11), binary_input_json("b", "INT64", {1}, 8)});
  auto r = parse_infer_request(head + bin, head.size(), in, {});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->inputs[0].second.data<float>()[1], -2.f);
  EXPECT_EQ(r->inputs[1].second.data<int64_t>()[0], -42);
  EXPECT_EQ(r->inputs[2].second.strings()[0], "abc");
  EXPECT_EQ(r->inputs[2].second.strings()[1], "");
  EXPECT_EQ(r->inputs[3].second.data<uint8_t>()[2], 3);
}

// With the body in a host buffer (as the server reads it), a numeric binary input whose
// bytes lie 64-byte aligned in it is a view of the buffer; one that is not aligned, BOOL
// (checked byte by byte) and BYTES are copies. Either way the values are the request's.
TEST(Oip, AlignedBinaryInputsAreViewsOfTheBody) {
  std::vector<IoInfo> in = {io("a", DataType::kFloat32, {16}), io("b", DataType::kFloat32, {3}),
                            io("c", DataType::kBool, {2}), io("d", DataType::kInt32, {1})};
  std::string head = request({binary_input_json("a", "FP32", {16}, 64), binary_input_json("b", "FP32", {3}, 12),
                              binary_input_json("c", "BOOL", {2}, 2), binary_input_json("d", "INT32", {1}, 4)});
  std::string bin;
  for (int i = 0; i < 16; ++i) {
    const float v = 0.5f * static_cast<float>(i);
    bin.append(reinterpret_cast<const char*>(&v), 4);
  }
  const float b[3] = {-1.f, 2.f, 3.25f};
  bin.append(reinterpret_cast<const char*>(b), 12);
  bin += std::string("\x01\x00", 2);
  const int32_t d = -7;
  bin.append(reinterpret_cast<const char*>(&d), 4);
  const std::string body = head + bin;
  // The body placed so that its binary part starts 64-byte aligned.
  const size_t pad = (64 - head.size() % 64) % 64;
  auto allocated = HostAllocator::create("body")->allocate(pad + body.size(), 64);
  ASSERT_TRUE(allocated.is_ok());
  std::shared_ptr<Buffer> owner = std::move(allocated).value();
  char* base = static_cast<char*>(owner->data());
  std::memcpy(base + pad, body.data(), body.size());
  auto r = parse_infer_request(std::string_view(base + pad, body.size()), head.size(), in, {}, {}, owner);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const Tensor& ta = r->inputs[0].second;
  EXPECT_EQ(ta.buffer(), owner);  // a view
  EXPECT_EQ(ta.raw(), base + pad + head.size());
  EXPECT_EQ(ta.data<float>()[15], 7.5f);
  const Tensor& tb = r->inputs[1].second;  // right after a's 64 bytes: aligned too
  EXPECT_EQ(tb.buffer(), owner);
  EXPECT_EQ(tb.data<float>()[2], 3.25f);
  EXPECT_NE(r->inputs[2].second.buffer(), owner);  // BOOL: copied
  EXPECT_EQ(r->inputs[2].second.data<uint8_t>()[0], 1);
  const Tensor& td = r->inputs[3].second;  // at 78 bytes into the binary part: copied
  EXPECT_NE(td.buffer(), owner);
  EXPECT_EQ(td.data<int32_t>()[0], -7);
  // The views keep the body alive after the caller lets go of it.
  std::weak_ptr<Buffer> weak = owner;
  owner.reset();
  EXPECT_FALSE(weak.expired());
  InferRequest moved = std::move(r).value();
  EXPECT_EQ(moved.inputs[0].second.data<float>()[1], 0.5f);
  moved.inputs.clear();
  EXPECT_TRUE(weak.expired());
  // Without an owner every input is a copy.
  auto copied = parse_infer_request(body, head.size(), in, {});
  ASSERT_TRUE(copied.is_ok());
  EXPECT_EQ(copied->inputs[0].second.data<float>()[15], 7.5f);
}

TEST(Oip, BinarySizesMustAddUpToTheBinaryPart) {
  std::vector<IoInfo> in = {io("x", DataType::kFloat32, {2})};
  std::string head = request({binary_input_json("x", "FP32", {2}, 8)});
  // Too few bytes, too many bytes, and none at all (no header length).
  expect_error(parse_infer_request(head + std::string(7, '\0'), head.size(), in, {}), {"add up to 8", "7 bytes"});
  expect_error(parse_infer_request(head + std::string(9, '\0'), head.size(), in, {}), {"add up to 8", "9 bytes"});
  expect_error(parse_infer_request(head, std::nullopt, in, {}), {"add up to 8", "0 bytes"});
  // Binary bytes that no input claims.
  std::string json_only = request({input_json("x", "FP32", {2}, {1, 2})});
  expect_error(parse_infer_request(json_only + "xyz", json_only.size(), in, {}), {"add up to 0", "3 bytes"});
  EXPECT_TRUE(parse_infer_request(head + std::string(8, '\0'), head.size(), in, {}).is_ok());
}

TEST(Oip, BinarySizeMustMatchTheShape) {
  std::vector<IoInfo> in = {io("x", DataType::kFloat32, {2})};
  std::string head = request({binary_input_json("x", "FP32", {2}, 12)});
  expect_error(parse_infer_request(head + std::string(12, '\0'), head.size(), in, {}),
               {"input 'x'", "binary_data_size is 12 bytes", "takes 8"});
  std::string neg =
      request({{{"name", "x"}, {"datatype", "FP32"}, {"shape", {2}}, {"parameters", {{"binary_data_size", -8}}}}});
  expect_error(parse_infer_request(neg, neg.size(), in, {}), {"input 'x'", "binary_data_size"});
  json both = binary_input_json("x", "FP32", {2}, 8);
  both["data"] = {1, 2};
  std::string hb = request({both});
  expect_error(parse_infer_request(hb + std::string(8, '\0'), hb.size(), in, {}), {"input 'x'", "both"});
  // BOOL bytes must be 0 or 1.
  std::string hbool = request({binary_input_json("x", "BOOL", {2}, 2)});
  expect_error(
      parse_infer_request(hbool + std::string("\x01\x02", 2), hbool.size(), {io("x", DataType::kBool, {2})}, {}),
      {"input 'x'", "byte 1", "not 0 or 1"});
}

TEST(Oip, BinaryBytesWithLyingLengths) {
  std::vector<IoInfo> in = {io("s", DataType::kString, {2})};
  auto parse = [&](const std::string& bin) {
    std::string head = request({binary_input_json("s", "BYTES", {2}, bin.size())});
    return parse_infer_request(head + bin, head.size(), in, {});
  };
  // The second element claims 100 bytes of the 5 left.
  expect_error(parse(le32(1) + "a" + le32(100) + "bcdef"), {"input 's'", "BYTES element 1", "100"});
  // A claim of 4 GiB - 1 must not wrap around.
  expect_error(parse(le32(1) + "a" + le32(0xffffffffu) + "bcdef"), {"input 's'", "BYTES element 1"});
  // The length prefix itself cut short.
  expect_error(parse(le32(1) + "a" + std::string("\x01\x00", 2) + "xx"), {"input 's'", "BYTES element 1"});
  // Bytes left over after the two elements.
  expect_error(parse(le32(1) + "a" + le32(1) + "b" + "extra"), {"input 's'", "binary_data_size"});
  // Fewer bytes than 4 an element.
  expect_error(parse(le32(0) + "abc"), {"input 's'", "too small"});
  auto ok = parse(le32(1) + "a" + le32(2) + "bc");
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_EQ(ok->inputs[0].second.strings()[1], "bc");
}

TEST(Oip, RequestedOutputs) {
  std::vector<IoInfo> in = {io("x", DataType::kFloat32, {1})};
  std::vector<IoInfo> out = {io("y", DataType::kFloat32, {1}), io("z", DataType::kInt64, {1})};
  json body = {{"id", "req-1"},
               {"parameters", {{"binary_data_output", true}}},
               {"inputs", {input_json("x", "FP32", {1}, {1})}},
               {"outputs", {{{"name", "z"}, {"parameters", {{"binary_data", true}}}}, {{"name", "y"}}}}};
  auto r = parse_infer_request(body.dump(), std::nullopt, in, out);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->id, "req-1");
  EXPECT_TRUE(r->binary_output);
  ASSERT_EQ(r->outputs.size(), 2u);
  EXPECT_EQ(r->outputs[0].name, "z");
  EXPECT_TRUE(r->outputs[0].binary);
  EXPECT_EQ(r->outputs[1].name, "y");
  EXPECT_FALSE(r->outputs[1].binary);

  body["outputs"] = {{{"name", "y"}}, {{"name", "q"}}};
  expect_error(parse_infer_request(body.dump(), std::nullopt, in, out), {"unknown output 'q'", "'y'", "'z'"});
  body["outputs"] = {{{"name", "y"}}, {{"name", "y"}}};
  expect_error(parse_infer_request(body.dump(), std::nullopt, in, out), {"output 'y' is requested twice"});
  body["outputs"] = {{{"name", "y"}, {"parameters", {{"binary_data", "yes"}}}}};
  expect_error(parse_infer_request(body.dump(), std::nullopt, in, out), {"output 'y'", "binary_data"});
  body["outputs"] = {{{"nom", "y"}}};
  expect_error(parse_infer_request(body.dump(), std::nullopt, in, out), {"outputs[0]"});
}

// ---------------------------------------------------------------------------------------
// Responses

TEST(Oip, ResponseMixesBinaryAndJsonOutputsInTheRequestsOrder) {
  Tensor a = make<float>(DataType::kFloat32, {2}, {0.1f, 2.f});
  Tensor b = make<int64_t>(DataType::kInt64, {1, 2}, {-1, 7});
  Tensor c = strings({2}, {"hi", ""});
  InferRequest req;
  req.id = "r7";
  req.outputs = {{"c", true}, {"a", false}, {"b", true}};
  auto enc = encode_infer_response("model", "3", req, {{"a", a}, {"b", b}, {"c", c}});
  ASSERT_TRUE(enc.is_ok()) << enc.status().to_string();
  json j = json::parse(enc->json);
  EXPECT_EQ(j["model_name"], "model");
  EXPECT_EQ(j["model_version"], "3");
  EXPECT_EQ(j["id"], "r7");
  ASSERT_EQ(j["outputs"].size(), 3u);
  const json& oc = j["outputs"][0];
  const json& oa = j["outputs"][1];
  const json& ob = j["outputs"][2];
  EXPECT_EQ(oc["name"], "c");
  EXPECT_EQ(oc["datatype"], "BYTES");
  EXPECT_FALSE(oc.contains("data"));
  EXPECT_EQ(oc["parameters"]["binary_data_size"], 4 + 2 + 4);
  EXPECT_EQ(oa["name"], "a");
  EXPECT_EQ(oa["datatype"], "FP32");
  EXPECT_EQ(oa["shape"], json({2}));
  EXPECT_EQ(oa["data"], json({0.1, 2.0}));
  EXPECT_FALSE(oa.contains("parameters"));
  EXPECT_EQ(ob["name"], "b");
  EXPECT_EQ(ob["shape"], json({1, 2}));
  EXPECT_EQ(ob["parameters"]["binary_data_size"], 16);
  // The binary part: c's elements, then b's bytes.
  std::string want = le32(2) + "hi" + le32(0);
  want.append(static_cast<const char*>(b.raw()), 16);
  EXPECT_EQ(enc->binary(), want);
  // The shortest float text, not 0.100000001.
  EXPECT_NE(enc->json.find("[0.1,2]"), std::string::npos) << enc->json;
}

TEST(Oip, ResponseWithoutRequestedOutputsFollowsTheRunsOrder) {
  Tensor a = make<int32_t>(DataType::kInt32, {1}, {5});
  Tensor b = make<uint8_t>(DataType::kBool, {2}, {1, 0});
  InferRequest req;
  auto enc = encode_infer_response("m", "1", req, {{"b", b}, {"a", a}});
  ASSERT_TRUE(enc.is_ok()) << enc.status().to_string();
  json j = json::parse(enc->json);
  EXPECT_FALSE(j.contains("id"));
  EXPECT_EQ(j["outputs"][0]["name"], "b");
  EXPECT_EQ(j["outputs"][0]["data"], json({true, false}));
  EXPECT_EQ(j["outputs"][1]["name"], "a");
  EXPECT_EQ(j["outputs"][1]["data"], json({5}));
  EXPECT_EQ(enc->binary_size(), 0u);

  req.binary_output = true;
  enc = encode_infer_response("m", "1", req, {{"b", b}, {"a", a}});
  ASSERT_TRUE(enc.is_ok()) << enc.status().to_string();
  j = json::parse(enc->json);
  EXPECT_EQ(j["outputs"][0]["parameters"]["binary_data_size"], 2);
  EXPECT_EQ(j["outputs"][1]["parameters"]["binary_data_size"], 4);
  EXPECT_EQ(enc->binary_size(), 6u);
  EXPECT_EQ(enc->binary().substr(0, 2), std::string("\x01\x00", 2));
}

TEST(Oip, ResponseNanAndInfinity) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  Tensor f = make<float>(DataType::kFloat32, {4}, {nan, inf, -inf, 1.f});
  Tensor d = make<double>(DataType::kFloat64, {2}, {-std::numeric_limits<double>::infinity(), std::nan("")});
  Tensor h = make<uint16_t>(DataType::kFloat16, {2}, {0x7c00, 0x7e00});  // inf, NaN
  InferRequest req;
  auto enc = encode_infer_response("m", "1", req, {{"f", f}, {"d", d}, {"h", h}});
  ASSERT_TRUE(enc.is_ok()) << enc.status().to_string();
  json j = json::parse(enc->json);  // valid JSON
  EXPECT_EQ(j["outputs"][0]["data"], json({"NaN", "Infinity", "-Infinity", 1}));
  EXPECT_EQ(j["outputs"][1]["data"], json({"-Infinity", "NaN"}));
  EXPECT_EQ(j["outputs"][2]["data"], json({"Infinity", "NaN"}));
  // And they read back.
  auto back = through_json(f);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  const float* v = back->inputs[0].second.data<float>();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], inf);
  EXPECT_EQ(v[2], -inf);
  EXPECT_EQ(v[3], 1.f);
}

TEST(Oip, ResponseHalfAndBfloat16AsNumbers) {
  Tensor h = make<uint16_t>(DataType::kFloat16, {2}, {float_to_half(1.5f), float_to_half(-0.25f)});
  Tensor b = make<uint16_t>(DataType::kBFloat16, {2}, {float_to_bfloat16(3.f), float_to_bfloat16(-0.5f)});
  auto enc = encode_infer_response("m", "1", InferRequest{}, {{"h", h}, {"b", b}});
  ASSERT_TRUE(enc.is_ok()) << enc.status().to_string();
  json j = json::parse(enc->json);
  EXPECT_EQ(j["outputs"][0]["datatype"], "FP16");
  EXPECT_EQ(j["outputs"][0]["data"], json({1.5, -0.25}));
  EXPECT_EQ(j["outputs"][1]["datatype"], "BF16");
  EXPECT_EQ(j["outputs"][1]["data"], json({3.0, -0.5}));
}

TEST(Oip, ResponseEscapesNamesIdsAndStrings) {
  const std::string odd = std::string("q\"\\\n\x01\xff\xc3", 7);
  InferRequest req;
  req.id = odd;
  Tensor s = strings({2}, {odd, "\xe2\x82\xac"});
  auto enc = encode_infer_response(odd, odd, req, {{odd, s}});
  ASSERT_TRUE(enc.is_ok()) << enc.status().to_string();
  json j;
  ASSERT_NO_THROW(j = json::parse(enc->json)) << enc->json;
  const std::string fixed = "q\"\\\n\x01\\xFF\\xC3";  // invalid UTF-8 becomes text
  EXPECT_EQ(j["model_name"], fixed);
  EXPECT_EQ(j["model_version"], fixed);
  EXPECT_EQ(j["id"], fixed);
  EXPECT_EQ(j["outputs"][0]["name"], fixed);
  EXPECT_EQ(j["outputs"][0]["data"], json({fixed, "\xe2\x82\xac"}));
}

TEST(Oip, ResponseErrors) {
  InferRequest req;
  req.outputs = {{"missing", false}};
  auto r = encode_infer_response("m", "1", req, {{"y", make<float>(DataType::kFloat32, {1}, {1.f})}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("'missing'"), std::string::npos) << r.status().message();

  Tensor f8 = Tensor::host(DataType::kFloat8E4M3FN, {1});
  r = encode_infer_response("m", "1", InferRequest{}, {{"y", f8}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("output 'y'"), std::string::npos) << r.status().message();

  r = encode_infer_response("m", "1", InferRequest{}, {{"u", Tensor()}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("output 'u'"), std::string::npos) << r.status().message();
}

TEST(Oip, ResponseEmptyTensors) {
  Tensor e = Tensor::host(DataType::kFloat32, {0, 3});
  Tensor es = Tensor::host(DataType::kString, {0});
  InferRequest req;
  req.outputs = {{"e", false}, {"es", true}};
  auto enc = encode_infer_response("m", "1", req, {{"e", e}, {"es", es}});
  ASSERT_TRUE(enc.is_ok()) << enc.status().to_string();
  json j = json::parse(enc->json);
  EXPECT_EQ(j["outputs"][0]["shape"], json({0, 3}));
  EXPECT_EQ(j["outputs"][0]["data"], json::array());
  EXPECT_EQ(j["outputs"][1]["parameters"]["binary_data_size"], 0);
  EXPECT_EQ(enc->binary_size(), 0u);
}

TEST(Oip, ErrorJson) {
  json j = json::parse(error_json("input 'x': bad \"thing\""));
  EXPECT_EQ(j, json({{"error", "input 'x': bad \"thing\""}}));
  json k;
  ASSERT_NO_THROW(k = json::parse(error_json(std::string("name '\xff'", 8))));
  EXPECT_EQ(k["error"], "name '\\xFF'");
}

}  // namespace
}  // namespace bulkhead::serve
