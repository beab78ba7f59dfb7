#include "backends/faulty/faulty_allocator.h"

#include <cstdlib>

namespace bulkhead::faulty {

Result<std::shared_ptr<Buffer>> FaultyAllocator::allocate(size_t size, size_t alignment) {
  if (alignment < alignof(std::max_align_t)) alignment = alignof(std::max_align_t);
  size_t rounded = (std::max<size_t>(size, 1) + alignment - 1) / alignment * alignment;
  void* p = std::aligned_alloc(alignment, rounded);
  if (!p)
    return Status(StatusCode::kResourceExhausted, name_ + ": allocation of " + std::to_string(size) + " bytes failed");
  return std::make_shared<Buffer>(shared_from_this(), domain_, p, size);
}

void FaultyAllocator::release(void* data, void*, size_t) { std::free(data); }

}  // namespace bulkhead::faulty
