// Shape and type inference (ir/infer.h): per-operator cases from ONNX text, symbolic
// broadcasting, integer values followed through shape sub-graphs, the overridable-
// initializer rule, declared-type conflicts, subgraphs, load-time type errors, the real
// models, and a sweep over every model of the ONNX backend data.
#include <chrono>
#include <filesystem>
#include <fstream>

#include "ir/infer.h"
#include "ir/onnx_import.h"
#include "onnx/onnx_pb.h"
#include "support/test_util.h"

namespace bulkhead::test {
namespace {

namespace fs = std::filesystem;

Result<ir::Model> load_text(const std::string& text) {
  std::string bytes = model_text_bytes(text);
  return ir::load_model_from_bytes(bytes.data(), bytes.size(), "infer.onnx", ir::DataFolder{});
}

// A model of one graph in the default domain at `opset`.
std::string model(const std::string& graph, int opset = 17, int ir = 8) {
  return "<ir_version: " + std::to_string(ir) + ", opset_import: [\"\" : " + std::to_string(opset) + "]>\n" + graph;
}

// The inferred (or declared) type of `value`: "float32[N,3,?]", "undefined" when unknown.
std::string type_of(const ir::Graph& g, const std::string& value) {
  const ir::ValueInfo* v = g.info(value);
  return v ? v->type_string() : "(none)";
}
std::string type_of(const ir::Model& m, const std::string& value) { return type_of(*m.graph, value); }

// Loads `graph` and returns the type of `value`.
std::string infer(const std::string& graph, const std::string& value, int opset = 17) {
  auto m = load_text(model(graph, opset));
  if (!m.is_ok()) return "error: " + m.status().to_string();
  return type_of(*m, value);
}

TEST(Infer, ElementwiseBroadcastingWithSymbolicDims) {
  EXPECT_EQ(infer("g (float[N,3,1] a, float[1,W] b) => (c) { c = Add(a, b) }", "c"), "float32[N,3,W]");
  EXPECT_EQ(infer("g (float[N,4] a, float[N,4] b) => (c) { c = Mul(a, b) }", "c"), "float32[N,4]");
  // Different names might be 1 or equal: unknown. A fixed size other than 1 wins.
  EXPECT_EQ(infer("g (float[N,4] a, float[M,4] b) => (c) { c = Sub(a, b) }", "c"), "float32[?,4]");
  EXPECT_EQ(infer("g (float[N,1] a, float[5] b) => (c) { c = Div(a, b) }", "c"), "float32[N,5]");
  EXPECT_EQ(infer("g (float[N,K] a, float[7,1] b) => (c) { c = Add(a, b) }", "c"), "float32[7,K]");
  EXPECT_EQ(infer("g (float[2,3] a, float[3] b, float[1] d) => (c) { c = Max(a, b, d) }", "c"), "float32[2,3]");
  EXPECT_EQ(infer("g (float[2,3] a, float[3] b) => (c) { c = Less(a, b) }", "c"), "bool[2,3]");
  EXPECT_EQ(infer("g (bool[4] c, float[4] a, float[1] b) => (y) { y = Where(c, a, b) }", "y"), "float32[4]");
  EXPECT_EQ(infer("g (float[2,3] a) => (y) { y = Sigmoid(a) }", "y"), "float32[2,3]");
  EXPECT_EQ(infer("g (float[2,3] a) => (y) { y = IsNaN(a) }", "y"), "bool[2,3]");
  EXPECT_EQ(infer("g (float[2,3] a) => (y) { y = Cast<to = 7>(a) }", "y"), "int64[2,3]");
  EXPECT_EQ(infer("g (float[2,3] a, int32[1] b) => (y) { y = CastLike(a, b) }", "y"), "int32[2,3]");
}

TEST(Infer, ShapeOperatorsAreInt64) {
  EXPECT_EQ(infer("g (float[N,3,W] a) => (s) { s = Shape(a) }", "s"), "int64[3]");
  EXPECT_EQ(infer("g (float[N,3,W] a) => (s) { s = Shape<start = 1>(a) }", "s", 15), "int64[2]");
  EXPECT_EQ(infer("g (float[N,3,W] a) => (s) { s = Size(a) }", "s"), "int64[]");
  EXPECT_EQ(infer("g (float[N,3] a) => (s) { s = NonZero(a) }", "s"), "int64[2,?]");
  EXPECT_EQ(infer("g (float[2,5] a) => (y) { y = ArgMax<axis = 1, keepdims = 0>(a) }", "y"), "int64[2]");
  EXPECT_EQ(infer("g (float[2,5] a, int64[1] k) => (v, i) { v, i = TopK(a, k) }", "i"), "int64[2,?]");
}

TEST(Infer, ConvolutionAndPooling) {
  const std::string conv = R"(g (float[N,3,224,224] x, float[16,3,3,3] w) => (y) {
    y = Conv<pads = [1, 1, 1, 1], strides = [2, 2]>(x, w) })";
  EXPECT_EQ(infer(conv, "y"), "float32[N,16,112,112]");
  EXPECT_EQ(infer(R"(g (float[1,4,10,9] x, float[8,2,3,3] w) => (y) {
    y = Conv<group = 2, dilations = [2, 2]>(x, w) })", "y"), "float32[1,8,6,5]");
  EXPECT_EQ(infer(R"(g (float[1,1,7,8] x, float[2,1,3,3] w) => (y) {
    y = Conv<auto_pad = "SAME_UPPER", strides = [2, 2]>(x, w) })", "y"), "float32[1,2,4,4]");
  EXPECT_EQ(infer(R"(g (float[1,1,7,8] x, float[2,1,3,3] w) => (y) {
    y = Conv<auto_pad = "VALID", strides = [2, 2]>(x, w) })", "y"), "float32[1,2,3,3]");
  // A 1x1 stride-1 convolution keeps symbolic sizes.
  EXPECT_EQ(infer("g (float[N,8,H,W] x, float[4,8,1,1] w) => (y) { y = Conv(x, w) }", "y"), "float32[N,4,H,W]");
  EXPECT_EQ(infer(R"(g (float[1,2,3,3] x, float[2,3,3,3] w) => (y) {
    y = ConvTranspose<strides = [3, 2], output_padding = [1, 1]>(x, w) })", "y"), "float32[1,3,10,8]");
  EXPECT_EQ(infer(R"(g (float[1,2,3,3] x, float[2,3,3,3] w) => (y) {
    y = ConvTranspose<strides = [3, 2], output_shape = [10, 8]>(x, w) })", "y"), "float32[1,3,10,8]");
  EXPECT_EQ(infer(R"(g (float[1,3,32,32] x) => (y, i) {
    y, i = MaxPool<kernel_shape = [3, 3], strides = [2, 2], ceil_mode = 1>(x) })", "i"), "int64[1,3,16,16]");
  EXPECT_EQ(infer(R"(g (float[1,1,4,4] x) => (y) {
    y = MaxPool<kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], ceil_mode = 1>(x) })", "y"),
            "float32[1,1,3,3]");
  // Ceil mode drops a last window that would start in the end padding.
  EXPECT_EQ(infer(R"(g (float[1,1,2,2] x) => (y) {
    y = MaxPool<kernel_shape = [1, 1], strides = [2, 2], ceil_mode = 1>(x) })", "y"), "float32[1,1,1,1]");
  EXPECT_EQ(infer(R"(g (float[1,3,5,5] x) => (y) {
    y = AveragePool<kernel_shape = [2, 2], pads = [0, 0, 1, 1]>(x) })", "y"), "float32[1,3,5,5]");
  EXPECT_EQ(infer("g (float[N,3,H,W] x) => (y) { y = GlobalAveragePool(x) }", "y"), "float32[N,3,1,1]");
}

