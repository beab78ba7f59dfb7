// Process isolation (I8): a session whose model lives in a worker process gives the same
// answers as an in-process one; errors from the worker arrive as clear errors; a worker
// killed or stopped during a run fails that run with one clear line and the next run is
// served by a fresh worker; concurrent runs each get their own outputs; no child process
// outlives its session. The worker is the bulkhead binary built beside these tests.
#include <map>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "io/npy.h"
#include "onnx/onnx_pb.h"
#include "support/test_util.h"

namespace bulkhead::test {
namespace {

const char* kAddModel = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,4] x, float[1,4] z) => (float[1,4] y, float[1,4] d) { y = Add(x, z) d = Sub(x, z) })";

// A run as long as `n` asks: n rounds of a 64x64 MatMul + Tanh.
const char* kLoopModel = R"(<ir_version: 8, opset_import: ["" : 17]>
g (int64 n, float[64,64] x, float[64,64] w) => (float[64,64] y) {
  c = Constant <value = bool {1}> ()
  y = Loop (n, c, x) <body = b (int64 i, bool ci, float[64,64] a) => (bool co, float[64,64] r) {
    co = Identity(ci)
    m = MatMul(a, w)
    r = Tanh(m)
  }>
})";

SessionOptions process_options(int timeout_ms = 60000) {
  SessionOptions o;
  o.threads = 1;
  o.isolation = "process";
  o.worker_binary = BULKHEAD_BINARY;
  o.worker_timeout_ms = timeout_ms;
  return o;
}

SessionOptions in_process_options() {
  SessionOptions o;
  o.threads = 1;
  return o;
}

Tensor int64_scalar(int64_t v) { return Tensor::from_vector<int64_t>(DataType::kInt64, {}, {v}); }

NamedTensors loop_inputs(int64_t n, uint32_t seed) {
  return {{"n", int64_scalar(n)}, {"x", random_tensor({64, 64}, seed)}, {"w", random_tensor({64, 64}, seed + 1)}};
}

// True when `pid` is neither running nor a zombie of ours.
bool gone(pid_t pid) {
  int st;
  bool not_our_child = waitpid(pid, &st, WNOHANG) < 0 && errno == ECHILD;
  return not_our_child && !std::filesystem::exists("/proc/" + std::to_string(pid));
}

// Waits (up to 5 s) until a killed worker has finished dying: reaped, or a zombie whose
// every thread has gone. Its descriptors are released only then — /proc/PID/fd empties
// and the main thread turns zombie earlier, while another thread (a sanitizer's, say)
// still holds the descriptor table and so the socket the supervisor watches.
void wait_until_dead(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid);
  for (int i = 0; i < 1000; ++i) {
    std::ifstream stat(dir + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return;  // reaped
    const size_t paren = line.rfind(')');
    const bool zombie = paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z';
    std::error_code ec;
    int threads = 0;
    for (auto it = std::filesystem::directory_iterator(dir + "/task", ec); !ec && it != std::filesystem::directory_iterator();
         it.increment(ec))
      ++threads;
    if (zombie && threads <= 1) return;  // each thread closed what it held before it went
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void expect_same(const NamedTensors& a, const NamedTensors& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_TRUE(bitwise_equal(a[i].second, b[i].second)) << a[i].first;
  }
}

// x, y -> a sequence of both and an optional of x. (ONNX 1.12's text parser cannot
// declare sequence or optional types, so the outputs' types are set on the proto.)
std::string sequence_model_bytes() {
  onnx::ModelProto m;
  m.ParseFromString(model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x, float[3] y) => (float[2] s, float[2] o) { s = SequenceConstruct(x, y) o = Optional(x) })"));
  auto* g = m.mutable_graph();
  g->mutable_output(0)->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(
      onnx::TensorProto::FLOAT);
  *g->mutable_output(1)->mutable_type()->mutable_optional_type()->mutable_elem_type() = g->input(0).type();
  std::string bytes;
  m.SerializeToString(&bytes);
  return bytes;
}

class Isolation : public ::testing::Test {
 protected:
  Env env_;
};

TEST_F(Isolation, SmallModelMatchesInProcess) {
  std::string bytes = model_text_bytes(kAddModel);
  auto local = env_.load_bytes(bytes, "add", in_process_options());
  auto remote = env_.load_bytes(bytes, "add", process_options());
  ASSERT_TRUE(local.is_ok()) << local.status().to_string();
  ASSERT_TRUE(remote.is_ok()) << remote.status().to_string();
  EXPECT_EQ(local->worker_pid(), -1);
  EXPECT_GT(remote->worker_pid(), 0);
  EXPECT_NE(remote->worker_pid(), getpid());

  // The same description of the model.
  ASSERT_EQ(remote->inputs().size(), local->inputs().size());
  for (size_t i = 0; i < local->inputs().size(); ++i) {
    EXPECT_EQ(remote->inputs()[i].name, local->inputs()[i].name);
    EXPECT_EQ(remote->inputs()[i].type_string, local->inputs()[i].type_string);
    EXPECT_EQ(remote->inputs()[i].shape, local->inputs()[i].shape);
  }
  ASSERT_EQ(remote->outputs().size(), 2u);
  EXPECT_EQ(remote->outputs()[1].name, "d");
  EXPECT_EQ(remote->placement(), local->placement());
  EXPECT_EQ(remote->options().isolation, "process");

  for (uint32_t seed = 0; seed < 5; ++seed) {
    NamedTensors in = {{"x", random_tensor({1, 4}, seed)}, {"z", random_tensor({1, 4}, seed + 100)}};
    auto a = local->run(in);
    auto b = remote->run(in);
    ASSERT_TRUE(a.is_ok() && b.is_ok()) << b.status().to_string();
    expect_same(*a, *b);
    EXPECT_EQ((*b)[0].second.domain(), Domain::host());
  }
  // Selected outputs, in the order asked.
  RunOptions ro;
  ro.outputs = {"d", "y"};
  NamedTensors in = {{"x", random_tensor({1, 4}, 7)}, {"z", random_tensor({1, 4}, 8)}};
  auto b = remote->run(in, ro);
  ASSERT_TRUE(b.is_ok()) << b.status().to_string();
  ASSERT_EQ(b->size(), 2u);
  EXPECT_EQ((*b)[0].first, "d");
  EXPECT_FLOAT_EQ((*b)[0].second.data<float>()[2], in[0].second.data<float>()[2] - in[1].second.data<float>()[2]);
}

