// The small floats (float8 x5, float4e2m1), the sub-byte integers and the kernels that use
// them — Cast, QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, the integer
// convolutions and matrix products — and ai.onnx.ml TreeEnsemble, beyond what the
// conformance cases check: every code of every format, the rounding edges, packing in
// model files, and the refusals at session creation.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/kernels/quant_util.h"
#include "bulkhead/bulkhead.hpp"
#include "onnx/onnx_pb.h"
#include "support/test_util.h"

namespace bulkhead::test {
namespace {

constexpr DataType kSmallFloats[] = {DataType::kFloat8E4M3FN, DataType::kFloat8E4M3FNUZ, DataType::kFloat8E5M2,
                                     DataType::kFloat8E5M2FNUZ, DataType::kFloat4E2M1, DataType::kFloat8E8M0};

TEST(SmallFloat, EveryCodeDecodesAndEncodesBackToItself) {
  for (DataType t : kSmallFloats) {
    const int codes = t == DataType::kFloat4E2M1 ? 16 : 256;
    for (int c = 0; c < codes; ++c) {
      const float v = small_float_to_float(t, static_cast<uint8_t>(c));
      if (std::isnan(v)) continue;
      // FNUZ types have no negative zero and E8M0 no sign: those codes are NaN or absent.
      for (bool sat : {true, false}) {
        if (sat && std::isinf(v)) continue;  // saturation turns float8e5m2's infinities into its largest value
        EXPECT_EQ(float_to_small_float(t, v, sat), c) << dtype_name(t) << " code " << c << " value " << v;
      }
    }
  }
}

TEST(SmallFloat, RoundingSaturationAndSpecials) {
  const DataType e4 = DataType::kFloat8E4M3FN, e4uz = DataType::kFloat8E4M3FNUZ, e5 = DataType::kFloat8E5M2,
                 e5uz = DataType::kFloat8E5M2FNUZ, f4 = DataType::kFloat4E2M1, e8 = DataType::kFloat8E8M0;
  EXPECT_EQ(small_float_to_float(e4, 0x7e), 448.0f);
  EXPECT_TRUE(std::isnan(small_float_to_float(e4, 0x7f)));
  EXPECT_EQ(float_to_small_float(e4, 464.0, false), 0x7e);  // the midpoint to 480 rounds to even: 448
  EXPECT_EQ(float_to_small_float(e4, 464.5, false), 0x7f);  // rounds past the largest: NaN
  EXPECT_EQ(float_to_small_float(e4, 464.5, true), 0x7e);
  EXPECT_EQ(float_to_small_float(e4, -INFINITY, true), 0xfe);
  EXPECT_EQ(float_to_small_float(e4, 1.0625, true), 0x38);  // tie between 1 and 1.125: even
  EXPECT_EQ(float_to_small_float(e4, std::ldexp(1.0, -10), true), 0x00);  // half the smallest subnormal: even (zero)
  EXPECT_EQ(float_to_small_float(e4, std::ldexp(1.5, -10), true), 0x01);
  EXPECT_EQ(float_to_small_float(e5, INFINITY, false), 0x7c);
  EXPECT_EQ(float_to_small_float(e5, INFINITY, true), 0x7b);
  EXPECT_EQ(float_to_small_float(e5, -1e-9, true), 0x80);  // negative zero
  EXPECT_EQ(float_to_small_float(e4uz, -1e-9, true), 0x00);  // no negative zero: 0x80 is NaN
  EXPECT_EQ(float_to_small_float(e4uz, 1e6, false), 0x80);
  EXPECT_EQ(float_to_small_float(e5uz, -1e6, true), 0xff);
  EXPECT_EQ(small_float_to_float(e5uz, 0x7f), 57344.0f);
  EXPECT_EQ(float_to_small_float(f4, 0.25), 0x0);   // tie between 0 and 0.5: even
  EXPECT_EQ(float_to_small_float(f4, 0.75), 0x2);   // tie between 0.5 and 1: even
  EXPECT_EQ(float_to_small_float(f4, -100.0, false), 0xf);  // float4 always saturates
  EXPECT_EQ(float_to_small_float(e8, 3.0, true, E8M0Round::kUp), 129);
  EXPECT_EQ(float_to_small_float(e8, 3.0, true, E8M0Round::kDown), 128);
  EXPECT_EQ(float_to_small_float(e8, 3.0, true, E8M0Round::kNearest), 129);  // 1.5 x 2: ties go up
  EXPECT_EQ(float_to_small_float(e8, 2.9, true, E8M0Round::kNearest), 128);
  EXPECT_EQ(float_to_small_float(e8, 2.0, true, E8M0Round::kUp), 128);
  EXPECT_EQ(float_to_small_float(e8, -2.0, true, E8M0Round::kUp), 128);  // the sign is ignored
  EXPECT_EQ(float_to_small_float(e8, 1e300, false), 0xff);
  EXPECT_EQ(float_to_small_float(e8, 1e300, true), 0xfe);
  EXPECT_EQ(float_to_small_float(e8, 2.0 * (1.0 + 0x1p-40), true, E8M0Round::kUp), 129);  // below float32's precision
}

TEST(SubByte, PackAndUnpackSignExtend) {
  const int8_t v[5] = {-8, 7, -1, 0, 5};
  uint8_t packed[3] = {0xaa, 0xaa, 0xaa};
  dtype_pack(DataType::kInt4, v, 5, packed);
  EXPECT_EQ(dtype_packed_nbytes(DataType::kInt4, 5), 3u);
  EXPECT_EQ(packed[0], 0x78);
  EXPECT_EQ(packed[1], 0x0f);
  EXPECT_EQ(packed[2], 0x05);  // the unused high half is zero
  int8_t back[5];
  dtype_unpack(DataType::kInt4, packed, 5, back);
  EXPECT_EQ(std::memcmp(v, back, 5), 0);
  const int8_t two[5] = {-2, 1, -1, 0, 1};
  uint8_t p2[2];
  dtype_pack(DataType::kInt2, two, 5, p2);
  EXPECT_EQ(p2[0], 0x36);  // 10 01 11 00 from the low bits up
  int8_t b2[5];
  dtype_unpack(DataType::kInt2, p2, 5, b2);
  EXPECT_EQ(std::memcmp(two, b2, 5), 0);
}

// A one-node model built as a protobuf (the ONNX text parser of Debian's libonnx predates
// these types).
std::string one_node(const std::string& op, DataType in, DataType out, const std::vector<onnx::AttributeProto>& attrs,
                     const std::vector<onnx::TensorProto>& inits = {}, int opset = 25) {
  onnx::ModelProto m;
  m.set_ir_version(11);
  auto* os = m.add_opset_import();
  os->set_domain("");
  os->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name("n0");
  n->add_input("x");
  for (const auto& t : inits) {
    n->add_input(t.name());
    *g->add_initializer() = t;
  }
  n->add_output("y");
  for (const auto& a : attrs) *n->add_attribute() = a;
  auto io = [](onnx::ValueInfoProto* v, const char* name, DataType t) {
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(static_cast<int>(t));
  };
  io(g->add_input(), "x", in);
  io(g->add_output(), "y", out);
  return m.SerializeAsString();
}

onnx::AttributeProto int_attr(const char* name, int64_t v) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(v);
  return a;
}

onnx::AttributeProto str_attr(const char* name, const char* v) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::STRING);
  a.set_s(v);
  return a;
}

