#include "io/file_set.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <memory>
#include <set>

namespace bulkhead::io {
namespace {

// The files a write in progress would leave behind if the process ended now: its
// temporaries, then the final files it has already renamed into place. Published for the
// signal handler, which may only read atomics and call unlink().
struct Pending {
  size_t n = 0;
  std::unique_ptr<std::atomic<const char*>[]> paths;
};
std::atomic<Pending*> g_pending{nullptr};

void on_signal(int sig) {
  if (Pending* p = g_pending.load(std::memory_order_acquire))
    for (size_t i = 0; i < p->n; ++i)
      if (const char* path = p->paths[i].load(std::memory_order_acquire)) ::unlink(path);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

std::string dir_of(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}

std::string base_of(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

Status write_whole(const std::string& tmp, const std::string& final_path, const std::string& bytes) {
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Status(StatusCode::kNotFound, "cannot write '" + final_path + "': " + std::strerror(errno));
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t w = ::write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int e = w < 0 ? errno : ENOSPC;
      ::close(fd);
      return Status(StatusCode::kResourceExhausted, "cannot write '" + final_path + "': " + std::strerror(e));
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
  if (::close(fd) != 0)
    return Status(StatusCode::kResourceExhausted, "cannot write '" + final_path + "': " + std::strerror(errno));
  return Status::ok();
}

}  // namespace

std::string safe_file_name(const std::string& name) {
  std::string s;
  for (unsigned char c : name) {
    bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
    s += keep ? static_cast<char>(c) : '_';
  }
  if (s.empty() || s[0] == '.') s.insert(s.begin(), '_');
  return s;
}

Status write_files_all_or_nothing(const std::vector<std::pair<std::string, std::string>>& files) {
  std::set<std::string> seen;
  for (const auto& [path, bytes] : files)
    if (!seen.insert(path).second) return invalid_argument("two outputs would both be written to '" + path + "'");

  const size_t n = files.size();
  std::vector<std::string> tmps;
  tmps.reserve(n);
  for (size_t i = 0; i < n; ++i)
    tmps.push_back(dir_of(files[i].first) + "." + base_of(files[i].first) + ".tmp." + std::to_string(::getpid()) + "." +
                   std::to_string(i));
  // Slots 0..n-1: temporaries; n..2n-1: final files once renamed.
  auto pending = std::make_unique<Pending>();
  pending->n = 2 * n;
  pending->paths = std::make_unique<std::atomic<const char*>[]>(2 * n);
  for (size_t i = 0; i < 2 * n; ++i) pending->paths[i].store(nullptr);
  g_pending.store(pending.get(), std::memory_order_release);

  auto undo = [&](size_t renamed) {
    for (size_t i = 0; i < n; ++i) ::unlink(tmps[i].c_str());
    for (size_t i = 0; i < renamed; ++i) ::unlink(files[i].first.c_str());
    g_pending.store(nullptr, std::memory_order_release);
  };
  for (size_t i = 0; i < n; ++i) {
    pending->paths[i].store(tmps[i].c_str(), std::memory_order_release);
    Status s = write_whole(tmps[i], files[i].first, files[i].second);
    if (!s.is_ok()) {
      undo(0);
      return s;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    pending->paths[n + i].store(files[i].first.c_str(), std::memory_order_release);
    if (::rename(tmps[i].c_str(), files[i].first.c_str()) != 0) {
      int e = errno;
      undo(i);
      return Status(StatusCode::kNotFound, "cannot write '" + files[i].first + "': " + std::strerror(e) +
                                               " (no output was written)");
    }
  }
  g_pending.store(nullptr, std::memory_order_release);
  return Status::ok();
}

void remove_temporaries_on_signals() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    ::sigaction(sig, &sa, nullptr);
  }
  ::signal(SIGXFSZ, SIG_IGN);
}

}  // namespace bulkhead::io
