#include "isolate/output_regions.h"

#include <sys/stat.h>

#include <algorithm>
#include <utility>

namespace bulkhead::isolate {
namespace {

// A free region more than this many times larger than the last run's outputs (and over
// kLargeBytes) is unmapped rather than kept: one huge output should not pin that much
// shared memory for the session's life.
constexpr uint64_t kOversize = 4;
constexpr uint64_t kLargeBytes = uint64_t{1} << 20;

void* key_handle(uint64_t key) { return reinterpret_cast<void*>(static_cast<uintptr_t>(key)); }

}  // namespace

Result<std::shared_ptr<Buffer>> OutputRegions::allocate(size_t, size_t) {
  return internal_error("output regions are made by a worker's run, not allocated");
}

void OutputRegions::release(void*, void* handle, size_t) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = regions_.find(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle)));
  if (it == regions_.end()) return;
  if (it->second.generation != generation_) {
    regions_.erase(it);  // its worker is gone: nobody will write it again
    return;
  }
  it->second.state = State::kFree;
  trim(0);
}

void OutputRegions::forget(std::map<uint64_t, Region>::iterator it) {
  if (it->second.generation == generation_) forgotten_.push_back(it->second.worker_id);
  regions_.erase(it);
}

void OutputRegions::trim(uint64_t expected) {
  std::vector<std::map<uint64_t, Region>::iterator> free;
  for (auto it = regions_.begin(); it != regions_.end(); ++it)
    if (it->second.state == State::kFree) free.push_back(it);
  std::sort(free.begin(), free.end(),
            [](auto a, auto b) { return a->second.mapping->size() < b->second.mapping->size(); });
  size_t over = free.size() > kMaxFree ? free.size() - kMaxFree : 0;
  for (auto it : free) {
    const uint64_t size = it->second.mapping->size();
    if (over > 0) {
      --over;
      forget(it);
    } else if (expected > 0 && size > kOversize * expected && size > kLargeBytes) {
      forget(it);
    }
  }
}

std::optional<LendableRegion> OutputRegions::lendable(const Buffer& buffer, uint64_t receiver) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = regions_.find(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(buffer.handle())));
  if (receiver == 0 || it == regions_.end()) return std::nullopt;
  const Region& r = it->second;
  if (r.state != State::kLeased || r.receiver != receiver || !r.readonly.valid() || r.mapping->data() != buffer.data())
    return std::nullopt;
  return LendableRegion{r.uid, r.readonly.get(), static_cast<const char*>(r.mapping->data()), r.lend_bytes};
}

uint64_t OutputRegions::offer(uint64_t expected_bytes, uint64_t receiver) {
  std::lock_guard<std::mutex> l(mu_);
  trim(expected_bytes);
  run_receiver_ = receiver;
  Region* best = nullptr;
  uint64_t best_key = 0;
  for (auto& [key, r] : regions_)
    if (r.state == State::kFree && r.receiver == receiver && r.mapping->size() >= std::max<uint64_t>(expected_bytes, 1) &&
        (!best || r.mapping->size() < best->mapping->size())) {
      best = &r;
      best_key = key;
    }
  if (!best) return 0;
  best->state = State::kOffered;
  offered_key_ = best_key;
  return best->worker_id;
}

Result<std::shared_ptr<Buffer>> OutputRegions::take(uint64_t worker_id, UniqueFd fd, uint64_t bytes,
                                                    const std::string& what) {
  std::lock_guard<std::mutex> l(mu_);
  auto offered = regions_.find(offered_key_);
  offered_key_ = 0;
  uint64_t key = 0;
  if (!fd.valid()) {
    if (offered == regions_.end() || offered->second.worker_id != worker_id) {
      if (offered != regions_.end()) offered->second.state = State::kFree;
      return internal_error(what + ": the worker used output region " + std::to_string(worker_id) +
                            ", which it was not offered");
    }
    if (offered->second.mapping->size() < bytes) {
      offered->second.state = State::kFree;
      return internal_error(what + ": " + std::to_string(bytes) + " bytes do not fit output region " +
                            std::to_string(worker_id));
    }
    key = offered->first;
  } else {
    if (offered != regions_.end()) offered->second.state = State::kFree;  // it did not fit
    for (auto& [k, r] : regions_)
      if (r.generation == generation_ && r.worker_id == worker_id)
        return internal_error(what + ": the worker sent output region " + std::to_string(worker_id) + " twice");
    // A region for a receiver keeps a read-only descriptor to lend; when that cannot be
    // had, it is still for the receiver (never offered to other runs) but not lent.
    UniqueFd readonly;
    struct stat st {};
    if (run_receiver_) {
      auto ro = SharedMemory::reopen_readonly(fd.get());
      if (ro.is_ok() && fstat(ro->get(), &st) == 0 && static_cast<uint64_t>(st.st_size) >= bytes)
        readonly = std::move(ro).value();
    }
    BH_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> mapping, shm_->map_shared(std::move(fd), bytes, what));
    key = next_key_++;
    regions_[key] = Region{worker_id, generation_, State::kFree, std::move(mapping), run_receiver_,
                           run_receiver_ ? next_lend_id() : 0, std::move(readonly), static_cast<uint64_t>(st.st_size)};
  }
  Region& r = regions_[key];
  r.state = State::kLeased;
  return std::make_shared<Buffer>(shared_from_this(), domain(), r.mapping->data(), r.mapping->size(), key_handle(key));
}

void OutputRegions::withdraw() {
  std::lock_guard<std::mutex> l(mu_);
  auto it = regions_.find(offered_key_);
  if (it != regions_.end()) it->second.state = State::kFree;
  offered_key_ = 0;
  run_receiver_ = 0;
}

std::vector<uint64_t> OutputRegions::forgotten() {
  std::lock_guard<std::mutex> l(mu_);
  return std::exchange(forgotten_, {});
}

void OutputRegions::new_worker() {
  std::lock_guard<std::mutex> l(mu_);
  ++generation_;
  offered_key_ = 0;
  forgotten_.clear();
  for (auto it = regions_.begin(); it != regions_.end();) {
    if (it->second.state == State::kLeased) ++it;  // unmapped when its caller lets go
    else it = regions_.erase(it);
  }
}

size_t OutputRegions::mapped() const {
  std::lock_guard<std::mutex> l(mu_);
  return regions_.size();
}

size_t OutputRegions::free_regions() const {
  std::lock_guard<std::mutex> l(mu_);
  return static_cast<size_t>(
      std::count_if(regions_.begin(), regions_.end(), [](const auto& kv) { return kv.second.state == State::kFree; }));
}

}  // namespace bulkhead::isolate
