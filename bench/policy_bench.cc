// policy_bench: the submission policies of a GPU device on whole models — each model in
// a folder of .onnx files (default: the light models of the ONNX backend data) runs
// under single, per-dispatch, split and auto; the outputs must be bit-identical across
// policies, and the table gives the submits of one run and the median latency of each.
// Exit 0 when every model agrees under every policy, 2 when one does not, 1 on errors.
//
//   policy_bench [--device vulkan:0] [--runs N] [--auto auto:8M] [MODEL.onnx | FOLDER]
//
// Inputs are generated as the conformance runner does for the light models: float32,
// element i of n is i / n, symbolic dimensions set to 1.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "backends/vulkan/vulkan_backend.h"
#include "bulkhead/bulkhead.hpp"
#include "session/env_impl.h"

namespace {

using namespace bulkhead;
namespace fs = std::filesystem;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

NamedTensors inputs_for(const Session& s) {
  NamedTensors in;
  for (const auto& io : s.inputs()) {
    Shape shape;
    for (int64_t d : io.shape) shape.push_back(d < 0 ? 1 : d);
    Tensor t = Tensor::host(DataType::kFloat32, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i) / static_cast<float>(t.numel());
    in.emplace_back(io.name, t);
  }
  return in;
}

bool identical(const NamedTensors& a, const NamedTensors& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const Tensor &x = a[i].second, &y = b[i].second;
    if (x.shape() != y.shape() || x.nbytes() != y.nbytes() || std::memcmp(x.raw(), y.raw(), x.nbytes()) != 0) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string device = "vulkan:0", auto_policy = "auto", where = std::string(BULKHEAD_SHARED_DIR) + "/onnx-backend-data/light";
  int runs = 3;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--device" && i + 1 < argc) device = argv[++i];
    else if (a == "--runs" && i + 1 < argc) runs = std::atoi(argv[++i]);
    else if (a == "--auto" && i + 1 < argc) auto_policy = argv[++i];
    else if (!a.empty() && a[0] != '-') where = a;
    else {
      std::fprintf(stderr, "usage: policy_bench [--device vulkan:0] [--runs N] [--auto auto:8M] [MODEL.onnx | FOLDER]\n");
      return 1;
    }
  }
  if (runs < 1) {
    std::fprintf(stderr, "policy_bench: error: --runs must be at least 1\n");
    return 1;
  }
  std::vector<std::string> models;
  std::error_code ec;
  if (fs::is_directory(where, ec)) {
    for (const auto& e : fs::directory_iterator(where))
      if (e.path().extension() == ".onnx") models.push_back(e.path().string());
    std::sort(models.begin(), models.end());
  } else {
    models.push_back(where);
  }
  if (models.empty()) {
    std::fprintf(stderr, "policy_bench: error: no .onnx models under '%s'\n", where.c_str());
    return 1;
  }
  Env env;
  auto dev = env.impl()->acquire_device(device);
  vulkan::DeviceCounters c;
  if (!dev.is_ok() || !vulkan::counters(**dev, &c)) {
    std::fprintf(stderr, "policy_bench: error: '%s' is not a Vulkan device\n", device.c_str());
    return 1;
  }
  const std::vector<std::string> policies = {"single", "per-dispatch", "split", auto_policy};
  std::printf("%-28s %14s", "model (nodes on device)", "");
  for (const auto& p : policies) std::printf(" %18s", p.c_str());
  std::printf("  identical\n");
  bool all_agree = true;
  for (const auto& path : models) {
    NamedTensors first;
    std::string cells;
    bool agree = true;
    std::string placed;
    for (const auto& policy : policies) {
      SessionOptions o;
      o.devices = {device, "cpu"};
      o.threads = 1;
      o.submit_policy = policy;
      auto s = env.load(path, o);
      if (!s.is_ok()) {
        std::fprintf(stderr, "policy_bench: error: %s\n", s.status().message().c_str());
        return 1;
      }
      if (placed.empty()) {
        int on = 0, total = 0;
        for (auto& [d, n] : s->placement()) {
          total += n;
          if (d == device) on += n;
        }
        placed = std::to_string(on) + "/" + std::to_string(total);
      }
      NamedTensors in = inputs_for(*s);
      std::vector<double> ms;
      uint64_t submits = 0;
      NamedTensors out;
      for (int r = 0; r <= runs; ++r) {
        vulkan::counters(**dev, &c);
        const uint64_t before = c.run_submits;
        auto t0 = std::chrono::steady_clock::now();
        auto y = s->run(in);
        double dt = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (!y.is_ok()) {
          std::fprintf(stderr, "policy_bench: error: %s: %s\n", path.c_str(), y.status().message().c_str());
          return 1;
        }
        vulkan::counters(**dev, &c);
        submits = c.run_submits - before;
        if (r > 0) ms.push_back(dt);
        out = std::move(y).value();
      }
      if (first.empty()) first = out;
      else agree = agree && identical(first, out);
      char cell[64];
      std::snprintf(cell, sizeof cell, " %6llu x %7.1f ms", static_cast<unsigned long long>(submits), median(ms));
      cells += cell;
    }
    all_agree = all_agree && agree;
    std::printf("%-28s %14s%s  %s\n", fs::path(path).stem().string().c_str(), placed.c_str(), cells.c_str(),
                agree ? "yes" : "NO");
    std::fflush(stdout);
  }
  std::printf("cells: submits of one run x median latency of %d runs (after one warm-up)\n", runs);
  return all_agree ? 0 : 2;
}
