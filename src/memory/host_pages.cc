#include "memory/host_pages.h"

#include <malloc.h>  // malloc_trim
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace bulkhead {
namespace {

constexpr size_t kHuge = kHugePageBytes;
constexpr size_t kPage = 4096;
// The largest fresh block host_fresh_alloc maps in at once.
constexpr size_t kPrefaultMaxBytes = size_t{64} << 20;

#if defined(BULKHEAD_SANITIZE_ADDRESS) || defined(BULKHEAD_SANITIZE_THREAD)
constexpr bool kEnabled = false;
#else
constexpr bool kEnabled = true;
#endif

size_t map_length(size_t size) { return (size + kPage - 1) / kPage * kPage; }

// madvise(advice) on the whole 4 KiB pages inside [p, p + size).
void advise_whole_pages(void* p, size_t size, int advice) {
  const uintptr_t b = (reinterpret_cast<uintptr_t>(p) + kPage - 1) & ~(kPage - 1);
  const uintptr_t e = (reinterpret_cast<uintptr_t>(p) + size) & ~(kPage - 1);
  if (e > b) (void)::madvise(reinterpret_cast<void*>(b), e - b, advice);
}

// A mapping of `size` bytes starting on a 2 MiB boundary, advised as huge pages.
void* map_huge(size_t size, int extra_flags) {
  const size_t len = map_length(size);
  // Over-map by one huge page and cut the mapping down to a 2 MiB-aligned start.
  void* raw = ::mmap(nullptr, len + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | extra_flags, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t base = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t start = (base + kHuge - 1) & ~(kHuge - 1);
  if (start > base) ::munmap(raw, start - base);
  const uintptr_t end = base + len + kHuge;
  if (end > start + len) ::munmap(reinterpret_cast<void*>(start + len), end - (start + len));
  void* p = reinterpret_cast<void*>(start);
  // Advice only: where the kernel has no huge pages (or THP is off) the block simply gets
  // 4 KiB pages.
  ::madvise(p, len, MADV_HUGEPAGE);
  return p;
}

}  // namespace

void trim_malloc_heaps() {
#if defined(__GLIBC__)
  if (kEnabled) malloc_trim(0);
#endif
}

bool host_pages_serve(size_t size, size_t alignment) { return kEnabled && size >= kHuge && alignment <= kHuge; }

void* host_pages_alloc(size_t size) { return map_huge(size, 0); }

void* host_pages_reserve(size_t size) { return kEnabled ? map_huge(size, MAP_NORESERVE) : nullptr; }

void host_pages_discard(void* p, size_t size) { advise_whole_pages(p, size, MADV_DONTNEED); }

void host_pages_free(void* p, size_t size) {
  if (p) ::munmap(p, map_length(size));
}

void* host_fresh_alloc(size_t size, size_t alignment, bool* from_pages) {
  *from_pages = host_pages_serve(size, alignment);
  void* p = *from_pages ? host_pages_alloc(size)
                        : std::aligned_alloc(alignment, (std::max<size_t>(size, 1) + alignment - 1) / alignment * alignment);
  // Written in full right after: mapping a fresh block in at once saves a fault per page
  // (a session's first run). A larger block (a hostile shape's) may fail before any write.
  if (p && size <= kPrefaultMaxBytes) prefault_for_write(p, size);
  return p;
}

void* host_block_alloc(size_t size) {
  bool from_pages = false;
  return host_fresh_alloc(size, kBlockAlign, &from_pages);
}

void host_block_discard(void* p, size_t size) {
  if (p && host_pages_serve(size, kBlockAlign)) host_pages_discard(p, map_length(size));
}

void prefault_for_write(void* p, size_t size) {
#ifdef MADV_POPULATE_WRITE
  if (!kEnabled || !p || size < (size_t{1} << 16)) return;
  advise_whole_pages(p, size, MADV_POPULATE_WRITE);
#else
  (void)p;
  (void)size;
#endif
}

void host_block_free(void* p, size_t size) {
  if (host_pages_serve(size, kBlockAlign)) host_pages_free(p, size);
  else std::free(p);
}

}  // namespace bulkhead