TEST(Infer, MatrixProducts) {
  EXPECT_EQ(infer("g (float[B,1,4,5] a, float[3,5,6] b) => (y) { y = MatMul(a, b) }", "y"), "float32[B,3,4,6]");
  EXPECT_EQ(infer("g (float[5] a, float[2,5,6] b) => (y) { y = MatMul(a, b) }", "y"), "float32[2,6]");
  EXPECT_EQ(infer("g (float[4,5] a, float[5] b) => (y) { y = MatMul(a, b) }", "y"), "float32[4]");
  EXPECT_EQ(infer(R"(g (float[5,M] a, float[N,5] b, float[N] c) => (y) {
    y = Gemm<transA = 1, transB = 1>(a, b, c) })", "y"), "float32[M,N]");
  EXPECT_EQ(infer("g (float[2,3,4] a, float[2,4,5] b) => (y) { y = Einsum<equation = \"bij,bjk->bik\">(a, b) }", "y",
                  12),
            "float32[2,3,5]");
  EXPECT_EQ(infer("g (float[7,3,4] a) => (y) { y = Einsum<equation = \"...ij\">(a) }", "y", 12), "float32[7,3,4]");
}

TEST(Infer, ReshapeFlattenTransposeConcatSplit) {
  EXPECT_EQ(infer("g (float[2,3,4] x) => (y) <int64[3] s = {0, -1, 2}> { y = Reshape(x, s) }", "y"), "float32[2,6,2]");
  EXPECT_EQ(infer("g (float[N,3,4] x) => (y) <int64[2] s = {0, -1}> { y = Reshape(x, s) }", "y"), "float32[N,12]");
  EXPECT_EQ(infer("g (float[N,3,4] x) => (y) <int64[2] s = {-1, 12}> { y = Reshape(x, s) }", "y"), "float32[N,12]");
  // allowzero: a 0 is a size, not "copy".
  EXPECT_EQ(infer("g (float[0,3] x) => (y) <int64[2] s = {3, 0}> { y = Reshape<allowzero = 1>(x, s) }", "y", 14),
            "float32[3,0]");
  EXPECT_EQ(infer("g (float[N,3,4,5] x) => (y) { y = Flatten<axis = 2>(x) }", "y"), "float32[?,20]");
  EXPECT_EQ(infer("g (float[N,3,4,5] x) => (y) { y = Flatten(x) }", "y"), "float32[N,60]");
  EXPECT_EQ(infer("g (float[N,3,4] x) => (y) { y = Transpose<perm = [2, 0, 1]>(x) }", "y"), "float32[4,N,3]");
  EXPECT_EQ(infer("g (float[N,3,4] x) => (y) { y = Transpose(x) }", "y"), "float32[4,3,N]");
  EXPECT_EQ(infer("g (float[N,3] a, float[N,5] b) => (y) { y = Concat<axis = 1>(a, b) }", "y"), "float32[N,8]");
  EXPECT_EQ(infer("g (float[N,3] a, float[M,3] b) => (y) { y = Concat<axis = 0>(a, b) }", "y"), "float32[?,3]");
  EXPECT_EQ(infer("g (float[6,4] x) => (a, b) <int64[2] s = {2, 4}> { a, b = Split(x, s) }", "b"), "float32[4,4]");
  EXPECT_EQ(infer("g (float[6,4] x) => (a, b, c) { a, b, c = Split(x) }", "c"), "float32[2,4]");
  EXPECT_EQ(infer("g (float[7,4] x) => (a, b, c) { a, b, c = Split<num_outputs = 3>(x) }", "c", 18), "float32[1,4]");
  EXPECT_EQ(infer("g (float[6,4] x) => (a, b) { a, b = Split<axis = 1, split = [1, 3]>(x) }", "b", 11),
            "float32[6,3]");
}

