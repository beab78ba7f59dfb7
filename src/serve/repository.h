// A model repository on disk, as `bulkhead serve --model-repository DIR` reads it:
//
//   DIR/<model>/config.json         optional: how the model is served (below)
//   DIR/<model>/<version>/model.onnx   one folder per version, a positive integer
//
// Model names are what clients put in URLs: letters, digits, '_', '-' and '.', at most
// 128 characters, not starting with '.'. Folders with other names are skipped with a
// warning. Nothing is read outside DIR: a model's folder, its versions and their
// model.onnx must be real folders and files, not symbolic links leaving it.
//
// config.json (every field optional; an unknown field is an error naming it):
//   "devices":            ["cpu"] | ["vulkan:0", "cpu"] | "vulkan:0,cpu"
//   "threads":            intra-op threads per run (0 = the cores)
//   "isolation":          "in-process" | "process"
//   "instances":          sessions serving the model (1..64; default 1)
//   "queue_depth":        requests that may wait for an instance (0..100000; default 64);
//                         one more is refused with HTTP 503
//   "request_timeout_ms": the longest a request may wait and run (0 = no limit)
//   "worker_timeout_ms":  process isolation: a run not answered in this long kills the worker
//   "graph_capture":      true | false
//   "submission_policy":  GPU submissions: "single", "per-dispatch", "split", "auto[:bytes]"
//   "optimization_level": 0, 1, 2
//   "precision":          "fp32" | "bf16"
//   "versions":           "latest" (default: the highest version only) | "all" | [1, 3]
//   "check_dims":         {"<symbolic dim>": N} for the inputs `--check-on-load` makes up
//   "max_batch_size":     dynamic batching (1..4096; default 1 = off): requests waiting for
//                         an instance are run together, concatenated along the first
//                         dimension (every input and output must have it free), up to
//                         this many rows, and the results split back per request
//   "max_queue_delay_us": how long a request with an instance waits for others to batch
//                         with (0..10 s; default 0: only those already waiting)
//
// `bulkhead serve --check-on-load` runs `bulkhead check`'s quick schedules (front_only,
// same_process, threads) on each version before it serves it, with the inputs in
// DIR/<model>/check_inputs/<input>.npy (file names as `bulkhead run -o` writes them) where
// there are, generated ones (of check_dims) otherwise.
//
// Free functions; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "bulkhead/bulkhead.hpp"

namespace bulkhead::serve {

struct ModelConfig {
  SessionOptions session;  // devices, threads, isolation, timeouts, graph capture, policy
  int instances = 1;
  int queue_depth = 64;
  int max_batch_size = 1;          // > 1: dynamic batching (serve/model_host.h)
  int64_t max_queue_delay_us = 0;
  int64_t request_timeout_ms = 0;
  enum class Versions { kLatest, kAll, kListed } versions = Versions::kLatest;
  std::vector<int64_t> listed_versions;
  std::map<std::string, int64_t> check_dims;
};

// Parses config.json's text; `where` ("model 'rec': /repo/rec/config.json") prefixes errors.
Result<ModelConfig> parse_model_config(const std::string& json_text, const std::string& where);

// Whether `name` may be a model's name (above).
bool valid_model_name(const std::string& name);

// The model folders of the repository, sorted; `skipped` receives one line per folder
// left out and why. Fails when DIR is not a readable folder.
Result<std::vector<std::string>> list_models(const std::string& repository, std::vector<std::string>* skipped);

struct ModelFiles {
  ModelConfig config;
  std::vector<std::pair<int64_t, std::string>> versions;  // (version, path of model.onnx), ascending
};

// What to load for model `name`: its configuration and the versions it selects. Errors
// name the model, the file and the field.
Result<ModelFiles> model_files(const std::string& repository, const std::string& name);

}  // namespace bulkhead::serve
