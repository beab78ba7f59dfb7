// Bad input at the command line: one clear line on stderr, a non-zero exit code, no
// crash and no output file. Runs the real `bulkhead` binary.
#include <sys/wait.h>

#include <sys/stat.h>

#include <filesystem>
#include <thread>

#include "onnx/onnx_pb.h"

#include "io/npy.h"
#include "support/test_util.h"

namespace bulkhead::test {
namespace {

struct Outcome {
  int code = -1;
  bool signaled = false;
  std::string out, err;
};

std::string slurp(const std::string& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Outcome bulkhead(const std::string& args, const TempDir& dir) {
  std::string cmd = std::string(BULKHEAD_BINARY) + " " + args + " >" + dir.file("stdout") + " 2>" + dir.file("stderr") + " </dev/null";
  int st = std::system(cmd.c_str());
  Outcome o;
  o.signaled = WIFSIGNALED(st);
  o.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  o.out = slurp(dir.file("stdout"));
  o.err = slurp(dir.file("stderr"));
  return o;
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.write("add.onnx", model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,4] x, float[1,4] z) => (float[1,4] y) { y = Add(x, z) })"));
    dir_.write("frob.onnx", model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y) { y = FrobnicateTensor(x) })"));
    dir_.write("inttype.onnx", model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (int32[2] x) => (int32[2] y) { y = Sigmoid(x) })"));
    std::string add = slurp(dir_.file("add.onnx"));
    dir_.write("truncated.onnx", add.substr(0, add.size() / 2));
    dir_.write("notonnx.onnx", "hello, I am a text file\n");
    Tensor x = Tensor::from_vector<float>(DataType::kFloat32, {1, 4}, {1, 2, 3, 4});
    ASSERT_TRUE(io::write_npy(dir_.file("x.npy"), x).is_ok());
    ASSERT_TRUE(io::write_npy(dir_.file("x5.npy"), Tensor::host(DataType::kFloat32, {1, 5})).is_ok());
    ASSERT_TRUE(io::write_npy(dir_.file("xi.npy"), Tensor::host(DataType::kInt64, {1, 4})).is_ok());
    dir_.write("bad.npy", "\x93NUMPY garbage");
    std::filesystem::create_directories(dir_.file("out"));
  }

  // Expects failure with one stderr line containing `needle` and nothing in out/.
  void expect_error(const std::string& args, const std::string& needle) {
    Outcome o = bulkhead(args, dir_);
    EXPECT_FALSE(o.signaled) << args;
    EXPECT_NE(o.code, 0) << args;
    EXPECT_NE(o.code, -1) << args;
    size_t lines = std::count(o.err.begin(), o.err.end(), '\n');
    EXPECT_EQ(lines, 1u) << args << "\nstderr:\n" << o.err;
    EXPECT_NE(o.err.find(needle), std::string::npos) << args << "\nstderr:\n" << o.err;
    EXPECT_TRUE(std::filesystem::is_empty(dir_.file("out"))) << args << ": left an output file";
  }

  std::string m(const char* name) { return dir_.file(name); }
  TempDir dir_;
};

TEST_F(Cli, RunWritesOutputs) {
  Outcome o = bulkhead("run " + m("add.onnx") + " -i x=" + m("x.npy") + " -i z=" + m("x.npy") + " -o " + m("out"), dir_);
  ASSERT_EQ(o.code, 0) << o.err;
  auto y = io::read_npy(m("out") + "/y.npy");
  ASSERT_TRUE(y.is_ok());
  EXPECT_EQ(y->data<float>()[3], 8.f);
  EXPECT_NE(o.out.find("latency"), std::string::npos);
  EXPECT_NE(o.out.find("session created in "), std::string::npos) << o.out;
  // -q keeps the three lines bench/run_bench.js parses, and nothing else.
  Outcome q = bulkhead("run " + m("add.onnx") + " -i x=" + m("x.npy") + " -i z=" + m("x.npy") + " -q", dir_);
  ASSERT_EQ(q.code, 0) << q.err;
  EXPECT_EQ(std::count(q.out.begin(), q.out.end(), '\n'), 3) << q.out;
  EXPECT_EQ(q.out.rfind("session created in ", 0), 0u) << q.out;
  EXPECT_NE(q.out.find("\nfirst run in "), std::string::npos) << q.out;
  EXPECT_NE(q.out.find("\nlatency over 1 run(s): median "), std::string::npos) << q.out;
}