TEST(Infer, SliceGatherSqueezeUnsqueeze) {
  EXPECT_EQ(infer(R"(g (float[20,10,N] x) => (y) <int64[2] st = {1, -3}, int64[2] en = {1000, -1}, int64[2] ax = {0, 1},
                  int64[2] sp = {3, 1}> { y = Slice(x, st, en, ax, sp) })", "y"), "float32[7,2,N]");
  EXPECT_EQ(infer(R"(g (float[20,10] x) => (y) <int64[1] st = {-1}, int64[1] en = {-9223372036854775807},
                  int64[1] ax = {0}, int64[1] sp = {-2}> { y = Slice(x, st, en, ax, sp) })", "y"), "float32[10,10]");
  EXPECT_EQ(infer("g (float[20,10] x) => (y) { y = Slice<starts = [2], ends = [5], axes = [1]>(x) }", "y", 9),
            "float32[20,3]");
  EXPECT_EQ(infer("g (float[5,N,3] x, int64[2,4] i) => (y) { y = Gather<axis = 1>(x, i) }", "y"), "float32[5,2,4,3]");
  EXPECT_EQ(infer("g (float[5,4] x, int64[5,2] i) => (y) { y = GatherElements<axis = 1>(x, i) }", "y"),
            "float32[5,2]");
  EXPECT_EQ(infer("g (float[2,3,4] x, int64[2,1,2] i) => (y) { y = GatherND<batch_dims = 1>(x, i) }", "y"),
            "float32[2,1]");
  EXPECT_EQ(infer("g (float[1,N,1,4] x) => (y) <int64[2] a = {0, -2}> { y = Squeeze(x, a) }", "y"), "float32[N,4]");
  EXPECT_EQ(infer("g (float[1,3,1] x) => (y) { y = Squeeze(x) }", "y"), "float32[3]");
  EXPECT_EQ(infer("g (float[1,N] x) => (y) { y = Squeeze(x) }", "y"), "float32");  // N might be 1
  EXPECT_EQ(infer("g (float[3,N] x) => (y) { y = Unsqueeze<axes = [0, 3]>(x) }", "y", 11), "float32[1,3,N,1]");
  EXPECT_EQ(infer("g (float[3,N] x) => (y) <int64[1] a = {-1}> { y = Unsqueeze(x, a) }", "y"), "float32[3,N,1]");
}

TEST(Infer, ExpandTilePadResizeAndFriends) {
  EXPECT_EQ(infer("g (float[3,1] x) => (y) <int64[3] s = {2, 1, 6}> { y = Expand(x, s) }", "y"), "float32[2,3,6]");
  EXPECT_EQ(infer("g (float[N,2] x) => (y) <int64[2] r = {1, 3}> { y = Tile(x, r) }", "y"), "float32[N,6]");
  EXPECT_EQ(infer("g (float[N,3,4] x) => (y) <int64[6] p = {0, 1, 2, 0, 1, 0}> { y = Pad(x, p) }", "y"),
            "float32[N,5,6]");
  EXPECT_EQ(infer("g (float[1,2,4,4] x) => (y) { y = Pad<pads = [0, 0, 1, 1, 0, 0, 1, 1]>(x) }", "y", 10),
            "float32[1,2,6,6]");
  EXPECT_EQ(infer(R"(g (float[N,3,4,5] x) => (y) <float[0] roi = {}, float[4] sc = {1.0, 1.0, 2.0, 1.5}> {
    y = Resize<mode = "nearest">(x, roi, sc) })", "y", 13), "float32[N,3,8,7]");
  EXPECT_EQ(infer(R"(g (float[1,3,4,5] x) => (y) <float[0] roi = {}, float[0] sc = {}, int64[2] sz = {9, 10}> {
    y = Resize<axes = [2, 3]>(x, roi, sc, sz) })", "y", 18), "float32[1,3,9,10]");
  EXPECT_EQ(infer("g (float[1,1,2,2] x) => (y) <float[4] s = {1.0, 1.0, 2.0, 3.0}> { y = Upsample(x, s) }", "y", 9),
            "float32[1,1,4,6]");
  EXPECT_EQ(infer("g (float[1,8,2,3] x) => (y) { y = DepthToSpace<blocksize = 2>(x) }", "y"), "float32[1,2,4,6]");
  EXPECT_EQ(infer("g (float[1,2,4,6] x) => (y) { y = SpaceToDepth<blocksize = 2>(x) }", "y"), "float32[1,8,2,3]");
  EXPECT_EQ(infer(R"(g (int64[2,3] i) => (y) <int64 d = {10}, float[2] v = {0.0, 1.0}> {
    y = OneHot<axis = 1>(i, d, v) })", "y"), "float32[2,10,3]");
  EXPECT_EQ(infer("g () => (y) <int64 a = {2}, int64 b = {11}, int64 c = {3}> { y = Range(a, b, c) }", "y"),
            "int64[3]");
  EXPECT_EQ(infer("g () => (y) <float a = {0.0}, float b = {1.0}, float c = {0.25}> { y = Range(a, b, c) }", "y"),
            "float32[4]");
  EXPECT_EQ(infer("g (float[N,5] x) => (y) <int64[1] a = {1}> { y = CumSum(x, a) }", "y"), "float32[N,5]");
}

TEST(Infer, ReductionsAndNormalisations) {
  EXPECT_EQ(infer("g (float[N,3,4] x) => (y) { y = ReduceMean<axes = [-1]>(x) }", "y"), "float32[N,3,1]");
  EXPECT_EQ(infer("g (float[N,3,4] x) => (y) { y = ReduceMax<axes = [1], keepdims = 0>(x) }", "y"), "float32[N,4]");
  EXPECT_EQ(infer("g (float[N,3,4] x) => (y) <int64[1] a = {1}> { y = ReduceSum<keepdims = 0>(x, a) }", "y", 13),
            "float32[N,4]");
  EXPECT_EQ(infer("g (float[N,3,4] x) => (y) { y = ReduceL2(x) }", "y", 18), "float32[1,1,1]");
  EXPECT_EQ(infer("g (float[N,3,4] x) => (y) { y = ReduceSum<noop_with_empty_axes = 1>(x) }", "y", 13),
            "float32[N,3,4]");
  EXPECT_EQ(infer("g (float[N,3,4] x, int64[1] a) => (y) { y = ReduceProd(x, a) }", "y", 18), "float32[?,?,?]");
  EXPECT_EQ(infer("g (float[N,3,4] x) => (y) { y = Softmax<axis = 1>(x) }", "y"), "float32[N,3,4]");
  EXPECT_EQ(infer(R"(g (float[N,3,4] x, float[4] s, float[4] b) => (y, m, r) {
    y, m, r = LayerNormalization<axis = -1>(x, s, b) })", "r"), "float32[N,3,1]");
  EXPECT_EQ(infer(R"(g (float[N,3,4,4] x, float[3] s, float[3] b, float[3] m, float[3] v) => (y) {
    y = BatchNormalization(x, s, b, m, v) })", "y"), "float32[N,3,4,4]");
}

TEST(Infer, RecurrentAndAttention) {
  const std::string lstm = R"(g (float[7,B,10] x, float[2,80,10] w, float[2,80,20] r) => (y, h, c) {
    y, h, c = LSTM<hidden_size = 20, direction = "bidirectional">(x, w, r) })";
  EXPECT_EQ(infer(lstm, "y"), "float32[7,2,B,20]");
  EXPECT_EQ(infer(lstm, "c"), "float32[2,B,20]");
  EXPECT_EQ(infer(R"(g (float[B,7,10] x, float[1,30,10] w, float[1,30,10] r) => (y, h) {
    y, h = GRU<hidden_size = 10, layout = 1>(x, w, r) })", "h", 14), "float32[B,1,10]");
  EXPECT_EQ(infer(R"(g (float[2,4,8,16] q, float[2,4,6,16] k, float[2,4,6,32] v) => (y) {
    y = Attention(q, k, v) })", "y", 23), "float32[2,4,8,32]");
  EXPECT_EQ(infer(R"(g (float[2,8,64] q, float[2,6,32] k, float[2,6,32] v) => (y) {
    y = Attention<q_num_heads = 4, kv_num_heads = 2>(q, k, v) })", "y", 23), "float32[2,8,64]");
}

