// The lifetime-planned arena: the placement (arena_plan.h), the session allocator that
// records a run and replays it (planned_allocator.h), and the heap of the run it records
// (recording_heap.h).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <set>

#include "memory/arena_plan.h"
#include "memory/planned_allocator.h"
#include "memory/recording_heap.h"

namespace bulkhead {
namespace {

void expect_valid(const std::vector<ArenaBlock>& blocks, const ArenaPlan& plan) {
  ASSERT_EQ(plan.offsets.size(), blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i) {
    EXPECT_LE(plan.offsets[i] + blocks[i].size, plan.size);
    for (size_t j = i + 1; j < blocks.size(); ++j) {
      if (!lifetimes_overlap(blocks[i], blocks[j])) continue;
      bool disjoint = plan.offsets[i] + blocks[i].size <= plan.offsets[j] || plan.offsets[j] + blocks[j].size <= plan.offsets[i];
      EXPECT_TRUE(disjoint) << "blocks " << i << " and " << j << " are alive together and share bytes";
    }
  }
  EXPECT_GE(plan.size, peak_live_bytes(blocks));
}

TEST(ArenaPlan, AChainNeedsOnlyTwoNeighboursAtOnce) {
  // x0 -> x1 -> ... : each value lives from its producer to its consumer, so two at a time.
  std::vector<ArenaBlock> blocks;
  for (uint64_t i = 0; i < 20; ++i) blocks.push_back({64 * (1 + i % 5), 2 * i, 2 * i + 3});
  ArenaPlan plan = plan_arena(blocks);
  expect_valid(blocks, plan);
  EXPECT_EQ(peak_live_bytes(blocks), 64u * (5 + 4));
  EXPECT_LE(plan.size, 64u * (5 + 5));  // far below the 3840 bytes of one block each
}

TEST(ArenaPlan, BlocksNeverAliveTogetherShareBytes) {
  std::vector<ArenaBlock> blocks{{256, 0, 2}, {256, 2, 4}, {256, 4, 6}};
  ArenaPlan plan = plan_arena(blocks);
  expect_valid(blocks, plan);
  EXPECT_EQ(plan.size, 256u);
  EXPECT_EQ(plan.offsets, (std::vector<size_t>{0, 0, 0}));
}

TEST(ArenaPlan, SmallBlocksFillGapsBetweenLargeOnes) {
  // Two large blocks alive for the whole run with a hole between them, then a small one.
  std::vector<ArenaBlock> blocks{{1024, 0, 10}, {512, 1, 3}, {1024, 2, 10}, {256, 4, 6}};
  ArenaPlan plan = plan_arena(blocks);
  expect_valid(blocks, plan);
  EXPECT_EQ(plan.size, 2048u + 512u);
}

TEST(ArenaPlan, RandomLifetimesAreValidAndNearTheBound) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<ArenaBlock> blocks;
    uint64_t clock = 0;
    int n = 1 + static_cast<int>(rng() % 200);
    for (int i = 0; i < n; ++i) {
      uint64_t start = clock++;
      blocks.push_back({64 * (1 + rng() % 64), start, start + 1 + rng() % 12});
    }
    ArenaPlan plan = plan_arena(blocks);
    expect_valid(blocks, plan);
    EXPECT_LE(plan.size, 2 * peak_live_bytes(blocks)) << "trial " << trial;
  }
}

TEST(ArenaPlan, EmptyIsEmpty) {
  ArenaPlan plan = plan_arena({});
  EXPECT_EQ(plan.size, 0u);
  EXPECT_TRUE(plan.offsets.empty());
}

// One "run": a chain of `n` tensors of `bytes` each, each written with its index and
// read back (a live block overwritten by another would show here), and an output kept.
struct ChainRun {
  std::vector<void*> addresses;
  std::shared_ptr<Buffer> output;
};