TEST_F(Cli, MissingModelFile) { expect_error("run " + m("nope.onnx") + " -o " + m("out"), "nope.onnx"); }
TEST_F(Cli, TruncatedModel) { expect_error("run " + m("truncated.onnx") + " -o " + m("out"), "not a valid ONNX model"); }
TEST_F(Cli, NotAnOnnxFile) { expect_error("run " + m("notonnx.onnx") + " -o " + m("out"), "not a valid ONNX model"); }
TEST_F(Cli, UnsupportedOperator) { expect_error("run " + m("frob.onnx") + " -i " + m("x.npy") + " -o " + m("out"), "FrobnicateTensor"); }
TEST_F(Cli, UnsupportedType) {
  ASSERT_TRUE(io::write_npy(m("i32.npy"), Tensor::host(DataType::kInt32, {2})).is_ok());
  expect_error("run " + m("inttype.onnx") + " -i " + m("i32.npy") + " -o " + m("out"), "(Sigmoid)");
  // Reported when the model loads: before the (missing) input file is read. The int32
  // reaching Sigmoid here is known only from shape and type inference.
  dir_.write("casttype.onnx", model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (y) { c = Cast<to = 6>(x) y = Sigmoid(c) })"));
  for (const char* model : {"inttype.onnx", "casttype.onnx"})
    expect_error("run " + m(model) + " -i x=" + m("absent.npy") + " -o " + m("out"),
                 "(Sigmoid): input type int32 is not supported");
}
TEST_F(Cli, WrongInputName) {
  expect_error("run " + m("add.onnx") + " -i x=" + m("x.npy") + " -i q=" + m("x.npy") + " -o " + m("out"), "unknown input 'q'");
}
TEST_F(Cli, WrongInputShape) {
  expect_error("run " + m("add.onnx") + " -i x=" + m("x.npy") + " -i z=" + m("x5.npy") + " -o " + m("out"), "input 'z': expected shape");
}
TEST_F(Cli, WrongInputType) {
  expect_error("run " + m("add.onnx") + " -i x=" + m("xi.npy") + " -i z=" + m("x.npy") + " -o " + m("out"), "expected element type float32, got int64");
}
TEST_F(Cli, MissingInput) { expect_error("run " + m("add.onnx") + " -i x=" + m("x.npy") + " -o " + m("out"), "missing input 'z'"); }
TEST_F(Cli, BadNpy) { expect_error("run " + m("add.onnx") + " -i x=" + m("bad.npy") + " -i z=" + m("x.npy") + " -o " + m("out"), "bad.npy"); }
TEST_F(Cli, MissingNpy) { expect_error("run " + m("add.onnx") + " -i x=" + m("none.npy") + " -i z=" + m("x.npy") + " -o " + m("out"), "none.npy"); }
TEST_F(Cli, BadOptionValues) {
  std::string base = "run " + m("add.onnx") + " -i x=" + m("x.npy") + " -i z=" + m("x.npy") + " -o " + m("out");
  expect_error(base + " --threads -3", "threads");
  expect_error(base + " --threads many", "threads");
  expect_error(base + " --repeat 0", "repeat");
  expect_error(base + " --optimization-level 7", "optimization-level");
  expect_error(base + " --device quantum:0", "quantum");
  expect_error(base + " --frobnicate", "frobnicate");
  expect_error("conformance --data /nonexistent/data", "/nonexistent/data");
}

TEST_F(Cli, DemoRuns) {
  Outcome o = bulkhead("demo", dir_);
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("watertight"), std::string::npos) << o.out;
}

TEST_F(Cli, DevicesListsTheCpu) {
  Outcome o = bulkhead("devices", dir_);
  EXPECT_EQ(o.code, 0);
  EXPECT_NE(o.out.find("cpu:0"), std::string::npos) << o.out;
}