TEST(Infer, QuantisationAndGenerators) {
  EXPECT_EQ(infer("g (float[3] x, float s, uint8 z) => (y) { y = QuantizeLinear(x, s, z) }", "y"), "uint8[3]");
  EXPECT_EQ(infer("g (float[3] x, float s) => (y) { y = QuantizeLinear(x, s) }", "y"), "uint8[3]");
  EXPECT_EQ(infer("g (int8[3] x, float s) => (y) { y = DequantizeLinear(x, s) }", "y"), "float32[3]");
  EXPECT_EQ(infer("g (int8[3] x, float16 s) => (y) { y = DequantizeLinear(x, s) }", "y", 19), "float16[3]");
  EXPECT_EQ(infer("g () => (y) { y = RandomNormal<shape = [2, 3], dtype = 11>() }", "y"), "float64[2,3]");
  EXPECT_EQ(infer("g () => (y) <int64[2] s = {4, 5}> { y = ConstantOfShape<value = int32[1] {7}>(s) }", "y"),
            "int32[4,5]");
  EXPECT_EQ(infer("g () => (y) <int64[2] s = {4, 5}> { y = ConstantOfShape(s) }", "y"), "float32[4,5]");
}

// The usual exported pattern: the target shape of a Reshape computed from Shape at run time.
TEST(Infer, ShapeSubgraphGivesStaticShapes) {
  const std::string g = R"(g (float[N,3,4,5] x) => (y) <int64 zero = {0}, int64[1] ax = {0}, int64[1] m1 = {-1}> {
    s = Shape(x)
    b = Gather(s, zero)
    bu = Unsqueeze(b, ax)
    t = Concat<axis = 0>(bu, m1)
    y = Reshape(x, t)
  })";
  auto m = load_text(model(g));
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_EQ(type_of(*m, "b"), "int64[]");
  EXPECT_EQ(type_of(*m, "t"), "int64[2]");
  EXPECT_EQ(type_of(*m, "y"), "float32[N,60]");
  // With a fixed batch, every shape is static.
  std::string fixed = g;
  fixed.replace(fixed.find("float[N,"), 8, "float[2,");
  auto f = load_text(model(fixed));
  ASSERT_TRUE(f.is_ok());
  EXPECT_EQ(type_of(*f, "y"), "float32[2,60]");
  EXPECT_TRUE(f->graph->all_shapes_static());
  EXPECT_FALSE(m->graph->all_shapes_static());

  // Arithmetic, Cast and ConstantOfShape/Expand/Slice on shape values.
  auto a = load_text(model(R"(g (float[2,6,8] x, float[6,1] col) => (y, z, w)
      <int64[1] one = {1}, int64[1] two = {2}, int64[1] k = {2}> {
    s = Shape(x)
    hw = Slice(s, one, k)
    c = Cast<to = 6>(hw)
    c64 = Cast<to = 7>(c)
    d = Mul(c64, two)
    y = ConstantOfShape(d)
    z = Expand(col, s)
    half = Div(hw, two)
    w = Slice(x, one, half, two)
  })"));
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  EXPECT_EQ(type_of(*a, "y"), "float32[12]");
  EXPECT_EQ(type_of(*a, "z"), "float32[2,6,8]");
  EXPECT_EQ(type_of(*a, "w"), "float32[2,6,2]");  // axis 2, elements 1 to 3
}

