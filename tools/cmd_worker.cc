// `bulkhead worker --fd N`: the worker process of a session with process isolation
// (isolate/worker.h). Hidden from --help: process isolation starts it, people do not.
#include "cli.h"
#include "isolate/worker.h"

namespace bulkhead::cli {

void add_worker(CLI::App& app) {
  auto fd = std::make_shared<int>(-1);
  auto parent = std::make_shared<int>(0);
  auto* cmd = app.add_subcommand("worker", "Serve one process-isolated session over an inherited socket");
  cmd->group("");  // hidden
  cmd->add_option("--fd", *fd, "the socket to the supervisor")->required();
  cmd->add_option("--parent", *parent, "the supervisor's pid: exit if it is gone");
  cmd->callback([fd, parent]() {
    int rc = isolate::worker_main(*fd, *parent);
    if (rc) throw CLI::RuntimeError(rc);
  });
}

}  // namespace bulkhead::cli
