#include <cmath>

#include "support/test_util.h"

namespace bulkhead::test {
namespace {

const char* kAddModel = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,4] x, float[1,4] z) => (float[1,4] y) { y = Add(x, z) })";

Session load_text(Env& env, const char* text, SessionOptions opts = {}) {
  opts.threads = opts.threads ? opts.threads : 1;
  auto s = env.load_bytes(model_text_bytes(text), "test.onnx", opts);
  EXPECT_TRUE(s.is_ok()) << s.status().to_string();
  return *s;
}

Tensor ones(const Shape& s, DataType dt = DataType::kFloat32) {
  Tensor t = Tensor::host(dt, s);
  std::memset(t.raw(), 0, t.nbytes());
  if (dt == DataType::kFloat32)
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 1;
  return t;
}

TEST(Session, MemoryUseIsReportedAndSteadyFromTheSecondRun) {
  Env env;
  Session s = load_text(env, R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[64,1024] x) => (float[64,1024] y) { a = Relu(x)
 b = Sigmoid(a)
 c = Add(a, b)
 y = Mul(c, b) })");
  auto m0 = s.memory();
  ASSERT_EQ(m0.size(), 1u);
  EXPECT_EQ(m0[0].device, "cpu:0");
  NamedTensors in{{"x", ones({64, 1024})}};
  {
    auto r = s.run(in);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  }
  AllocatorStats first = s.memory()[0].stats;
  const size_t one = 64 * 1024 * sizeof(float);
  EXPECT_GE(first.peak, 2 * one);  // a and b (at least) are alive at once
  EXPECT_EQ(first.in_use, 0u);     // the outputs are released
  EXPECT_GE(first.cached, 2 * one);
  // a, b and c are alive together (c = a + b, then b is read again): a three-block arena.
  EXPECT_EQ(first.arena, 3 * one);
  EXPECT_EQ(first.arena_blocks, 3u);
  // The first run's blocks were in its recording heap, gone with its output; the second
  // run's output comes from the cache, which keeps it for the next run's. From then on
  // runs take no new memory, and the peak stays.
  {
    auto r = s.run(in);
    ASSERT_TRUE(r.is_ok());
  }
  AllocatorStats second = s.memory()[0].stats;
  EXPECT_LE(second.cached, first.cached + one);
  for (int i = 0; i < 3; ++i) {
    auto r = s.run(in);
    ASSERT_TRUE(r.is_ok());
  }
  AllocatorStats later = s.memory()[0].stats;
  EXPECT_EQ(later.peak, first.peak);
  EXPECT_EQ(later.cached, second.cached);
  EXPECT_EQ(later.in_use, 0u);
  EXPECT_EQ(later.arena, first.arena);
}

TEST(Session, ShapesThatChangeBetweenRunsAreRePlannedThenLeftToTheCache) {
  // Each run of another batch size differs from the arena's plan: the session plans
  // again a few times, then gives planning up; every result stays right throughout.
  Env env;
  Session s = load_text(env, R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[N,256] x) => (float[N,256] y) { a = Relu(x)
 b = Sigmoid(a)
 c = Add(a, b)
 y = Mul(c, b) })");
  std::vector<NamedTensors> held;  // earlier outputs stay alive across later runs
  const int64_t sizes[] = {8, 8, 16, 16, 8, 16, 8, 16};  // replayed, re-planned, replayed, ...
  for (int run = 0; run < 8; ++run) {
    int64_t n = sizes[run];
    Tensor x = Tensor::host(DataType::kFloat32, {n, 256});
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>((i + run) % 13) * 0.25f - 1.5f;
    auto r = s.run({{"x", x}});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const Tensor& y = (*r)[0].second;
    ASSERT_EQ(y.shape(), (Shape{n, 256}));
    for (int64_t i = 0; i < x.numel(); ++i) {
      float a = std::max(x.data<float>()[i], 0.f), b = 1.f / (1.f + std::exp(-a));
      ASSERT_NEAR(y.data<float>()[i], (a + b) * b, 1e-6f) << "run " << run << " element " << i;
    }
    held.push_back(*r);
    if (run == 1 || run == 3) {
      EXPECT_GT(s.memory()[0].stats.arena, 0u) << "run " << run << " replayed a plan";
    }
  }
  EXPECT_EQ(s.memory()[0].stats.arena, 0u);
  // The first outputs are untouched by everything since.
  for (int64_t i = 0; i < 8 * 256; ++i) {
    float xv = static_cast<float>(i % 13) * 0.25f - 1.5f;
    float a = std::max(xv, 0.f), b = 1.f / (1.f + std::exp(-a));
    ASSERT_NEAR(held[0][0].second.data<float>()[i], (a + b) * b, 1e-6f);
  }
}