Status load_status(const std::string& bytes) {
  Env env;
  auto s = env.load_bytes(bytes, "m");
  return s.is_ok() ? Status::ok() : s.status();
}

void expect_refused(const std::string& bytes, const std::string& part) {
  Status st = load_status(bytes);
  ASSERT_FALSE(st.is_ok()) << "loaded, expected a refusal containing: " << part;
  EXPECT_NE(st.message().find(part), std::string::npos) << st.to_string();
}

TEST(Quantize, RefusalsNameNodeOperatorAndWhat) {
  expect_refused(one_node("Cast", DataType::kFloat32, DataType::kFloat8E8M0,
                          {int_attr("to", 24), str_attr("round_mode", "sideways")}),
                 "node 'n0' (Cast): round_mode 'sideways' is not supported (up, down or nearest)");
  expect_refused(one_node("Cast", DataType::kFloat32, DataType::kFloat8E4M3FN, {int_attr("to", 17), int_attr("saturate", 2)}),
                 "node 'n0' (Cast): attribute 'saturate' must be 0 or 1");
  expect_refused(one_node("QuantizeLinear", DataType::kFloat32, DataType::kFloat8E8M0, {int_attr("output_dtype", 24)}),
                 "node 'n0' (QuantizeLinear): cannot quantise to output_dtype float8e8m0");
  expect_refused(one_node("DequantizeLinear", DataType::kInt8, DataType::kInt8, {int_attr("output_dtype", 3)}),
                 "node 'n0' (DequantizeLinear): cannot dequantise to output_dtype int8 (float32, float16 or bfloat16)");
  expect_refused(one_node("QuantizeLinear", DataType::kFloat32, DataType::kUInt8, {int_attr("precision", 6)}),
                 "node 'n0' (QuantizeLinear): precision int32 is not supported (float32, float16 or bfloat16)");
  expect_refused(one_node("QuantizeLinear", DataType::kFloat32, DataType::kUInt8, {int_attr("block_size", -1)}),
                 "node 'n0' (QuantizeLinear): block_size must be >= 0, got -1");
}

onnx::TensorProto float_tensor(const char* name, const std::vector<int64_t>& dims, const std::vector<float>& v) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t.add_dims(d);
  for (float f : v) t.add_float_data(f);
  return t;
}

TEST(Quantize, BlockedScaleOfTheWrongShapeIsAClearError) {
  Env env;
  auto s = env.load_bytes(one_node("QuantizeLinear", DataType::kFloat32, DataType::kUInt8,
                                   {int_attr("axis", 1), int_attr("block_size", 2)},
                                   {float_tensor("scale", {2, 3}, {1, 1, 1, 1, 1, 1})}),
                          "m");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  auto r = s->run({{"x", Tensor::host(DataType::kFloat32, {2, 4})}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("blocked scale for float32[2,4] with block_size 2 along axis 1 must have shape [2,2], got float32[2,3]"),
            std::string::npos)
      << r.status().to_string();
}

TEST(Quantize, Int4RoundTripsThroughAPackedInitializer) {
  // DequantizeLinear of a packed int4 initializer with a per-axis scale and zero point.
  onnx::ModelProto m;
  m.set_ir_version(11);
  auto* os = m.add_opset_import();
  os->set_version(25);
  auto* g = m.mutable_graph();
  g->set_name("g");
  onnx::TensorProto w;
  w.set_name("w");
  w.set_data_type(static_cast<int>(DataType::kInt4));  // newer than Debian's onnx.proto
  w.add_dims(2);
  w.add_dims(3);
  const int8_t wv[6] = {-8, 7, -1, 3, 0, -5};
  uint8_t packed[3];
  dtype_pack(DataType::kInt4, wv, 6, packed);
  w.set_raw_data(packed, 3);
  *g->add_initializer() = w;
  *g->add_initializer() = float_tensor("s", {2}, {0.5f, 2.0f});
  onnx::TensorProto z;
  z.set_name("z");
  z.set_data_type(static_cast<int>(DataType::kInt4));  // newer than Debian's onnx.proto
  z.add_dims(2);
  z.add_int32_data(0x1f);  // -1 and 1, packed into one entry
  *g->add_initializer() = z;
  auto* n = g->add_node();
  n->set_op_type("DequantizeLinear");
  n->set_name("dq");
  for (const char* i : {"w", "s", "z"}) n->add_input(i);
  n->add_output("y");
  *n->add_attribute() = int_attr("axis", 0);
  auto* out = g->add_output();
  out->set_name("y");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  Env env;
  auto s = env.load_bytes(m.SerializeAsString(), "m");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  auto r = s->run({});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const float* y = (*r)[0].second.data<float>();
  const float want[6] = {(-8 + 1) * 0.5f, (7 + 1) * 0.5f, (-1 + 1) * 0.5f, (3 - 1) * 2.0f, (0 - 1) * 2.0f, (-5 - 1) * 2.0f};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y[i], want[i]) << i;
}

TEST(Quantize, CastOfLargeInt64ToE8M0RoundsOnce) {
  // 2^62 + 1 is not a double; rounded to nearest first it would become 2^62 exactly and
  // round_mode "up" would keep it there. The answer is 2^63.
  Env env;
  auto s = env.load_bytes(one_node("Cast", DataType::kInt64, DataType::kFloat8E8M0, {int_attr("to", 24)}), "m");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  auto r = s->run({{"x", Tensor::from_vector<int64_t>(DataType::kInt64, {2}, {(int64_t{1} << 62) + 1, int64_t{1} << 62})}});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const uint8_t* y = (*r)[0].second.data<uint8_t>();
  EXPECT_EQ(y[0], 63 + 127);
  EXPECT_EQ(y[1], 62 + 127);
}