TEST_F(Isolation, InputsOfChangingSizes) {
  // The input region is kept between runs, grown and shrunk: every size must still
  // give exactly the in-process answer.
  std::string bytes = model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[N] x) => (float[N] y) { y = Neg(x) })");
  auto local = env_.load_bytes(bytes, "neg", in_process_options());
  auto remote = env_.load_bytes(bytes, "neg", process_options());
  ASSERT_TRUE(local.is_ok() && remote.is_ok()) << remote.status().to_string();
  uint32_t seed = 0;
  for (int64_t n : {1000, 10, 1000, 400000, 10, 0, 70000, 400000}) {
    NamedTensors in = {{"x", random_tensor({n}, ++seed)}};
    auto a = local->run(in);
    auto b = remote->run(in);
    ASSERT_TRUE(a.is_ok()) << a.status().to_string();
    ASSERT_TRUE(b.is_ok()) << n << ": " << b.status().to_string();
    expect_same(*a, *b);
  }
}

TEST_F(Isolation, OutputsAreTheCallersAndOutliveTheSession) {
  NamedTensors in = {{"x", random_tensor({1, 4}, 1)}, {"z", random_tensor({1, 4}, 2)}};
  NamedTensors first, second;
  {
    auto s = env_.load_bytes(model_text_bytes(kAddModel), "add", process_options());
    ASSERT_TRUE(s.is_ok()) << s.status().to_string();
    auto a = s->run(in);
    ASSERT_TRUE(a.is_ok()) << a.status().to_string();
    first = *a;
    Tensor keep = first[0].second.clone_host();
    first[0].second.data<float>()[0] = 1234.f;  // writable, and private to this caller
    auto b = s->run(in);
    ASSERT_TRUE(b.is_ok());
    second = *b;
    EXPECT_TRUE(bitwise_equal(second[0].second, keep));
    EXPECT_NE(first[0].second.raw(), second[0].second.raw());
  }
  // The session and its worker are gone; the outputs are still readable.
  EXPECT_EQ(first[0].second.data<float>()[0], 1234.f);
  EXPECT_FLOAT_EQ(second[0].second.data<float>()[3], in[0].second.data<float>()[3] + in[1].second.data<float>()[3]);
}

TEST_F(Isolation, OutputRegionIsReusedOnlyOnceItsOutputsAreReleased) {
  // Outputs come back in regions both processes keep mapped; a region is written again
  // only after the caller let go of every output in it — never under a held result.
  std::string bytes = model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[N] x) => (float[N] y) { y = Neg(x) })");
  auto s = env_.load_bytes(bytes, "neg", process_options());
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  auto run = [&](uint32_t seed) {
    auto r = s->run({{"x", random_tensor({100000}, seed)}});
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    return r.is_ok() ? (*r)[0].second : Tensor();
  };
  auto expect_neg_of = [](const Tensor& y, uint32_t seed) {
    Tensor x = random_tensor({100000}, seed);
    for (int64_t i = 0; i < x.numel(); i += 997) ASSERT_EQ(y.data<float>()[i], -x.data<float>()[i]) << i;
  };
  Tensor first = run(1);
  const void* first_at = first.raw();
  Tensor second = run(2);
  EXPECT_NE(second.raw(), first_at) << "the first outputs are still held";
  expect_neg_of(first, 1);
  first = Tensor();
  Tensor third = run(3);
  EXPECT_EQ(third.raw(), first_at) << "released: its region serves the next run";
  expect_neg_of(second, 2);
  expect_neg_of(third, 3);
  // A fresh worker makes its own regions; outputs of the old one stay readable.
  ASSERT_EQ(kill(s->worker_pid(), SIGKILL), 0);
  NamedTensors small = {{"x", random_tensor({4}, 9)}};
  if (!s->run(small).is_ok()) {
    ASSERT_TRUE(s->run(small).is_ok()) << "a fresh worker serves the next run";
  }
  Tensor fourth = run(4);
  expect_neg_of(second, 2);
  expect_neg_of(third, 3);
  expect_neg_of(fourth, 4);
}