// IR >= 4: an initializer that is also a graph input is a default the caller may replace,
// so its values are not constants; IR 3 lists every initializer as an input, as constants.
TEST(Infer, OverridableInitializersAreNotConstants) {
  const std::string g = "g (float[2,6] x, int64[2] shp = {3, 4}) => (y) { y = Reshape(x, shp) }";
  auto ir8 = load_text(model(g, 17, 8));
  ASSERT_TRUE(ir8.is_ok()) << ir8.status().to_string();
  EXPECT_EQ(type_of(*ir8, "y"), "float32[?,?]");
  auto ir3 = load_text(model(g, 8, 3));
  ASSERT_TRUE(ir3.is_ok()) << ir3.status().to_string();
  EXPECT_EQ(type_of(*ir3, "y"), "float32[3,4]");
  // A plain initializer is a constant at any IR version.
  auto plain = load_text(model("g (float[2,6] x) => (y) <int64[2] shp = {3, 4}> { y = Reshape(x, shp) }", 17, 8));
  ASSERT_TRUE(plain.is_ok());
  EXPECT_EQ(type_of(*plain, "y"), "float32[3,4]");
}

TEST(Infer, DeclaredTypesAreKeptAndCompleted) {
  // An undeclared output gets the inferred type; a declared unknown dim is filled.
  auto m = load_text(model("g (float[N,3] x) => (y, float[N,?] z) { y = Relu(x) z = Neg(x) }"));
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_EQ(m->graph->outputs[0].type_string(), "float32[N,3]");
  EXPECT_EQ(m->graph->outputs[1].type_string(), "float32[N,3]");
  // A declared shape that conflicts with the inferred one is kept as declared.
  auto k = load_text(model("g (float[2,3] x) => (float[5,5] y) { y = Relu(x) }"));
  ASSERT_TRUE(k.is_ok()) << k.status().to_string();
  EXPECT_EQ(k->graph->outputs[0].type_string(), "float32[5,5]");
  // The session reports inferred output types when the model declares none.
  Env env;
  auto s = env.load_bytes(model_text_bytes(model("g (float[2,3] x) => (y) { y = Transpose(x) }")), "t.onnx");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  ASSERT_EQ(s->outputs().size(), 1u);
  EXPECT_EQ(s->outputs()[0].dtype, DataType::kFloat32);
  EXPECT_TRUE(s->outputs()[0].has_shape);
  EXPECT_EQ(s->outputs()[0].shape, (std::vector<int64_t>{3, 2}));
}