// QuantizeLinear's loop computes x / scale as RN(x * RN(1/scale)) corrected by one fused
// multiply-add (quant_util.h): the result must be the division's bit for bit. Where they
// could part is where the quotient sits next to a rounding edge (k + 1/2) or a clamp bound,
// so every float within 48 ulps of each edge x = (k + 1/2) * scale and x = k * scale for
// |k| <= 300, for scales from 2^-99 to 2^99 and the common ones, plus random floats of
// every exponent, infinities and NaN, in uint8 and int8. (Every float x was checked for
// fifteen scales when this was written: 0 differences.)
TEST(Quantize, RowsWithoutADivisionGiveTheDivisionsResult) {
  auto by_division = [](float x, float sc, float z, float lo, float hi) {
    float r = x / sc;
    r = r < lo ? lo : r;
    r = r > hi ? hi : r;
    r = std::nearbyint(r);
    return static_cast<int32_t>(r == r ? r + z : z);
  };
  std::mt19937 rng(18);
  std::vector<float> scales{0.0235f, 1.0f / 255, 1.0f / 127, 3.0f, 1.0f, 0.1f, 7.629e-6f, 0x1p-99f, 0x1p99f, -0.05f};
  for (int i = 0; i < 40; ++i) scales.push_back(std::ldexp(std::uniform_real_distribution<float>(1, 2)(rng), -60 + 3 * i));
  for (float sc : scales) {
    std::vector<float> xs{INFINITY, -INFINITY, NAN, -NAN, 0.f, -0.f, FLT_MAX, -FLT_MAX, FLT_MIN, 1e-45f};
    for (int k = -300; k <= 300; ++k)
      for (float edge : {(k + 0.5f) * sc, k * sc}) {
        float up = edge, down = edge;
        for (int u = 0; u < 48; ++u) {
          xs.push_back(up), xs.push_back(down);
          up = std::nextafter(up, INFINITY), down = std::nextafter(down, -INFINITY);
        }
      }
    for (int i = 0; i < 20000; ++i) {
      uint32_t bits = rng();
      float f;
      std::memcpy(&f, &bits, 4);
      xs.push_back(f);
    }
    const int64_t n = static_cast<int64_t>(xs.size());
    for (bool is_u8 : {true, false}) {
      const float z = is_u8 ? 131.f : -7.f, lo = (is_u8 ? 0.f : -128.f) - z, hi = (is_u8 ? 255.f : 127.f) - z;
      std::vector<uint8_t> got(n);
      if (is_u8) cpu::quantize_rows(xs.data(), got.data(), n, sc, z, lo, hi);
      else cpu::quantize_rows(xs.data(), reinterpret_cast<int8_t*>(got.data()), n, sc, z, lo, hi);
      int bad = 0;
      for (int64_t i = 0; i < n && bad < 5; ++i) {
        const int32_t want = by_division(xs[i], sc, z, lo, hi);
        const int32_t have = is_u8 ? got[i] : static_cast<int8_t>(got[i]);
        if (want != have) {
          ++bad;
          ADD_FAILURE() << "scale " << std::hexfloat << sc << " x " << xs[i] << ": " << have << ", division gives " << want;
        }
      }
    }
  }
}

TEST(Quantize, DynamicQuantizeLinearKeepsNaNAndInfinitiesOutOfTheRange) {
  Env env;
  auto s = env.load_bytes(model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 11]>
g (float[N] x) => (uint8[N] y, float s, uint8 z) { y, s, z = DynamicQuantizeLinear(x) })"),
                          "m");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  auto r = s->run({{"x", Tensor::from_vector<float>(DataType::kFloat32, {5}, {-1.0f, 2.0f, NAN, INFINITY, -INFINITY})}});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_FLOAT_EQ((*r)[1].second.data<float>()[0], 3.0f / 255.0f);
  const uint8_t zero = (*r)[2].second.data<uint8_t>()[0];
  EXPECT_EQ(zero, 85);
  const uint8_t* y = (*r)[0].second.data<uint8_t>();
  EXPECT_EQ(y[0], 0);
  EXPECT_EQ(y[1], 255);
  EXPECT_EQ(y[2], zero);
  EXPECT_EQ(y[3], 255);
  EXPECT_EQ(y[4], 0);
}

TEST(Quantize, IntegerConvAndMatMulRefuseWrongTypesAndShapes) {
  Env env;
  auto c = env.load_bytes(model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 10]>
g (float[1,1,3,3] x, uint8[1,1,2,2] w) => (int32[1,1,2,2] y) { y = ConvInteger(x, w) })"),
                          "m");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  auto r = c->run({{"x", Tensor::host(DataType::kFloat32, {1, 1, 3, 3})}, {"w", Tensor::host(DataType::kUInt8, {1, 1, 2, 2})}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("node 'ConvInteger_0' (ConvInteger): takes int8/uint8 x and w, got float32 and uint8"),
            std::string::npos)
      << r.status().to_string();
  auto m = env.load_bytes(model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 10]>
g (uint8[2,3] a, float sa, uint8 za, uint8[3,2] b, float[3] sb, uint8[3] zb, float sy, uint8 zy) => (uint8[2,2] y) { y = QLinearMatMul(a, sa, za, b, sb, zb, sy, zy) })"),
                          "m");
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  auto one = [](DataType t) { return Tensor::host(t, {}); };
  Tensor sa = Tensor::from_vector<float>(DataType::kFloat32, {}, {1.0f});
  auto q = m->run({{"a", Tensor::host(DataType::kUInt8, {2, 3})}, {"sa", sa}, {"za", one(DataType::kUInt8)},
                   {"b", Tensor::host(DataType::kUInt8, {3, 2})}, {"sb", Tensor::from_vector<float>(DataType::kFloat32, {3}, {1, 1, 1})},
                   {"zb", Tensor::host(DataType::kUInt8, {3})}, {"sy", sa}, {"zy", one(DataType::kUInt8)}});
  ASSERT_FALSE(q.is_ok());
  EXPECT_NE(q.status().message().find("b's scale must hold one value or 2, got float32[3]"), std::string::npos) << q.status().to_string();
}

onnx::AttributeProto ints_attr(const char* name, const std::vector<int64_t>& v) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a.add_ints(x);
  return a;
}

onnx::AttributeProto tensor_attr(const char* name, int dtype, const std::string& raw, int64_t n) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::TENSOR);
  a.mutable_t()->set_data_type(dtype);
  a.mutable_t()->add_dims(n);
  a.mutable_t()->set_raw_data(raw);
  return a;
}

// A two-node tree whose nodes point at each other: refused when the session is created,
// never a walk without end.
TEST(TreeEnsemble, RefusesCyclesAndBadModes) {
  auto model = [](uint8_t mode, std::vector<int64_t> true_nodes) {
    const float splits[2] = {1.0f, 2.0f}, weights[1] = {3.0f};
    const uint8_t modes[2] = {mode, 0};
    onnx::ModelProto m;
    m.set_ir_version(10);
    auto* os = m.add_opset_import();
    os->set_domain("ai.onnx.ml");
    os->set_version(5);
    auto* g = m.mutable_graph();
    g->set_name("g");
    auto* n = g->add_node();
    n->set_op_type("TreeEnsemble");
    n->set_domain("ai.onnx.ml");
    n->set_name("te");
    n->add_input("x");
    n->add_output("y");
    for (const auto& a : {tensor_attr("nodes_modes", 2, std::string(reinterpret_cast<const char*>(modes), 2), 2),
                          tensor_attr("nodes_splits", 1, std::string(reinterpret_cast<const char*>(splits), 8), 2),
                          tensor_attr("leaf_weights", 1, std::string(reinterpret_cast<const char*>(weights), 4), 1),
                          ints_attr("nodes_featureids", {0, 0}), ints_attr("nodes_truenodeids", true_nodes),
                          ints_attr("nodes_trueleafs", {0, 0}), ints_attr("nodes_falsenodeids", {0, 0}),
                          ints_attr("nodes_falseleafs", {1, 1}), ints_attr("leaf_targetids", {0}), ints_attr("tree_roots", {0}),
                          int_attr("n_targets", 1)})
      *n->add_attribute() = a;
    auto io = [](onnx::ValueInfoProto* v, const char* name) {
      v->set_name(name);
      v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    };
    io(g->add_input(), "x");
    io(g->add_output(), "y");
    return m.SerializeAsString();
  };
  expect_refused(model(0, {1, 0}), "node 'te' (ai.onnx.ml.TreeEnsemble): the nodes reached from root 0 form a cycle");
  expect_refused(model(9, {1, 0}), "node 'te' (ai.onnx.ml.TreeEnsemble): node 0 has mode 9 (0-6)");
  expect_refused(model(0, {1, 5}), "node 'te' (ai.onnx.ml.TreeEnsemble): node 1 points to node 5, which does not exist");
}