TEST_F(Isolation, OutputsAreWrittenStraightIntoTheOutputRegion) {
  // Once the session's plan holds, the worker lends the offered output region to the run:
  // the outputs are written there and nothing is copied out — and a region under held
  // outputs is still never written.
  std::string bytes = model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[N, M] x, float[N, M] z) => (float[N, M] y, float[N, M] d) {
  t = Transpose<perm = [1, 0]>(x)
  y = Transpose<perm = [1, 0]>(t)
  u = Transpose<perm = [1, 0]>(z)
  v = Transpose<perm = [1, 0]>(u)
  d = Sub(v, x)
})");
  auto remote = env_.load_bytes(bytes, "transposes", process_options());
  auto local = env_.load_bytes(bytes, "transposes", in_process_options());
  ASSERT_TRUE(remote.is_ok() && local.is_ok()) << remote.status().to_string();
  auto inputs = [](uint32_t seed) {
    return NamedTensors{{"x", random_tensor({512, 256}, seed)}, {"z", random_tensor({512, 256}, seed + 50)}};
  };
  auto copied_out = [&](NamedTensors* out, uint32_t seed) {
    std::vector<NodeProfile> prof;
    RunOptions ro;
    ro.profile = &prof;
    auto r = remote->run(inputs(seed), ro);
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    if (r.is_ok()) *out = *r;
    for (auto& p : prof)
      if (p.node == "outputs copied out") return p.shapes;
    return std::string("none");
  };
  NamedTensors held;
  EXPECT_EQ(copied_out(&held, 1), "1.00 MiB");  // the first run records the plan: copied
  held.clear();
  std::string last;
  NamedTensors out;
  for (uint32_t seed = 2; seed < 6; ++seed) {
    last = copied_out(&out, seed);
    auto want = local->run(inputs(seed));
    ASSERT_TRUE(want.is_ok());
    expect_same(*want, out);
    out.clear();
  }
  EXPECT_EQ(last, "0.00 MiB") << "outputs written in place once the plan holds";

  // Held outputs of a run written in place: the next runs go elsewhere.
  NamedTensors first, second;
  copied_out(&first, 10);
  const void* first_at = first[0].second.raw();
  copied_out(&second, 11);
  EXPECT_NE(second[0].second.raw(), first_at);
  auto want10 = local->run(inputs(10));
  ASSERT_TRUE(want10.is_ok());
  expect_same(*want10, first);
}

TEST_F(Isolation, PpOcrRecognitionMatchesInProcess) {
  std::string dir = shared_dir() + "/models/ppocrv4_rec";
  auto local = env_.load(dir + "/model.onnx", in_process_options());
  auto remote = env_.load(dir + "/model.onnx", process_options());
  ASSERT_TRUE(local.is_ok()) << local.status().to_string();
  ASSERT_TRUE(remote.is_ok()) << remote.status().to_string();
  NamedTensors in;
  for (auto& io : remote->inputs()) {
    auto t = io::read_npy(dir + "/inputs/" + io.name + ".npy");
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    in.emplace_back(io.name, *t);
  }
  auto a = local->run(in);
  auto b = remote->run(in);
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  ASSERT_TRUE(b.is_ok()) << b.status().to_string();
  expect_same(*a, *b);
  for (auto& [name, t] : *b) {
    auto ref = io::read_npy(dir + "/outputs/" + name + ".npy");
    ASSERT_TRUE(ref.is_ok());
    ASSERT_EQ(t.shape(), ref->shape());
    double d = 0;
    for (int64_t i = 0; i < t.numel(); ++i)
      d = std::max<double>(d, std::fabs(t.data<float>()[i] - ref->data<float>()[i]));
    EXPECT_LE(d, 1e-4) << name;
  }
  EXPECT_EQ(remote->placement(), local->placement());
}

TEST_F(Isolation, WorkerLoadErrorsArriveVerbatim) {
  std::string frob = model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y) { y = FrobnicateTensor(x) })");
  auto local = env_.load_bytes(frob, "frob", in_process_options());
  auto remote = env_.load_bytes(frob, "frob", process_options());
  ASSERT_FALSE(local.is_ok());
  ASSERT_FALSE(remote.is_ok());
  EXPECT_EQ(remote.status().code(), local.status().code());
  EXPECT_EQ(remote.status().message(), local.status().message());
  EXPECT_NE(remote.status().message().find("FrobnicateTensor"), std::string::npos) << remote.status().message();

  auto missing = env_.load("/nonexistent/dir/model.onnx", process_options());
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/dir/model.onnx"), std::string::npos)
      << missing.status().message();
  auto missing_local = env_.load("/nonexistent/dir/model.onnx", in_process_options());
  EXPECT_EQ(missing.status().message(), missing_local.status().message());

  auto corrupt = env_.load_bytes("definitely not a model", "corrupt", process_options());
  ASSERT_FALSE(corrupt.is_ok());
  EXPECT_EQ(corrupt.status().code(), StatusCode::kInvalidModel) << corrupt.status().to_string();
}

TEST_F(Isolation, RunErrorsMatchInProcess) {
  std::string bytes = model_text_bytes(kAddModel);
  auto local = env_.load_bytes(bytes, "add", in_process_options());
  auto remote = env_.load_bytes(bytes, "add", process_options());
  ASSERT_TRUE(local.is_ok() && remote.is_ok());
  Tensor x = random_tensor({1, 4}, 1);
  std::vector<NamedTensors> bad = {
      {{"x", x}},                                                     // missing input
      {{"x", x}, {"q", x}},                                           // unknown input
      {{"x", x}, {"z", random_tensor({1, 5}, 2)}},                    // wrong shape
      {{"x", x}, {"z", Tensor::host(DataType::kInt64, {1, 4})}},      // wrong type
      {{"x", x}, {"x", x}, {"z", x}},                                 // given twice
  };
  for (auto& in : bad) {
    auto a = local->run(in);
    auto b = remote->run(in);
    ASSERT_FALSE(a.is_ok());
    ASSERT_FALSE(b.is_ok());
    EXPECT_EQ(b.status().message(), a.status().message());
  }
  RunOptions ro;
  ro.outputs = {"nope"};
  auto b = remote->run({{"x", x}, {"z", x}}, ro);
  ASSERT_FALSE(b.is_ok());
  EXPECT_NE(b.status().message().find("unknown output 'nope'"), std::string::npos);

  // A kernel's run-time error comes back from the worker, which keeps serving.
  std::string i32 = model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (int32[2] x) => (int32[2] y) { y = Sigmoid(x) })");
  auto l2 = env_.load_bytes(i32, "i32", in_process_options());
  auto r2 = env_.load_bytes(i32, "i32", process_options());
  if (l2.is_ok()) {  // the type may be rejected at load time instead: then both reject it
    ASSERT_TRUE(r2.is_ok()) << r2.status().to_string();
    NamedTensors in = {{"x", Tensor::host(DataType::kInt32, {2})}};
    auto a2 = l2->run(in);
    auto b2 = r2->run(in);
    ASSERT_FALSE(a2.is_ok());
    ASSERT_FALSE(b2.is_ok());
    EXPECT_EQ(b2.status().message(), a2.status().message());
    int pid = r2->worker_pid();
    EXPECT_FALSE(r2->run(in).is_ok());
    EXPECT_EQ(r2->worker_pid(), pid);
  } else {
    ASSERT_FALSE(r2.is_ok());
    EXPECT_EQ(r2.status().message(), l2.status().message());
  }
}