TEST(Infer, DeclaredTypeConflictIsAnInvalidModel) {
  auto m = load_text(model("g (float[2] x) => (int64[2] y) { y = Relu(x) }"));
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidModel);
  const std::string msg = m.status().message();
  EXPECT_NE(msg.find("infer.onnx"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(Relu)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'y'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("int64"), std::string::npos) << msg;
  EXPECT_NE(msg.find("float32"), std::string::npos) << msg;
}

TEST(Infer, MismatchedInputTypesAreAnInvalidModel) {
  auto m = load_text(model("g (float[2] a, int64[2] b) => (c) { c = Add(a, b) }"));
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidModel);
  const std::string msg = m.status().message();
  EXPECT_NE(msg.find("node 'Add_0' (Add)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("float32 and int64"), std::string::npos) << msg;
  auto w = load_text(model("g (int64[2] c, float[2] a, float[2] b) => (y) { y = Where(c, a, b) }"));
  ASSERT_FALSE(w.is_ok());
  EXPECT_NE(w.status().message().find("(Where)"), std::string::npos) << w.status().message();
  // BatchNormalization's statistics may have their own type from opset 14, not before.
  const std::string bn = R"(g (float16[1,2,3] x, float16[2] s, float16[2] b, float[2] m, float[2] v) => (y) {
    y = BatchNormalization(x, s, b, m, v) })";
  EXPECT_TRUE(load_text(model(bn, 14)).is_ok());
  auto bn9 = load_text(model(bn, 9));
  ASSERT_FALSE(bn9.is_ok());
  EXPECT_NE(bn9.status().message().find("float16 and float32"), std::string::npos) << bn9.status().message();
}

TEST(Infer, SubgraphsSeeEnclosingValues) {
  auto m = load_text(model(R"(g (bool c, float[N,2] x) => (y) {
    k = Constant <value = float[2] {10.0, 20.0}> ()
    y = If (c) <
      then_branch = t () => (a) { a = Add(x, k) },
      else_branch = e () => (b) { b = Sub(x, k) }
    >
  })"));
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_EQ(type_of(*m, "y"), "float32[N,2]");
  const ir::Node& n = m->graph->nodes.back();
  ASSERT_EQ(n.op_type, "If");
  const ir::Graph& then_g = *n.attr("then_branch")->g;
  EXPECT_EQ(type_of(then_g, "a"), "float32[N,2]");
  ASSERT_NE(then_g.info("x"), nullptr);  // the outer value's type, recorded in the branch
  EXPECT_EQ(then_g.info("x")->type_string(), "float32[N,2]");

  // Loop: state types flow into the body; scan outputs gain the iteration axis.
  auto l = load_text(model(R"(g (int64 n, float[3] x) => (s, sc) <bool t = {1}> {
    s, sc = Loop (n, t, x) <
      body = b (int64 i, bool c, v) => (co, vo, so) { co = Identity(c) vo = Add(v, v) so = Relu(v) }
    >
  })"));
  ASSERT_TRUE(l.is_ok()) << l.status().to_string();
  EXPECT_EQ(type_of(*l, "s"), "float32");
  EXPECT_EQ(type_of(*l, "sc"), "float32");
  const ir::Graph& body = *l->graph->nodes.back().attr("body")->g;
  EXPECT_EQ(body.inputs[2].type_string(), "float32");
  EXPECT_EQ(type_of(body, "so"), "float32");

  // A type error inside a subgraph names the enclosing node and the branch.
  auto bad = load_text(model(R"(g (bool c, float[2] x, int64[2] i) => (y) {
    y = If (c) < then_branch = t () => (a) { a = Add(x, i) }, else_branch = e () => (b) { b = Neg(x) } >
  })"));
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("then_branch"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("(Add)"), std::string::npos) << bad.status().message();
}

TEST(Infer, SequencesAndOptionals) {
  auto q = load_text(model(R"(g (float[2,3] a, float[2,3] b) => (n, t, o, h) <int64 zero = {0}> {
    s = SequenceConstruct(a, b)
    n = SequenceLength(s)
    t = SequenceAt(s, zero)
    o = Optional(a)
    h = OptionalHasElement(o)
  })", 18));
  ASSERT_TRUE(q.is_ok()) << q.status().to_string();
  EXPECT_EQ(type_of(*q, "s"), "sequence<float32[2,3]>");
  EXPECT_EQ(type_of(*q, "n"), "int64[]");
  EXPECT_EQ(type_of(*q, "t"), "float32[2,3]");
  EXPECT_EQ(type_of(*q, "o"), "optional<float32[2,3]>");
  EXPECT_EQ(type_of(*q, "h"), "bool[]");
}

