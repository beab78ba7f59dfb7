#include "io/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace bulkhead::io {
namespace {

// What a non-regular file is, for the message refusing it.
const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

std::string quoted(const std::string& what, const std::string& path) { return what + " '" + path + "'"; }

// The real path of `p` (every symlink resolved), or "" when it cannot be resolved.
std::string real_path(const std::string& p) {
  char buf[PATH_MAX];
  return ::realpath(p.c_str(), buf) ? std::string(buf) : std::string();
}

// The real path of an open descriptor, from /proc; "" where /proc is not mounted.
std::string fd_path(int fd) {
  char link[64], buf[PATH_MAX];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = ::readlink(link, buf, sizeof buf - 1);
  if (n <= 0) return {};
  return std::string(buf, static_cast<size_t>(n));
}

bool inside(const std::string& real, const std::string& real_dir) {
  if (real_dir == "/") return !real.empty() && real[0] == '/';
  return real.size() > real_dir.size() && real.compare(0, real_dir.size(), real_dir) == 0 && real[real_dir.size()] == '/';
}

}  // namespace

std::string format_bytes(uint64_t b) {
  char s[64];
  if (b < 1024) std::snprintf(s, sizeof s, "%llu B", static_cast<unsigned long long>(b));
  else if (b < (uint64_t{1} << 20)) std::snprintf(s, sizeof s, "%.1f KiB", static_cast<double>(b) / 1024.0);
  else if (b < (uint64_t{1} << 30)) std::snprintf(s, sizeof s, "%.1f MiB", static_cast<double>(b) / (1024.0 * 1024.0));
  else std::snprintf(s, sizeof s, "%.1f GiB", static_cast<double>(b) / (1024.0 * 1024.0 * 1024.0));
  return s;
}

RegularFile::RegularFile(RegularFile&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)), size_(o.size_), path_(std::move(o.path_)) {}

RegularFile& RegularFile::operator=(RegularFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    size_ = o.size_;
    path_ = std::move(o.path_);
  }
  return *this;
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

Result<RegularFile> RegularFile::open(const std::string& path, uint64_t max_bytes, const std::string& what) {
  if (path.empty()) return invalid_argument(what + ": the path is empty");
  // Look before opening: opening a device or a FIFO can block or have effects.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    int e = errno;
    if (e == ENOENT || e == ENOTDIR) return not_found(quoted(what, path) + " does not exist");
    return not_found("cannot open " + quoted(what, path) + ": " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) return invalid_argument(quoted(what, path) + " is " + kind_of(st.st_mode) + ", not a regular file");
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return not_found("cannot open " + quoted(what, path) + ": " + std::strerror(errno));
  RegularFile f;
  f.fd_ = fd;
  f.path_ = path;
  // Again on what was opened: the path may have been replaced in between.
  if (::fstat(fd, &st) != 0) return not_found("cannot open " + quoted(what, path) + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return invalid_argument(quoted(what, path) + " is " + kind_of(st.st_mode) + ", not a regular file");
  f.size_ = static_cast<uint64_t>(st.st_size);
  if (f.size_ > max_bytes)
    return invalid_argument(quoted(what, path) + " is " + format_bytes(f.size_) + ", more than the limit of " +
                            format_bytes(max_bytes) + " on files bulkhead reads");
  return f;
}

Result<RegularFile> RegularFile::open_inside(const std::string& dir, const std::string& relative, uint64_t max_bytes,
                                             const std::string& what) {
  if (relative.empty()) return invalid_model(what + ": the path is empty");
  if (relative[0] == '/')
    return invalid_model(quoted(what, relative) + " is an absolute path; it must be relative to the model's folder");
  if (relative.find('\0') != std::string::npos) return invalid_model(what + ": the path holds a NUL byte");
  const std::string real_dir = real_path(dir.empty() ? "." : dir);
  if (real_dir.empty()) return not_found("cannot resolve the model's folder '" + dir + "': " + std::strerror(errno));
  const std::string full = (dir.empty() ? "." : dir) + "/" + relative;
  // Resolve first, so that nothing outside the folder is even opened.
  std::string real = real_path(full);
  if (real.empty()) {
    int e = errno;
    if (e == ENOENT || e == ENOTDIR) return not_found(quoted(what, relative) + " does not exist in the model's folder '" + dir + "'");
    return not_found("cannot open " + quoted(what, full) + ": " + std::strerror(e));
  }
  auto outside = [&](const std::string& r) {
    return invalid_model(quoted(what, relative) + " resolves to '" + r + "', outside the model's folder '" + real_dir + "'");
  };
  if (!inside(real, real_dir)) return outside(real);
  BH_ASSIGN_OR_RETURN(RegularFile f, open(real, max_bytes, what));
  // What was opened is still inside (a symlink swapped in between would show here).
  std::string opened = fd_path(f.fd());
  if (!opened.empty() && !inside(opened, real_dir)) return outside(opened);
  f.path_ = full;
  return f;
}

Status RegularFile::read_at(uint64_t offset, void* dst, size_t n) const {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    size_t chunk = n < (size_t{1} << 30) ? n : (size_t{1} << 30);
    ssize_t r = ::pread(fd_, p, chunk, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return not_found("error reading '" + path_ + "': " + std::strerror(errno));
    if (r == 0) return invalid_argument("'" + path_ + "' ended early (was it truncated while being read?)");
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return Status::ok();
}

Result<std::string> RegularFile::read_all() const {
  std::string s(static_cast<size_t>(size_), '\0');
  BH_RETURN_IF_ERROR(read_at(0, s.data(), s.size()));
  return s;
}

Result<std::string> read_regular_file(const std::string& path, uint64_t max_bytes, const std::string& what) {
  BH_ASSIGN_OR_RETURN(RegularFile f, RegularFile::open(path, max_bytes, what));
  return f.read_all();
}

}  // namespace bulkhead::io
