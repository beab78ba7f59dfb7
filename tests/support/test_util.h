// Helpers shared by tests: paths to the shared data (failing loudly when absent), small
// models from ONNX text, temporary folders.
#pragma once

#include <algorithm>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "bulkhead/bulkhead.hpp"
#include "demo/demo_model.h"

namespace bulkhead::test {

inline std::string shared_dir() {
  std::string d = BULKHEAD_SHARED_DIR;
  if (const char* e = std::getenv("BULKHEAD_SHARED")) d = e;
  if (!std::filesystem::is_directory(d + "/models")) {
    ADD_FAILURE() << "test data folder '" << d << "' is missing: these tests need ../shared beside the repository "
                  << "(or BULKHEAD_SHARED=<path>)";
    throw std::runtime_error("missing shared test data");
  }
  return d;
}

inline std::string model_text_bytes(const std::string& text) {
  auto r = demo::model_from_text(text);
  if (!r.is_ok()) throw std::runtime_error(r.status().to_string());
  return *r;
}

// A session of a model written in ONNX's text form.
inline Result<Session> load_text_model(const Env& env, const std::string& text) {
  return env.load_bytes(model_text_bytes(text), "m");
}

// Expects session creation for the text model to fail with a message containing `part`.
inline void expect_text_model_refused(const std::string& text, const std::string& part) {
  Env env;
  auto s = load_text_model(env, text);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find(part), std::string::npos) << s.status().to_string();
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "bulkhead-test-XXXXXX").string();
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    path_ = mkdtemp(buf.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  void write(const std::string& name, const std::string& bytes) const {
    std::ofstream f(file(name), std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

 private:
  std::string path_;
};

// `n` uniform random floats in [lo, hi) as ONNX text ("0.1, -0.3, ..."), for initializers.
inline std::string random_values_text(int64_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::ostringstream os;
  os.precision(9);
  for (int64_t i = 0; i < n; ++i) os << (i ? ", " : "") << d(rng);
  return os.str();
}

// Sanitizer builds: slower, and ASan keeps freed memory (tests scale their work down).
#if defined(BULKHEAD_SANITIZE_THREAD)
constexpr bool kTsan = true;
#else
constexpr bool kTsan = false;
#endif
#if defined(BULKHEAD_SANITIZE_THREAD) || defined(BULKHEAD_SANITIZE_ADDRESS)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

// A run of `n` rounds of a 32x32 MatMul + Tanh: as long as a test needs it to be (for
// other runs to overlap it, or a kill to land inside).
inline const char* kLoopModel = R"(<ir_version: 8, opset_import: ["" : 17]>
g (int64 n, float[32,32] x, float[32,32] w) => (float[32,32] y) <bool c = {1}> {
  y = Loop (n, c, x) <body = b (int64 i, bool ci, float[32,32] a) => (bool co, float[32,32] r) {
    co = Identity(ci)
    m = MatMul(a, w)
    r = Tanh(m)
  }>
})";

inline Tensor random_tensor(const Shape& s, uint32_t seed) {
  Tensor t = Tensor::host(DataType::kFloat32, s);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

// One profiled run of a model written in ONNX's text form: its outputs, and how many nodes
// of each operator ran. Failures are reported as test failures (and an empty result).
struct ProfiledRun {
  NamedTensors outputs;
  std::map<std::string, int> ops;
};
inline ProfiledRun run_profiled(const std::string& text, const SessionOptions& options, const NamedTensors& in) {
  Env env;
  auto s = env.load_bytes(model_text_bytes(text), "m.onnx", options);
  EXPECT_TRUE(s.is_ok()) << s.status().to_string();
  if (!s.is_ok()) return {};
  std::vector<NodeProfile> prof;
  RunOptions ro;
  ro.profile = &prof;
  auto r = s->run(in, ro);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  if (!r.is_ok()) return {};
  ProfiledRun out{*r, {}};
  for (const auto& p : prof) out.ops[p.op_type]++;
  return out;
}

inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  if (a.dtype() == DataType::kString) return std::equal(a.strings(), a.strings() + a.numel(), b.strings());
  return a.nbytes() == 0 || std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// Runs `text` at optimisation level 1 (one thread) and at level 2 on 1 and 2 threads
// (SessionOptions::one_thread_when_small off: the kernels' own threads, whatever the
// model's size): the outputs must be the same bits. Returns level 2's operator counts.
inline std::map<std::string, int> expect_level2_same_as_level1(const std::string& text, const NamedTensors& in) {
  auto at = [&](int level, int threads) {
    SessionOptions o;
    o.optimization_level = level;
    o.threads = threads;
    o.one_thread_when_small = false;
    return run_profiled(text, o, in);
  };
  const ProfiledRun plain = at(1, 1);
  std::map<std::string, int> ops;
  for (int threads : {1, 2}) {
    const ProfiledRun fused = at(2, threads);
    EXPECT_EQ(fused.outputs.size(), plain.outputs.size());
    for (size_t k = 0; k < fused.outputs.size() && k < plain.outputs.size(); ++k)
      EXPECT_TRUE(bitwise_equal(fused.outputs[k].second, plain.outputs[k].second))
          << "output " << plain.outputs[k].first << ", threads " << threads;
    ops = fused.ops;
  }
  return ops;
}

}  // namespace bulkhead::test
