// The checker on the real models: the CPU backend is clean on ppocrv4_det, ppocrv4_rec,
// silero_vad_v5 and on ppocrv4_det split in two, in every schedule (worker processes
// included).
#include "check/check.h"
#include "check/split.h"
#include "io/npy.h"
#include "support/test_util.h"

namespace bulkhead::test {
namespace {

check::CheckOptions model_options(const std::string& name) {
  std::string dir = shared_dir() + "/models/" + name;
  check::CheckOptions o;
  o.front = {name, dir + "/model.onnx", ""};
  o.worker_binary = BULKHEAD_BINARY;
  o.thread_iterations = 2;
  Env env;
  auto s = env.load(o.front.path);
  if (!s.is_ok()) throw std::runtime_error(s.status().to_string());
  for (auto& io : s->inputs()) {
    auto t = io::read_npy(dir + "/inputs/" + io.name + ".npy");
    if (!t.is_ok()) throw std::runtime_error(t.status().to_string());
    o.inputs[io.name] = *t;
  }
  return o;
}

void expect_clean(const check::CheckOptions& o) {
  auto r = check::run_check(o);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  for (auto& s : r->schedules) EXPECT_TRUE(s.clean()) << o.front.name << " " << s.name << ": " << s.error
                                                      << (s.first_bad() ? s.first_bad()->findings.front() : "");
  EXPECT_EQ(r->exit_code(), 0) << r->first_bad_step();
}

TEST(CheckModels, DetIsCleanOnCpu) { expect_clean(model_options("ppocrv4_det")); }
TEST(CheckModels, RecIsCleanOnCpu) { expect_clean(model_options("ppocrv4_rec")); }
TEST(CheckModels, SileroIsCleanOnCpu) { expect_clean(model_options("silero_vad_v5")); }

TEST(CheckModels, SplitDetIsCleanOnCpu) {
  TempDir dir;
  auto o = model_options("ppocrv4_det");
  auto parts = check::split_model(o.front.path, 0.5);
  ASSERT_TRUE(parts.is_ok()) << parts.status().to_string();
  EXPECT_GE(parts->boundary.size(), 1u);
  dir.write("F.onnx", parts->front);
  dir.write("G.onnx", parts->back);
  o.front = {"det_front", dir.file("F.onnx"), ""};
  o.back = check::ModelSource{"det_back", dir.file("G.onnx"), ""};
  expect_clean(o);
}

}  // namespace
}  // namespace bulkhead::test