ChainRun run_chain(Allocator& alloc, int n, size_t bytes, bool ok = true) {
  ChainRun r;
  auto ra = alloc.open_run();
  Allocator& a = ra ? static_cast<Allocator&>(*ra) : alloc;
  std::shared_ptr<Buffer> prev;
  for (int i = 0; i < n; ++i) {
    auto b = a.allocate(bytes);
    EXPECT_TRUE(b.is_ok());
    std::memset((*b)->data(), i + 1, bytes);
    if (prev) {
      EXPECT_EQ(static_cast<unsigned char*>(prev->data())[bytes - 1], static_cast<unsigned char>(i));
    }
    r.addresses.push_back((*b)->data());
    prev = *b;
  }
  r.output = prev;
  prev.reset();
  if (ra) ra->finish(ok);
  return r;
}

TEST(PlannedHostAllocator, ReplaysTheFirstRunInOneArena) {
  auto alloc = std::make_shared<PlannedHostAllocator>("test");
  const size_t kb = 64 * 1024;
  ChainRun first = run_chain(*alloc, 8, kb);
  AllocatorStats s1 = alloc->stats();
  EXPECT_EQ(s1.arena_blocks, 7u);  // the last tensor is the output, alive after the run
  EXPECT_EQ(s1.arena, 2 * kb);     // two neighbours of a chain at a time
  EXPECT_EQ(s1.in_use, first.output->size());
  first.output.reset();
  ChainRun second = run_chain(*alloc, 8, kb);
  ChainRun third = run_chain(*alloc, 8, kb);  // second's output is still held: no clash
  auto intermediates = [](const ChainRun& r) { return std::vector<void*>(r.addresses.begin(), r.addresses.end() - 1); };
  EXPECT_EQ(intermediates(second), intermediates(third)) << "a replayed run makes the same placements";
  std::set<void*> distinct(second.addresses.begin(), second.addresses.end() - 1);
  EXPECT_EQ(distinct.size(), 2u);
  EXPECT_NE(second.output->data(), third.output->data());
  EXPECT_EQ(static_cast<unsigned char*>(second.output->data())[0], 8) << "an output outlives the next run";
  AllocatorStats s3 = alloc->stats();
  EXPECT_EQ(s3.arena, s1.arena);
  EXPECT_EQ(s3.in_use, 2 * kb);  // the two outputs still held
}

TEST(PlannedHostAllocator, ARunThatDiffersNeverOverlapsAndIsPlannedAgain) {
  auto alloc = std::make_shared<PlannedHostAllocator>("test");
  run_chain(*alloc, 8, 4096);
  EXPECT_EQ(alloc->stats().arena, 2 * 4096u);
  run_chain(*alloc, 12, 8192);  // other shapes: checked in run_chain, then planned anew
  EXPECT_EQ(alloc->stats().arena, 2 * 8192u);
  run_chain(*alloc, 12, 8192);
  EXPECT_EQ(alloc->stats().arena, 2 * 8192u);
}

TEST(PlannedHostAllocator, GivesUpAfterRunsThatKeepDiffering) {
  auto alloc = std::make_shared<PlannedHostAllocator>("test");
  for (int i = 0; i <= PlannedHostAllocator::kMaxReplans + 1; ++i) run_chain(*alloc, 4 + i, 4096);
  EXPECT_EQ(alloc->stats().arena, 0u);
  run_chain(*alloc, 5, 4096);  // still correct, from the cache
  EXPECT_EQ(alloc->stats().in_use, 0u);
  EXPECT_EQ(alloc->stats().arena, 0u) << "planning stays given up";
}

TEST(PlannedHostAllocator, AFailedRunKeepsThePlan) {
  auto alloc = std::make_shared<PlannedHostAllocator>("test");
  run_chain(*alloc, 8, 4096);
  run_chain(*alloc, 3, 4096, /*ok=*/false);
  ChainRun a = run_chain(*alloc, 8, 4096);
  ChainRun b = run_chain(*alloc, 8, 4096);
  EXPECT_EQ(std::vector<void*>(a.addresses.begin(), a.addresses.end() - 1),
            std::vector<void*>(b.addresses.begin(), b.addresses.end() - 1));
  EXPECT_EQ(alloc->stats().arena, 2 * 4096u);
}

