// The real models in ../shared/models on the OpenCL plugin (PoCL here), with the CPU as
// fallback: each matches ONNX Runtime's reference outputs within the CPU test's
// tolerances, and at least 80% of the nodes of the two PP-OCR models run on OpenCL.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "bulkhead/bulkhead.hpp"
#include "io/npy.h"
#include "support/test_util.h"

namespace bulkhead::test {
namespace {

constexpr double kOcrTolerance = 1e-4;     // tests/models/real_models_test.cc
constexpr double kSileroTolerance = 1e-5;

class OpenClModels : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(env_.load_backend(OPENCL_PLUGIN).is_ok());
    opts_.devices = {"opencl:0", "cpu"};
    opts_.threads = 1;
  }

  void check_model(const std::string& name, double tol, double min_fraction) {
    std::string dir = shared_dir() + "/models/" + name;
    auto s = env_.load(dir + "/model.onnx", opts_);
    ASSERT_TRUE(s.is_ok()) << s.status().to_string();
    NamedTensors in;
    for (auto& io : s->inputs()) {
      auto t = io::read_npy(dir + "/inputs/" + io.name + ".npy");
      ASSERT_TRUE(t.is_ok()) << t.status().to_string();
      in.emplace_back(io.name, *t);
    }
    int on = 0, total = 0;
    std::string listing;
    for (auto& [device, n] : s->placement()) {
      total += n;
      if (device == "opencl:0") on += n;
      listing += " " + device + "=" + std::to_string(n);
    }
    auto t0 = std::chrono::steady_clock::now();
    auto out = s->run(in);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_TRUE(out.is_ok()) << out.status().to_string();
    std::printf("%s on opencl:0: one run %.0f ms, placement%s (%.1f%% on opencl:0)\n", name.c_str(), ms,
                listing.c_str(), total ? 100.0 * on / total : 0.0);
    EXPECT_GE(total ? double(on) / total : 0, min_fraction) << listing;
    for (auto& [oname, t] : *out) {
      auto ref = io::read_npy(dir + "/outputs/" + oname + ".npy");
      ASSERT_TRUE(ref.is_ok()) << ref.status().to_string();
      ASSERT_EQ(t.shape(), ref->shape()) << oname;
      double d = 0;
      for (int64_t i = 0; i < t.numel(); ++i) {
        double e = std::fabs(double(t.data<float>()[i]) - ref->data<float>()[i]);
        if (!(e <= d)) d = e;  // NaN fails
      }
      std::printf("%s output %s: max abs diff %.3g (tolerance %.0e)\n", name.c_str(), oname.c_str(), d, tol);
      EXPECT_LE(d, tol) << name << " output " << oname;
    }
  }

  Env env_;
  SessionOptions opts_;
};

TEST_F(OpenClModels, PpOcrDetection) { check_model("ppocrv4_det", kOcrTolerance, 0.8); }
TEST_F(OpenClModels, PpOcrRecognition) { check_model("ppocrv4_rec", kOcrTolerance, 0.8); }
TEST_F(OpenClModels, SileroVad) { check_model("silero_vad_v5", kSileroTolerance, 0.0); }

}  // namespace
}  // namespace bulkhead::test
