// Placing blocks of known lifetimes in one arena: offline dynamic storage allocation.
//
// Each block has a size and a lifetime [start, end) on a clock of allocation and release
// events. Two blocks whose lifetimes overlap get disjoint byte ranges; blocks that are
// never alive together may share bytes. The arena is as small as this greedy finds:
// blocks are placed largest first, each in the smallest gap left between the blocks
// already placed that it overlaps in time (or after the last of them). The result is
// never below the largest number of bytes alive at once (peak_live_bytes) and, on the
// chains and branches of inference graphs, close to it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace bulkhead {

struct ArenaBlock {
  size_t size = 0;     // bytes, a multiple of the plan's alignment
  uint64_t start = 0;  // alive from this event ...
  uint64_t end = 0;    // ... until this one (exclusive); end > start
};

struct ArenaPlan {
  std::vector<size_t> offsets;  // one per block, multiples of the alignment
  size_t size = 0;              // bytes the arena needs
};

// Whether two blocks are alive at the same time.
inline bool lifetimes_overlap(const ArenaBlock& a, const ArenaBlock& b) { return a.start < b.end && b.start < a.end; }

ArenaPlan plan_arena(const std::vector<ArenaBlock>& blocks);

// The most bytes alive at any one time: a lower bound on any plan's size.
size_t peak_live_bytes(const std::vector<ArenaBlock>& blocks);

}  // namespace bulkhead