TEST_F(Cli, RunWithProcessIsolationMatchesInProcess) {
  auto demo = demo::classifier_model_bytes();
  ASSERT_TRUE(demo.is_ok());
  dir_.write("demo.onnx", *demo);
  ASSERT_TRUE(io::write_npy(m("image.npy"), demo::classifier_image(0.25f)).is_ok());
  std::filesystem::create_directories(m("local"));
  std::filesystem::create_directories(m("remote"));
  std::string base = "run " + m("demo.onnx") + " -i image=" + m("image.npy") + " --threads 1";
  Outcome a = bulkhead(base + " -o " + m("local"), dir_);
  Outcome b = bulkhead(base + " --isolation process -o " + m("remote"), dir_);
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_TRUE(b.err.empty()) << b.err;
  auto pa = io::read_npy(m("local") + "/probs.npy");
  auto pb = io::read_npy(m("remote") + "/probs.npy");
  ASSERT_TRUE(pa.is_ok() && pb.is_ok());
  EXPECT_TRUE(bitwise_equal(*pa, *pb));
  EXPECT_NE(b.out.find("cpu:0"), std::string::npos) << b.out;  // the worker's placement

  // --profile says what the hand-off cost, apart from the kernels; in-process has none.
  Outcome c = bulkhead(base + " --isolation process --profile", dir_);
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find("hand-off to the worker process ("), std::string::npos) << c.out;
  for (const char* what : {"inputs copied in", "outputs copied out", "messages and wake-ups"})
    EXPECT_NE(c.out.find(what), std::string::npos) << what << "\n" << c.out;
  EXPECT_EQ(c.out.find("(isolation)"), std::string::npos) << c.out;  // not among the kernels
  Outcome d = bulkhead(base + " --profile", dir_);
  ASSERT_EQ(d.code, 0) << d.err;
  EXPECT_EQ(d.out.find("hand-off"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("profile (one run, "), std::string::npos) << d.out;
  // Medians over several profiled runs: the same nodes, listed once each.
  Outcome e = bulkhead(base + " --profile --profile-runs 5 --profile-nodes 1000", dir_);
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_NE(e.out.find("profile (each node's median over 5 runs, "), std::string::npos) << e.out;
  auto slowest = [](const std::string& out) {
    std::string tail = out.substr(out.find("slowest nodes:"));
    tail = tail.substr(0, tail.find("\nmodel "));
    return std::count(tail.begin(), tail.end(), '\n');
  };
  EXPECT_EQ(slowest(e.out), slowest(bulkhead(base + " --profile --profile-nodes 1000", dir_).out)) << e.out;
}

TEST_F(Cli, ReleaseIdleMemoryGivesTheSameOutputs) {
  auto demo = demo::classifier_model_bytes();
  ASSERT_TRUE(demo.is_ok());
  dir_.write("demo.onnx", *demo);
  ASSERT_TRUE(io::write_npy(m("image.npy"), demo::classifier_image(0.5f)).is_ok());
  std::filesystem::create_directories(m("keep"));
  std::filesystem::create_directories(m("release"));
  std::string base = "run " + m("demo.onnx") + " -i image=" + m("image.npy") + " --threads 1 -r 3";
  Outcome a = bulkhead(base + " -o " + m("keep"), dir_);
  Outcome b = bulkhead(base + " --release-idle-memory -o " + m("release"), dir_);
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  auto pa = io::read_npy(m("keep") + "/probs.npy");
  auto pb = io::read_npy(m("release") + "/probs.npy");
  ASSERT_TRUE(pa.is_ok() && pb.is_ok());
  EXPECT_TRUE(bitwise_equal(*pa, *pb));
}

TEST_F(Cli, ProcessIsolationErrors) {
  std::string base = "run " + m("add.onnx") + " -i x=" + m("x.npy") + " -i z=" + m("x.npy") + " -o " + m("out");
  expect_error(base + " --isolation bogus", "--isolation must be in-process or process, got 'bogus'");
  // Errors from the worker arrive as the same one line.
  expect_error("run " + m("frob.onnx") + " -i " + m("x.npy") + " --isolation process -o " + m("out"), "FrobnicateTensor");
  expect_error("run " + m("nope.onnx") + " --isolation process -o " + m("out"), "nope.onnx");
  expect_error("run " + m("add.onnx") + " -i x=" + m("x.npy") + " -i z=" + m("x5.npy") + " --isolation process -o " +
                   m("out"),
               "input 'z': expected shape");
}

