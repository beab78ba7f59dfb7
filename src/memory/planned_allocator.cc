#include "memory/planned_allocator.h"

#include <cstdlib>  // getenv
#include <cstring>
#include <limits>
#include <unordered_map>
#include <utility>

#include "memory/host_pages.h"
#include "memory/recording_heap.h"

namespace bulkhead {

namespace {
constexpr size_t kAlign = kBlockAlign;
constexpr uint64_t kOpen = std::numeric_limits<uint64_t>::max();

size_t round_up(size_t n) { return (std::max<size_t>(n, 1) + kAlign - 1) / kAlign * kAlign; }

bool planning_enabled() {
  const char* e = std::getenv("BULKHEAD_CPU_ARENA");
  return !(e && std::strcmp(e, "0") == 0);
}
}  // namespace

void* SurvivorRegion::take(size_t bytes) {
  size_t at = used_.load();
  do {
    if (bytes > size_ || at > size_ - bytes) return nullptr;
  } while (!used_.compare_exchange_weak(at, at + bytes));
  live_.fetch_add(1);
  return base_ + at;
}

// One block of memory that a plan's slots are offsets into. Freed when the last run that
// used it, and the last buffer in it, are gone.
struct PlannedHostAllocator::Arena {
  char* base = nullptr;
  size_t size = 0;
  size_t live_blocks = 0, live_bytes = 0;  // guarded by the allocator's mutex

  static std::shared_ptr<Arena> make(size_t size) {
    auto a = std::make_shared<Arena>();
    a->size = size;
    void* p = host_block_alloc(size);
    if (!p) return nullptr;
    a->base = static_cast<char*>(p);
    return a;
  }
  ~Arena() {
    if (base) host_block_free(base, size);
  }
};

// The allocations of one run. Holds the allocator's arena when the run got it, and then
// replays the plan; records the run either way.
class RunArena final : public RunAllocator {
 public:
  RunArena(std::shared_ptr<PlannedHostAllocator> owner, std::shared_ptr<PlannedHostAllocator::Arena> arena,
           std::shared_ptr<const std::vector<PlannedHostAllocator::Slot>> plan,
           std::shared_ptr<SurvivorRegion> survivors)
      : owner_(std::move(owner)), arena_(std::move(arena)), plan_(std::move(plan)), survivors_(std::move(survivors)) {
    // A run records as many blocks as the plan holds: room for them at once.
    if (plan_) {
      trace_.reserve(plan_->size());
      open_.reserve(plan_->size());
    } else {
      heap_ = RecordingHeap::make();  // null in sanitizer builds: the cache serves the run
    }
  }
  const Domain& domain() const override { return owner_->domain(); }
  std::string name() const override { return owner_->name() + "/run"; }
  AllocatorStats stats() const override { return owner_->stats(); }

  Result<std::shared_ptr<Buffer>> allocate(size_t size, size_t alignment) override {
    if (alignment > kAlign) return invalid_argument(name() + ": alignment above 64 bytes is not supported");
    const size_t need = round_up(size);
    std::lock_guard lock(owner_->mu_);
    const size_t idx = trace_.size();
    void* p = nullptr;
    size_t bytes = 0;
    void* handle = nullptr;
    if (!finished_ && plan_ && !diverged_) {
      const auto* slot = idx < plan_->size() ? &(*plan_)[idx] : nullptr;
      if (!slot || slot->size != need) {
        diverged_ = true;
      } else if (slot->from_cache) {
        // A block the plan says outlives the run: into the survivor region, if any.
        if (survivors_ && (p = survivors_->take(need))) {
          bytes = need;
          handle = survivors_.get();
        }
      } else {
        if (!arena_ || overlaps_live(slot->offset, slot->offset + need)) {
          diverged_ = true;
        } else {
          p = arena_->base + slot->offset;
          bytes = need;
          handle = arena_.get();
          live_ranges_.emplace_back(slot->offset, slot->offset + need);
          arena_->live_blocks++;
          arena_->live_bytes += need;
        }
      }
    }
    if (!p && heap_ && !finished_ && (p = heap_->take(need))) {
      bytes = need;
      handle = heap_.get();
    }
    if (!p) {
      BH_ASSIGN_OR_RETURN(p, owner_->cache_->take(size, alignment, &bytes));
    }
    if (!finished_) {
      open_[p] = idx;
      trace_.push_back({need, clock_++, kOpen});
    }
    owner_->count_in_locked(bytes);
    return std::make_shared<Buffer>(shared_from_this(), domain(), p, bytes, handle);
  }