TEST_F(Isolation, KilledDuringRunFailsThatRunAndTheNextSucceeds) {
  std::string bytes = model_text_bytes(kLoopModel);
  auto local = env_.load_bytes(bytes, "loop", in_process_options());
  auto remote = env_.load_bytes(bytes, "loop", process_options(30000));
  ASSERT_TRUE(local.is_ok()) << local.status().to_string();
  ASSERT_TRUE(remote.is_ok()) << remote.status().to_string();
  const int pid = remote->worker_pid();
  ASSERT_GT(pid, 0);

  Result<NamedTensors> long_run = Status(StatusCode::kInternal, "not run");
  std::thread runner([&] { long_run = remote->run(loop_inputs(int64_t{1} << 40, 3)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  runner.join();
  ASSERT_FALSE(long_run.is_ok());
  const std::string msg = long_run.status().message();
  EXPECT_EQ(long_run.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(msg.find("worker process " + std::to_string(pid) + " for 'loop' died during the run (killed by signal 9)"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("a fresh worker will serve the next run"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
  EXPECT_TRUE(gone(pid)) << "the killed worker was not reaped";

  auto in = loop_inputs(50, 11);
  auto a = local->run(in);
  auto b = remote->run(in);
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  ASSERT_TRUE(b.is_ok()) << b.status().to_string();
  expect_same(*a, *b);
  EXPECT_GT(remote->worker_pid(), 0);
  EXPECT_NE(remote->worker_pid(), pid);
}

TEST_F(Isolation, StoppedWorkerTimesOutAndTheNextRunSucceeds) {
  std::string bytes = model_text_bytes(kLoopModel);
  auto local = env_.load_bytes(bytes, "loop", in_process_options());
  auto remote = env_.load_bytes(bytes, "loop", process_options(1500));
  ASSERT_TRUE(local.is_ok() && remote.is_ok()) << remote.status().to_string();
  const int pid = remote->worker_pid();
  ASSERT_EQ(kill(pid, SIGSTOP), 0);
  auto t0 = std::chrono::steady_clock::now();
  auto r = remote->run(loop_inputs(5, 1));
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("worker process " + std::to_string(pid) +
                                      " for 'loop' did not answer within 1500 ms (killed)"),
            std::string::npos)
      << r.status().message();
  EXPECT_GE(s, 1.4);
  EXPECT_LT(s, 15.0);
  EXPECT_TRUE(gone(pid)) << "the stopped worker was not killed and reaped";

  auto in = loop_inputs(20, 5);
  auto a = local->run(in);
  auto b = remote->run(in);
  ASSERT_TRUE(a.is_ok() && b.is_ok()) << b.status().to_string();
  expect_same(*a, *b);
}

TEST_F(Isolation, WorkerDeadBetweenRunsIsReplacedWithoutAnError) {
  auto remote = env_.load_bytes(model_text_bytes(kAddModel), "add", process_options());
  ASSERT_TRUE(remote.is_ok());
  const int pid = remote->worker_pid();
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  wait_until_dead(pid);  // so that the supervisor sees the closed socket
  auto r = remote->run({{"x", random_tensor({1, 4}, 1)}, {"z", random_tensor({1, 4}, 2)}});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_NE(remote->worker_pid(), pid);
  EXPECT_TRUE(gone(pid));
}

TEST_F(Isolation, ReplacementWorkerMustFindTheSameModel) {
  // A fresh worker loads the file again; if it changed, the session's callers would be
  // validated against the old model: the replacement must refuse to serve.
  TempDir dir;
  dir.write("m.onnx", model_text_bytes(kAddModel));
  auto s = env_.load(dir.file("m.onnx"), process_options());
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  NamedTensors in = {{"x", random_tensor({1, 4}, 1)}, {"z", random_tensor({1, 4}, 2)}};
  ASSERT_TRUE(s->run(in).is_ok());
  dir.write("m.onnx", model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,4] x) => (float[1,4] y) { y = Neg(x) })"));
  int pid = s->worker_pid();
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  wait_until_dead(pid);
  auto r = s->run(in);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("differ from the session's"), std::string::npos) << r.status().message();
  dir.write("m.onnx", model_text_bytes(kAddModel));
  auto again = s->run(in);
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
}

TEST_F(Isolation, ConcurrentRunsEachGetTheirOwnOutputs) {
  std::string bytes = model_text_bytes(kLoopModel);
  auto local = env_.load_bytes(bytes, "loop", in_process_options());
  auto remote = env_.load_bytes(bytes, "loop", process_options());
  ASSERT_TRUE(local.is_ok() && remote.is_ok());
  constexpr int kThreads = 4, kIters = 10;
  std::vector<NamedTensors> inputs, expected;
  for (int t = 0; t < kThreads; ++t) {
    inputs.push_back(loop_inputs(3 + t, 100 + 7 * t));
    auto r = local->run(inputs.back());
    ASSERT_TRUE(r.is_ok());
    expected.push_back(*r);
  }
  std::atomic<int> wrong{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIters; ++i) {
        auto r = remote->run(inputs[t]);
        if (!r.is_ok()) ++failed;
        else if (!bitwise_equal((*r)[0].second, expected[t][0].second)) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
}

TEST_F(Isolation, DestroyingTheSessionLeavesNoChildProcess) {
  pid_t pid;
  {
    auto s = env_.load_bytes(model_text_bytes(kAddModel), "add", process_options());
    ASSERT_TRUE(s.is_ok());
    pid = s->worker_pid();
    ASSERT_GT(pid, 0);
    EXPECT_FALSE(gone(pid));
    auto copy = *s;  // handles share the session: the worker goes with the last one
    s = Status(StatusCode::kInternal, "dropped");
    EXPECT_FALSE(gone(pid));
    EXPECT_TRUE(copy.run({{"x", random_tensor({1, 4}, 1)}, {"z", random_tensor({1, 4}, 2)}}).is_ok());
  }
  EXPECT_TRUE(gone(pid));
  // Also when the worker is stopped and cannot hear the request to leave.
  {
    auto s = env_.load_bytes(model_text_bytes(kAddModel), "add", process_options());
    ASSERT_TRUE(s.is_ok());
    pid = s->worker_pid();
    ASSERT_EQ(kill(pid, SIGSTOP), 0);
  }
  EXPECT_TRUE(gone(pid));
  EXPECT_EQ(env_.open_device_count(), 0);
}

TEST_F(Isolation, WorkerStartedFromAThreadThatEndsKeepsServing) {
  // The worker dies with the thread that forked it (PR_SET_PDEATHSIG): workers must be
  // started from the session's own launcher thread, not from whoever called.
  std::string bytes = model_text_bytes(kAddModel);
  Result<Session> s = Status(StatusCode::kInternal, "not loaded");
  std::thread([&] { s = env_.load_bytes(bytes, "add", process_options()); }).join();
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  int pid = s->worker_pid();
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  wait_until_dead(pid);
  std::thread([&] { (void)s->run({{"x", random_tensor({1, 4}, 1)}, {"z", random_tensor({1, 4}, 2)}}); }).join();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  int replacement = s->worker_pid();
  ASSERT_GT(replacement, 0);
  ASSERT_NE(replacement, pid);
  auto r = s->run({{"x", random_tensor({1, 4}, 1)}, {"z", random_tensor({1, 4}, 2)}});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(s->worker_pid(), replacement) << "the replacement worker died with the thread that asked for it";
}

// Processes whose parent is `pid` (from /proc/*/stat).
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> r;
  for (auto& e : std::filesystem::directory_iterator("/proc")) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(e.path() / "stat");
    std::string line;
    std::getline(f, line);
    auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == pid) r.push_back(std::stoi(name));
  }
  return r;
}

// Running (not gone and not a zombie waiting for some other parent to reap it).
bool alive(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return false;
  auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z' && line[close + 2] != 'X';
}

TEST_F(Isolation, WorkerDiesWithItsParentProcess) {
  TempDir dir;
  dir.write("loop.onnx", model_text_bytes(kLoopModel));
  auto in = loop_inputs(int64_t{1} << 40, 1);
  for (auto& [name, t] : in) ASSERT_TRUE(io::write_npy(dir.file(name + ".npy"), t).is_ok());
  std::string n = dir.file("n.npy"), x = "x=" + dir.file("x.npy"), w = "w=" + dir.file("w.npy");
  std::string nn = "n=" + n;
  std::vector<const char*> argv = {BULKHEAD_BINARY, "run", nullptr, "-i", nn.c_str(), "-i", x.c_str(), "-i", w.c_str(),
                                   "--isolation", "process", "--threads", "1", "-q", nullptr};
  std::string model = dir.file("loop.onnx");
  argv[2] = model.c_str();
  pid_t parent = fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execv(argv[0], const_cast<char* const*>(argv.data()));
    _exit(127);
  }
  std::vector<pid_t> kids;
  for (int i = 0; i < 400 && kids.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    kids = children_of(parent);
  }
  ASSERT_EQ(kids.size(), 1u) << "bulkhead run did not start a worker";
  const pid_t worker = kids[0];
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the worker is now in its long run
  EXPECT_TRUE(alive(worker));
  ASSERT_EQ(kill(parent, SIGKILL), 0);
  int st;
  ASSERT_EQ(waitpid(parent, &st, 0), parent);
  bool died = false;
  for (int i = 0; i < 200 && !died; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    died = !alive(worker);
  }
  EXPECT_TRUE(died) << "worker " << worker << " outlived its parent";
  if (!died) kill(worker, SIGKILL);
}

