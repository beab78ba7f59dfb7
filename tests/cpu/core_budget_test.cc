// The process-wide core budget of CPU runs (backends/cpu/core_budget.h).
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "backends/cpu/core_budget.h"

namespace bulkhead::cpu {
namespace {

TEST(CoreBudget, GrantsWhatIsFreeAndAtLeastOne) {
  CoreBudget b(2);
  int first = b.acquire(2);
  EXPECT_EQ(first, 2);
  int second = b.acquire(2);  // nothing free: one thread, never a wait
  EXPECT_EQ(second, 1);
  EXPECT_EQ(b.in_use(), 3);
  b.release(first);
  EXPECT_EQ(b.acquire(4), 1);  // one core free of two
  b.release(second);
  b.release(1);
  EXPECT_EQ(b.in_use(), 0);
  EXPECT_EQ(b.acquire(1), 1);
  EXPECT_EQ(b.acquire(1), 1);
  EXPECT_EQ(b.in_use(), 2);
}

TEST(CoreBudget, ConcurrentRunsNeverExceedTheCoresWhileThereIsRoom) {
  CoreBudget b(4);
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        int g = b.acquire(2);
        EXPECT_GE(g, 1);
        EXPECT_LE(g, 2);
        b.release(g);
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(b.in_use(), 0);
}

}  // namespace
}  // namespace bulkhead::cpu