// Attributes no valid model has must leave shapes unknown, never crash or overflow.
TEST(Infer, AbsurdAttributesLeaveShapesUnknown) {
  const char* cases[] = {
      "g (float[1,1,5,5] x, float[1,1,3,3] w) => (y) { y = Conv<strides = [9223372036854775807, 1]>(x, w) }",
      "g (float[1,1,5,5] x, float[1,1,3,3] w) => (y) { y = Conv<pads = [9223372036854775807, 0, 9223372036854775807, 0]>(x, w) }",
      "g (float[1,1,5,5] x, float[1,1,3,3] w) => (y) { y = ConvTranspose<strides = [4611686018427387904, 1]>(x, w) }",
      "g (float[1,1,5,5] x) => (y) { y = MaxPool<kernel_shape = [-3, 0]>(x) }",
      "g (float[4,4] x) => (y) <int64[2] s = {-1, -1}> { y = Reshape(x, s) }",
      "g (float[4,4] x) => (y) <int64[1] a = {-9223372036854775807}, int64[1] b = {9223372036854775807}, int64[1] c = {0}, "
      "int64[1] d = {-9223372036854775807}> { y = Slice(x, a, b, c, d) }",
      "g (float[0,4] x) => (y) <int64[1] a = {-1}, int64[1] b = {-9223372036854775807}, int64[1] c = {0}, "
      "int64[1] d = {-1}> { y = Slice(x, a, b, c, d) }",
      "g (float[1,4,2,2] x) => (y) { y = DepthToSpace<blocksize = 0>(x) }",
      "g () => (y) <float a = {0.0}, float b = {1e30}, float c = {1e-30}> { y = Range(a, b, c) }",
      "g () => (y) <int64 a = {0}, int64 b = {10}, int64 c = {0}> { y = Range(a, b, c) }",
      "g (float[3,4] x) => (y) <int64[2] r = {4611686018427387904, 4}> { y = Tile(x, r) }",
      "g (float[3,4] x) => (y) <int64[2] s = {9223372036854775807, 9223372036854775807}> { y = Expand(x, s) }",
      "g (float[9223372036854775807,4] x) => (y) { y = Flatten<axis = 0>(x) }",
      "g (float[3,4] x) => (y) { y = Transpose<perm = [0, 5]>(x) }",
      "g (float[3,4] x) => (y) { y = Einsum<equation = \"ij,->k...\">(x) }",
      // found by fuzz/model_fuzz.cc: batch_dims + the index depth overflowed
      "g (float[2,3] x, int64[2,7] i) => (y) { y = GatherND<batch_dims = 9223372036854775807>(x, i) }",
      "g (float[2,3] x, int64[2,1] i) => (y) { y = GatherND<batch_dims = 1>(x, i) }",
  };
  for (const char* c : cases) {
    auto m = load_text(model(c, 18));
    ASSERT_TRUE(m.is_ok()) << c << "\n" << m.status().to_string();
    const ir::ValueInfo* y = m->graph->info("y");
    ASSERT_NE(y, nullptr) << c;
    if (y->shape) {
      for (const ir::Dim& d : *y->shape) {
        EXPECT_TRUE(!d.fixed() || d.value < (int64_t{1} << 62)) << c << ": " << y->type_string();
      }
    }
  }
}

// Found by fuzzing: Attention's inference read Q's first dimension when Q is a scalar.
TEST(Infer, AttentionWithScalarQueryLeavesShapesUnknown) {
  auto m = load_text(model("g (float q, float[2,6,8] k, float[2,6,8] v) => (y) "
                           "{ y = Attention<q_num_heads = 2, kv_num_heads = 2>(q, k, v) }", 23));
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  const ir::ValueInfo* y = m->graph->info("y");
  ASSERT_NE(y, nullptr);
  EXPECT_FALSE(y->shape.has_value()) << y->type_string();
}

TEST(Infer, StaticShapes) {
  auto s = load_text(model("g (float[2,3] x) => (y) { t = Relu(x) y = Transpose(t) }"));
  ASSERT_TRUE(s.is_ok());
  EXPECT_TRUE(s->graph->all_shapes_static());
  auto n = load_text(model("g (float[2,3] x) => (y) { y = NonZero(x) }"));
  ASSERT_TRUE(n.is_ok());
  EXPECT_FALSE(n->graph->all_shapes_static());
  auto sym = load_text(model("g (float[N,3] x) => (y) { y = Relu(x) }"));
  ASSERT_TRUE(sym.is_ok());
  EXPECT_FALSE(sym->graph->all_shapes_static());
}