TEST(PlannedHostAllocator, OneRunAtATimeHoldsTheArena) {
  auto alloc = std::make_shared<PlannedHostAllocator>("test");
  run_chain(*alloc, 4, 4096);
  const AllocatorStats planned = alloc->stats();
  auto first = alloc->open_run();
  ASSERT_NE(first, nullptr);
  auto second = alloc->open_run();  // overlaps the first: allocates from the cache
  ASSERT_NE(second, nullptr);
  auto a = first->allocate(4096);
  auto b = second->allocate(4096);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_NE((*a)->data(), (*b)->data());
  EXPECT_EQ((*a)->handle() != nullptr, true) << "the first run's block is in the arena";
  EXPECT_EQ((*b)->handle(), nullptr) << "the overlapping run's block is the cache's";
  a->reset();
  b->reset();
  second->finish(true);
  EXPECT_EQ(alloc->stats().trimmed, 0u) << "the first run is still open: no burst has ended";
  first->finish(false);
  // The last of the overlapping runs is over: what the burst cached goes back.
  const AllocatorStats after = alloc->stats();
  EXPECT_GE(after.trimmed, 4096u);
  EXPECT_EQ(after.arena, planned.arena);
  auto again = alloc->open_run();
  ASSERT_NE(again, nullptr);
  auto c = again->allocate(4096);
  ASSERT_TRUE(c.is_ok());
  EXPECT_NE((*c)->handle(), nullptr) << "one run at a time again: the arena";
  c->reset();
  again->finish(false);
}

TEST(PlannedHostAllocator, ABlockKeptPastItsRunIsNotReused) {
  auto alloc = std::make_shared<PlannedHostAllocator>("test");
  run_chain(*alloc, 4, 4096);
  // A replayed run whose first intermediate is kept by someone after the run.
  auto ra = alloc->open_run();
  ASSERT_NE(ra, nullptr);
  auto kept = ra->allocate(4096);
  ASSERT_TRUE(kept.is_ok());
  std::memset((*kept)->data(), 0x5a, 4096);
  for (int i = 1; i < 4; ++i) ASSERT_TRUE(ra->allocate(4096).is_ok());
  ra->finish(true);
  ra.reset();
  ChainRun next = run_chain(*alloc, 4, 4096);
  for (void* p : next.addresses) EXPECT_NE(p, (*kept)->data());
  EXPECT_EQ(static_cast<unsigned char*>((*kept)->data())[4095], 0x5a);
}