// The report's silently accepted and unclear options: each is one clear line now.
TEST_F(Cli, HostileOptionsAreOneClearLine) {
  std::string base = "run " + m("add.onnx") + " -i x=" + m("x.npy") + " -i z=" + m("x.npy");
  expect_error(base + " --threads 100000", "--threads must be 0..1024");
  expect_error(base + " --warmup -3", "--warmup must be >= 0, got -3");
  expect_error(base + " --profile --profile-runs 0", "--profile-runs must be at least 1, got 0");
  expect_error(base + " -o ''", "--output-dir is empty");
  expect_error(base + " --device cpu,,", "has an empty entry in 'cpu,,'");
  expect_error(base + " --device vulkan,cpu --submit-policy auto:-5K -o " + m("out"), "auto:-5K");
  expect_error(base + " --max-file-size 10 -o " + m("out"), "more than the limit of 10 B");
  expect_error(base + " --max-file-size -5 -o " + m("out"), "bad --max-file-size '-5'");
  expect_error("frobnicate " + m("add.onnx"), "unknown command 'frobnicate'");
  expect_error("run /dev/zero -o " + m("out"), "'/dev/zero' is a character device, not a regular file");
  expect_error("run " + dir_.path() + " -o " + m("out"), "is a directory, not a regular file");
  expect_error(base.substr(0, base.find(" -i z=")) + " -i z=/dev/zero -o " + m("out"), "'/dev/zero' is a character device");
  ASSERT_EQ(::mkfifo(m("fifo.npy").c_str(), 0600), 0);
  expect_error(base.substr(0, base.find(" -i z=")) + " -i z=" + m("fifo.npy") + " -o " + m("out"), "is a FIFO");  // no hang
  // More threads than cores: the line says what a run gets.
  Outcome o = bulkhead(base + " --threads 64", dir_);
  ASSERT_EQ(o.code, 0) << o.err;
  int cores = static_cast<int>(std::thread::hardware_concurrency());
  if (cores < 64) {
    EXPECT_NE(o.out.find("64 asked for, " + std::to_string(cores) + " cores"), std::string::npos) << o.out;
  }
}

// A run that would never end, or make a huge tensor, stops at the limit the user set.
TEST_F(Cli, RunLimitsFromTheCommandLine) {
  dir_.write("loop.onnx", model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (int64 m, float[1] x) => (float[1] y) <bool t = {1}> {
  y = Loop (m, t, x) < body = b (int64 i, bool c, float[1] v) => (bool co, float[1] vo) { co = Identity(c) vo = Add(v, v) } >
})"));
  ASSERT_TRUE(io::write_npy(m("m.npy"), Tensor::from_vector<int64_t>(DataType::kInt64, {}, {1000000000000000})).is_ok());
  ASSERT_TRUE(io::write_npy(m("x1.npy"), Tensor::from_vector<float>(DataType::kFloat32, {1}, {1})).is_ok());
  std::string base = "run " + m("loop.onnx") + " -i m=" + m("m.npy") + " -i x=" + m("x1.npy") + " -o " + m("out");
  expect_error(base + " --timeout 200", "took longer than its time limit of 200 ms");
  expect_error(base + " --max-loop-iterations 50", "max_loop_iterations of 50");
  expect_error(base + " --timeout -5", "bad --timeout '-5'");
  expect_error(base + " --max-tensor-size lots", "bad --max-tensor-size 'lots'");
}

// A model with two outputs, named as given (raw bytes allowed: names come from files).
std::string two_output_model(const std::string& a, const std::string& b, bool second_is_string) {
  onnx::ModelProto mp;
  mp.set_ir_version(8);
  mp.add_opset_import()->set_version(17);
  auto* g = mp.mutable_graph();
  g->set_name("two");
  auto value = [](onnx::ValueInfoProto* v, const std::string& name, int type, int n) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(type);
    t->mutable_shape()->add_dim()->set_dim_value(1);
    t->mutable_shape()->add_dim()->set_dim_value(n);
  };
  value(g->add_input(), "x", onnx::TensorProto::FLOAT, 1024);
  value(g->add_output(), a, onnx::TensorProto::FLOAT, 1024);
  value(g->add_output(), b, second_is_string ? onnx::TensorProto::STRING : onnx::TensorProto::FLOAT, 1024);
  auto* n1 = g->add_node();
  n1->set_op_type("Relu");
  n1->add_input("x");
  n1->add_output(a);
  auto* n2 = g->add_node();
  n2->set_op_type(second_is_string ? "Constant" : "Neg");
  n2->add_output(b);
  if (second_is_string) {
    // Strings a .npy file cannot hold: element 7 is not UTF-8.
    auto* v = n2->add_attribute();
    v->set_name("value");
    v->set_type(onnx::AttributeProto::TENSOR);
    auto* t = v->mutable_t();
    t->set_data_type(onnx::TensorProto::STRING);
    t->add_dims(1);
    t->add_dims(1024);
    for (int i = 0; i < 1024; ++i) t->add_string_data(i == 7 ? "\xff" : "ok");
  } else {
    n2->add_input("x");
  }
  std::string bytes;
  mp.SerializeToString(&bytes);
  return bytes;
}

