// `bulkhead demo`: needs no files. Builds a small image classifier in code from ONNX's
// text format, runs it in two sessions on two threads at once, and shows that each got
// exactly the answer it gets alone.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>

#include "backend/backend.h"
#include "bulkhead/bulkhead.hpp"
#include "check/check.h"
#include "cli.h"
#include "demo/demo_model.h"

namespace bulkhead::cli {
namespace {

// The isolation checker on a split pipeline F -> G built in code, on every device this
// machine has (in-process and with each session in a worker process), and on the
// `faulty` test instrument, whose four faults the checker must catch.
int check_demo() {
  auto f = demo::pipeline_front_bytes();
  auto g = demo::pipeline_back_bytes();
  if (!f.is_ok()) return fail("demo", f.status());
  if (!g.is_ok()) return fail("demo", g.status());
  std::printf("\nbulkhead check on a split pipeline built in code: F (image -> main, mean, std; 11 nodes) -> G (-> probs; 9 nodes)\n");
  std::printf("%-26s %-12s %-21s %s\n", "device", "sessions", "verdict", "first bad step");
  Env env;
  int rc = 0;
  for (const auto& d : env.devices()) {
    bool instrument = d.backend == "faulty";
    std::string spec = d.backend + ":" + (instrument ? d.name : std::to_string(d.ordinal));
    for (int mode = 0; mode < (instrument ? 1 : 2); ++mode) {
      check::CheckOptions o;
      o.front = {"F", "", *f};
      o.back = check::ModelSource{"G", "", *g};
      o.devices = {spec};
      o.thread_iterations = 2;
      if (mode == 0) o.schedules = {"front_only", "back_only", "same_process", "order_after_g", "threads", "recover", "pipeline"};
      else o.schedules = {"cross_process"};
      auto r = check::run_check(o);
      std::string verdict = r.is_ok() ? r->verdict() : "error";
      std::string why = r.is_ok() ? r->first_bad_step() : r.status().message();
      if (r.is_ok() && why.empty() && r->exit_code() == 1)
        for (auto& s : r->schedules)
          if (!s.error.empty()) why = s.name + ": " + s.error;
      if (why.size() > 90) why = why.substr(0, 87) + "...";
      std::string label = instrument ? verdict + (d.name == "none" ? "" : " (meant)") : verdict;
      std::printf("%-26s %-12s %-21s %s\n", spec.c_str(), mode == 0 ? "in-process" : "two workers", label.c_str(), why.c_str());
      // Real devices must be clean; each fault of the instrument must be caught.
      bool expected = instrument ? (d.name == "none" ? verdict == "clean" : verdict == "contaminated") : verdict == "clean";
      if (!expected) rc = 2;
    }
  }
  std::printf(rc ? "\nUNEXPECTED: a real device is not clean, or a planted fault went unnoticed\n"
                 : "\nevery real device is watertight; every planted fault was caught\n");
  return rc;
}

int demo_cmd() {
  const std::string cmd = "demo";
  auto bytes = demo::classifier_model_bytes();
  if (!bytes.is_ok()) return fail(cmd, bytes.status());
  Env env;
  SessionOptions opts;
  opts.threads = 1;
  auto a = env.load_bytes(*bytes, "demo_classifier", opts);
  if (!a.is_ok()) return fail(cmd, a.status());
  auto b = env.load_bytes(*bytes, "demo_classifier", opts);
  if (!b.is_ok()) return fail(cmd, b.status());
  std::printf("bulkhead %s demo: a 9-node image classifier built in code (Conv, Relu, HardSwish, Add,\n"
              "GlobalAveragePool, Flatten, Gemm, Softmax), input %s, on ", version(), a->inputs()[0].type_string.c_str());
  for (auto& [dev, n] : a->placement()) std::printf("%s (%d kernels after graph optimisation)\n\n", dev.c_str(), n);

  Tensor img_a = demo::classifier_image(0.3f), img_b = demo::classifier_image(1.7f);
  // Each session alone, for reference.
  auto ref_a = a->run({{"image", img_a}});
  auto ref_b = b->run({{"image", img_b}});
  if (!ref_a.is_ok()) return fail(cmd, ref_a.status());
  if (!ref_b.is_ok()) return fail(cmd, ref_b.status());

  // Then both at once, 200 runs each, from two threads.
  int mismatches = 0;
  std::string err;
  auto hammer = [&](const Session& s, const Tensor& img, const Tensor& ref, int& bad) {
    for (int i = 0; i < 200; ++i) {
      auto r = s.run({{"image", img}});
      if (!r.is_ok()) { err = r.status().message(); ++bad; return; }
      if (std::memcmp((*r)[0].second.raw(), ref.raw(), ref.nbytes()) != 0) ++bad;
    }
  };
  int bad_a = 0, bad_b = 0;
  std::thread ta(hammer, std::cref(*a), std::cref(img_a), std::cref((*ref_a)[0].second), std::ref(bad_a));
  std::thread tb(hammer, std::cref(*b), std::cref(img_b), std::cref((*ref_b)[0].second), std::ref(bad_b));
  ta.join();
  tb.join();
  mismatches = bad_a + bad_b;
  if (!err.empty()) return fail(cmd, err);

  for (auto* r : {&*ref_a, &*ref_b}) {
    const Tensor& p = (*r)[0].second;
    int best = 0;
    for (int i = 1; i < 10; ++i)
      if (p.data<float>()[i] > p.data<float>()[best]) best = i;
    std::printf("session %c: probs =", r == &*ref_a ? 'A' : 'B');
    for (int i = 0; i < 10; ++i) std::printf(" %.4f", p.data<float>()[i]);
    std::printf("  -> class %d\n", best);
  }
  std::printf("\n2 sessions x 200 concurrent runs on 2 threads: %d of 400 results differed from the solo run%s\n",
              mismatches, mismatches ? "  <-- CONTAMINATION" : " (watertight)");
  int rc = check_demo();
  return mismatches ? 2 : rc;
}

}  // namespace

void add_demo(CLI::App& app) {
  auto* cmd = app.add_subcommand("demo", "Build a small model in code and run it (needs no files)");
  cmd->callback([]() {
    int rc = demo_cmd();
    if (rc) throw CLI::RuntimeError(rc);
  });
}

}  // namespace bulkhead::cli
