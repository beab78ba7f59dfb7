#include "check/selftest.h"

#include "backend/plugin_host.h"
#include "backends/vulkan/policy.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "backends/vulkan/vulkan_backend.h"
#include "bulkhead/bulkhead.hpp"
#include "demo/demo_model.h"
#include "session/env_impl.h"

namespace bulkhead::check {
namespace {

constexpr int kKh = 3, kKw = 4, kStrideW = 2;  // the field report's ConvTranspose

std::string canary_text(const SelftestOptions& o) {
  const int c = o.channels, h = o.height, w = o.width;
  std::string text = "<ir_version: 8, opset_import: [\"\" : 17]>\ncanary (float[1," + std::to_string(c) + "," +
                     std::to_string(h) + "," + std::to_string(w) + "] x) => (float[1," + std::to_string(c) + "," +
                     std::to_string(h) + "," + std::to_string(w) + "] y) {\n";
  text += "  starts = Constant <value = int64[2] {1, 1}> ()\n";
  text += "  ends = Constant <value = int64[2] {" + std::to_string(h + 1) + ", " + std::to_string(w + 1) + "}> ()\n";
  text += "  axes = Constant <value = int64[2] {2, 3}> ()\n";
  std::string prev = "x";
  for (int i = 0; i < o.links; ++i) {
    const std::string t = "t" + std::to_string(i), s = i + 1 == o.links ? "y" : "s" + std::to_string(i);
    text += "  " + t + " = ConvTranspose <kernel_shape = [" + std::to_string(kKh) + ", " + std::to_string(kKw) +
            "], strides = [1, " + std::to_string(kStrideW) + "]> (" + prev + ", w" + std::to_string(i) + ")\n";
    text += "  " + s + " = Slice (" + t + ", starts, ends, axes)\n";
    prev = s;
  }
  return text + "}\n";
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Counts {
  uint64_t submits = 0, dispatches = 0;
};

Result<Counts> device_counts(const Env& env, const std::string& device) {
  BH_ASSIGN_OR_RETURN(auto dev, env.impl()->acquire_device(device));
  vulkan::DeviceCounters c;
  if (vulkan::counters(*dev, &c)) return Counts{c.run_submits, c.dispatches};
  plugin::Counters pc;
  if (plugin::counters(*dev, &pc)) return Counts{pc.run_submits, pc.dispatches};
  return invalid_argument("selftest: device '" + device +
                          "' has no submission policies to test (a GPU device is needed: vulkan:N, or a plugin's "
                          "device that counts its submits)");
}

// The submits `auto` with `threshold` makes for dispatches writing `writes` bytes each.
uint64_t auto_submits(const std::vector<uint64_t>& writes, uint64_t threshold) {
  uint64_t submits = 0, since = 0;
  for (uint64_t b : writes) {
    since += b;
    if (since >= threshold) {
      ++submits;
      since = 0;
    }
  }
  return submits + (since > 0 ? 1 : 0);
}

}  // namespace

Result<std::string> canary_model(const SelftestOptions& o) {
  if (o.links < 1 || o.links > 64) return invalid_argument("selftest: --links must be 1..64, got " + std::to_string(o.links));
  if (o.channels < 1 || o.height < 1 || o.width < 1) return invalid_argument("selftest: sizes must be positive");
  std::vector<demo::Weight> weights;
  const int64_t n = int64_t{o.channels} * o.channels * kKh * kKw;
  for (int i = 0; i < o.links; ++i) {
    demo::Weight w{"w" + std::to_string(i), {o.channels, o.channels, kKh, kKw}};
    w.values.resize(n);
    // The field report's weights, cos(0.01 i) · 0.05, scaled so a value keeps its size
    // along the chain whatever the channel count (128 in the report).
    const float scale = 0.05f * 128.0f / static_cast<float>(o.channels) / 8.0f;
    for (int64_t k = 0; k < n; ++k) w.values[k] = std::cos(0.01f * static_cast<float>(k + i)) * scale;
    weights.push_back(std::move(w));
  }
  return demo::model_with_weights(canary_text(o), weights);
}

Result<SelftestReport> run_selftest(const SelftestOptions& o) {
  if (o.runs < 1) return invalid_argument("selftest: --runs must be at least 1");
  BH_ASSIGN_OR_RETURN(std::string model, canary_model(o));
  Env env;
  SelftestReport rep;
  rep.device = o.device;
  BH_ASSIGN_OR_RETURN(Counts start, device_counts(env, o.device));
  (void)start;
  for (const auto& d : env.devices())
    if (d.backend + ":" + std::to_string(d.ordinal) == o.device || d.backend == o.device) {
      rep.device_name = d.name;
      rep.default_policy = d.submit_policy;
    }
  const int64_t hw_in = int64_t{o.height} * o.width;
  rep.convt_bytes = uint64_t(o.channels) * (o.height + kKh - 1) * ((o.width - 1) * kStrideW + kKw) * 4;
  rep.slice_bytes = uint64_t(o.channels) * hw_in * 4;

  Tensor x = Tensor::host(DataType::kFloat32, {1, o.channels, o.height, o.width});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::sin(0.001f * static_cast<float>(i)) + 1.0f;
  NamedTensors in = {{"x", x}};

  SessionOptions cpu;
  cpu.threads = 0;
  BH_ASSIGN_OR_RETURN(Session ref_session, env.load_bytes(model, "canary", cpu));
  BH_ASSIGN_OR_RETURN(NamedTensors ref, ref_session.run(in));
  const Tensor& want = ref[0].second;
  double ref_max = 0;
  for (int64_t i = 0; i < want.numel(); ++i) ref_max = std::max(ref_max, double(std::abs(want.data<float>()[i])));
  rep.output_max = ref_max;

  Tensor single;
  for (const std::string& policy : {std::string("single"), std::string("per-dispatch"), std::string("split"), o.auto_policy}) {
    PolicyOutcome out;
    out.policy = policy;
    SessionOptions so;
    so.devices = {o.device, "cpu"};
    so.threads = 0;
    so.submit_policy = policy;
    auto s = env.load_bytes(model, "canary", so);
    if (!s.is_ok()) return s.status();
    if (rep.nodes_total == 0) {
      for (auto& [dev, count] : s->placement()) {
        rep.nodes_total += count;
        if (dev == o.device || dev.rfind(o.device + ":", 0) == 0) rep.nodes_on_device += count;
      }
      if (rep.nodes_on_device < 2 * o.links)
        return unsupported("selftest: only " + std::to_string(rep.nodes_on_device) + " of the canary's " +
                           std::to_string(2 * o.links) + " ConvTranspose/Slice nodes run on " + o.device +
                           " (the others would fall back to the CPU, testing nothing)");
    }
    Tensor got;
    std::vector<double> ms;
    for (int r = 0; r <= o.runs && out.error.empty(); ++r) {
      BH_ASSIGN_OR_RETURN(Counts before, device_counts(env, o.device));
      auto t0 = std::chrono::steady_clock::now();
      auto y = s->run(in);
      double dt = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      BH_ASSIGN_OR_RETURN(Counts after, device_counts(env, o.device));
      if (!y.is_ok()) {
        out.error = y.status().message();
        break;
      }
      if (r > 0) ms.push_back(dt);  // run 0 warms up (pipelines)
      out.submits = after.submits - before.submits;
      out.dispatches = after.dispatches - before.dispatches;
      got = (*y)[0].second;
    }
    out.median_ms = median(ms);
    if (out.error.empty()) {
      // What the policy promises, given the dispatches the run made.
      if (policy == "single" || policy == "per-dispatch") out.expected_submits = 1;
      else if (policy == "split") out.expected_submits = out.dispatches;
      else if (out.dispatches == uint64_t(2 * o.links)) {
        uint64_t threshold = 0;
        if (auto dev = env.impl()->acquire_device(o.device); dev.is_ok()) {
          threshold = vulkan::auto_threshold(**dev, policy);
          // A plugin device: the threshold its policy names ("auto:8M"), or its
          // default's when the device's policy text begins with one.
          std::string text = policy;
          if (!threshold && (policy == "auto" || policy.empty())) text = (*dev)->info().submit_policy;
          if (!threshold && plugin::is_plugin_device(**dev))
            if (auto p = vulkan::parse_policy(text.substr(0, text.find(' ')), "policy");
                p.is_ok() && p->policy == vulkan::Policy::kAuto)
              threshold = p->auto_bytes;
        }
        std::vector<uint64_t> writes;
        for (int i = 0; i < o.links; ++i) {
          writes.push_back(rep.convt_bytes);
          writes.push_back(rep.slice_bytes);
        }
        if (threshold) out.expected_submits = auto_submits(writes, threshold);
      }
      int64_t zeros = 0;
      for (int64_t i = 0; i < got.numel(); ++i) {
        const double d = std::abs(double(got.data<float>()[i]) - want.data<float>()[i]);
        out.max_abs_vs_cpu = std::max(out.max_abs_vs_cpu, std::isnan(d) ? INFINITY : d);
        zeros += got.data<float>()[i] == 0.0f;
      }
      out.zero_fraction = got.numel() ? double(zeros) / got.numel() : 0;
      out.tolerance = 1e-3 * std::max(ref_max, 1e-6);
      out.matches_cpu = out.max_abs_vs_cpu <= out.tolerance;
      if (!single.defined()) single = got;
      out.matches_single = got.nbytes() == single.nbytes() &&
                           std::equal(got.data<float>(), got.data<float>() + got.numel(), single.data<float>(),
                                      [](float a, float b) { return std::memcmp(&a, &b, 4) == 0; });
    }
    rep.policies.push_back(out);
  }
  rep.agree = true;
  for (auto& p : rep.policies) rep.agree = rep.agree && p.error.empty() && p.matches_cpu && p.matches_single;
  return rep;
}

}  // namespace bulkhead::check
