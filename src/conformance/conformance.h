// The conformance runner: runs ONNX backend test cases (../shared/onnx-backend-data)
// against a device list and compares with the ONNX reference rule (rtol 1e-3, atol 1e-7,
// NaN equals NaN, integers, bools and strings exact, shapes exact).
//
// Each case runs in a forked child process, so a crash or hang in one case is reported
// as that case's failure and cannot take the run down.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "bulkhead/bulkhead.hpp"
#include "bulkhead/status.h"
#include "bulkhead/tensor.h"

namespace bulkhead::conformance {

struct Case {
  std::string folder;  // node, simple, pytorch-converted, pytorch-operator, light
  std::string name;    // case folder (or light model) name
  std::string dir;     // absolute directory of the case (the light folder for light models)
  std::string op = "-", form = "direct", tier, dtypes = "basic";
};

struct CaseResult {
  Case c;
  enum class Outcome { kPass, kFail, kError, kCrash, kTimeout } outcome = Outcome::kError;
  bool loose = false;   // fails the reference rule but passes with rtol 1e-2, atol 1e-5
  std::string message;  // why it failed
  double seconds = 0;
};

const char* outcome_name(CaseResult::Outcome o);

struct Options {
  std::string data_dir;      // the backend-data root or one of its folders
  std::string cases_tsv;     // tier table; default: <data>/../conformance/cases.tsv when present
  std::vector<std::string> devices = {"cpu"};
  std::string filter;        // ECMAScript regex on "folder/case"
  int jobs = 1;
  int threads = 1;
  int timeout_s = 120;
};

// Finds the cases under opts.data_dir (with tiers from the tsv).
Result<std::vector<Case>> discover(const Options& opts);
// The model file of case `c`.
std::string model_path(const Case& c);
// The inputs and reference outputs of case `c`, for a session of its model, with the
// tolerance its comparison uses.
struct CaseData {
  NamedValues inputs;
  std::vector<Value> expected;
  double rtol = 1e-3, atol = 1e-7;
};
Result<CaseData> load_case_data(const Case& c, const Session& session);
// Runs one case in this process.
CaseResult run_case(const Case& c, const Options& opts);
// Runs every case, each in a child process, `jobs` at a time. `progress` is called per case.
std::vector<CaseResult> run_all(const std::vector<Case>& cases, const Options& opts,
                                void (*progress)(const CaseResult&, void*) = nullptr, void* user = nullptr);

// Compares one actual value with the expected one; empty string when it matches.
std::string compare(const Value& actual, const Value& expected, double rtol, double atol);

}  // namespace bulkhead::conformance
