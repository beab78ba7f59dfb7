// bulkhead-worker: the worker process of a session with process isolation
// (isolate/worker.h), as a program of its own — `bulkhead worker` without the rest of the
// command line tool (the server's HTTP and gRPC libraries among it), so that a worker,
// started again each time one crashes, starts in half the time. Process isolation
// starts it (isolate/child_process.h), people do not:
//   bulkhead-worker worker --fd N [--parent PID]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "isolate/worker.h"

namespace {

bool integer(const char* s, long lo, long hi, int* out) {
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (!*s || *end || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

int usage(const char* why) {
  std::fprintf(stderr, "bulkhead-worker: %s (usage: bulkhead-worker worker --fd N [--parent PID]; "
                       "process isolation starts it)\n", why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "worker") != 0) return usage("expected the 'worker' command");
  int fd = -1, parent = 0;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage(("'" + a + "' needs a value").c_str());
    const char* v = argv[++i];
    if (a == "--fd") {
      if (!integer(v, 0, 1 << 20, &fd)) return usage("--fd must be a descriptor number");
    } else if (a == "--parent") {
      if (!integer(v, 0, 1 << 30, &parent)) return usage("--parent must be a process id");
    } else {
      return usage(("unknown option '" + a + "'").c_str());
    }
  }
  if (fd < 0) return usage("--fd is required");
  return bulkhead::isolate::worker_main(fd, parent);
}