// Outputs are all or nothing: a failure anywhere leaves none of them, no temporary, and
// names that would share a file are an error rather than an overwrite.
TEST_F(Cli, OutputsAreAllOrNothing) {
  ASSERT_TRUE(io::write_npy(m("x1024.npy"), Tensor::host(DataType::kFloat32, {1, 1024})).is_ok());
  const std::string in = " -i x=" + m("x1024.npy") + " -o " + m("out");
  dir_.write("collide.onnx", two_output_model("a/b", "a_b", false));
  expect_error("run " + m("collide.onnx") + in, "outputs 'a/b' and 'a_b' would both be written to 'a_b.npy'");
  dir_.write("string.onnx", two_output_model("y", "s", true));
  expect_error("run " + m("string.onnx") + in, "output 's': string 7 is not valid UTF-8 (byte 0xFF at offset 0)");
  // Control bytes in a name reach the terminal escaped.
  dir_.write("esc.onnx", two_output_model("a\x1b[2J", "a_[2J", false));
  Outcome esc = bulkhead("run " + m("esc.onnx") + in, dir_);
  EXPECT_NE(esc.code, 0);
  EXPECT_EQ(esc.err.find('\x1b'), std::string::npos) << esc.err;
  EXPECT_NE(esc.err.find("a\\x1B[2J"), std::string::npos) << esc.err;
  EXPECT_TRUE(std::filesystem::is_empty(m("out")));
  // Killed by the file size limit in the middle of writing: an error, and nothing left.
  dir_.write("two.onnx", two_output_model("first", "second", false));
  std::string cmd = "ulimit -f 2; " + std::string(BULKHEAD_BINARY) + " run " + m("two.onnx") + in + " >/dev/null 2>" + m("err");
  int st = std::system(("bash -c '" + cmd + "'").c_str());
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 1) << "status " << st;
  EXPECT_NE(slurp(m("err")).find("File too large"), std::string::npos) << slurp(m("err"));
  EXPECT_TRUE(std::filesystem::is_empty(m("out"))) << "a temporary or a first output stayed";
  // And when all is well, both appear.
  Outcome ok = bulkhead("run " + m("two.onnx") + in, dir_);
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_TRUE(std::filesystem::exists(m("out/first.npy")));
  EXPECT_TRUE(std::filesystem::exists(m("out/second.npy")));
}


// A .npy file as numpy lays it out: `dict` padded to 64 bytes, then `data`.
std::string npy_raw(std::string dict, const std::string& data) {
  dict.append((64 - (10 + dict.size() + 1) % 64) % 64, ' ');
  dict += '\n';
  return std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(dict.size() & 0xff) + static_cast<char>(dict.size() >> 8) + dict + data;
}

