// Reading the files users and models name, safely: regular files only (never a device,
// FIFO, socket or directory, which can block or never end), no larger than a limit the
// caller sets, and — for files a model refers to, such as external data — only inside the
// model's folder, with symlinks resolved before the check.
// RegularFile is move-only and thread-compatible; read_at() may be called from several
// threads at once (pread).
#pragma once

#include <cstdint>
#include <string>

#include "bulkhead/status.h"

namespace bulkhead::io {

// The default limit on any one file bulkhead reads (a model, its external data, an
// input): generous, but a bound (SessionOptions::max_file_bytes, --max-file-size).
inline constexpr uint64_t kDefaultMaxFileBytes = uint64_t{64} << 30;

// "1.5 GiB", "300 B": for messages about sizes.
std::string format_bytes(uint64_t bytes);

class RegularFile {
 public:
  RegularFile() = default;
  RegularFile(RegularFile&& o) noexcept;
  RegularFile& operator=(RegularFile&& o) noexcept;
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;
  ~RegularFile();

  // Opens `path` for reading. not_found when it does not exist; invalid_argument when it
  // is not a regular file or is larger than `max_bytes`. `what` starts each message
  // ("model", "input 'x'"); the path is always named.
  static Result<RegularFile> open(const std::string& path, uint64_t max_bytes, const std::string& what);
  // Opens `relative` (a path a model wrote) inside the folder `dir`: absolute paths and
  // any path whose real location — every symlink resolved — is not inside the real
  // location of `dir` are refused, as are non-regular files and files over `max_bytes`.
  static Result<RegularFile> open_inside(const std::string& dir, const std::string& relative, uint64_t max_bytes,
                                         const std::string& what);

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }
  // The path as given, for messages.
  const std::string& path() const { return path_; }
  // Reads exactly `n` bytes at `offset`; an error (naming the file) on a short read.
  Status read_at(uint64_t offset, void* dst, size_t n) const;
  // The whole file.
  Result<std::string> read_all() const;

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
  std::string path_;
};

// Reads the whole regular file at `path` (RegularFile::open's checks).
Result<std::string> read_regular_file(const std::string& path, uint64_t max_bytes, const std::string& what);

}  // namespace bulkhead::io
