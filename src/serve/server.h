// `bulkhead serve`: models from a repository (serve/repository.h) served over the Open
// Inference Protocol (KServe v2): its REST binding, with the binary tensor data and model
// repository extensions, and Prometheus metrics; and, when a gRPC port is given, its gRPC
// binding (serve/grpc_service.h) on the same models.
//
//   GET  /v2/health/live                        200 while the process serves HTTP
//   GET  /v2/health/ready                       200 once startup loading is over and every
//                                               loaded model is ready; else 400
//   GET  /v2                                    {"name", "version", "extensions"}
//   GET  /v2/models/{m}[/versions/{v}]          metadata: inputs and outputs with
//                                               datatype and shape (-1: free)
//   GET  /v2/models/{m}[/versions/{v}]/ready    200 ready, 400 not (404 unknown)
//   POST /v2/models/{m}[/versions/{v}]/infer    inference (serve/oip.h)
//   POST /v2/repository/index                   [{"name", "version", "state", "reason"}]
//   POST /v2/repository/models/{m}/load         (re)loads the model from the repository
//   POST /v2/repository/models/{m}/unload       drains and unloads it
//   GET  /metrics                               Prometheus text format
//   GET  /                                      a dashboard page (serve/dashboard.h)
//   GET  /status.json                           what the dashboard shows, per model version
//
// Errors are {"error": "<one line>"}: 400 for the client's mistakes (malformed JSON, an
// unknown input, a wrong datatype or shape), 404 for an unknown model or version, 413 for
// a body over the limit, 503 when a model's queue is full or it is not ready, 504 when a
// request passes its time limit, 500 when a run fails otherwise (a crashed worker). A
// model's failure reaches only its own requests (DESIGN.md I9).
//
// Ownership: the Server owns its Env, its models and its HTTP listener. Thread-safety:
// stop() may be called from any thread (a signal-watching one); everything else is for
// the thread that made the Server.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bulkhead/bulkhead.hpp"
#include "memory/caching_allocator.h"
#include "serve/model_host.h"

namespace httplib {
class Server;
}

namespace bulkhead::serve {

class GrpcFrontend;

struct ServerOptions {
  std::string repository;
  std::string host = "127.0.0.1";
  int http_port = 8000;          // 0: any free port (see Server::http_port())
  int grpc_port = -1;            // -1: no gRPC; 0: any free port (see Server::grpc_port())
  int http_threads = 64;         // connections served at once (keep-alive ones hold one)
  uint64_t max_body_bytes = uint64_t{256} << 20;
  uint64_t max_json_bytes = uint64_t{64} << 20;  // of that, the JSON part (parsed into a document)
  std::vector<std::string> backend_libs;  // plugins to load into the Env
  bool check_on_load = false;             // serve/repository.h: `--check-on-load`
  // Where log lines go (loads, unloads, failed runs, worker restarts), one JSON object a
  // line (log_line below); null: stderr.
  std::function<void(const std::string&)> log;
};

// A structured log line: {"time": "2026-12-04T21:10:00.123Z", "level": "info"|"error",
// "event": "model_ready"|..., "model": "<name>" (when there is one), "message": "..."}.
std::string log_line(const char* level, const std::string& event, const std::string& model, const std::string& message);

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Loads every model of the repository (a model that fails is logged and listed with its
  // reason; the others load), then binds the HTTP port. Fails only when the repository
  // cannot be read or the port cannot be bound.
  Status start();
  int http_port() const { return port_; }
  int grpc_port() const { return grpc_port_; }  // -1 when gRPC is off
  // Serves until stop(); returns when the listeners have closed and in-flight requests are
  // answered.
  Status serve();
  // Stops accepting; in-flight requests finish. Safe from any thread, more than once.
  void stop();

  // What both protocol bindings answer from; safe from any thread.
  // The host serving model `m` at version `v` (empty: the highest loaded): kNotFound for an
  // unknown model or version, or one not loaded; kUnavailable while it is loading.
  Result<std::shared_ptr<ModelHost>> lookup(const std::string& m, const std::string& v) const;
  // Startup loading is over and every loaded model version is ready.
  bool ready() const;
  // The versions of `name` loaded now, ascending.
  std::vector<std::string> versions(const std::string& name) const;
  // The repository index: every model folder and every model known, a row per loaded
  // version (state READY, UNAVAILABLE, LOADING or UNLOADING, with the reason when not ready).
  struct IndexEntry {
    std::string name, version, state, reason;
  };
  std::vector<IndexEntry> index(bool only_ready) const;
  // Runs a checked request on `host`, logging a failed run (not a full queue).
  Result<NamedTensors> run(ModelHost& host, const NamedTensors& inputs, const std::vector<std::string>& outputs) const;
  void log(const char* level, const std::string& event, const std::string& model, const std::string& message) const;

  // The model repository extension, also used by start().
  Status load_model(const std::string& name);
  Status unload_model(const std::string& name);

  struct ModelState {
    std::string name;
    std::string state;   // "LOADING", "READY", "UNAVAILABLE", "UNLOADING"
    std::string reason;  // why UNAVAILABLE
    std::string check;   // the last check on load: "clean", "contaminated", "error", "" (none)
    std::vector<std::shared_ptr<ModelHost>> versions;  // ascending version
  };
  std::vector<ModelState> models() const;

 private:
  void routes();
  // The host serving (m, v); v empty = the highest version. Sets an HTTP status and
  // message when there is none.
  std::shared_ptr<ModelHost> find(const std::string& m, const std::string& v, int* status, std::string* error) const;
  std::string metrics_text() const;
  // `--check-on-load` for one version (whose loaded host declares `inputs`): OK when clean;
  // `verdict` gets the check's verdict.
  Status check_version(const std::string& name, int64_t version, const std::string& path, const ModelConfig& config,
                       const std::vector<IoInfo>& inputs, std::string* verdict) const;

  ServerOptions options_;
  Env env_;
  std::unique_ptr<httplib::Server> http_;
  // REST request bodies of known length (their binary inputs are views of them): freed
  // blocks of up to kBodyCacheBytes are kept for the next request of the same size class.
  static constexpr size_t kBodyCacheBytes = size_t{64} << 20;
  std::shared_ptr<CachingHostAllocator> body_cache_ =
      std::make_shared<CachingHostAllocator>("request bodies", kBodyCacheBytes);
  int port_ = -1;
  std::unique_ptr<GrpcFrontend> grpc_;
  int grpc_port_ = -1;
  std::atomic<bool> started_{false};
  mutable std::mutex mu_;
  std::map<std::string, ModelState> models_;
  std::mutex load_mu_;  // one load or unload at a time
  // Brings process-isolated models' dead workers back (ModelHost::check_workers) every
  // kMonitorMs, so that readiness follows the workers without waiting for a request.
  static constexpr int kMonitorMs = 100;
  void monitor();
  std::thread monitor_;
  std::mutex monitor_mu_;
  std::condition_variable monitor_cv_;
  bool monitor_stop_ = false;
};

}  // namespace bulkhead::serve