TEST(PlannedHostAllocator, SurvivingBlocksGoToTheSurvivorRegionAndItKnowsWhoStillLives) {
  auto alloc = std::make_shared<PlannedHostAllocator>("test");
  const size_t kb = 64 * 1024;
  run_chain(*alloc, 6, kb);  // recorded: the last block survives its run
  std::vector<char> memory(2 * kb + 4096);
  char* base = memory.data() + (64 - reinterpret_cast<uintptr_t>(memory.data()) % 64) % 64;
  auto region = std::make_shared<SurvivorRegion>(base, 2 * kb, nullptr);
  alloc->set_survivor_region(region);
  ChainRun r = run_chain(*alloc, 6, kb);
  EXPECT_EQ(r.output->data(), base) << "the output was placed in the region";
  for (size_t i = 0; i + 1 < r.addresses.size(); ++i)
    EXPECT_TRUE(r.addresses[i] < base || r.addresses[i] >= base + 2 * kb) << "intermediates stay in the arena";
  EXPECT_EQ(region->used(), kb);
  EXPECT_EQ(region->live(), 1u);
  EXPECT_EQ(static_cast<unsigned char*>(r.output->data())[kb - 1], 6);
  r.output.reset();
  EXPECT_EQ(region->live(), 0u) << "released: nothing of the process points into it";

  // The region is taken by one run only; the next one's output comes from the cache.
  ChainRun again = run_chain(*alloc, 6, kb);
  EXPECT_TRUE(again.output->data() < base || again.output->data() >= base + 2 * kb);
  EXPECT_EQ(region->used(), kb);

  // A region too small for the surviving block: the cache serves it, the run is unharmed.
  auto tiny = std::make_shared<SurvivorRegion>(base, 4096, nullptr);
  alloc->set_survivor_region(tiny);
  ChainRun small = run_chain(*alloc, 6, kb);
  EXPECT_EQ(tiny->used(), 0u);
  EXPECT_EQ(tiny->live(), 0u);
  EXPECT_EQ(static_cast<unsigned char*>(small.output->data())[0], 6);

  // A run that releases nothing (its one block is its output): no arena, yet the plan
  // places the output in a region lent to the run.
  auto single = std::make_shared<PlannedHostAllocator>("single");
  run_chain(*single, 1, kb);
  EXPECT_EQ(single->stats().arena, 0u);
  auto lent = std::make_shared<SurvivorRegion>(base, 2 * kb, nullptr);
  single->set_survivor_region(lent);
  ChainRun one = run_chain(*single, 1, kb);
  EXPECT_EQ(one.output->data(), base);
  EXPECT_EQ(lent->live(), 1u);
  one.output.reset();
  EXPECT_EQ(lent->live(), 0u);
  ChainRun longer = run_chain(*single, 3, kb);  // another run: planned again, unharmed
  EXPECT_EQ(static_cast<unsigned char*>(longer.output->data())[0], 3);

  // Withdrawn before any run took it: untouched.
  auto unused = std::make_shared<SurvivorRegion>(base, 2 * kb, nullptr);
  alloc->set_survivor_region(unused);
  alloc->set_survivor_region(nullptr);
  run_chain(*alloc, 6, kb);
  EXPECT_EQ(unused->used(), 0u);
}

TEST(BestFitRanges, AFreedBlockIsUsedAgainAndTheTopComesDown) {
  BestFitRanges r(1000);
  EXPECT_EQ(r.take(100), 0u);
  EXPECT_EQ(r.take(200), 100u);
  EXPECT_EQ(r.take(300), 300u);
  r.give(100, 200);
  EXPECT_EQ(r.take(150), 100u) << "into the hole, not at the top";
  EXPECT_EQ(r.top(), 600u);
  r.give(300, 300);  // the block at the top: the top comes down to the hole's rest
  EXPECT_EQ(r.top(), 250u);
  EXPECT_TRUE(r.free_ranges().empty()) << "a free range reaching the top is not kept";
  EXPECT_EQ(r.high_water(), 600u);
  EXPECT_EQ(r.live_blocks(), 2u);
}

TEST(BestFitRanges, NeighboursMergeAndTheSmallestHoleThatFitsIsChosen) {
  BestFitRanges r(1 << 20);
  std::vector<size_t> at;
  for (size_t size : {64, 64, 64, 64, 320, 64, 192, 64}) at.push_back(*r.take(size));
  r.give(at[1], 64);
  r.give(at[2], 64);  // merges with at[1]: a hole of 128
  r.give(at[6], 192);
  r.give(at[4], 320);
  ASSERT_EQ(r.free_ranges().size(), 3u);
  EXPECT_EQ(r.take(128), at[1]) << "128 fits the merged hole exactly";
  EXPECT_EQ(r.take(150), at[6]) << "the 192 hole, not the 320 one";
  EXPECT_EQ(r.take(320), at[4]);
  EXPECT_FALSE(r.take(size_t{1} << 21).has_value()) << "beyond the capacity";
  EXPECT_FALSE(r.take(0).has_value());
}

