// The isolation checker (DESIGN.md I7): runs two sessions F and G on a device under the
// failure schedules of the field reports, compares every output with the CPU float32
// reference, hashes inputs and earlier outputs to catch writes where none may happen,
// and says whether the sessions are watertight.
//
// run_check() creates its own Envs (a fresh one per schedule, so one schedule's damage
// cannot leak into the next) and is safe to call from any thread; the report it returns
// is a plain value owned by the caller.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bulkhead/bulkhead.hpp"
#include "check/metrics.h"

namespace bulkhead::check {

// A model by file (external data resolved beside it) or by serialized bytes.
struct ModelSource {
  std::string name;   // for reports: the file name or a label
  std::string path;   // empty when `bytes` holds the model
  std::string bytes;
};

struct CheckOptions {
  ModelSource front;                 // F
  std::optional<ModelSource> back;   // G; absent: G is a second session of F's model
  // The session device list under test. Nodes no listed device can run fall back to
  // the CPU: "cpu" is appended when no entry names it.
  std::vector<std::string> devices = {"cpu"};
  int threads = 1;
  std::map<std::string, Tensor> inputs;      // F's inputs (variant A); the rest generated
  std::map<std::string, int64_t> dims;       // values of symbolic dims for generated inputs
  uint64_t seed = 1;
  std::vector<std::string> schedules;        // empty: every schedule
  int thread_iterations = 4;                 // runs per thread in `threads`
  double rtol = 0;                           // 0: the device's default accuracy floor
  std::string worker_binary;                 // for `cross_process` ("" = resolve as usual)
  int worker_timeout_ms = 120000;
  // SessionOptions::precision of the sessions under test ("fp32" or "bf16"); the
  // reference stays the CPU in float32, so the solo schedules measure what the precision
  // costs (CheckReport::precision_costs) and the tolerances follow that error.
  std::string precision = "fp32";
};

const std::vector<std::string>& schedule_names();
std::string schedule_description(const std::string& name);

struct OutputResult {
  std::string name;
  Metrics metrics;
  double tolerance = 0;   // max |error| allowed
  std::string hash;       // SHA-256 right after the run
  std::string rewritten_by;  // label of the later step after which the hash changed
  bool clean = true;
  std::string why;        // when not clean
};

struct StepResult {
  std::string label;      // "F3", "G1", "F'1", "F@t1#2", "F→G"
  char role = 'F';        // 'F', 'G' or 'P' (pipeline: G's outputs with F on the device)
  int variant = 0;        // which input set (0 = A, 1 = B)
  bool ran = false;
  std::string error;      // the run's error, when it failed
  bool inputs_unchanged = true;
  std::vector<OutputResult> outputs;
  std::vector<std::string> findings;  // why the step is not clean, one line each
  bool clean = true;
  double ms = 0;
  std::vector<std::pair<std::string, Tensor>> raw;  // the outputs as returned
};

struct ScheduleResult {
  std::string name, description;
  std::vector<StepResult> steps;
  std::string error;      // the schedule could not be run (not a contamination)
  bool clean() const;
  const StepResult* first_bad() const;
};

// What a reduced precision costs one output: the solo run of F (or G, fed the reference
// of F) on variant A against the float32 CPU reference.
struct PrecisionCost {
  char role = 'F';
  std::string output;
  Metrics metrics;
};

struct CheckReport {
  CheckOptions options;
  Session::PrecisionUse precision;  // as the device's session of F runs
  std::string device_description;   // "cpu:0 (…)", from `bulkhead devices`
  std::vector<std::string> front_inputs, front_outputs, back_inputs, back_outputs;
  std::vector<std::pair<std::string, Tensor>> inputs[2];  // F's inputs, variants A and B
  std::vector<ScheduleResult> schedules;
  double rtol = 0;
  bool pipeline = false;
  // 0 clean, 2 contamination found, 1 error (a schedule could not run).
  int exit_code() const;
  std::string verdict() const;          // "clean", "contaminated", "error"
  std::string first_bad_step() const;   // "same_process/F3: output 'y' max error 3.1 > tolerance 1e-05"
  // Outputs of the first solo steps (front_only F1, back_only G1) against the reference,
  // when the sessions ran another precision than fp32; empty otherwise.
  std::vector<PrecisionCost> precision_costs() const;
};

Result<CheckReport> run_check(const CheckOptions& options);

}  // namespace bulkhead::check
