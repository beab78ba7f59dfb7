// `bulkhead quantize MODEL OUT.onnx --calibrate DIR_OR_NPY...`: static QDQ quantisation
// (check/quantize.h). Each --calibrate is one sample: a folder holding NAME.npy for every
// model input, or one .npy file for a model with one input.
#include <cstdio>
#include <filesystem>
#include <memory>

#include "bulkhead/bulkhead.hpp"
#include "check/quantize.h"
#include "cli.h"
#include "io/file_set.h"
#include "io/npy.h"

namespace bulkhead::cli {

void add_quantize(CLI::App& app) {
  struct Args {
    std::string model, out, method = "minmax";
    std::vector<std::string> calibrate, keep_float;
    double percentile = 99.99;
    int threads = 0;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("quantize", "write a QDQ int8 model: Conv, ConvTranspose, MatMul and Gemm weights int8, activations uint8 from calibration");
  cmd->add_option("model", a->model, "float ONNX model")->required();
  cmd->add_option("out", a->out, "where to write the QDQ model")->required();
  cmd->add_option("--calibrate", a->calibrate, "a calibration sample: a folder of NAME.npy (one per input) or one .npy (repeatable)")
      ->required();
  cmd->add_option("--method", a->method, "activation ranges: minmax (default) or percentile");
  cmd->add_option("--percentile", a->percentile, "for --method percentile: the share of values kept at each end (default 99.99)");
  cmd->add_option("--keep-float", a->keep_float, "names of nodes to leave in float (repeatable)");
  cmd->add_option("-t,--threads", a->threads, "threads for the calibration runs (0 = all cores)");
  cmd->callback([a]() {
    if (a->out == a->model) throw CLI::RuntimeError(fail("quantize", "the output would overwrite the model '" + a->model + "'"));
    Env env;
    SessionOptions so;
    so.threads = a->threads;
    so.optimization_level = 0;
    auto probe = env.load(a->model, so);
    if (!probe.is_ok()) throw CLI::RuntimeError(fail("quantize", probe.status()));
    check::QuantizeOptions o;
    o.method = a->method;
    o.percentile = a->percentile;
    o.keep_float = a->keep_float;
    o.threads = a->threads;
    for (const auto& c : a->calibrate) {
      NamedTensors sample;
      std::error_code ec;
      if (std::filesystem::is_directory(c, ec)) {
        for (const IoInfo& io : probe->inputs()) {
          // NAME.npy, with NAME made a safe file name as `run -o` writes it (an input
          // named "gpu_0/data_0" is gpu_0_data_0.npy; none can reach outside the folder).
          auto t = io::read_npy(c + "/" + io::safe_file_name(io.name) + ".npy");
          if (!t.is_ok()) throw CLI::RuntimeError(fail("quantize", t.status().with_context("calibration folder '" + c + "': ")));
          sample.emplace_back(io.name, *t);
        }
      } else {
        if (probe->inputs().size() != 1)
          throw CLI::RuntimeError(fail("quantize", "'" + c + "' is one .npy file, but the model takes " +
                                                       std::to_string(probe->inputs().size()) +
                                                       " inputs: give a folder with NAME.npy for each"));
        auto t = io::read_npy(c);
        if (!t.is_ok()) throw CLI::RuntimeError(fail("quantize", t.status()));
        sample.emplace_back(probe->inputs()[0].name, *t);
      }
      o.samples.push_back(std::move(sample));
    }
    auto r = check::quantize_model(a->model, o);
    if (!r.is_ok()) throw CLI::RuntimeError(fail("quantize", r.status()));
    Status st = io::write_files_all_or_nothing({{a->out, r->model}});
    if (!st.is_ok()) throw CLI::RuntimeError(fail("quantize", st));
    std::printf("%s: %d Conv, %d ConvTranspose, %d MatMul and %d Gemm quantised (weights int8 %s, %d activations uint8 per tensor, %s over %zu sample(s))%s\n",
                a->out.c_str(), r->convs, r->conv_transposes, r->matmuls, r->gemms, r->per_channel ? "per channel" : "per tensor (opset < 13)",
                r->activations, a->method.c_str(), o.samples.size(),
                r->kept ? (", " + std::to_string(r->kept) + " kept in float").c_str() : "");
    if (r->opset_before < 10)
      std::printf("  the model imported opset %lld of the default domain: moved to opset %lld (QuantizeLinear)\n",
                  static_cast<long long>(r->opset_before), static_cast<long long>(r->opset));
    if (r->folded)
      std::printf("  %d BatchNormalization / Mul / Add node(s) folded into Conv / ConvTranspose weights before quantising\n", r->folded);
    throw CLI::RuntimeError(0);
  });
}

}  // namespace bulkhead::cli