// String tensors cross the command line as .npy: '<U' (and '|S') inputs reach the session,
// string outputs are written as '<U'; object arrays are refused in one line.
// tests/cli/test_npy_strings.py runs every string conformance case the same way.
TEST_F(Cli, StringTensorsAsNpy) {
  dir_.write("concat.onnx", model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 20]>
g (string[2] x, string[2] z) => (string[2] y, bool[2] same) { y = StringConcat(x, z) same = Equal(x, z) })"));
  Tensor x = Tensor::host(DataType::kString, {2});
  x.strings()[0] = "h\xC3\xA9";
  x.strings()[1] = "\xF0\x9F\x98\x80";
  ASSERT_TRUE(io::write_npy(m("xs.npy"), x).is_ok());
  // '|S5': UTF-8 bytes, as np.char.encode would give, NUL-padded.
  dir_.write("zs.npy", npy_raw("{'descr': '|S5', 'fortran_order': False, 'shape': (2,), }", std::string("!\0\0\0\0\xF0\x9F\x98\x80\0", 10)));
  Outcome o = bulkhead("run " + m("concat.onnx") + " -i x=" + m("xs.npy") + " -i z=" + m("zs.npy") + " -o " + m("out"), dir_);
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("string[2]"), std::string::npos) << o.out;
  auto y = io::read_npy(m("out/y.npy"));
  ASSERT_TRUE(y.is_ok()) << y.status().message();
  ASSERT_EQ(y->dtype(), DataType::kString);
  EXPECT_EQ(y->strings()[0], "h\xC3\xA9!");
  EXPECT_EQ(y->strings()[1], "\xF0\x9F\x98\x80\xF0\x9F\x98\x80");
  EXPECT_NE(slurp(m("out/y.npy")).find("'descr': '<U3'"), std::string::npos);
  auto same = io::read_npy(m("out/same.npy"));
  ASSERT_TRUE(same.is_ok()) << same.status().message();
  EXPECT_EQ(same->data<uint8_t>()[0], 0);
  EXPECT_EQ(same->data<uint8_t>()[1], 1);
  std::filesystem::remove_all(m("out"));
  std::filesystem::create_directories(m("out"));

  dir_.write("obj.npy", npy_raw("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", "\x80\x03" "cnumpy.core.multiarray\n_reconstruct\n."));
  expect_error("run " + m("concat.onnx") + " -i x=" + m("obj.npy") + " -i z=" + m("zs.npy") + " -o " + m("out"),
               "input 'x': '" + m("obj.npy") + "' holds a NumPy object array (dtype '|O')");
  dir_.write("surrogate.npy", npy_raw("{'descr': '<U1', 'fortran_order': False, 'shape': (2,), }", std::string("a\0\0\0\0\xD8\0\0", 8)));
  expect_error("run " + m("concat.onnx") + " -i x=" + m("surrogate.npy") + " -i z=" + m("zs.npy") + " -o " + m("out"),
               "holds 0xD800 at character 0, a UTF-16 surrogate");
}

// `bulkhead quantize`: a one-input model from a .npy or a folder of NAME.npy; the model
// it writes runs; bad requests are one clear line and write nothing.
TEST_F(Cli, QuantizeWritesARunnableQdqModel) {
  dir_.write("conv.onnx", model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,3,8,8] x) => (float[1,4,8,8] y) <float[4,3,3,3] w = {)" + random_values_text(108, 5, -0.5f, 0.5f) + R"(}> {
  y = Conv <pads = [1,1,1,1]> (x, w) })"));
  ASSERT_TRUE(io::write_npy(m("cx.npy"), random_tensor({1, 3, 8, 8}, 6)).is_ok());
  std::filesystem::create_directories(m("cal"));
  ASSERT_TRUE(io::write_npy(m("cal/x.npy"), random_tensor({1, 3, 8, 8}, 7)).is_ok());
  Outcome o = bulkhead("quantize " + m("conv.onnx") + " " + m("q.onnx") + " --calibrate " + m("cx.npy") + " --calibrate " + m("cal"), dir_);
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("1 Conv, 0 ConvTranspose, 0 MatMul and 0 Gemm quantised (weights int8 per channel"), std::string::npos) << o.out;
  Outcome r = bulkhead("run " + m("q.onnx") + " -i " + m("cx.npy") + " -o " + m("qout"), dir_);
  EXPECT_EQ(r.code, 0) << r.err;
  expect_error("quantize " + m("conv.onnx") + " " + m("q2.onnx") + " --calibrate " + m("none.npy"), "none.npy");
  expect_error("quantize " + m("conv.onnx") + " " + m("q2.onnx") + " --calibrate " + m("qout"), "calibration folder '" + m("qout") + "'");
  expect_error("quantize " + m("add.onnx") + " " + m("q2.onnx") + " --calibrate " + m("x.npy"), "the model takes 2 inputs");
  expect_error("quantize " + m("conv.onnx") + " " + m("conv.onnx") + " --calibrate " + m("cx.npy"), "would overwrite the model");
  expect_error("quantize " + m("conv.onnx") + " " + m("q2.onnx") + " --calibrate " + m("cx.npy") + " --method kl", "unknown calibration method 'kl'");
  EXPECT_FALSE(std::filesystem::exists(m("q2.onnx")));
  // An input whose name is no file name: its calibration file is the name `run -o` writes.
  onnx::ModelProto slash;
  ASSERT_TRUE(slash.ParseFromString(slurp(m("conv.onnx"))));
  slash.mutable_graph()->mutable_input(0)->set_name("gpu_0/data_0");
  slash.mutable_graph()->mutable_node(0)->set_input(0, "gpu_0/data_0");
  dir_.write("slash.onnx", slash.SerializeAsString());
  std::filesystem::create_directories(m("cal2"));
  ASSERT_TRUE(io::write_npy(m("cal2/gpu_0_data_0.npy"), random_tensor({1, 3, 8, 8}, 9)).is_ok());
  Outcome s = bulkhead("quantize " + m("slash.onnx") + " " + m("qs.onnx") + " --calibrate " + m("cal2"), dir_);
  EXPECT_EQ(s.code, 0) << s.err;
}

