#include "isolate/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "isolate/unique_fd.h"

extern char** environ;

namespace bulkhead::isolate {
namespace {

constexpr int kChildSocketFd = 3;
constexpr int kHighFd = 10;  // where the socket waits before it is moved down to 3

// posix_spawn (vfork-like: no copy of this process's page tables, so starting a worker
// from a large process is cheap and needs no memory overcommit) with the socket as
// descriptor 3, every other descriptor above 2 closed, default signal dispositions and
// an empty signal mask. The worker sets PR_SET_PDEATHSIG itself, first thing, and exits
// if its parent is not `getpid()` any more (the parent went before it could ask).
Result<pid_t> spawn(const std::string& binary, int socket) {
  // A copy at kHighFd or above, so the dup2 onto 3 never overwrites it and always clears
  // close-on-exec (dup2 onto the same descriptor would leave the flag set).
  UniqueFd sock(fcntl(socket, F_DUPFD_CLOEXEC, kHighFd));
  if (!sock.valid())
    return Status(StatusCode::kResourceExhausted, std::string("cannot duplicate a descriptor: ") + std::strerror(errno));
  std::string fd_arg = std::to_string(kChildSocketFd), parent_arg = std::to_string(getpid());
  std::vector<char*> argv = {const_cast<char*>(binary.c_str()), const_cast<char*>("worker"),
                             const_cast<char*>("--fd"),         fd_arg.data(),
                             const_cast<char*>("--parent"),     parent_arg.data(),
                             nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_adddup2(&actions, sock.get(), kChildSocketFd);
  posix_spawn_file_actions_addclosefrom_np(&actions, kChildSocketFd + 1);
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  pid_t pid = -1;
  int err = posix_spawn(&pid, binary.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (err != 0) return Status(StatusCode::kUnavailable, "cannot start the worker program '" + binary + "': " + std::strerror(err));
  return pid;
}

bool executable_file(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(p.c_str(), X_OK) == 0;
}

Result<std::string> check_binary(const std::string& p, const std::string& origin) {
  struct stat st {};
  if (stat(p.c_str(), &st) != 0)
    return not_found("worker program '" + p + "' (" + origin + ") does not exist");
  if (!S_ISREG(st.st_mode) || access(p.c_str(), X_OK) != 0)
    return invalid_argument("worker program '" + p + "' (" + origin + ") is not an executable file");
  return p;
}

}  // namespace

Launcher::Launcher() : thread_([this] { loop(); }) {}

Launcher::~Launcher() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Launcher::loop() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    cv_.wait(l, [&] { return stop_ || job_; });
    if (job_) {
      auto job = std::move(job_);
      job_ = nullptr;
      l.unlock();
      job();
      l.lock();
      job_done_ = true;
      cv_.notify_all();
    } else if (stop_) {
      return;
    }
  }
}

Result<pid_t> Launcher::start(const std::string& binary, int socket) {
  std::lock_guard<std::mutex> call(call_mu_);
  Result<pid_t> result = Status(StatusCode::kInternal, "the launcher did not run");
  std::unique_lock<std::mutex> l(mu_);
  job_done_ = false;
  job_ = [&] { result = spawn(binary, socket); };
  cv_.notify_all();
  // spawn() returns once the child has executed the program (or failed to).
  cv_.wait(l, [&] { return job_done_; });
  return result;
}

Result<std::string> resolve_worker_binary(const std::string& configured) {
  if (!configured.empty()) return check_binary(configured, "worker_binary");
  if (const char* env = std::getenv("BULKHEAD_WORKER"); env && *env) return check_binary(env, "BULKHEAD_WORKER");
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    // The worker program of the same build first (it starts in half the time), then the
    // bulkhead program itself.
    std::string lean = (self.parent_path() / "bulkhead-worker").string();
    if (executable_file(lean)) return lean;
    if (self.filename() == "bulkhead") return self.string();
    std::string sibling = (self.parent_path() / "bulkhead").string();
    if (executable_file(sibling)) return sibling;
  }
  return not_found("process isolation needs the bulkhead program as its worker and found none beside '" +
                   (ec ? std::string("this program") : self.string()) +
                   "': set SessionOptions::worker_binary (session option worker_binary=PATH) or the "
                   "BULKHEAD_WORKER environment variable to the bulkhead program");
}

bool reap_child(pid_t pid, int timeout_ms, std::string* how) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  int sleep_us = 50;
  for (;;) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (WIFSIGNALED(status)) *how = "killed by signal " + std::to_string(WTERMSIG(status));
      else if (WIFEXITED(status)) *how = "exited with code " + std::to_string(WEXITSTATUS(status));
      else *how = "ended";
      return true;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {  // ECHILD: reaped elsewhere (SIGCHLD ignored, or someone's waitpid(-1))
      *how = "ended";
      return true;
    }
    if (Clock::now() >= deadline) return false;
    usleep(sleep_us);
    sleep_us = std::min(sleep_us * 2, 5000);
  }
}

}  // namespace bulkhead::isolate