TEST(Session, DescribesInputsAndOutputs) {
  Env env;
  Session s = load_text(env, kAddModel);
  ASSERT_EQ(s.inputs().size(), 2u);
  EXPECT_EQ(s.inputs()[0].name, "x");
  EXPECT_EQ(s.inputs()[0].type_string, "float32[1,4]");
  EXPECT_EQ(s.outputs()[0].name, "y");
  ASSERT_EQ(s.placement().size(), 1u);
  EXPECT_EQ(s.placement()[0].first, "cpu:0");
  EXPECT_EQ(s.placement()[0].second, 1);
}

TEST(Session, BadInputsGiveOneClearError) {
  Env env;
  Session s = load_text(env, kAddModel);
  Tensor good = ones({1, 4});
  struct Case {
    NamedTensors in;
    const char* needle;
  } cases[] = {
      {{{"x", good}, {"nope", good}}, "unknown input 'nope'"},
      {{{"x", good}}, "missing input 'z'"},
      {{{"x", good}, {"z", ones({1, 5})}}, "input 'z': expected shape"},
      {{{"x", good}, {"z", ones({4})}}, "input 'z': expected shape"},
      {{{"x", ones({1, 4}, DataType::kInt64)}, {"z", good}}, "input 'x': expected element type float32, got int64"},
      {{{"x", good}, {"x", good}, {"z", good}}, "given twice"},
  };
  for (auto& c : cases) {
    auto r = s.run(c.in);
    ASSERT_FALSE(r.is_ok()) << c.needle;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.needle), std::string::npos) << r.status().message();
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
  }
  auto ok = s.run({{"x", good}, {"z", good}});
  ASSERT_TRUE(ok.is_ok());
  EXPECT_EQ((*ok)[0].second.data<float>()[3], 2.f);
  auto unknown_out = s.run({{"x", good}, {"z", good}}, RunOptions{{"w"}});
  EXPECT_FALSE(unknown_out.is_ok());
}

TEST(Session, SymbolicDimensionsAcceptAnySize) {
  Env env;
  Session s = load_text(env, R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[N,3] x) => (float[N,3] y) { y = Relu(x) })");
  for (int64_t n : {1, 7, 64}) {
    auto r = s.run({{"x", ones({n, 3})}});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ((*r)[0].second.shape()[0], n);
  }
  EXPECT_FALSE(s.run({{"x", ones({2, 4})}}).is_ok());
}

TEST(Session, KernelErrorsNameTheNode) {
  Env env;
  Session s = load_text(env, R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[N] x, int64[2] shape) => (float[A,B] y) { y = Reshape(x, shape) })");
  Tensor shape = Tensor::from_vector<int64_t>(DataType::kInt64, {2}, {3, 5});
  auto r = s.run({{"x", ones({7})}, {"shape", shape}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("Reshape"), std::string::npos) << r.status().message();
}