TEST(BestFitRanges, RandomBlocksNeverOverlapAndFreeRangesStayDisjoint) {
  std::mt19937 rng(7);
  BestFitRanges r(size_t{1} << 30);
  std::map<size_t, size_t> live;  // offset → size
  size_t peak = 0, bytes = 0;
  for (int step = 0; step < 20000; ++step) {
    if (live.empty() || rng() % 100 < 55) {
      const size_t size = 64 * (1 + rng() % 64);
      auto off = r.take(size);
      ASSERT_TRUE(off.has_value());
      auto next = live.lower_bound(*off);
      if (next != live.end()) {
        ASSERT_LE(*off + size, next->first) << "overlaps the next live block";
      }
      if (next != live.begin()) {
        ASSERT_LE(std::prev(next)->first + std::prev(next)->second, *off) << "overlaps the previous one";
      }
      live.emplace(*off, size);
      bytes += size;
      peak = std::max(peak, bytes);
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      r.give(it->first, it->second);
      bytes -= it->second;
      live.erase(it);
    }
  }
  size_t free_bytes = 0, last_end = 0;
  for (const auto& [off, size] : r.free_ranges()) {
    EXPECT_GE(off, last_end) << "free ranges are disjoint";
    last_end = off + size;
    free_bytes += size;
    auto next = live.lower_bound(off);
    if (next != live.end()) {
      EXPECT_LE(off + size, next->first) << "a free range covers a live block";
    }
  }
  EXPECT_LE(last_end, r.top());
  EXPECT_EQ(free_bytes + bytes, r.top()) << "below the top every byte is live or free";
  EXPECT_EQ(r.live_blocks(), live.size());
  EXPECT_LT(r.high_water(), peak * 3 / 2) << "freed memory is used again";
}

// Blocks of a chain whose sizes all differ: no two share a size class of the cache, so
// without the recording heap a first run touches each anew.
TEST(PlannedHostAllocator, TheRecordedRunUsesItsFreedMemoryAgain) {
  auto probe = RecordingHeap::make();
  if (!probe) GTEST_SKIP() << "no recording heap in this build (sanitizers keep malloc)";
  probe.reset();
  auto alloc = std::make_shared<PlannedHostAllocator>("test");
  auto ra = alloc->open_run();
  ASSERT_NE(ra, nullptr);
  std::shared_ptr<Buffer> prev;
  uintptr_t lowest = UINTPTR_MAX, highest = 0;  // the span of bytes the run touched
  const size_t kb = 1024;
  for (int i = 0; i < 16; ++i) {
    const size_t bytes = (256 - 8 * i) * kb;
    auto b = ra->allocate(bytes);
    ASSERT_TRUE(b.is_ok());
    std::memset((*b)->data(), i + 1, bytes);
    if (prev) {
      EXPECT_EQ(static_cast<unsigned char*>(prev->data())[0], i) << "a live block was overwritten";
    }
    lowest = std::min(lowest, reinterpret_cast<uintptr_t>((*b)->data()));
    highest = std::max(highest, reinterpret_cast<uintptr_t>((*b)->data()) + bytes);
    prev = *b;
  }
  // Two blocks are alive at a time, 512 KiB at most: 16 fresh blocks would span 3 MiB.
  EXPECT_LE(highest - lowest, 2 * 256 * kb) << "each block went where earlier ones were freed";
  ra->finish(true);
  ra.reset();
  EXPECT_EQ(static_cast<unsigned char*>(prev->data())[136 * kb - 1], 16) << "the output kept by its caller is intact";
  EXPECT_GT(alloc->stats().arena, 0u);
  prev.reset();  // the heap's last block: its range goes
  ChainRun next = run_chain(*alloc, 4, 4096);
  EXPECT_EQ(static_cast<unsigned char*>(next.output->data())[4095], 4);
}

}  // namespace
}  // namespace bulkhead
