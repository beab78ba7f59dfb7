// Limits a user sets on a run (SessionOptions::max_tensor_bytes, max_loop_iterations,
// run_timeout_ms, RunOptions::timeout_ms): passing one is an error naming the node and the
// limit, never a crash or an endless run, and the session serves the next run as before.
#include "support/test_util.h"

namespace bulkhead::test {
namespace {

// y = x doubled `m` times by a Loop (a trip count of 10^15 never ends without a limit).
const char* kLoop = R"(<ir_version: 8, opset_import: ["" : 17]>
g (int64 m, float[1] x) => (float[1] y) <bool t = {1}> {
  y = Loop (m, t, x) <
    body = b (int64 i, bool c, float[1] v) => (bool co, float[1] vo) { co = Identity(c) vo = Add(v, v) }
  >
})";

// y = ConstantOfShape(shape): its size is the input's to choose.
const char* kExpand = R"(<ir_version: 8, opset_import: ["" : 17]>
g (int64[2] shape) => (float[A,B] y) { y = ConstantOfShape <value = float[1] {1.0}> (shape) })";

Tensor scalar_i64(int64_t v) { return Tensor::from_vector<int64_t>(DataType::kInt64, {}, {v}); }
Tensor one_float(float v) { return Tensor::from_vector<float>(DataType::kFloat32, {1}, {v}); }

TEST(Limits, LoopIterationsAreBoundedAndTheSessionStaysUsable) {
  Env env;
  SessionOptions o;
  o.max_loop_iterations = 1000;
  auto s = env.load_bytes(model_text_bytes(kLoop), "loop.onnx", o);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  auto r = s->run({{"m", scalar_i64(1000000000000000)}, {"x", one_float(1)}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("(Loop): would run its body more than the session's max_loop_iterations of 1000 times"),
            std::string::npos)
      << r.status().message();
  auto ok = s->run({{"m", scalar_i64(10)}, {"x", one_float(1)}});
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_EQ((*ok)[0].second.data<float>()[0], 1024.f);
  auto edge = s->run({{"m", scalar_i64(1000)}, {"x", one_float(0)}});
  EXPECT_TRUE(edge.is_ok()) << "exactly the limit is allowed: " << edge.status().to_string();
}

TEST(Limits, ARunPastItsTimeLimitStopsAndTheNextRunIsServed) {
  Env env;
  SessionOptions o;
  o.run_timeout_ms = 200;
  auto s = env.load_bytes(model_text_bytes(kLoop), "loop.onnx", o);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  auto r = s->run({{"m", scalar_i64(1000000000000000)}, {"x", one_float(1)}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(r.status().message().find("took longer than its time limit of 200 ms"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("(Loop)"), std::string::npos) << r.status().message();
  // A per-run limit overrides the session's.
  RunOptions ro;
  ro.timeout_ms = 50;
  auto r2 = s->run({{"m", scalar_i64(1000000000000000)}, {"x", one_float(1)}}, ro);
  ASSERT_FALSE(r2.is_ok());
  EXPECT_NE(r2.status().message().find("time limit of 50 ms"), std::string::npos) << r2.status().message();
  auto ok = s->run({{"m", scalar_i64(3)}, {"x", one_float(1)}});
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_EQ((*ok)[0].second.data<float>()[0], 8.f);
  ro.timeout_ms = -7;
  EXPECT_FALSE(s->run({{"m", scalar_i64(3)}, {"x", one_float(1)}}, ro).is_ok());
}

TEST(Limits, TensorsLargerThanTheLimitAreRefusedBeforeTheyAreMade) {
  Env env;
  SessionOptions o;
  o.max_tensor_bytes = 1 << 20;
  auto s = env.load_bytes(model_text_bytes(kExpand), "expand.onnx", o);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  auto shape = [](int64_t a, int64_t b) { return Tensor::from_vector<int64_t>(DataType::kInt64, {2}, {a, b}); };
  auto r = s->run({{"shape", shape(100000, 100000)}});  // 40 GB
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("(ConstantOfShape): output 0 float32[100000,100000] would be 37.3 GiB, more than the "
                                      "session's max_tensor_bytes of 1.0 MiB"),
            std::string::npos)
      << r.status().message();
  // Without a limit the byte count is still checked: one that wraps is an error, not 0 bytes.
  auto unlimited = env.load_bytes(model_text_bytes(kExpand), "expand.onnx");
  ASSERT_TRUE(unlimited.is_ok());
  auto wrap = unlimited->run({{"shape", shape(int64_t{1} << 32, int64_t{1} << 30)}});
  ASSERT_FALSE(wrap.is_ok());
  EXPECT_NE(wrap.status().message().find("too large"), std::string::npos) << wrap.status().message();
  auto ok = s->run({{"shape", shape(512, 512)}});  // exactly 1 MiB
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_EQ((*ok)[0].second.numel(), 512 * 512);
}

// A declared input shape whose element count overflows 64 bits (found by the model fuzz
// harness: the MatMul kernel's warm-up multiplied the dimensions): loading is refused or
// succeeds, never undefined behaviour; a run with any real tensor is refused.
TEST(Limits, AShapeWhoseSizeOverflowsIsNeverMultipliedOut) {
  const char* matmul = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[3037000500,3037000500,4] a) => (float[3037000500,3037000500,2] y) <float[4,2] b = {1,2,3,4,5,6,7,8}> {
  y = MatMul (a, b)
})";
  const char* conv = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,2,3037000500,3037000500] a) => (float[1,2,3037000500,3037000500] y) <float[2,2,1,1] b = {1,2,3,4}> {
  y = Conv (a, b)
})";
  // (The Concat planning to write its inputs in place multiplied the output's dimensions.)
  const char* concat = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,2,9223372036854775807] a, float[1,2,9223372036854775807] b) => (float[2,2,9223372036854775807] y) {
  y = Concat <axis = 0> (a, b)
})";
  for (const char* text : {matmul, conv, concat}) {
    Env env;
    auto s = env.load_bytes(model_text_bytes(text), "huge.onnx", SessionOptions{});
    if (!s.is_ok()) {
      EXPECT_FALSE(s.status().message().empty());
      continue;
    }
    NamedTensors in;
    for (const IoInfo& io : s->inputs()) in.emplace_back(io.name, Tensor::host(DataType::kFloat32, Shape(io.shape.size(), 1)));
    auto r = s->run(in);
    ASSERT_FALSE(r.is_ok());
    EXPECT_NE(r.status().message().find("'a'"), std::string::npos) << r.status().to_string();
  }
}