  void release(void* data, void* handle, size_t size) override {
    std::unique_ptr<RecordingHeap> unmapped;  // destroyed after the lock is let go
    std::lock_guard lock(owner_->mu_);
    if (!finished_) {
      auto it = open_.find(data);
      if (it != open_.end()) {
        trace_[it->second].end = clock_++;
        open_.erase(it);
      }
    }
    owner_->in_use_ -= size;
    if (handle && handle == survivors_.get()) {
      survivors_->give();
      return;
    }
    if (handle && handle == heap_.get()) {
      heap_->give(data, size);
      // The run is over and this was its heap's last block (an output): unmap the range.
      if (finished_ && heap_->live_blocks() == 0) unmapped = std::move(heap_);
      return;
    }
    if (handle) {
      auto* a = static_cast<PlannedHostAllocator::Arena*>(handle);
      a->live_blocks--;
      a->live_bytes -= size;
      size_t off = static_cast<char*>(data) - a->base;
      for (size_t i = 0; i < live_ranges_.size(); ++i)
        if (live_ranges_[i].first == off) {
          live_ranges_[i] = live_ranges_.back();
          live_ranges_.pop_back();
          break;
        }
      return;
    }
    owner_->give_to_cache_locked(data, size);
  }

  void finish(bool ok) override {
    bool burst_over = false;
    std::unique_ptr<RecordingHeap> heap;  // unmapped once the lock is let go
    {
      std::lock_guard lock(owner_->mu_);
      if (finished_) return;
      finished_ = true;
      owner_->busy_ = false;
      // A failed run says nothing about the next one: keep the plan as it is; nor does
      // one whose plan held.
      if (ok && !(plan_ && !diverged_ && trace_.size() == plan_->size())) {
        std::vector<bool> open(trace_.size(), false);
        for (auto& [p, idx] : open_) open[idx] = true;
        owner_->replan_locked(trace_, open);
      }
      // After the plan: memory given back when idle includes an arena the plan just made.
      burst_over = owner_->run_closed_locked();
      // The recording heap keeps the pages of the blocks still in use (the run's outputs)
      // until they go; the rest goes back to the system now.
      if (heap_ && heap_->live_blocks() == 0) heap = std::move(heap_);
      else if (heap_) heap_->discard_free_pages();
    }
    // Blocks under 2 MiB come from malloc, which keeps freed memory in its heaps: after a
    // burst they go back to the system too (without the lock: it walks every heap).
    if (burst_over) trim_malloc_heaps();
  }

 private:
  bool overlaps_live(size_t begin, size_t end) const {
    for (const auto& [b, e] : live_ranges_)
      if (b < end && begin < e) return true;
    return false;
  }

  std::shared_ptr<PlannedHostAllocator> owner_;
  std::shared_ptr<PlannedHostAllocator::Arena> arena_;  // null: no block of the plan is in an arena
  std::shared_ptr<const std::vector<PlannedHostAllocator::Slot>> plan_;
  std::shared_ptr<SurvivorRegion> survivors_;  // null: the surviving blocks come from the cache
  // Guarded by owner_->mu_:
  std::unique_ptr<RecordingHeap> heap_;  // a run without a plan: its blocks, while it records
  std::vector<ArenaBlock> trace_;
  std::unordered_map<void*, size_t> open_;  // the run's live blocks: data → trace index
  std::vector<std::pair<size_t, size_t>> live_ranges_;  // [offset, end) of live arena blocks
  uint64_t clock_ = 0;
  bool diverged_ = false, finished_ = false;
};

// A run that overlaps the one holding the arena: it allocates from the cache, and says
// when it is over, so that the allocator knows when a burst ends.
class CacheRun final : public RunAllocator {
 public:
  explicit CacheRun(std::shared_ptr<PlannedHostAllocator> owner) : owner_(std::move(owner)) {}
  const Domain& domain() const override { return owner_->domain(); }
  std::string name() const override { return owner_->name() + "/run"; }
  AllocatorStats stats() const override { return owner_->stats(); }
  Result<std::shared_ptr<Buffer>> allocate(size_t size, size_t alignment) override {
    size_t cls = 0;
    BH_ASSIGN_OR_RETURN(void* p, owner_->cache_->take(size, alignment, &cls));
    {
      std::lock_guard lock(owner_->mu_);
      owner_->count_in_locked(cls);
    }
    return std::make_shared<Buffer>(shared_from_this(), domain(), p, cls);
  }
  void release(void* data, void* handle, size_t size) override { owner_->release(data, handle, size); }
  void finish(bool) override {
    bool burst_over = false;
    {
      std::lock_guard lock(owner_->mu_);
      if (finished_) return;
      finished_ = true;
      burst_over = owner_->run_closed_locked();
    }
    if (burst_over) trim_malloc_heaps();  // as in RunArena::finish
  }