// --precision bf16: in-process and in a worker the same (the option reaches the worker),
// the session says what it runs, and `check` reports what bfloat16 costs. On a CPU
// without bf16 units BULKHEAD_CPU_BF16=force takes the bf16 path anyway.
TEST_F(Cli, PrecisionBf16RunAndCheck) {
  auto demo = demo::classifier_model_bytes();
  ASSERT_TRUE(demo.is_ok());
  dir_.write("demo.onnx", *demo);
  ASSERT_TRUE(io::write_npy(m("image.npy"), demo::classifier_image(0.75f)).is_ok());
  const char* old = std::getenv("BULKHEAD_CPU_BF16");
  const std::string saved = old ? old : "";
  setenv("BULKHEAD_CPU_BF16", "force", 1);
  for (const char* d : {"fp32", "local", "remote"}) std::filesystem::create_directories(m(d));
  std::string base = "run " + m("demo.onnx") + " -i image=" + m("image.npy") + " --threads 1";
  Outcome f = bulkhead(base + " -o " + m("fp32"), dir_);
  Outcome a = bulkhead(base + " --precision bf16 -o " + m("local"), dir_);
  Outcome b = bulkhead(base + " --precision bf16 --isolation process -o " + m("remote"), dir_);
  Outcome c = bulkhead("check " + m("demo.onnx") + " -i image=" + m("image.npy") + " --precision bf16 --no-report", dir_);
  if (old) setenv("BULKHEAD_CPU_BF16", saved.c_str(), 1);
  else unsetenv("BULKHEAD_CPU_BF16");
  ASSERT_EQ(f.code, 0) << f.err;
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(f.out.find("precision"), std::string::npos) << f.out;  // fp32: nothing to say
  for (const Outcome* o : {&a, &b}) EXPECT_NE(o->out.find("precision bf16 (3 nodes compute in bf16)"), std::string::npos) << o->out;
  auto pf = io::read_npy(m("fp32") + "/probs.npy");
  auto pa = io::read_npy(m("local") + "/probs.npy");
  auto pb = io::read_npy(m("remote") + "/probs.npy");
  ASSERT_TRUE(pf.is_ok() && pa.is_ok() && pb.is_ok());
  EXPECT_TRUE(bitwise_equal(*pa, *pb));
  EXPECT_FALSE(bitwise_equal(*pa, *pf));
  for (int64_t i = 0; i < pf->numel(); ++i) EXPECT_NEAR(pa->data<float>()[i], pf->data<float>()[i], 0.02) << i;
  EXPECT_EQ(c.code, 0) << c.out << c.err;
  EXPECT_NE(c.out.find("precision: bf16 asked, bf16 run (3 nodes in bf16)"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("output probs"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("against fp32: cosine "), std::string::npos) << c.out;
  EXPECT_NE(c.out.find(" dB"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("verdict: clean"), std::string::npos) << c.out;
  std::string run_base = base + " -o " + m("out");
  expect_error(run_base + " --precision fp16", "--precision 'fp16': expected fp32 or bf16");
  expect_error(run_base + " --precision bf16 -O 1", "--precision bf16 needs --optimization-level 2");
  expect_error("check " + m("demo.onnx") + " --precision int4 --no-report", "--precision must be fp32 or bf16");
}

}  // namespace
}  // namespace bulkhead::test