// A type only inference knows (the Cast's output) reaches the kernel factory, which
// rejects it when the model loads -- not on the first run.
TEST(Infer, UnsupportedTypeFailsAtLoad) {
  Env env;
  auto s = env.load_bytes(model_text_bytes(model("g (float[2] x) => (y) { c = Cast<to = 6>(x) y = Sigmoid(c) }")),
                          "t.onnx");
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnsupported);
  const std::string msg = s.status().message();
  EXPECT_NE(msg.find("(Sigmoid)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("input type int32 is not supported"), std::string::npos) << msg;
  // From two subgraphs down, reading the enclosing graph's value.
  auto nested = env.load_bytes(model_text_bytes(model(R"(g (bool b, float[2] x) => (y) {
    c = Cast<to = 6>(x)
    y = If (b) <
      then_branch = t () => (o) {
        o = If (b) < then_branch = t2 () => (p) { p = Sigmoid(c) }, else_branch = e2 () => (q) { q = Identity(c) } >
      },
      else_branch = e () => (r) { r = Identity(c) }
    >
  })")), "nested.onnx");
  ASSERT_FALSE(nested.is_ok());
  EXPECT_NE(nested.status().message().find("(Sigmoid): input type int32 is not supported"), std::string::npos)
      << nested.status().message();
  // The same node on a supported type loads and runs.
  auto ok = env.load_bytes(model_text_bytes(model("g (float[2] x) => (y) { c = Cast<to = 11>(x) y = Sigmoid(c) }")),
                           "t.onnx");
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
}

// The real models come out fully typed; det and rec have every shape known once their
// image size is given (the batch stays symbolic).
std::string with_input_shape(const std::string& path, const std::string& input, const std::vector<std::string>& dims) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  onnx::ModelProto p;
  EXPECT_TRUE(p.ParseFromString(ss.str())) << path;
  for (auto& in : *p.mutable_graph()->mutable_input()) {
    if (in.name() != input) continue;
    auto* shape = in.mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->clear_dim();
    for (const std::string& d : dims) {
      auto* dim = shape->add_dim();
      if (std::isdigit(static_cast<unsigned char>(d[0]))) dim->set_dim_value(std::stoll(d));
      else dim->set_dim_param(d);
    }
  }
  std::string out;
  p.SerializeToString(&out);
  return out;
}

struct Counts {
  int values = 0, untyped = 0, unranked = 0, not_known = 0;
};

void count(const ir::Graph& g, Counts* c) {
  for (const ir::Node& n : g.nodes) {
    for (const std::string& o : n.outputs) {
      if (o.empty()) continue;
      ++c->values;
      const ir::ValueInfo* v = g.info(o);
      if (!v || v->dtype == DataType::kUndefined) ++c->untyped;
      if (!v || !v->shape) {
        ++c->unranked;
        ++c->not_known;
        continue;
      }
      for (const ir::Dim& d : *v->shape)
        if (!d.fixed() && d.param.empty()) {
          ++c->not_known;
          break;
        }
    }
    for (const auto& [name, a] : n.attrs)
      if (a.g) count(*a.g, c);
  }
}

TEST(Infer, RealModelsAreFullyTyped) {
  const std::string dir = shared_dir() + "/models/";
  for (const char* name : {"ppocrv4_det", "ppocrv4_rec", "silero_vad_v5"}) {
    auto m = ir::load_model(dir + name + "/model.onnx");
    ASSERT_TRUE(m.is_ok()) << name << ": " << m.status().to_string();
    Counts c;
    count(*m->graph, &c);
    EXPECT_GT(c.values, 300) << name;
    EXPECT_EQ(c.untyped, 0) << name;
    if (std::string(name) != "silero_vad_v5") {
      EXPECT_EQ(c.unranked, 0) << name;
    }
  }
  struct Pin {
    const char* name;
    std::vector<std::string> dims;
    const char* output;
  };
  for (const Pin& p : {Pin{"ppocrv4_det", {"N", "3", "480", "640"}, "float32[p2o.DynamicDimension.3,1,480,640]"},
                       Pin{"ppocrv4_rec", {"N", "3", "48", "320"}, "float32[p2o.DynamicDimension.2,40,6625]"}}) {
    std::string bytes = with_input_shape(dir + p.name + "/model.onnx", "x", p.dims);
    auto m = ir::load_model_from_bytes(bytes.data(), bytes.size(), p.name, ir::DataFolder{});
    ASSERT_TRUE(m.is_ok()) << p.name << ": " << m.status().to_string();
    Counts c;
    count(*m->graph, &c);
    EXPECT_EQ(c.untyped, 0) << p.name;
    EXPECT_EQ(c.not_known, 0) << p.name;
    EXPECT_EQ(m->graph->outputs[0].type_string(), p.output);
    EXPECT_FALSE(m->graph->all_shapes_static()) << p.name;  // the batch is symbolic
  }
}

// Every model of the ONNX backend data and the real models loads: inference never fails
// on a valid model, and never crashes.
TEST(Infer, EveryBackendModelLoads) {
  std::vector<std::string> files;
  const std::string data = shared_dir() + "/onnx-backend-data";
  for (const char* sub : {"node", "simple", "pytorch-converted", "pytorch-operator", "light"})
    for (const auto& e : fs::recursive_directory_iterator(data + "/" + sub))
      if (e.path().extension() == ".onnx") files.push_back(e.path().string());
  for (const auto& e : fs::directory_iterator(shared_dir() + "/models"))
    if (fs::exists(e.path() / "model.onnx")) files.push_back((e.path() / "model.onnx").string());
  EXPECT_GT(files.size(), 1900u);
  for (const std::string& f : files) {
    auto m = ir::load_model(f);
    EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  }
}

}  // namespace
}  // namespace bulkhead::test