TEST_F(Isolation, BadWorkerBinaryGivesAClearError) {
  std::string bytes = model_text_bytes(kAddModel);
  SessionOptions o = process_options();
  o.worker_binary = "/nonexistent/bulkhead";
  auto r = env_.load_bytes(bytes, "add", o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("worker program '/nonexistent/bulkhead' (worker_binary) does not exist"),
            std::string::npos)
      << r.status().message();

  TempDir dir;
  dir.write("not-a-program", "just text\n");
  std::filesystem::permissions(dir.file("not-a-program"), std::filesystem::perms::owner_read);
  o.worker_binary = dir.file("not-a-program");  // exists, not executable
  r = env_.load_bytes(bytes, "add", o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("is not an executable file"), std::string::npos) << r.status().message();

  o.worker_binary = "/bin/true";  // runs, but is not a bulkhead worker
  r = env_.load_bytes(bytes, "add", o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("exited with code 0 before it was ready"), std::string::npos)
      << r.status().message();

  // No worker_binary: this test program is not `bulkhead` and has none beside it.
  o.worker_binary.clear();
  ASSERT_EQ(unsetenv("BULKHEAD_WORKER"), 0);
  r = env_.load_bytes(bytes, "add", o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("BULKHEAD_WORKER"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("worker_binary"), std::string::npos) << r.status().message();
  // ... and the environment variable is honoured.
  ASSERT_EQ(setenv("BULKHEAD_WORKER", BULKHEAD_BINARY, 1), 0);
  r = env_.load_bytes(bytes, "add", o);
  unsetenv("BULKHEAD_WORKER");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_GT(r->worker_pid(), 0);
}

TEST_F(Isolation, OptionsParseAndValidate) {
  auto o = SessionOptions::parse("isolation=process;worker_timeout_ms=1500;worker_binary=/x/bulkhead");
  ASSERT_TRUE(o.is_ok()) << o.status().to_string();
  EXPECT_EQ(o->isolation, "process");
  EXPECT_EQ(o->worker_timeout_ms, 1500);
  EXPECT_EQ(o->worker_binary, "/x/bulkhead");
  EXPECT_EQ(SessionOptions{}.isolation, "in-process");
  for (const char* bad : {"isolation=sandbox", "worker_timeout_ms=0", "worker_timeout_ms=-5", "worker_timeout_ms=soon",
                          "worker_binary="}) {
    auto r = SessionOptions::parse(bad);
    ASSERT_FALSE(r.is_ok()) << bad;
    std::string key = std::string(bad).substr(0, std::string(bad).find('='));
    EXPECT_NE(r.status().message().find(key), std::string::npos) << r.status().message();
  }
  auto unknown = SessionOptions::parse("isolate=process");
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("isolation"), std::string::npos);  // listed among the known keys

  SessionOptions so = process_options();
  so.isolation = "sandbox";
  auto r = env_.load_bytes(model_text_bytes(kAddModel), "add", so);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("'sandbox' for session option 'isolation'"), std::string::npos);
  so = process_options(0);
  r = env_.load_bytes(model_text_bytes(kAddModel), "add", so);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("worker_timeout_ms"), std::string::npos);
}