 private:
  std::shared_ptr<PlannedHostAllocator> owner_;
  bool finished_ = false;  // guarded by owner_->mu_
};

PlannedHostAllocator::PlannedHostAllocator(std::string name)
    : name_(std::move(name)), cache_(std::make_shared<CachingHostAllocator>(name_)), disabled_(!planning_enabled()) {}

PlannedHostAllocator::~PlannedHostAllocator() = default;

void PlannedHostAllocator::count_in_locked(size_t bytes) {
  in_use_ += bytes;
  peak_ = std::max(peak_, in_use_);
}

Result<std::shared_ptr<Buffer>> PlannedHostAllocator::allocate(size_t size, size_t alignment) {
  size_t cls = 0;
  BH_ASSIGN_OR_RETURN(void* p, cache_->take(size, alignment, &cls));
  {
    std::lock_guard lock(mu_);
    count_in_locked(cls);
  }
  return std::make_shared<Buffer>(shared_from_this(), domain_, p, cls);
}

void PlannedHostAllocator::release(void* data, void*, size_t size) {
  std::lock_guard lock(mu_);
  in_use_ -= size;
  give_to_cache_locked(data, size);
}

void PlannedHostAllocator::give_to_cache_locked(void* data, size_t size) {
  // Between the end of a burst and the next run, whatever comes back is a burst's block
  // that its caller held past the trim (an output): it goes to the system too, or the
  // cache would keep one output per overlapping run.
  if (after_burst_) trimmed_ += size;
  cache_->give(data, size, !after_burst_);
}

AllocatorStats PlannedHostAllocator::stats() const {
  std::lock_guard lock(mu_);
  AllocatorStats s;
  s.in_use = in_use_;
  s.peak = peak_;
  s.cached = cache_->bytes_cached();
  s.trimmed = trimmed_;
  if (arena_ && !released_) {
    s.cached += arena_->size - arena_->live_bytes;
    s.arena = arena_->size;
    for (const auto& slot : *plan_) s.arena_blocks += slot.from_cache ? 0 : 1;
  }
  return s;
}

void PlannedHostAllocator::set_release_when_idle(int after_ms, std::shared_ptr<IdleReleaser> releaser) {
  std::lock_guard lock(mu_);
  release_after_ms_ = after_ms > 0 && !releaser ? -1 : after_ms;
  releaser_ = after_ms > 0 ? std::move(releaser) : nullptr;
}

void PlannedHostAllocator::release_idle_locked() {
  // No run is open: nothing in the arena is live unless a run's output was placed in it
  // (then the arena stays as it is, and the output's owner has it).
  overlapped_ = false;
  if (arena_ && arena_->live_blocks == 0 && !released_) {
    host_block_discard(arena_->base, arena_->size);
    trimmed_ += arena_->size;
    released_ = true;
  }
  trimmed_ += cache_->bytes_cached();
  cache_->trim();
}

bool PlannedHostAllocator::run_closed_locked() {
  if (--runs_open_ > 0) return false;
  if (release_after_ms_ == 0) {
    release_idle_locked();
    return true;
  }
  if (release_after_ms_ > 0) {
    idle_since_ = IdleReleaser::Clock::now();
    if (!wake_pending_) {
      auto self = std::static_pointer_cast<PlannedHostAllocator>(shared_from_this());
      wake_pending_ = releaser_->wake_at(self, idle_since_ + std::chrono::milliseconds(release_after_ms_));
      if (!wake_pending_) release_after_ms_ = -1;  // no thread to wake it: keep the memory
    }
  }
  if (!overlapped_) return false;
  // The last of several overlapping runs is over: what the overlapping ones cached is
  // beyond what one run at a time needs (the arena, and the cache blocks of its
  // outputs, which the next run takes again). Give it back to the system.
  overlapped_ = false;
  after_burst_ = true;
  trimmed_ += cache_->bytes_cached();
  cache_->trim();
  return true;
}

std::optional<IdleReleaser::Clock::time_point> PlannedHostAllocator::release_if_idle(IdleReleaser::Clock::time_point now) {
  {
    std::lock_guard lock(mu_);
    if (runs_open_ > 0) {
      wake_pending_ = false;  // the open run's end asks again
      return std::nullopt;
    }
    const auto due = idle_since_ + std::chrono::milliseconds(release_after_ms_);
    if (now < due) return due;  // a run came and went since this was asked for
    wake_pending_ = false;
    release_idle_locked();
  }
  trim_malloc_heaps();  // as in RunArena::finish, without the lock
  return std::nullopt;
}

std::shared_ptr<RunAllocator> PlannedHostAllocator::open_run() {
  std::shared_ptr<Arena> refault;  // an arena whose pages were given back while idle
  std::shared_ptr<RunAllocator> run;
  {
    std::lock_guard lock(mu_);
    auto self = std::static_pointer_cast<PlannedHostAllocator>(shared_from_this());
    if (++runs_open_ > 1) overlapped_ = true;
    after_burst_ = false;
    const bool was_released = std::exchange(released_, false);
    if (disabled_ || busy_) return std::make_shared<CacheRun>(std::move(self));
    busy_ = true;
    // Blocks of the arena still alive from an earlier run (an output the plan did not
    // expect): this run gets an arena of its own; the old one goes with its last block.
    if (arena_ && arena_->live_blocks > 0) arena_ = Arena::make(arena_->size);
    else if (was_released) refault = arena_;
    std::shared_ptr<SurvivorRegion> survivors = plan_ ? std::move(survivors_) : nullptr;
    survivors_.reset();
    run = std::make_shared<RunArena>(std::move(self), arena_, plan_, std::move(survivors));
  }
  // The pages come back zero-filled in one system call rather than one fault each, which
  // in a virtual machine is several times slower (without the lock: it takes a while).
  if (refault) prefault_for_write(refault->base, refault->size);
  return run;
}

void PlannedHostAllocator::restart_planning() {
  std::lock_guard lock(mu_);
  replans_ = 0;
  disabled_ = !planning_enabled();
  plan_.reset();
  arena_.reset();  // a run holding it keeps it; the next recorded run makes the new one
  released_ = false;
}

void PlannedHostAllocator::set_survivor_region(std::shared_ptr<SurvivorRegion> region) {
  std::lock_guard lock(mu_);
  survivors_ = std::move(region);
}

void PlannedHostAllocator::replan_locked(const std::vector<ArenaBlock>& trace, const std::vector<bool>& open) {
  if (trace.empty()) return;  // a run that allocated nothing says nothing
  if (plan_) ++replans_;
  if (replans_ > kMaxReplans || trace.size() > kMaxBlocks) {
    disabled_ = true;
    arena_.reset();
    plan_.reset();
    return;
  }
  std::vector<ArenaBlock> planned;
  std::vector<size_t> index;  // planned block → trace index
  for (size_t i = 0; i < trace.size(); ++i)
    if (!open[i]) {
      planned.push_back(trace[i]);
      index.push_back(i);
    }
  ArenaPlan p = plan_arena(planned);
  auto slots = std::make_shared<std::vector<Slot>>(trace.size());
  for (size_t i = 0; i < trace.size(); ++i) {
    (*slots)[i].size = trace[i].size;
    (*slots)[i].from_cache = open[i];
  }
  if (p.size == 0) {
    // Nothing a run releases: no arena, but a plan of the blocks that outlive the run,
    // which a survivor region can then take (a worker's outputs).
    arena_.reset();
    plan_ = std::move(slots);
    return;
  }
  for (size_t k = 0; k < planned.size(); ++k) (*slots)[index[k]].offset = p.offsets[k];
  // The recorded run's blocks sit in the cache: the arena takes their place.
  cache_->trim();
  if (!arena_ || arena_->live_blocks > 0 || arena_->size < p.size) {
    arena_.reset();
    arena_ = Arena::make(p.size);
    released_ = false;
    if (!arena_) {  // no memory for it: allocate from the cache as before
      disabled_ = true;
      plan_.reset();
      return;
    }
  }
  plan_ = std::move(slots);
}

}  // namespace bulkhead