// ---------------------------------------------------------------------------------------
// ConvInteger and QLinearConv on oneDNN's int8 convolutions against the exact reference
// loops (BULKHEAD_CPU_INT8=0), over the forms real quantised models use.

namespace int8conv {

std::string ints_text(int64_t n, uint32_t seed, int lo, int hi) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  std::string s;
  for (int64_t i = 0; i < n; ++i) s += (i ? "," : "") + std::to_string(d(rng));
  return s;
}

Tensor random_ints(DataType t, const Shape& shape, uint32_t seed) {
  Tensor x = Tensor::host(t, shape);
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int v = static_cast<int>(rng() % 256);
    if (t == DataType::kUInt8) x.data<uint8_t>()[i] = static_cast<uint8_t>(v);
    else x.data<int8_t>()[i] = static_cast<int8_t>(v - 128);
  }
  return x;
}

struct Case {
  const char* name;
  bool qlinear;
  const char* xt;  // "uint8" / "int8"
  const char* wt;
  int C, M, group, k, stride, pad, dilation, H;
  bool bias, per_channel, w_zero_point, w_is_input;
  int wz_lo = 128;
};

std::string model_for(const Case& c) {
  const int Cg = c.C / c.group;
  const int64_t wn = int64_t{c.M} * Cg * c.k * c.k;
  const std::string wshape = "[" + std::to_string(c.M) + "," + std::to_string(Cg) + "," + std::to_string(c.k) + "," + std::to_string(c.k) + "]";
  const bool wu8 = std::string(c.wt) == "uint8";
  std::string inits, ins = std::string(c.xt) + "[1," + std::to_string(c.C) + "," + std::to_string(c.H) + "," + std::to_string(c.H) + "] x";
  if (c.w_is_input) ins += ", " + std::string(c.wt) + wshape + " w";
  else inits += std::string(c.wt) + wshape + " w = {" + ints_text(wn, 11, wu8 ? 0 : -128, wu8 ? 255 : 127) + "}";
  auto add = [&](const std::string& t) { inits += (inits.empty() ? "" : ", ") + t; };
  const int nz = c.per_channel ? c.M : 1;
  const std::string zshape = c.per_channel ? "[" + std::to_string(c.M) + "]" : "";
  // A weight zero point in the middle of uint8's range keeps w - w_zero_point in int8.
  // uint8 weights: zero point 128 (as quantisers write them) keeps w - w_zero_point in
  // int8; `wz_lo` below that does not.
  if (c.w_zero_point) add(std::string(c.wt) + zshape + " wz = {" + ints_text(nz, 12, wu8 ? c.wz_lo : -5, wu8 ? 128 : 5) + "}");
  else if (c.qlinear) add(std::string(c.wt) + zshape + " wz = {" + ints_text(nz, 12, 0, 0) + "}");  // required there
  add(std::string(c.xt) + " xz = {" + (std::string(c.xt) == "uint8" ? "121" : "-7") + "}");
  std::string attrs = "<group = " + std::to_string(c.group) + ", strides = [" + std::to_string(c.stride) + "," + std::to_string(c.stride) +
                      "], pads = [" + std::to_string(c.pad) + "," + std::to_string(c.pad) + "," + std::to_string(c.pad) + "," +
                      std::to_string(c.pad) + "], dilations = [" + std::to_string(c.dilation) + "," + std::to_string(c.dilation) + "]>";
  std::string body;
  const std::string wz = c.w_zero_point || c.qlinear ? "wz" : "";
  if (c.qlinear) {
    add("float xs = {0.02}");
    add("float" + zshape + " ws = {" + random_values_text(nz, 13, 0.001f, 0.01f) + "}");
    add("float ys = {0.05}");
    add(std::string(c.xt) + " yz = {" + (std::string(c.xt) == "uint8" ? "3" : "-2") + "}");
    if (c.bias) add("int32[" + std::to_string(c.M) + "] b = {" + ints_text(c.M, 14, -3000, 3000) + "}");
    body = "y = QLinearConv " + attrs + " (x, xs, xz, w, ws, wz, ys, yz" + (c.bias ? ", b" : "") + ")";
    return R"(<ir_version: 8, opset_import: ["" : 10]>
g ()" + ins + ") => (" + c.xt + "[1," + std::to_string(c.M) + ",?,?] y) <" + inits + "> { " + body + " }";
  }
  body = "y = ConvInteger " + attrs + " (x, w, xz" + (wz.empty() ? "" : ", " + wz) + ")";
  return R"(<ir_version: 8, opset_import: ["" : 10]>
g ()" + ins + ") => (int32[1," + std::to_string(c.M) + ",?,?] y) <" + inits + "> { " + body + " }";
}

}  // namespace int8conv

TEST(Int8Conv, OneDnnGivesWhatTheReferenceLoopsGive) {
  using namespace int8conv;
  const Case cases[] = {
      {"3x3 u8 per-channel bias", true, "uint8", "int8", 32, 48, 1, 3, 1, 1, 1, 14, true, true, false, false},
      {"3x3 s8 stride 2", true, "int8", "int8", 16, 32, 1, 3, 2, 1, 1, 15, true, false, false, false},
      {"1x1 u8 no bias", true, "uint8", "int8", 64, 16, 1, 1, 1, 0, 1, 9, false, true, false, false},
      {"depthwise 3x3", true, "uint8", "int8", 24, 24, 24, 3, 1, 1, 1, 12, true, true, false, false},
      {"grouped dilated", true, "uint8", "int8", 16, 16, 4, 3, 1, 2, 2, 11, true, false, false, false},
      {"uint8 weights with zero point", true, "uint8", "uint8", 16, 8, 1, 3, 1, 1, 1, 10, true, true, true, false},
      {"uint8 weights beyond int8 once shifted", true, "uint8", "uint8", 16, 8, 1, 3, 1, 1, 1, 10, true, true, true, false, 100},
      {"weights as an input", true, "uint8", "int8", 8, 8, 1, 3, 1, 1, 1, 9, true, false, false, true},
      {"ConvInteger 3x3", false, "uint8", "int8", 8, 16, 1, 3, 1, 1, 1, 10, false, false, false, false},
      {"ConvInteger uint8 weights", false, "uint8", "uint8", 4, 8, 1, 3, 2, 1, 1, 9, false, false, true, false},
      {"ConvInteger too long for float32 sums", false, "uint8", "int8", 256, 8, 1, 3, 1, 1, 1, 6, false, false, false, false},
  };
  Env env;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string bytes = model_text_bytes(model_for(c));
    auto fast = env.load_bytes(bytes, "m");
    ASSERT_TRUE(fast.is_ok()) << fast.status().to_string();
    setenv("BULKHEAD_CPU_INT8", "0", 1);
    auto ref = env.load_bytes(bytes, "m");
    unsetenv("BULKHEAD_CPU_INT8");
    ASSERT_TRUE(ref.is_ok()) << ref.status().to_string();
    const DataType xt = std::string(c.xt) == "uint8" ? DataType::kUInt8 : DataType::kInt8;
    NamedTensors in{{"x", random_ints(xt, {1, c.C, c.H, c.H}, 21)}};
    if (c.w_is_input) in.emplace_back("w", random_ints(DataType::kInt8, {c.M, c.C / c.group, c.k, c.k}, 22));
    auto a = fast->run(in);
    auto b = ref->run(in);
    ASSERT_TRUE(a.is_ok()) << a.status().to_string();
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    const Tensor& ya = (*a)[0].second;
    const Tensor& yb = (*b)[0].second;
    ASSERT_EQ(ya.shape(), yb.shape());
    ASSERT_EQ(ya.dtype(), yb.dtype());
    int64_t differ = 0;
    for (int64_t i = 0; i < ya.numel(); ++i) {
      int64_t va = 0, vb = 0;
      if (ya.dtype() == DataType::kInt32) va = ya.data<int32_t>()[i], vb = yb.data<int32_t>()[i];
      else if (ya.dtype() == DataType::kUInt8) va = ya.data<uint8_t>()[i], vb = yb.data<uint8_t>()[i];
      else va = ya.data<int8_t>()[i], vb = yb.data<int8_t>()[i];
      if (va != vb) ++differ;
      // Requantised outputs may differ by one step where float32 rounding of the scaled sum
      // lands on the other side of a half; integer sums must be exact.
      ASSERT_LE(std::abs(va - vb), c.qlinear ? 1 : 0) << "element " << i;
    }
    EXPECT_LE(differ * 1000, ya.numel()) << differ << " of " << ya.numel() << " differ by one step";
  }
}

}  // namespace
}  // namespace bulkhead::test

