#include "isolate/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14
#endif

namespace bulkhead::isolate {
namespace {

constexpr int kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL;

std::string errno_text(int err) { return std::strerror(err); }

size_t page_size() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

size_t page_round(size_t n) { return (std::max<size_t>(n, 1) + page_size() - 1) / page_size() * page_size(); }

// The memfd of an allocate()d region travels in Buffer::handle() as fd + 1 (0 = none).
void* fd_handle(int fd) { return reinterpret_cast<void*>(static_cast<intptr_t>(fd) + 1); }
int handle_fd(void* handle) { return static_cast<int>(reinterpret_cast<intptr_t>(handle)) - 1; }

}  // namespace

Result<UniqueFd> SharedMemory::create_region(size_t size) {
  UniqueFd fd(memfd_create("bulkhead-tensors", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return Status(StatusCode::kResourceExhausted, "memfd_create failed: " + errno_text(errno));
  if (ftruncate(fd.get(), static_cast<off_t>(page_round(size))) != 0)
    return Status(StatusCode::kResourceExhausted,
                  "cannot size a shared-memory region of " + std::to_string(size) + " bytes: " + errno_text(errno));
  return fd;
}

Status SharedMemory::write(int region, size_t offset, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n) {
    ssize_t w = pwrite(region, p, n, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0)
      return Status(StatusCode::kResourceExhausted, "cannot write to a shared-memory region: " + errno_text(w < 0 ? errno : ENOSPC));
    p += w;
    offset += static_cast<size_t>(w);
    n -= static_cast<size_t>(w);
  }
  return Status::ok();
}

Status SharedMemory::seal(int region) {
  if (fcntl(region, F_ADD_SEALS, kSeals) != 0) return internal_error("cannot seal a shared-memory region: " + errno_text(errno));
  return Status::ok();
}

Result<std::shared_ptr<Buffer>> SharedMemory::allocate(size_t size, size_t alignment) {
  if (alignment > page_size())
    return invalid_argument("shared-memory alignment " + std::to_string(alignment) + " exceeds a page");
  BH_ASSIGN_OR_RETURN(UniqueFd fd, create_region(size));
  const size_t bytes = page_round(size);
  // Populated now, in one call, rather than one fault per page at the first write.
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd.get(), 0);
  if (p == MAP_FAILED)
    return Status(StatusCode::kResourceExhausted,
                  "cannot map a shared-memory region of " + std::to_string(bytes) + " bytes: " + errno_text(errno));
  return std::make_shared<Buffer>(shared_from_this(), domain_, p, bytes, fd_handle(fd.release()));
}

Result<UniqueFd> SharedMemory::reopen_readonly(int region) {
  // Opening the descriptor's /proc entry makes a new open file of the same memfd, with
  // its own access mode; a dup() would share the writable one.
  const std::string path = "/proc/self/fd/" + std::to_string(region);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status(StatusCode::kUnavailable, "cannot reopen a shared region read-only: " + std::string(std::strerror(errno)));
  return UniqueFd(fd);
}

int SharedMemory::fd_of(const Buffer& region) {
  if (!region.handle() || dynamic_cast<const SharedMemory*>(region.allocator()) == nullptr) return -1;
  return handle_fd(region.handle());
}

void SharedMemory::release(void* data, void* handle, size_t size) {
  if (data) munmap(data, size);
  if (handle) close(handle_fd(handle));
}

Result<std::shared_ptr<Buffer>> SharedMemory::map(UniqueFd fd, size_t size, const std::string& what) {
  int seals = fcntl(fd.get(), F_GET_SEALS);
  if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_WRITE)) != (F_SEAL_SHRINK | F_SEAL_WRITE))
    return internal_error(what + ": the shared-memory region is not sealed");
  struct stat st {};
  if (fstat(fd.get(), &st) != 0 || static_cast<size_t>(st.st_size) < size)
    return internal_error(what + ": the shared-memory region holds " + std::to_string(st.st_size) + " bytes, " +
                          std::to_string(size) + " expected");
  const size_t bytes = page_round(static_cast<size_t>(st.st_size));
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd.get(), 0);
  if (p == MAP_FAILED)
    return Status(StatusCode::kResourceExhausted, what + ": cannot map " + std::to_string(bytes) + " bytes: " + errno_text(errno));
  // Map the region's pages in now (read-only sharing, no copy) rather than one fault per
  // few pages later; a write still copies just the page written. Best effort: older
  // kernels lack it and fault lazily.
  if (size >= (size_t{1} << 16)) madvise(p, bytes, MADV_POPULATE_READ);
  return std::make_shared<Buffer>(shared_from_this(), domain_, p, bytes, nullptr);
}

Result<std::shared_ptr<Buffer>> SharedMemory::map_kept(UniqueFd fd, size_t size, const std::string& what, int prot) {
  struct stat st {};
  if (fstat(fd.get(), &st) != 0 || static_cast<size_t>(st.st_size) < size)
    return internal_error(what + ": the shared-memory region holds " + std::to_string(st.st_size) + " bytes, " +
                          std::to_string(size) + " expected");
  const size_t bytes = page_round(static_cast<size_t>(st.st_size));
  void* p = mmap(nullptr, bytes, prot, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED)
    return Status(StatusCode::kResourceExhausted, what + ": cannot map " + std::to_string(bytes) + " bytes: " + errno_text(errno));
  if (bytes >= (size_t{1} << 16)) madvise(p, bytes, MADV_POPULATE_READ);  // best effort, as in map()
  return std::make_shared<Buffer>(shared_from_this(), domain_, p, bytes, nullptr);
}

Result<std::shared_ptr<Buffer>> SharedMemory::map_readonly(UniqueFd fd, size_t size, const std::string& what) {
  return map_kept(std::move(fd), size, what, PROT_READ);
}

Result<std::shared_ptr<Buffer>> SharedMemory::map_shared(UniqueFd fd, size_t size, const std::string& what) {
  return map_kept(std::move(fd), size, what, PROT_READ | PROT_WRITE);
}

}  // namespace bulkhead::isolate