// Found by fuzzing (fuzz/model_fuzz.cc): opset-6 broadcasting with an axis near INT64_MAX
// overflowed `axis + rank` in the Add kernel's shape check.
TEST(Session, LegacyBroadcastAxisNearInt64MaxIsAnError) {
  Env env;
  Session s = load_text(env, R"(<ir_version: 3, opset_import: ["" : 6]>
g (float[2,3] a, float[3] b) => (float[2,3] y) { y = Add <broadcast = 1, axis = 9223372036854775807> (a, b) })");
  auto r = s.run({{"a", ones({2, 3})}, {"b", ones({3})}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("does not fit B of rank 1"), std::string::npos) << r.status().message();
}

TEST(Session, OutputsNeverAliasInputsOrWeights) {
  Env env;
  // y passes the input through; w is a weight returned as is; v is a view of the weight;
  // u is a view of another weight made at run time (its shape is an input: not folded).
  Session s = load_text(env, R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x, int64[2] us) => (float[2] y, float[2] w, float[1,2] v, float[?,?] u) {
  y = Identity(x)
  w = Constant <value = float[2] {5.0, 6.0}> ()
  shp = Constant <value = int64[2] {1, 2}> ()
  v = Reshape(w, shp)
  k = Constant <value = float[2] {7.0, 8.0}> ()
  u = Reshape(k, us)
})");
  Tensor x = Tensor::from_vector<float>(DataType::kFloat32, {2}, {1, 2});
  Tensor us = Tensor::from_vector<int64_t>(DataType::kInt64, {2}, {2, 1});
  auto r = s.run({{"x", x}, {"us", us}});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  auto& outs = *r;
  EXPECT_NE(outs[0].second.buffer(), x.buffer());
  // Writing into the outputs must not change the input or the next run's answer.
  outs[0].second.data<float>()[0] = 99;
  outs[1].second.data<float>()[0] = 99;
  outs[2].second.data<float>()[0] = 99;
  ASSERT_EQ(outs[3].second.shape(), (Shape{2, 1}));
  outs[3].second.data<float>()[0] = 99;
  EXPECT_EQ(x.data<float>()[0], 1.f);
  auto again = s.run({{"x", x}, {"us", us}});
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ((*again)[1].second.data<float>()[0], 5.f);
  EXPECT_EQ((*again)[2].second.data<float>()[0], 5.f);
  EXPECT_EQ((*again)[3].second.data<float>()[0], 7.f);
}

TEST(Session, RunDoesNotWriteItsInputs) {
  Env env;
  auto bytes = demo::classifier_model_bytes();
  ASSERT_TRUE(bytes.is_ok());
  auto s = env.load_bytes(*bytes, "demo");
  ASSERT_TRUE(s.is_ok());
  Tensor img = demo::classifier_image(0.5f);
  Tensor copy = img.clone_host();
  ASSERT_TRUE(s->run({{"image", img}}).is_ok());
  EXPECT_TRUE(bitwise_equal(img, copy));
}

TEST(SessionOptions, ParseAndReject) {
  auto o = SessionOptions::parse("devices=cpu;threads=2;graph_capture=0");
  ASSERT_TRUE(o.is_ok());
  EXPECT_EQ(o->threads, 2);
  EXPECT_FALSE(o->graph_capture);
  for (const char* bad : {"threads=-1", "threads=abc", "threads=", "graph_capture=maybe", "colour=blue", "threads"}) {
    auto r = SessionOptions::parse(bad);
    EXPECT_FALSE(r.is_ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(Session, BadDeviceOptions) {
  Env env;
  auto bytes = model_text_bytes(kAddModel);
  SessionOptions o;
  o.devices = {"quantum:0"};
  auto r = env.load_bytes(bytes, "m", o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("quantum"), std::string::npos);
  o.devices = {"cpu:3"};
  EXPECT_FALSE(env.load_bytes(bytes, "m", o).is_ok());
  o.devices = {"cpu:x"};
  EXPECT_FALSE(env.load_bytes(bytes, "m", o).is_ok());
  o.devices = {"cpu"};
  o.threads = -2;
  EXPECT_FALSE(env.load_bytes(bytes, "m", o).is_ok());
}

TEST(Env, SeveralEnvsCoexist) {
  Env a, b;
  Session sa = load_text(a, kAddModel), sb = load_text(b, kAddModel);
  EXPECT_EQ(a.open_device_count(), 1);
  EXPECT_EQ(b.open_device_count(), 1);
  auto ra = sa.run({{"x", ones({1, 4})}, {"z", ones({1, 4})}});
  auto rb = sb.run({{"x", ones({1, 4})}, {"z", ones({1, 4})}});
  ASSERT_TRUE(ra.is_ok() && rb.is_ok());
  EXPECT_TRUE(bitwise_equal((*ra)[0].second, (*rb)[0].second));
}

}  // namespace
}  // namespace bulkhead::test