namespace bulkhead::test {
namespace {

// A QDQ model as quantisers write it: x quantised, two convolutions whose weights, inputs
// and bias are dequantised, a Relu after the first (y's zero point 0: it changes nothing),
// each result quantised again; x's dequantiser also feeds a float branch (kept).
std::string qdq_two_conv_model() {
  const std::string w1 = int8conv::ints_text(8 * 4 * 9, 31, -127, 127), w2 = int8conv::ints_text(6 * 8 * 9, 32, -127, 127);
  return R"(<ir_version: 8, opset_import: ["" : 13]>
g (uint8[1,4,10,10] xq) => (uint8[1,6,10,10] yq, float[1,4,10,10] side) <
  float xs = {0.03}, uint8 xz = {120},
  int8[8,4,3,3] w1 = {)" + w1 + R"(}, float[8] w1s = {0.004,0.005,0.006,0.003,0.007,0.004,0.005,0.006}, int8[8] w1z = {0,0,0,0,0,0,0,0},
  int32[8] b1 = {100,-200,300,-50,0,25,-75,150}, float[8] b1s = {0.00012,0.00015,0.00018,0.00009,0.00021,0.00012,0.00015,0.00018},
  float h1s = {0.02}, uint8 h1z = {0},
  int8[6,8,3,3] w2 = {)" + w2 + R"(}, float w2s = {0.005},
  float ys = {0.04}, uint8 yz = {128}> {
  x = DequantizeLinear(xq, xs, xz)
  side = Relu(x)
  w1f = DequantizeLinear <axis = 0> (w1, w1s, w1z)
  b1f = DequantizeLinear <axis = 0> (b1, b1s)
  c1 = Conv <pads = [1,1,1,1]> (x, w1f, b1f)
  r1 = Relu(c1)
  h1q = QuantizeLinear(r1, h1s, h1z)
  h1 = DequantizeLinear(h1q, h1s, h1z)
  w2f = DequantizeLinear(w2, w2s)
  c2 = Conv <pads = [1,1,1,1]> (h1, w2f)
  yq = QuantizeLinear(c2, ys, yz)
})";
}

TEST(QdqFusion, DequantizeConvQuantizeRunsAsQLinearConvWithinOneStep) {
  Env env;
  const std::string bytes = model_text_bytes(qdq_two_conv_model());
  SessionOptions plain;
  plain.optimization_level = 0;
  auto ref = env.load_bytes(bytes, "qdq", plain);
  auto fused = env.load_bytes(bytes, "qdq");
  ASSERT_TRUE(ref.is_ok()) << ref.status().to_string();
  ASSERT_TRUE(fused.is_ok()) << fused.status().to_string();
  // 11 nodes as written; fused: x's DequantizeLinear (still read by the float branch),
  // Relu, and the two QLinearConv.
  EXPECT_EQ(fused->placement()[0].second, 4);
  NamedTensors in{{"xq", int8conv::random_ints(DataType::kUInt8, {1, 4, 10, 10}, 41)}};
  auto a = ref->run(in);
  auto b = fused->run(in);
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  ASSERT_TRUE(b.is_ok()) << b.status().to_string();
  const Tensor& ya = (*a)[0].second;
  const Tensor& yb = (*b)[0].second;
  ASSERT_EQ(ya.shape(), yb.shape());
  int64_t differ = 0;
  for (int64_t i = 0; i < ya.numel(); ++i) {
    const int d = std::abs(int{ya.data<uint8_t>()[i]} - int{yb.data<uint8_t>()[i]});
    ASSERT_LE(d, 1) << "element " << i;
    differ += d != 0;
  }
  EXPECT_LE(differ * 50, ya.numel()) << differ << " of " << ya.numel() << " differ by one step";
  EXPECT_TRUE(bitwise_equal((*a)[1].second, (*b)[1].second)) << "the float branch is untouched";
}

TEST(QdqFusion, AReluThatWouldClipAndABiasOfAnotherScaleStayAsWritten) {
  Env env;
  // x's DequantizeLinear, the float branch's Relu, the first Conv with its Relu fused as
  // a float post-op (weight and bias dequantisers folded into constants when the session
  // is made), its QuantizeLinear, and the second convolution as one QLinearConv.
  const int kFirstStaysFloat = 5;
  // y's zero point 9: the Relu clips real values, so Conv+Relu+Q is not one QLinearConv.
  std::string m = qdq_two_conv_model();
  m.replace(m.find("uint8 h1z = {0}"), 15, "uint8 h1z = {9}");
  auto s = env.load_bytes(model_text_bytes(m), "qdq");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  EXPECT_EQ(s->placement()[0].second, kFirstStaysFloat);
  // A bias whose scale is not x_scale * w_scale: its int32 values mean something else.
  m = qdq_two_conv_model();
  m.replace(m.find("0.00012,0.00015"), 15, "0.00024,0.00015");
  s = env.load_bytes(model_text_bytes(m), "qdq");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  EXPECT_EQ(s->placement()[0].second, kFirstStaysFloat);
  NamedTensors in{{"xq", int8conv::random_ints(DataType::kUInt8, {1, 4, 10, 10}, 41)}};
  EXPECT_TRUE(s->run(in).is_ok());
}

}  // namespace
}  // namespace bulkhead::test

