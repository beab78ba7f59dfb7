// What a call costs through each API: the C++ Session::run and the C API's run() on a
// tiny model (y = x + z, float32[1,4]), and on a model whose work does not depend on its
// input's size (y = Shape(x)) fed inputs of 4 KiB to 64 MiB — flat times mean the input
// is not copied. Medians of per-call times, in microseconds. bench/python_bench.py adds
// the Python package's figures and the overheads.
//
//   api_bench [--calls N] [--models-out DIR]   (--models-out: write the two models and exit)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "bulkhead/bulkhead.h"
#include "bulkhead/bulkhead.hpp"
#include "demo/demo_model.h"

namespace {

using Clock = std::chrono::steady_clock;

const char* kAdd = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,4] x, float[1,4] z) => (float[1,4] y) { y = Add(x, z) })";
const char* kShape = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[N] x) => (int64[1] y) { y = Shape(x) })";

template <typename F>
double median_us(int calls, F&& call) {
  std::vector<double> t(static_cast<size_t>(calls));
  for (int i = 0; i < 20; ++i) call();  // warm-up
  for (auto& v : t) {
    auto a = Clock::now();
    call();
    v = std::chrono::duration<double, std::micro>(Clock::now() - a).count();
  }
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return t[t.size() / 2];
}

void die(const std::string& what) {
  std::fprintf(stderr, "api_bench: %s\n", what.c_str());
  std::exit(1);
}

std::string size_label(size_t bytes) {
  if (bytes >= (1u << 20)) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= 1024) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

}  // namespace

int main(int argc, char** argv) {
  int calls = 20000;
  std::string models_out;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--calls" && i + 1 < argc) calls = std::max(100, std::atoi(argv[++i]));
    else if (a == "--models-out" && i + 1 < argc) models_out = argv[++i];
    else die("unknown argument '" + a + "' (--calls N, --models-out DIR)");
  }
  auto add = bulkhead::demo::model_from_text(kAdd);
  auto shape = bulkhead::demo::model_from_text(kShape);
  if (!add.is_ok() || !shape.is_ok()) die("cannot build the models");
  if (!models_out.empty()) {
    std::ofstream(models_out + "/add.onnx", std::ios::binary) << *add;
    std::ofstream(models_out + "/shape.onnx", std::ios::binary) << *shape;
    return 0;
  }
  const std::vector<size_t> sizes = {4096, 1u << 20, 16u << 20, 64u << 20};
  std::printf("%-6s %-6s %-8s %10s\n", "api", "model", "input", "median_us");

  // C++.
  bulkhead::Env env;
  bulkhead::SessionOptions o;
  o.threads = 1;
  auto s_add = env.load_bytes(*add, "add.onnx", o);
  auto s_shape = env.load_bytes(*shape, "shape.onnx", o);
  if (!s_add.is_ok() || !s_shape.is_ok()) die("cannot load the models");
  auto x = bulkhead::Tensor::from_vector<float>(bulkhead::DataType::kFloat32, {1, 4}, {1, 2, 3, 4});
  double us = median_us(calls, [&] {
    if (!s_add->run({{"x", x}, {"z", x}}).is_ok()) die("C++ run failed");
  });
  std::printf("%-6s %-6s %-8s %10.2f\n", "c++", "add", "32 B", us);
  for (size_t bytes : sizes) {
    bulkhead::Tensor big = bulkhead::Tensor::host(bulkhead::DataType::kFloat32, {static_cast<int64_t>(bytes / 4)});
    std::memset(big.raw(), 0, bytes);
    us = median_us(std::max(100, calls / 100), [&] {
      if (!s_shape->run({{"x", big}}).is_ok()) die("C++ run failed");
    });
    std::printf("%-6s %-6s %-8s %10.2f\n", "c++", "shape", size_label(bytes).c_str(), us);
  }

  // The C API.
  const BhApi* bh = bh_get_api(BH_API_VERSION);
  BhEnv* cenv = nullptr;
  BhSessionOptions* copts = nullptr;
  BhSession *c_add = nullptr, *c_shape = nullptr;
  auto ok = [&](BhStatus* st) {
    if (st) die(std::string("C API: ") + bh->status_message(st));
  };
  ok(bh->create_env(&cenv));
  ok(bh->create_session_options(&copts));
  ok(bh->session_options_set_threads(copts, 1));
  ok(bh->create_session_from_bytes(cenv, add->data(), add->size(), "add.onnx", copts, &c_add));
  ok(bh->create_session_from_bytes(cenv, shape->data(), shape->size(), "shape.onnx", copts, &c_shape));
  float xs[4] = {1, 2, 3, 4};
  int64_t dims[2] = {1, 4};
  BhTensor* cx = nullptr;
  ok(bh->create_tensor_borrowed(BH_TYPE_FLOAT32, dims, 2, xs, sizeof xs, nullptr, nullptr, &cx));
  const char* names[2] = {"x", "z"};
  const BhTensor* ins[2] = {cx, cx};
  us = median_us(calls, [&] {
    BhTensor* out = nullptr;
    ok(bh->run(c_add, nullptr, names, ins, 2, nullptr, 1, &out));
    bh->release_tensor(out);
  });
  std::printf("%-6s %-6s %-8s %10.2f\n", "c", "add", "32 B", us);
  for (size_t bytes : sizes) {
    std::vector<float> big(bytes / 4, 0.f);
    int64_t n = static_cast<int64_t>(big.size());
    BhTensor* cbig = nullptr;
    ok(bh->create_tensor_borrowed(BH_TYPE_FLOAT32, &n, 1, big.data(), bytes, nullptr, nullptr, &cbig));
    const char* xname[1] = {"x"};
    const BhTensor* bin[1] = {cbig};
    us = median_us(std::max(100, calls / 100), [&] {
      BhTensor* out = nullptr;
      ok(bh->run(c_shape, nullptr, xname, bin, 1, nullptr, 1, &out));
      bh->release_tensor(out);
    });
    std::printf("%-6s %-6s %-8s %10.2f\n", "c", "shape", size_label(bytes).c_str(), us);
    bh->release_tensor(cbig);
  }
  bh->release_tensor(cx);
  bh->release_session(c_add);
  bh->release_session(c_shape);
  bh->release_session_options(copts);
  bh->release_env(cenv);
  return 0;
}