TEST_F(Isolation, StringsSequencesOptionalsAndProfiles) {
  std::string strs = model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (string[3] s) => (string[3] t) { t = StringNormalizer <case_change_action = "UPPER"> (s) })");
  auto local = env_.load_bytes(strs, "strings", in_process_options());
  auto remote = env_.load_bytes(strs, "strings", process_options());
  ASSERT_TRUE(local.is_ok() && remote.is_ok()) << remote.status().to_string();
  Tensor s = Tensor::host(DataType::kString, {3});
  s.strings()[0] = "hello";
  s.strings()[1] = "";
  s.strings()[2] = std::string("nul\0inside", 10);
  auto a = local->run({{"s", s}});
  auto b = remote->run({{"s", s}});
  ASSERT_TRUE(a.is_ok() && b.is_ok()) << b.status().to_string();
  for (int i = 0; i < 3; ++i) EXPECT_EQ((*b)[0].second.strings()[i], (*a)[0].second.strings()[i]);

  std::string seq = sequence_model_bytes();
  auto ls = env_.load_bytes(seq, "seq", in_process_options());
  auto rs = env_.load_bytes(seq, "seq", process_options());
  ASSERT_TRUE(ls.is_ok() && rs.is_ok()) << rs.status().to_string();
  NamedValues in = {{"x", Value(random_tensor({2}, 1))}, {"y", Value(random_tensor({3}, 2))}};
  auto la = ls->run_values(in);
  auto ra = rs->run_values(in);
  ASSERT_TRUE(la.is_ok()) << la.status().to_string();
  ASSERT_TRUE(ra.is_ok()) << ra.status().to_string();
  ASSERT_EQ(ra->size(), 2u);
  const Value& sv = (*ra)[0].second;
  ASSERT_TRUE(sv.is_sequence());
  ASSERT_EQ(sv.sequence.size(), 2u);
  EXPECT_TRUE(bitwise_equal(sv.sequence[1], (*la)[0].second.sequence[1]));
  EXPECT_EQ((*ra)[1].second.kind, (*la)[1].second.kind);
  EXPECT_EQ((*ra)[1].second.is_optional, (*la)[1].second.is_optional);

  std::vector<NodeProfile> prof;
  RunOptions ro;
  ro.profile = &prof;
  auto p = remote->run({{"s", s}}, ro);
  ASSERT_TRUE(p.is_ok());
  ASSERT_EQ(prof.size(), 4u);  // the node, then the hand-off's three entries
  EXPECT_EQ(prof[0].op_type, "StringNormalizer");
  for (size_t i = 1; i < prof.size(); ++i) EXPECT_EQ(prof[i].op_type, "(isolation)");
}

// The hand-off's "inputs copied in" entry of a profiled run: the MiB copied.
std::string inputs_copied(const Session& s, const NamedTensors& in, NamedTensors* out, const RunOptions& base = {}) {
  std::vector<NodeProfile> prof;
  RunOptions ro = base;
  ro.profile = &prof;
  auto r = s.run(in, ro);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  if (r.is_ok() && out) *out = *r;
  for (auto& p : prof)
    if (p.node == "inputs copied in") return p.shapes;
  return std::string("none");
}