namespace bulkhead::test {
namespace {

// Compares two int tensors element by element; at most `step` apart, and returns how many differ.
int64_t compare_ints(const Tensor& a, const Tensor& b, int step) {
  EXPECT_EQ(a.shape(), b.shape());
  EXPECT_EQ(a.dtype(), b.dtype());
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return a.numel();
  int64_t differ = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    int64_t va = 0, vb = 0;
    if (a.dtype() == DataType::kInt32) va = a.data<int32_t>()[i], vb = b.data<int32_t>()[i];
    else if (a.dtype() == DataType::kUInt8) va = a.data<uint8_t>()[i], vb = b.data<uint8_t>()[i];
    else va = a.data<int8_t>()[i], vb = b.data<int8_t>()[i];
    EXPECT_LE(std::abs(va - vb), step) << "element " << i;
    differ += va != vb;
  }
  return differ;
}

TEST(Int8MatMul, OneDnnGivesWhatTheReferenceLoopsGive) {
  using int8conv::ints_text;
  struct Case {
    const char* name;
    std::string model;
    NamedTensors inputs;
    int step;
  };
  const std::string bu8 = ints_text(64 * 24, 51, 0, 255), bs8 = ints_text(64 * 24, 52, -128, 127);
  std::vector<Case> cases;
  cases.push_back({"QLinearMatMul, uint8 B with zero point 128, per-column scales, 3-D a",
                   R"(<ir_version: 8, opset_import: ["" : 10]>
g (uint8[2,5,64] a) => (uint8[2,5,24] y) <float as = {0.02}, uint8 az = {117}, uint8[64,24] b = {)" + bu8 +
                       R"(}, float[24] bs = {)" + random_values_text(24, 53, 0.001f, 0.01f) + R"(}, uint8[24] bz = {)" +
                       ints_text(24, 54, 128, 128) + R"(}, float ys = {0.3}, uint8 yz = {100}> {
  y = QLinearMatMul(a, as, az, b, bs, bz, ys, yz) })",
                   {{"a", int8conv::random_ints(DataType::kUInt8, {2, 5, 64}, 55)}},
                   1});
  cases.push_back({"QLinearMatMul, constant uint8 B with a different zero point per column",
                   R"(<ir_version: 8, opset_import: ["" : 10]>
g (uint8[6,64] a) => (uint8[6,24] y) <float as = {0.02}, uint8 az = {117}, uint8[64,24] b = {)" +
                       ints_text(64 * 24, 63, 10, 240) + R"(}, float[24] bs = {)" +
                       random_values_text(24, 64, 0.001f, 0.01f) + R"(}, uint8[24] bz = {)" + ints_text(24, 65, 118, 138) +
                       R"(}, float ys = {0.3}, uint8 yz = {100}> {
  y = QLinearMatMul(a, as, az, b, bs, bz, ys, yz) })",
                   {{"a", int8conv::random_ints(DataType::kUInt8, {6, 64}, 66)}},
                   1});
  cases.push_back({"QLinearMatMul, int8 a and y, int8 B as an input",
                   R"(<ir_version: 8, opset_import: ["" : 10]>
g (int8[7,64] a, int8[64,24] b) => (int8[7,24] y) <float as = {0.02}, int8 az = {-3}, float bs = {0.004}, int8 bz = {0}, float ys = {0.2}, int8 yz = {5}> {
  y = QLinearMatMul(a, as, az, b, bs, bz, ys, yz) })",
                   {{"a", int8conv::random_ints(DataType::kInt8, {7, 64}, 56)}, {"b", int8conv::random_ints(DataType::kInt8, {64, 24}, 57)}},
                   1});
  cases.push_back({"MatMulInteger, constant int8 B", R"(<ir_version: 8, opset_import: ["" : 10]>
g (uint8[9,64] a) => (int32[9,24] y) <uint8 az = {130}, int8[64,24] b = {)" + bs8 + R"(}> { y = MatMulInteger(a, b, az) })",
                   {{"a", int8conv::random_ints(DataType::kUInt8, {9, 64}, 58)}},
                   0});
  cases.push_back({"MatMulInteger, sums beyond float32's integers (reference)", R"(<ir_version: 8, opset_import: ["" : 10]>
g (uint8[3,1200] a, int8[1200,4] b) => (int32[3,4] y) { y = MatMulInteger(a, b) })",
                   {{"a", int8conv::random_ints(DataType::kUInt8, {3, 1200}, 59)}, {"b", int8conv::random_ints(DataType::kInt8, {1200, 4}, 60)}},
                   0});
  Env env;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string bytes = model_text_bytes(c.model);
    auto fast = env.load_bytes(bytes, "m");
    setenv("BULKHEAD_CPU_INT8", "0", 1);
    auto ref = env.load_bytes(bytes, "m");
    unsetenv("BULKHEAD_CPU_INT8");
    ASSERT_TRUE(fast.is_ok()) << fast.status().to_string();
    ASSERT_TRUE(ref.is_ok()) << ref.status().to_string();
    auto a = fast->run(c.inputs);
    auto b = ref->run(c.inputs);
    ASSERT_TRUE(a.is_ok()) << a.status().to_string();
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    const int64_t differ = compare_ints((*a)[0].second, (*b)[0].second, c.step);
    EXPECT_LE(differ * 100, (*a)[0].second.numel()) << differ << " differ by one step";
  }
}

TEST(QdqFusion, DequantizeMatMulQuantizeRunsAsQLinearMatMulWithinOneStep) {
  const std::string b = int8conv::ints_text(32 * 16, 61, -127, 127);
  const std::string text = R"(<ir_version: 8, opset_import: ["" : 13]>
g (uint8[4,32] aq) => (uint8[4,16] yq) <float as = {0.05}, uint8 az = {128}, int8[32,16] b = {)" + b +
                           R"(}, float[16] bs = {)" + random_values_text(16, 62, 0.002f, 0.008f) +
                           R"(}, float ys = {0.15}, uint8 yz = {120}> {
  a = DequantizeLinear(aq, as, az)
  bf = DequantizeLinear <axis = 1> (b, bs)
  m = MatMul(a, bf)
  yq = QuantizeLinear(m, ys, yz)
})";
  Env env;
  SessionOptions plain;
  plain.optimization_level = 0;
  auto ref = env.load_bytes(model_text_bytes(text), "qdq", plain);
  auto fused = env.load_bytes(model_text_bytes(text), "qdq");
  ASSERT_TRUE(ref.is_ok()) << ref.status().to_string();
  ASSERT_TRUE(fused.is_ok()) << fused.status().to_string();
  EXPECT_EQ(fused->placement()[0].second, 1);
  NamedTensors in{{"aq", int8conv::random_ints(DataType::kUInt8, {4, 32}, 63)}};
  auto x = ref->run(in);
  auto y = fused->run(in);
  ASSERT_TRUE(x.is_ok()) << x.status().to_string();
  ASSERT_TRUE(y.is_ok()) << y.status().to_string();
  const int64_t differ = compare_ints((*x)[0].second, (*y)[0].second, 1);
  EXPECT_LE(differ * 20, (*x)[0].second.numel());
}