// A blocksize whose square overflows (found by the model fuzz harness under UBSan): a
// clear error naming the blocksize, not arithmetic on a wrapped number.
TEST(Limits, DepthToSpaceAndSpaceToDepthRefuseABlocksizeThatOverflows) {
  struct Case {
    const char* text;
    Shape x;
  };
  const Case cases[] = {
      {R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,4,2,2] x) => (float[?,?,?,?] y) { y = DepthToSpace <blocksize = 4294967296> (x) })",
       {1, 4, 2, 2}},
      {R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,4,0,0] x) => (float[?,?,?,?] y) { y = SpaceToDepth <blocksize = 4294967296> (x) })",
       {1, 4, 0, 0}},
  };
  for (const Case& c : cases) {
    Env env;
    auto s = env.load_bytes(model_text_bytes(c.text), "block.onnx", SessionOptions{});
    ASSERT_TRUE(s.is_ok()) << s.status().to_string();
    auto r = s->run({{"x", Tensor::host(DataType::kFloat32, c.x)}});
    ASSERT_FALSE(r.is_ok()) << c.text;
    EXPECT_NE(r.status().message().find("blocksize 4294967296"), std::string::npos) << r.status().to_string();
  }
}

TEST(Limits, OptionStringsAndBadValues) {
  auto o = SessionOptions::parse("max_tensor_bytes=64M;max_loop_iterations=5000;run_timeout_ms=250;max_file_bytes=1G");
  ASSERT_TRUE(o.is_ok()) << o.status().to_string();
  EXPECT_EQ(o->max_tensor_bytes, uint64_t{64} << 20);
  EXPECT_EQ(o->max_loop_iterations, 5000);
  EXPECT_EQ(o->run_timeout_ms, 250);
  EXPECT_EQ(o->max_file_bytes, uint64_t{1} << 30);
  for (const char* bad : {"max_tensor_bytes=-1", "max_loop_iterations=-3", "run_timeout_ms=soon", "max_file_bytes=0",
                          "threads=100000", "devices=cpu,,", "worker_timeout_ms=99999999999"})
    EXPECT_FALSE(SessionOptions::parse(bad).is_ok()) << bad;
  Env env;
  SessionOptions neg;
  neg.run_timeout_ms = -1;
  EXPECT_FALSE(env.load_bytes(model_text_bytes(kLoop), "loop.onnx", neg).is_ok());
  neg = SessionOptions();
  neg.threads = 5000;
  EXPECT_FALSE(env.load_bytes(model_text_bytes(kLoop), "loop.onnx", neg).is_ok());
}

TEST(Limits, AWorkerProcessEnforcesThemToo) {
  Env env;
  SessionOptions o;
  o.isolation = "process";
  o.max_loop_iterations = 100;
  o.worker_binary = BULKHEAD_BINARY;
  auto s = env.load_bytes(model_text_bytes(kLoop), "loop.onnx", o);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  const int pid = s->worker_pid();
  auto r = s->run({{"m", scalar_i64(1000000)}, {"x", one_float(1)}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("max_loop_iterations of 100"), std::string::npos) << r.status().message();
  RunOptions ro;
  ro.timeout_ms = 100;
  SessionOptions t = o;
  t.max_loop_iterations = 0;
  auto s2 = env.load_bytes(model_text_bytes(kLoop), "loop.onnx", t);
  ASSERT_TRUE(s2.is_ok()) << s2.status().to_string();
  auto r2 = s2->run({{"m", scalar_i64(1000000000000000)}, {"x", one_float(1)}}, ro);
  ASSERT_FALSE(r2.is_ok());
  EXPECT_EQ(r2.status().code(), StatusCode::kDeadlineExceeded) << r2.status().to_string();
  auto ok = s->run({{"m", scalar_i64(4)}, {"x", one_float(1)}});
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_EQ((*ok)[0].second.data<float>()[0], 16.f);
  EXPECT_EQ(s->worker_pid(), pid) << "a limit is an error of the run, not of the worker";
}

}  // namespace
}  // namespace bulkhead::test
