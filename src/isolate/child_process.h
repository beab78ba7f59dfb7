// Worker processes: finding the program, starting it, reaping it.
//
// Launcher starts workers from a thread of its own. A worker asks the kernel to kill it
// when its parent dies (PR_SET_PDEATHSIG), and for that the kernel's "parent" is the
// thread that spawned it: starting workers from whichever thread happened to call run()
// would kill a worker as soon as that thread exits. The launcher thread lives as long
// as the Launcher, which its RemoteSession destroys only after its worker is reaped.
//
// Ownership: a Launcher owns its thread. Thread-safety: Launcher::start may be called
// from any thread (calls are serialised); the free functions are thread-safe.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "bulkhead/status.h"

namespace bulkhead::isolate {

class Launcher {
 public:
  Launcher();
  ~Launcher();
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  // Starts `binary worker --fd 3 --parent PID` with `socket` as its descriptor 3 and
  // every other descriptor above 2 closed. Returns the pid once the program is
  // executing; an error naming `binary` when it could not be executed.
  Result<pid_t> start(const std::string& binary, int socket);

 private:
  void loop();

  std::mutex call_mu_;  // one start() at a time
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;  // guarded by mu_
  bool job_done_ = false;      // guarded by mu_
  bool stop_ = false;          // guarded by mu_
  std::thread thread_;
};

// The worker program for SessionOptions::worker_binary `configured`: itself when set;
// else $BULKHEAD_WORKER; else a `bulkhead-worker` beside this program (the worker alone,
// quicker to start); else this program when it is named `bulkhead`; else a `bulkhead`
// beside this program. The error says how to set it.
Result<std::string> resolve_worker_binary(const std::string& configured);

// Waits up to `timeout_ms` for `pid` to end and reaps it. True when reaped (or already
// gone); `how` then says how it ended: "killed by signal 9", "exited with code 1".
bool reap_child(pid_t pid, int timeout_ms, std::string* how);

}  // namespace bulkhead::isolate