TEST_F(Isolation, PipelineOutputsReachTheNextWorkerWithoutACopy) {
  // F -> G, both in worker processes: F's run names G (RunOptions::outputs_for), so its
  // outputs are written into shared memory lent to G's worker and G copies nothing in.
  // Outputs not meant for G, or passed to a session they were not meant for, are copied.
  std::string f_bytes = model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[N, M] x, float[N, M] z) => (float[N, M] y, float[N, M] d) {
  t = Transpose<perm = [1, 0]>(x)
  y = Transpose<perm = [1, 0]>(t)
  d = Sub(x, z)
})");
  std::string g_bytes = model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[N, M] y, float[N, M] d) => (float[N, M] s) { s = Mul(y, d) })");
  auto f = env_.load_bytes(f_bytes, "f", process_options());
  auto g = env_.load_bytes(g_bytes, "g", process_options());
  auto h = env_.load_bytes(g_bytes, "h", process_options());
  auto lf = env_.load_bytes(f_bytes, "f", in_process_options());
  auto lg = env_.load_bytes(g_bytes, "g", in_process_options());
  ASSERT_TRUE(f.is_ok() && g.is_ok() && h.is_ok() && lf.is_ok() && lg.is_ok()) << f.status().to_string();
  auto inputs = [](uint32_t seed) {
    return NamedTensors{{"x", random_tensor({512, 256}, seed)}, {"z", random_tensor({512, 256}, seed + 50)}};
  };
  auto expected = [&](uint32_t seed) {
    auto mid = lf->run(inputs(seed));
    EXPECT_TRUE(mid.is_ok());
    auto out = lg->run(*mid);
    EXPECT_TRUE(out.is_ok());
    return *out;
  };
  RunOptions for_g;
  for_g.outputs_for = &*g;
  NamedTensors out;
  for (uint32_t seed = 1; seed < 5; ++seed) {
    auto mid = f->run(inputs(seed), for_g);
    ASSERT_TRUE(mid.is_ok()) << mid.status().to_string();
    EXPECT_EQ(inputs_copied(*g, *mid, &out), "0.00 MiB") << "run " << seed;
    expect_same(expected(seed), out);
  }
  // Meant for G, passed to H: copied. Not meant for anyone: copied.
  auto mid = f->run(inputs(7), for_g);
  ASSERT_TRUE(mid.is_ok());
  EXPECT_EQ(inputs_copied(*h, *mid, &out), "1.00 MiB");
  expect_same(expected(7), out);
  auto plain = f->run(inputs(8));
  ASSERT_TRUE(plain.is_ok());
  EXPECT_EQ(inputs_copied(*g, *plain, &out), "1.00 MiB");
  expect_same(expected(8), out);

  // F's outputs held while F runs for G again: the next run goes into another region,
  // and both reach G unchanged; so do they after F's and G's workers are replaced.
  auto second = f->run(inputs(9), for_g);
  ASSERT_TRUE(second.is_ok());
  EXPECT_NE((*second)[0].second.raw(), (*mid)[0].second.raw());
  EXPECT_EQ(inputs_copied(*g, *mid, &out), "0.00 MiB");
  expect_same(expected(7), out);
  EXPECT_EQ(inputs_copied(*g, *second, &out), "0.00 MiB");
  expect_same(expected(9), out);
  for (const Session* s : {&*f, &*g}) {
    const int pid = s->worker_pid();
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    wait_until_dead(pid);
  }
  EXPECT_EQ(inputs_copied(*g, *mid, &out), "0.00 MiB");  // the old worker's region, lent to the new G worker
  expect_same(expected(7), out);
  auto after = f->run(inputs(10), for_g);
  ASSERT_TRUE(after.is_ok()) << after.status().to_string();
  EXPECT_EQ(inputs_copied(*g, *after, &out), "0.00 MiB");
  expect_same(expected(10), out);

  // In-process on either side: outputs_for changes nothing.
  auto local_mid = lf->run(inputs(11), for_g);
  ASSERT_TRUE(local_mid.is_ok());
  EXPECT_EQ(inputs_copied(*g, *local_mid, &out), "1.00 MiB");
  expect_same(expected(11), out);
  RunOptions for_local;
  for_local.outputs_for = &*lg;
  auto to_local = f->run(inputs(12), for_local);
  ASSERT_TRUE(to_local.is_ok());
  auto got = lg->run(*to_local);
  ASSERT_TRUE(got.is_ok());
  expect_same(expected(12), *got);
}

TEST_F(Isolation, InputsAllocatedForTheSessionAreReadWhereTheyAre) {
  // Session::allocate_input: the caller fills shared memory the worker reads in place.
  std::string bytes = model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[N, M] x, float[N, M] z) => (float[N, M] y, float[N, M] d) { y = Add(x, z) d = Sub(x, z) })");
  auto remote = env_.load_bytes(bytes, "add", process_options());
  auto other = env_.load_bytes(bytes, "add", process_options());
  auto local = env_.load_bytes(bytes, "add", in_process_options());
  ASSERT_TRUE(remote.is_ok() && other.is_ok() && local.is_ok()) << remote.status().to_string();
  auto fill = [](const Session& s, uint32_t seed) {
    Tensor src = random_tensor({256, 1024}, seed);
    auto t = s.allocate_input(DataType::kFloat32, {256, 1024});
    EXPECT_TRUE(t.is_ok()) << t.status().to_string();
    std::memcpy(t->raw(), src.raw(), src.nbytes());
    return *t;
  };
  NamedTensors in = {{"x", fill(*remote, 1)}, {"z", fill(*remote, 2)}}, out;
  EXPECT_EQ(inputs_copied(*remote, in, &out), "0.00 MiB");
  auto want = local->run(in);
  ASSERT_TRUE(want.is_ok());
  expect_same(*want, out);
  // Rewritten between runs: the next run reads the new values.
  Tensor next = random_tensor({256, 1024}, 3);
  std::memcpy(in[0].second.raw(), next.raw(), next.nbytes());
  EXPECT_EQ(inputs_copied(*remote, in, &out), "0.00 MiB");
  want = local->run(in);
  ASSERT_TRUE(want.is_ok());
  expect_same(*want, out);
  // Passed to another session: copied, like any tensor. Mixed with an ordinary tensor:
  // that one is copied.
  EXPECT_EQ(inputs_copied(*other, in, &out), "2.00 MiB");
  expect_same(*want, out);
  NamedTensors mixed = {{"x", in[0].second}, {"z", random_tensor({256, 1024}, 4)}};
  EXPECT_EQ(inputs_copied(*remote, mixed, &out), "1.00 MiB");
  want = local->run(mixed);
  ASSERT_TRUE(want.is_ok());
  expect_same(*want, out);

  // More regions than the worker keeps mapped (4), used in turn: each run still right.
  std::vector<Tensor> many;
  for (uint32_t i = 0; i < 7; ++i) many.push_back(fill(*remote, 10 + i));
  for (int pass = 0; pass < 2; ++pass)
    for (size_t i = 0; i + 1 < many.size(); ++i) {
      NamedTensors pair = {{"x", many[i]}, {"z", many[i + 1]}};
      EXPECT_EQ(inputs_copied(*remote, pair, &out), "0.00 MiB");
      want = local->run(pair);
      ASSERT_TRUE(want.is_ok());
      expect_same(*want, out);
    }
  // A fresh worker maps them again.
  const int pid = remote->worker_pid();
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  wait_until_dead(pid);
  EXPECT_EQ(inputs_copied(*remote, in, &out), "0.00 MiB");
  want = local->run(in);
  ASSERT_TRUE(want.is_ok());
  expect_same(*want, out);

  // In-process: an ordinary host tensor. Bad shapes and types: one line each.
  auto host = local->allocate_input(DataType::kFloat32, {2, 3});
  ASSERT_TRUE(host.is_ok());
  EXPECT_EQ(host->nbytes(), 24u);
  for (const Session* s : {&*remote, &*local}) {
    auto neg = s->allocate_input(DataType::kFloat32, {2, -3});
    ASSERT_FALSE(neg.is_ok());
    EXPECT_EQ(neg.status().message().find('\n'), std::string::npos);
    EXPECT_FALSE(s->allocate_input(DataType::kUndefined, {2}).is_ok());
  }
  auto huge = remote->allocate_input(DataType::kFloat32, {int64_t{1} << 40});
  ASSERT_FALSE(huge.is_ok());
  EXPECT_NE(huge.status().message().find("exceeds this machine's memory"), std::string::npos) << huge.status().message();
  EXPECT_FALSE(Session().allocate_input(DataType::kFloat32, {2}).is_ok());
}