// One QDQ model as three sessions: unfused (optimisation level 0, the float path), fused
// (the int8 kernels), and fused with BULKHEAD_CPU_INT8=0 (their reference loops).
struct ThreeWays {
  std::optional<Session> ref, fused, loops;
};
ThreeWays three_ways(Env& env, const std::string& text) {
  ThreeWays t;
  SessionOptions plain;
  plain.optimization_level = 0;
  auto ref = env.load_bytes(model_text_bytes(text), "qdq", plain);
  auto fused = env.load_bytes(model_text_bytes(text), "qdq");
  setenv("BULKHEAD_CPU_INT8", "0", 1);
  auto loops = env.load_bytes(model_text_bytes(text), "qdq");
  unsetenv("BULKHEAD_CPU_INT8");
  EXPECT_TRUE(ref.is_ok()) << ref.status().to_string();
  EXPECT_TRUE(fused.is_ok()) << fused.status().to_string();
  EXPECT_TRUE(loops.is_ok()) << loops.status().to_string();
  if (ref.is_ok() && fused.is_ok() && loops.is_ok()) {
    t.ref.emplace(std::move(*ref));
    t.fused.emplace(std::move(*fused));
    t.loops.emplace(std::move(*loops));
  }
  return t;
}

// The three on `in`: the fused output within one step of the unfused one, at most one in
// `ratio` elements a step apart, and byte for byte the reference loops'. The op types the
// fused session ran, counted.
std::map<std::string, int> expect_three_agree(ThreeWays& t, const NamedTensors& in, int ratio) {
  std::map<std::string, int> ops;
  if (!t.ref) return ops;
  std::vector<NodeProfile> prof;
  RunOptions ro;
  ro.profile = &prof;
  auto x = t.ref->run(in);
  auto y = t.fused->run(in, ro);
  auto z = t.loops->run(in);
  EXPECT_TRUE(x.is_ok() && y.is_ok() && z.is_ok()) << y.status().to_string();
  if (!x.is_ok() || !y.is_ok() || !z.is_ok()) return ops;
  for (const auto& p : prof) ++ops[p.op_type];
  const int64_t differ = compare_ints((*x)[0].second, (*y)[0].second, 1);
  EXPECT_LE(differ * ratio, (*x)[0].second.numel()) << differ << " differ by one step";
  EXPECT_EQ(compare_ints((*y)[0].second, (*z)[0].second, 0), 0);
  return ops;
}

// A fully connected layer as quantisers write it: Gemm with transB 1 (B [N, K], per-channel
// scales on axis 0) and an int32 bias of scale a_scale * b_scale [N].
std::string qdq_gemm_model(const char* gemm_attrs) {
  const int K = 40, N = 12;
  const std::string b = int8conv::ints_text(N * K, 81, -127, 127), bias = int8conv::ints_text(N, 82, -3000, 3000);
  std::vector<float> bs(N);
  std::string bs_text, cs_text;
  for (int n = 0; n < N; ++n) {
    bs[n] = 0.002f + 0.0005f * static_cast<float>(n);
    bs_text += (n ? "," : "") + std::to_string(bs[n]);
  }
  // The bias's scale: a_scale * b_scale, computed as float32 as a quantiser does.
  for (int n = 0; n < N; ++n) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(0.05f * std::stof(std::to_string(bs[n]))));
    cs_text += (n ? "," : "") + std::string(buf);
  }
  return R"(<ir_version: 8, opset_import: ["" : 13]>
g (uint8[3,40] aq) => (uint8[3,12] yq) <float as = {0.05}, uint8 az = {128}, int8[12,40] b = {)" + b +
         R"(}, float[12] bs = {)" + bs_text + R"(}, int32[12] c = {)" + bias + R"(}, float[12] cs = {)" + cs_text +
         R"(}, float ys = {0.15}, uint8 yz = {120}> {
  a = DequantizeLinear(aq, as, az)
  bf = DequantizeLinear <axis = 0> (b, bs)
  cf = DequantizeLinear <axis = 0> (c, cs)
  m = Gemm )" + gemm_attrs + R"( (a, bf, cf)
  yq = QuantizeLinear(m, ys, yz)
})";
}

TEST(QdqFusion, DequantizeGemmQuantizeRunsAsQLinearGemmWithinOneStep) {
  Env env;
  ThreeWays t = three_ways(env, qdq_gemm_model("<transB = 1>"));
  ASSERT_TRUE(t.ref);
  EXPECT_EQ(t.fused->placement()[0].second, 1) << "one QLinearGemm";
  auto ops = expect_three_agree(t, {{"aq", int8conv::random_ints(DataType::kUInt8, {3, 40}, 83)}}, 10);
  EXPECT_EQ(ops["QLinearGemm"], 1);
}

TEST(QdqFusion, GemmsTheInt8KernelCannotTakeStayAsWritten) {
  Env env;
  NamedTensors in{{"aq", int8conv::random_ints(DataType::kUInt8, {3, 40}, 84)}};
  // alpha 0.5, beta 2: the product or the bias scaled: they run as written.
  for (const char* attrs : {"<transB = 1, alpha = 0.5>", "<transB = 1, beta = 2.0>"}) {
    SCOPED_TRACE(attrs);
    auto s = env.load_bytes(model_text_bytes(qdq_gemm_model(attrs)), "qdq");
    ASSERT_TRUE(s.is_ok()) << s.status().to_string();
    EXPECT_GT(s->placement()[0].second, 1);
    auto r = s->run(in);
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  }
  // A bias whose scale is not a_scale * b_scale stays in float.
  std::string m = qdq_gemm_model("<transB = 1>");
  m.replace(m.find("float[12] cs = {") + 16, 1, "9");
  auto s = env.load_bytes(model_text_bytes(m), "qdq");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  EXPECT_GT(s->placement()[0].second, 1);
}


// QLinearGemm is the optimiser's, but a model may name it: what it is given is checked as
// for any operator, one line naming the problem.
TEST(QdqFusion, AModelCallingQLinearGemmGetsItsInputsChecked) {
  Env env;
  const std::string head = R"(<ir_version: 8, opset_import: ["" : 13, "bulkhead" : 1]>
g (uint8[2,4] a) => (uint8[2,3] y) <float as = {0.1}, uint8 az = {3}, int8[4,3] b = {1,2,3,4,5,6,7,8,9,10,11,12},
  float bs = {0.01}, int8 bz = {0}, float ys = {0.2}, uint8 yz = {7}, )";
  NamedTensors in{{"a", int8conv::random_ints(DataType::kUInt8, {2, 4}, 85)}};
  struct Case {
    const char* bias;
    const char* error;
  };
  for (const Case& c : {Case{"float[3] c = {1,2,3}", "bias must be int32 [3], got float32[3]"},
                        Case{"int32[4] c = {1,2,3,4}", "bias must be int32 [3], got int32[4]"}}) {
    SCOPED_TRACE(c.bias);
    for (const char* fast : {"1", "0"}) {
      setenv("BULKHEAD_CPU_INT8", fast, 1);
      auto s = env.load_bytes(model_text_bytes(head + c.bias + R"(> {
  y = bulkhead.QLinearGemm(a, as, az, b, bs, bz, ys, yz, c) })"),
                              "m");
      unsetenv("BULKHEAD_CPU_INT8");
      ASSERT_TRUE(s.is_ok()) << s.status().to_string();
      auto r = s->run(in);
      ASSERT_FALSE(r.is_ok());
      EXPECT_NE(r.status().message().find(c.error), std::string::npos) << r.status().to_string();
      EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
    }
  }
}


