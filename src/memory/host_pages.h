// Large host blocks: mapped directly, aligned to 2 MiB and advised as transparent huge
// pages (MADV_HUGEPAGE; the system setting is usually "madvise").
//
// A weight tensor or activation of several MiB is written in full soon after it is
// allocated, and fresh 4 KiB pages cost a page fault each: for a model whose weights are
// hundreds of MiB, faulting them in was most of session creation. With 2 MiB pages the
// same memory takes 1/512 of the faults. Only whole 2 MiB pages inside the block are huge
// (the mapping starts on a 2 MiB boundary and ends where the block ends), so resident
// memory is what the block's user touches, as before.
//
// Sanitizer builds keep malloc for every block, so ASan and TSan still see them.
// Used by HostAllocator, CachingHostAllocator and PlannedHostAllocator; the functions are thread-safe and the
// caller owns what host_pages_alloc returns until it hands it to host_pages_free.
#pragma once

#include <cstddef>

namespace bulkhead {

// The size of a transparent huge page, the granule of host_pages mappings.
constexpr size_t kHugePageBytes = size_t{2} << 20;

// Whether a block of `size` bytes with `alignment` is better served by host_pages_alloc.
bool host_pages_serve(size_t size, size_t alignment);
// The Buffer handle of a host block from host_pages_alloc, so that release() knows.
inline void* host_pages_tag() {
  static char tag;
  return &tag;
}
// nullptr when the system refuses the mapping.
void* host_pages_alloc(size_t size);
void host_pages_free(void* p, size_t size);
// Address space for `size` bytes, on a 2 MiB boundary and advised as huge pages, with no
// memory committed (MAP_NORESERVE): a page exists once touched. Free with
// host_pages_free. nullptr in sanitizer builds, or when the system refuses the mapping.
void* host_pages_reserve(size_t size);
// Gives the pages wholly inside [p, p + size) of a host_pages mapping back to the system;
// they read as zeros when next touched.
void host_pages_discard(void* p, size_t size);

// A fresh host block of `size` bytes aligned to `alignment`, for a caller that writes it
// in full next: from host_pages_alloc when it serves that size and alignment (then
// *from_pages is true), else from aligned_alloc. Blocks up to 64 MiB come mapped in for
// writing (prefault_for_write). nullptr on failure. HostAllocator's blocks; host_block_alloc's.
void* host_fresh_alloc(size_t size, size_t alignment, bool* from_pages);

// A host block of `size` bytes aligned to kBlockAlign (host_fresh_alloc). The choice of
// allocator follows from the size alone, so host_block_free needs nothing else.
constexpr size_t kBlockAlign = 64;
void* host_block_alloc(size_t size);
void host_block_free(void* p, size_t size);
// Gives the pages of a block from host_block_alloc back to the system while keeping it
// allocated: the next touch of each page finds it zero-filled. Blocks host_pages_alloc
// does not serve (small ones, sanitizer builds) are left as they are. The caller must
// not need the block's contents.
void host_block_discard(void* p, size_t size);

// Maps in every whole page of [p, p + size) for writing, in one system call
// (MADV_POPULATE_WRITE), where the caller is about to write all of it: a block of fresh
// 4 KiB pages otherwise takes one page fault per page, which in a virtual machine can
// cost several microseconds each. Best effort (nothing where the kernel predates 5.14, in
// sanitizer builds, or for blocks under 64 KiB). Thread-safe.
void prefault_for_write(void* p, size_t size);

// Gives the free memory of malloc's heaps back to the system (glibc's malloc_trim).
// Nothing in sanitizer builds: their malloc is not glibc's, whose malloc_trim then walks
// heaps it never set up and crashes when called from a thread other than the first
// (google/sanitizers#1721). Thread-safe; may take a while: call it without locks held.
void trim_malloc_heaps();

}  // namespace bulkhead
