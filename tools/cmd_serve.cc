// bulkhead serve: the model server (src/serve/server.h).
#include <malloc.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "cli.h"
#include "common/parse.h"
#include "serve/server.h"

namespace bulkhead::cli {

void add_serve(CLI::App& app) {
  struct ServeArgs {
    std::string repository, host = "127.0.0.1", max_body = "256M", max_json = "64M";
    int http_port = 8000, grpc_port = -1, http_threads = 64;
    bool check_on_load = false;
  };
  auto a = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand(
      "serve", "serve the models of a repository over the Open Inference Protocol (KServe v2: HTTP/REST, and gRPC)");
  cmd->add_option("--model-repository", a->repository, "DIR/<model>/<version>/model.onnx, optional DIR/<model>/config.json")
      ->required();
  cmd->add_option("--http-port", a->http_port, "port for HTTP (default 8000; 0: any free port, printed)");
  cmd->add_option("--grpc-port", a->grpc_port, "port for gRPC (default: no gRPC; 0: any free port, printed)");
  cmd->add_option("--host", a->host, "address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)");
  cmd->add_option("--http-threads", a->http_threads, "HTTP connections, and gRPC requests, served at once (default 64)");
  cmd->add_option("--max-body", a->max_body, "largest request body accepted, e.g. 256M (default)");
  cmd->add_option("--max-json", a->max_json, "largest JSON part of a request parsed (default 64M; tensors beyond go binary)");
  cmd->add_flag("--check-on-load", a->check_on_load,
                "run bulkhead check's quick schedules on each model before serving it; refuse one that is not clean");
  cmd->callback([a]() {
    if (a->http_port < 0 || a->http_port > 65535)
      throw CLI::RuntimeError(fail("serve", "--http-port must be in [0, 65535]"));
    if (a->grpc_port < -1 || a->grpc_port > 65535)
      throw CLI::RuntimeError(fail("serve", "--grpc-port must be in [0, 65535]"));
    if (a->http_threads < 1 || a->http_threads > 4096)
      throw CLI::RuntimeError(fail("serve", "--http-threads must be in [1, 4096]"));
    uint64_t max_body = 0;
    if (!parse_byte_size(a->max_body, &max_body) || max_body == 0)
      throw CLI::RuntimeError(fail("serve", "--max-body '" + a->max_body + "' is not a size such as 64M"));
    // SIGTERM and SIGINT end the server gracefully: blocked in every thread (set before any
    // starts) and taken by one that stops the listener; in-flight requests finish.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

    // Requests run on whichever of the HTTP threads took them, and glibc gives threads
    // heaps of their own (up to 8 per core), each keeping what its requests freed: resident
    // memory then climbs for as long as new threads keep meeting new heaps. Two heaps
    // (this program owns the process) keep it at what the models need.
    mallopt(M_ARENA_MAX, 2);
    // Requests' tensors (up to 32 MiB each) come from those heaps and go back to them, not
    // to fresh pages from the kernel each time: a 16 MiB request and its response had cost
    // ~200 ms of page faults on a virtual machine. What a burst leaves is given back beyond
    // 256 MiB of free heap, and whenever a model is unloaded (malloc_trim).
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    serve::ServerOptions o;
    o.repository = a->repository;
    o.host = a->host;
    o.http_port = a->http_port;
    o.grpc_port = a->grpc_port;
    o.http_threads = a->http_threads;
    o.max_body_bytes = max_body;
    uint64_t max_json = 0;
    if (!parse_byte_size(a->max_json, &max_json) || max_json == 0)
      throw CLI::RuntimeError(fail("serve", "--max-json '" + a->max_json + "' is not a size such as 16M"));
    o.max_json_bytes = max_json;
    o.check_on_load = a->check_on_load;
    serve::Server server(o);
    if (Status st = server.start(); !st.is_ok()) throw CLI::RuntimeError(fail("serve", st));
    std::printf("bulkhead serve: listening on http://%s:%d\n", a->host.c_str(), server.http_port());
    if (server.grpc_port() > 0) std::printf("bulkhead serve: gRPC on %s:%d\n", a->host.c_str(), server.grpc_port());
    std::fflush(stdout);
    std::atomic<bool> ending{false};
    std::thread watcher([&server, &ending, stop_signals] {
      int sig = 0;
      sigwait(&stop_signals, &sig);
      if (ending) return;  // woken to end (below)
      std::fprintf(stderr, "%s\n",
                   serve::log_line("info", "stopping", "",
                                   std::string(sig == SIGTERM ? "SIGTERM" : "SIGINT") +
                                       ": stopping (in-flight requests finish)")
                       .c_str());
      server.stop();
    });
    Status st = server.serve();
    // The watcher may still wait: wake it with a signal it takes as "end".
    ending = true;
    pthread_kill(watcher.native_handle(), SIGTERM);
    watcher.join();
    if (!st.is_ok()) throw CLI::RuntimeError(fail("serve", st));
    std::printf("bulkhead serve: stopped\n");
    throw CLI::RuntimeError(0);
  });
}

}  // namespace bulkhead::cli