TEST_F(Isolation, ARunThatFailsInTheWorkerLeavesLentInputsUsable) {
  // A run failing in the worker (a Loop past max_loop_iterations) after its inputs were
  // lent: the worker is told to forget them and gets them again, and later runs reading
  // the same caller-written tensors are right.
  SessionOptions o = process_options();
  o.max_loop_iterations = 5;
  auto remote = env_.load_bytes(model_text_bytes(kLoopModel), "loop", o);
  SessionOptions lo = in_process_options();
  lo.max_loop_iterations = 5;
  auto local = env_.load_bytes(model_text_bytes(kLoopModel), "loop", lo);
  ASSERT_TRUE(remote.is_ok() && local.is_ok()) << remote.status().to_string();
  NamedTensors in = loop_inputs(3, 7);
  for (auto& [name, t] : in) {
    auto shared = remote->allocate_input(t.dtype(), t.shape());
    ASSERT_TRUE(shared.is_ok());
    std::memcpy(shared->raw(), t.raw(), t.nbytes());
    t = *shared;
  }
  for (int round = 0; round < 2; ++round) {
    in[0].second.data<int64_t>()[0] = 50;  // past the limit
    auto failed = remote->run(in);
    ASSERT_FALSE(failed.is_ok());
    EXPECT_NE(failed.status().message().find("max_loop_iterations"), std::string::npos) << failed.status().message();
    in[0].second.data<int64_t>()[0] = 3;
    NamedTensors out;
    EXPECT_EQ(inputs_copied(*remote, in, &out), "0.00 MiB");
    auto want = local->run(in);
    ASSERT_TRUE(want.is_ok());
    expect_same(*want, out);
  }
}

TEST_F(Isolation, ProfileSaysWhatTheHandOffCost) {
  // x and z, [256, 1024] float each (2 MiB), in; y = x + z and d = x - z (2 MiB) out.
  std::string bytes = model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[N, M] x, float[N, M] z) => (float[N, M] y, float[N, M] d) { y = Add(x, z) d = Sub(x, z) })");
  auto remote = env_.load_bytes(bytes, "add", process_options());
  auto local = env_.load_bytes(bytes, "add", in_process_options());
  ASSERT_TRUE(remote.is_ok() && local.is_ok()) << remote.status().to_string();
  NamedTensors in = {{"x", random_tensor({256, 1024}, 1)}, {"z", random_tensor({256, 1024}, 2)}};
  std::vector<NodeProfile> prof, local_prof;
  RunOptions ro;
  ro.profile = &prof;
  auto b = remote->run(in, ro);
  ASSERT_TRUE(b.is_ok()) << b.status().to_string();
  ro.profile = &local_prof;
  ASSERT_TRUE(local->run(in, ro).is_ok());

  // The model's nodes as in-process, then the hand-off, after them.
  ASSERT_EQ(prof.size(), local_prof.size() + 3);
  for (size_t i = 0; i < local_prof.size(); ++i) EXPECT_EQ(prof[i].node, local_prof[i].node);
  std::map<std::string, NodeProfile> handoff;
  for (size_t i = local_prof.size(); i < prof.size(); ++i) {
    EXPECT_EQ(prof[i].op_type, "(isolation)");
    EXPECT_GE(prof[i].ms, 0);
    EXPECT_LT(prof[i].ms, 60000);
    handoff[prof[i].node] = prof[i];
  }
  ASSERT_EQ(handoff.size(), 3u);
  EXPECT_EQ(handoff["inputs copied in"].shapes, "2.00 MiB");
  EXPECT_EQ(handoff["outputs copied out"].shapes, "2.00 MiB");
  EXPECT_EQ(handoff["messages and wake-ups"].shapes, "");
  EXPECT_GT(handoff["messages and wake-ups"].ms, 0);
}

}  // namespace
}  // namespace bulkhead::test