// A QDQ upsampling ConvTranspose (kernel = stride = 2, per-channel weights on axis 1, an
// int32 bias, a Relu that clips nothing) between two QDQ convolutions, as det's head has
// them: the three run as int8 kernels (the ConvTranspose channels-last between the
// convolutions), within one step of the float path; oneDNN and the reference loops agree
// byte for byte. `deconv_attrs` replaces the ConvTranspose's attributes.
std::string qdq_deconv_model(const std::string& deconv_attrs = "<strides = [2, 2]>",
                             const std::string& out_shape = "[1,3,12,16]") {
  const std::string w0 = int8conv::ints_text(8 * 5 * 9, 91, -127, 127), wd = int8conv::ints_text(8 * 6 * 4, 92, -127, 127),
                    w2 = int8conv::ints_text(3 * 6 * 1, 93, -127, 127);
  return R"(<ir_version: 8, opset_import: ["" : 13]>
g (uint8[1,5,6,8] xq) => (uint8)" + out_shape + R"( yq) <
  float xs = {0.03}, uint8 xz = {120}, int8[8,5,3,3] w0 = {)" + w0 + R"(}, float w0s = {0.004},
  float h0s = {0.05}, uint8 h0z = {0},
  int8[8,6,2,2] wd = {)" + wd + R"(}, float[6] wds = {0.004,0.005,0.006,0.003,0.007,0.0045}, int8[6] wdz = {0,0,0,0,0,0},
  int32[6] bd = {100,-200,300,-50,0,25}, float[6] bds = {0.0002,0.00025,0.0003,0.00015,0.00035,0.000225},
  float h1s = {0.04}, uint8 h1z = {0},
  int8[3,6,1,1] w2 = {)" + w2 + R"(}, float w2s = {0.006}, float ys = {0.02}, uint8 yz = {128}> {
  x = DequantizeLinear(xq, xs, xz)
  w0f = DequantizeLinear(w0, w0s)
  c0 = Conv <pads = [1,1,1,1]> (x, w0f)
  h0q = QuantizeLinear(c0, h0s, h0z)
  h0 = DequantizeLinear(h0q, h0s, h0z)
  wdf = DequantizeLinear <axis = 1> (wd, wds, wdz)
  bdf = DequantizeLinear <axis = 0> (bd, bds)
  d = ConvTranspose )" + deconv_attrs + R"( (h0, wdf, bdf)
  r = Relu(d)
  h1q = QuantizeLinear(r, h1s, h1z)
  h1 = DequantizeLinear(h1q, h1s, h1z)
  w2f = DequantizeLinear(w2, w2s)
  c2 = Conv (h1, w2f)
  yq = QuantizeLinear(c2, ys, yz)
})";
}

TEST(QdqFusion, UpsamplingConvTransposeRunsAsInt8WithinOneStep) {
  Env env;
  ThreeWays t = three_ways(env, qdq_deconv_model());
  ASSERT_TRUE(t.ref);
  auto ops = expect_three_agree(t, {{"xq", int8conv::random_ints(DataType::kUInt8, {1, 5, 6, 8}, 94)}}, 10);
  EXPECT_EQ(ops["QLinearConvTranspose"], 1);
  EXPECT_EQ(ops["QLinearConv"], 2);
  EXPECT_EQ(ops["ConvTranspose"] + ops["DequantizeLinear"] + ops["QuantizeLinear"], 0);
}

TEST(QdqFusion, UpsamplingConvTransposeOnPlainTensors) {
  // x a graph input and y a graph output (both NCHW), int8 x, per-tensor weights with a
  // zero point, 3x2 blocks, no bias: one QLinearConvTranspose, as above.
  const std::string text = R"(<ir_version: 8, opset_import: ["" : 13]>
g (int8[2,7,5,4] xq) => (uint8[2,3,15,8] yq) <float xs = {0.02}, int8 xz = {-5},
  uint8[7,3,3,2] w = {)" + int8conv::ints_text(7 * 3 * 3 * 2, 97, 60, 200) +
                           R"(}, float ws = {0.003}, uint8 wz = {128}, float ys = {0.03}, uint8 yz = {100}> {
  x = DequantizeLinear(xq, xs, xz)
  wf = DequantizeLinear(w, ws, wz)
  d = ConvTranspose <strides = [3, 2], kernel_shape = [3, 2]> (x, wf)
  yq = QuantizeLinear(d, ys, yz)
})";
  Env env;
  ThreeWays t = three_ways(env, text);
  ASSERT_TRUE(t.ref);
  EXPECT_EQ(t.fused->placement()[0].second, 1);
  auto ops = expect_three_agree(t, {{"xq", int8conv::random_ints(DataType::kInt8, {2, 7, 5, 4}, 98)}}, 10);
  EXPECT_EQ(ops["QLinearConvTranspose"], 1);
}

TEST(QdqFusion, OtherConvTransposesStayAsWrittenAndTheInternalNodeIsChecked) {
  Env env;
  NamedTensors in{{"xq", int8conv::random_ints(DataType::kUInt8, {1, 5, 6, 8}, 95)}};
  // Stride 1 with pads: not an upsampling of whole blocks, the ConvTranspose stays.
  auto s = env.load_bytes(model_text_bytes(qdq_deconv_model("<pads = [0,0,1,1]>", "[1,3,6,8]")), "qdq");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  std::vector<NodeProfile> prof;
  RunOptions ro;
  ro.profile = &prof;
  auto r = s->run(in, ro);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  int deconvs = 0;
  for (const auto& p : prof) deconvs += p.op_type == "ConvTranspose";
  EXPECT_EQ(deconvs, 1);
  // A model naming QLinearConvTranspose with another geometry gets one line, on both paths.
  const std::string direct = R"(<ir_version: 8, opset_import: ["" : 13, "bulkhead" : 1]>
g (uint8[1,2,3,3] x) => (uint8[1,2,6,6] y) <float xs = {0.1}, uint8 xz = {3}, int8[2,2,2,2] w = {1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8},
  float ws = {0.01}, int8 wz = {0}, float ys = {0.2}, uint8 yz = {7}> {
  y = bulkhead.QLinearConvTranspose <strides = [1, 1]> (x, xs, xz, w, ws, wz, ys, yz) })";
  for (const char* fast : {"1", "0"}) {
    setenv("BULKHEAD_CPU_INT8", fast, 1);
    auto d = env.load_bytes(model_text_bytes(direct), "m");
    unsetenv("BULKHEAD_CPU_INT8");
    ASSERT_TRUE(d.is_ok()) << d.status().to_string();
    auto rr = d->run({{"x", int8conv::random_ints(DataType::kUInt8, {1, 2, 3, 3}, 96)}});
    ASSERT_FALSE(rr.is_ok());
    EXPECT_NE(rr.status().message().find("runs only kernels equal to their strides"), std::string::npos)
        << rr.status().to_string();
  }
}

}  // namespace
}  // namespace bulkhead::test
