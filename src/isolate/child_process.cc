#include "isolate/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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

namespace bulkhead::isolate {
namespace {

constexpr int kChildSocketFd = 3;
constexpr int kChildStatusFd = 4;   // exec failure report, close-on-exec
constexpr int kHighFd = 10;         // where descriptors wait before being moved down
constexpr int kExecReportMs = 10000;

[[noreturn]] void child_fail(int err) {
  ssize_t ignored = write(kChildStatusFd, &err, sizeof err);
  (void)ignored;
  _exit(127);
}

// Runs in the forked child: async-signal-safe calls only (no allocation, no locks).
[[noreturn]] void exec_child(pid_t parent, int socket_fd, int status_fd, const char* path, char* const argv[]) {
  // Die with the parent (thread): see child_process.h. The check after it closes the
  // race where the parent went before the request was made.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) _exit(127);
  if (getppid() != parent) _exit(127);
  if (dup3(status_fd, kChildStatusFd, O_CLOEXEC) < 0) _exit(127);
  if (dup2(socket_fd, kChildSocketFd) < 0) child_fail(errno);  // dup2 clears close-on-exec
  if (syscall(SYS_close_range, kChildStatusFd + 1, ~0U, 0) != 0) {
    long max = sysconf(_SC_OPEN_MAX);
    for (long fd = kChildStatusFd + 1; fd < (max > 0 && max < 65536 ? max : 65536); ++fd) close(static_cast<int>(fd));
  }
  // The parent's thread may block signals, and the mask survives exec.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGPIPE, SIG_DFL);
  execv(path, argv);
  child_fail(errno);
}

// A copy of `fd` at kHighFd or above, so the child can move descriptors to 3 and 4
// without overwriting one it still needs.
Result<UniqueFd> raise_fd(int fd) {
  int r = fcntl(fd, F_DUPFD_CLOEXEC, kHighFd);
  if (r < 0) return Status(StatusCode::kResourceExhausted, std::string("cannot duplicate a descriptor: ") + std::strerror(errno));
  return UniqueFd(r);
}

Result<pid_t> spawn(const std::string& binary, int socket) {
  BH_ASSIGN_OR_RETURN(UniqueFd sock, raise_fd(socket));
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0)
    return Status(StatusCode::kResourceExhausted, std::string("cannot create a pipe: ") + std::strerror(errno));
  UniqueFd report_read(p[0]), report_write_low(p[1]);
  BH_ASSIGN_OR_RETURN(UniqueFd report_write, raise_fd(report_write_low.get()));
  report_write_low.reset();

  std::string fd_arg = std::to_string(kChildSocketFd);
  std::vector<char*> argv = {const_cast<char*>(binary.c_str()), const_cast<char*>("worker"),
                             const_cast<char*>("--fd"), fd_arg.data(), nullptr};
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return Status(StatusCode::kResourceExhausted, std::string("cannot start a worker process: ") + std::strerror(errno));
  if (pid == 0) exec_child(parent, sock.get(), report_write.get(), binary.c_str(), argv.data());
  report_write.reset();

  // The report pipe closes on a successful exec, or carries errno when it failed.
  pollfd pf{report_read.get(), POLLIN, 0};
  int ready;
  do ready = poll(&pf, 1, kExecReportMs);
  while (ready < 0 && errno == EINTR);
  int err = 0;
  ssize_t n = ready > 0 ? read(report_read.get(), &err, sizeof err) : -1;
  if (n == 0) return pid;
  std::string how;
  if (n != static_cast<ssize_t>(sizeof err)) {
    kill(pid, SIGKILL);
    reap_child(pid, 5000, &how);
    return Status(StatusCode::kUnavailable, "worker program '" + binary + "' did not start within " +
                                                std::to_string(kExecReportMs) + " ms");
  }
  reap_child(pid, 5000, &how);
  return Status(StatusCode::kUnavailable, "cannot start the worker program '" + binary + "': " + std::strerror(err));
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
  // spawn() itself is bounded (kExecReportMs), so this wait is too.
  cv_.wait(l, [&] { return job_done_; });
  return result;
}

Result<std::string> resolve_worker_binary(const std::string& configured) {
  if (!configured.empty()) return check_binary(configured, "worker_binary");
  if (const char* env = std::getenv("BULKHEAD_WORKER"); env && *env) return check_binary(env, "BULKHEAD_WORKER");
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
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
