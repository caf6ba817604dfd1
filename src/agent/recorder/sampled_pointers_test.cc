// SampledPointers: every remembered block is found and removed exactly once, absent ones are
// never reported taken, through growth, backward-shift deletion and many threads at once.
#include "agent/recorder/sampled_pointers.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

namespace memlens::agent {
namespace {

std::unique_ptr<SampledPointers> NewSet() {
  auto set = std::make_unique<SampledPointers>();
  EXPECT_TRUE(set->Init());
  return set;
}

TEST(SampledPointers, TakesWhatWasInsertedOnce) {
  auto set = NewSet();
  ASSERT_TRUE(set->Insert(0x1000, 24));
  ASSERT_TRUE(set->Insert(0x2000, 4096));
  uint64_t size = 0;
  EXPECT_EQ(set->Take(0x3000, &size), SampledPointers::Lookup::kAbsent);
  EXPECT_EQ(set->Take(0x1000, &size), SampledPointers::Lookup::kTaken);
  EXPECT_EQ(size, 24u);
  EXPECT_EQ(set->Take(0x1000, &size), SampledPointers::Lookup::kAbsent);
  EXPECT_EQ(set->Take(0x2000, &size), SampledPointers::Lookup::kTaken);
  EXPECT_EQ(size, 4096u);
  EXPECT_EQ(set->Count(), 0u);
  // A stale entry at a reused address is overwritten, not duplicated.
  ASSERT_TRUE(set->Insert(0x5000, 1));
  ASSERT_TRUE(set->Insert(0x5000, 2));
  EXPECT_EQ(set->Count(), 1u);
  EXPECT_EQ(set->Take(0x5000, &size), SampledPointers::Lookup::kTaken);
  EXPECT_EQ(size, 2u);
}

// Far more entries than the first tables hold, removed in an order unrelated to insertion:
// growth keeps every entry and backward shifts never cut a probe run.
TEST(SampledPointers, GrowsAndDeletesWithoutLosingEntries) {
  auto set = NewSet();
  constexpr uint64_t kCount = 200000;  // ~12 times the first tables' capacity
  for (uint64_t i = 1; i <= kCount; ++i) ASSERT_TRUE(set->Insert(i * 16, i));
  EXPECT_EQ(set->Count(), kCount);
  uint64_t size = 0;
  for (uint64_t i = 1; i <= kCount; i += 2) {  // every odd one
    ASSERT_EQ(set->Take(i * 16, &size), SampledPointers::Lookup::kTaken) << i;
    ASSERT_EQ(size, i);
  }
  for (uint64_t i = 1; i <= kCount; ++i) {
    auto expected = i % 2 ? SampledPointers::Lookup::kAbsent : SampledPointers::Lookup::kTaken;
    ASSERT_EQ(set->Take(i * 16, &size), expected) << i;
  }
  EXPECT_EQ(set->Count(), 0u);
}

// The filter in front of the tables: never a false "not sampled" for a live block, a clear bit
// again once the last block on it is gone, and few false "maybe" with a churn-sized set (250
// live blocks: about 250/65,536 of other addresses, docs/sampling.md).
TEST(SampledPointers, FilterAnswersMostUnsampledFreesAlone) {
  auto set = NewSet();
  constexpr uint64_t kLive = 250;
  auto live = [](uint64_t i) { return 0x7f0000000000 + i * 4112; };  // heap-like addresses
  for (uint64_t i = 0; i < kLive; ++i) ASSERT_TRUE(set->Insert(live(i), 64));
  for (uint64_t i = 0; i < kLive; ++i) ASSERT_TRUE(set->MaybeSampled(live(i))) << i;
  constexpr uint64_t kOthers = 200000;
  uint64_t maybe = 0;
  for (uint64_t i = 0; i < kOthers; ++i) maybe += set->MaybeSampled(0x560000000000 + i * 48);
  EXPECT_LT(maybe, kOthers / 100);  // expected about 0.4%; the 512-byte filter gave 6%
  uint64_t size = 0;
  for (uint64_t i = 0; i < kLive; ++i) {
    ASSERT_EQ(set->Take(live(i), &size), SampledPointers::Lookup::kTaken);
  }
  for (uint64_t i = 0; i < kLive; ++i) EXPECT_FALSE(set->MaybeSampled(live(i))) << i;
}

// Two live blocks on one filter bit: taking one must leave the bit set for the other (else
// the other's free would be missed), and taking both clears it.
TEST(SampledPointers, FilterBitStaysWhileAnotherBlockHoldsIt) {
  auto set = NewSet();
  constexpr uint64_t kFirst = 0x7f0000001010;
  ASSERT_TRUE(set->Insert(kFirst, 64));
  uint64_t second = kFirst + 16;
  while (!set->MaybeSampled(second)) second += 16;  // ~65,536 steps: one bit in 65,536
  ASSERT_TRUE(set->Insert(second, 32));
  uint64_t size = 0;
  ASSERT_EQ(set->Take(kFirst, &size), SampledPointers::Lookup::kTaken);
  EXPECT_TRUE(set->MaybeSampled(second));
  ASSERT_EQ(set->Take(second, &size), SampledPointers::Lookup::kTaken);
  EXPECT_EQ(size, 32u);
  EXPECT_FALSE(set->MaybeSampled(second));
  EXPECT_FALSE(set->MaybeSampled(kFirst));
}

// A program's steady churn: a window of live sampled blocks, the oldest taken as each new one
// comes. Each removal clears its bit unless a live block still holds it, so after 100 times
// the window's worth of blocks the filter passes as few other addresses as with the window
// alone (about 0.4%), where bits that were never cleared would pass most of them.
TEST(SampledPointers, FilterStaysSelectiveThroughChurn) {
  auto set = NewSet();
  constexpr uint64_t kLive = 250, kBlocks = 100 * kLive;
  auto block = [](uint64_t i) { return 0x7f0000000000 + i * 2064; };
  uint64_t size = 0;
  for (uint64_t i = 0; i < kBlocks; ++i) {
    ASSERT_TRUE(set->Insert(block(i), 64));
    if (i >= kLive) {
      ASSERT_EQ(set->Take(block(i - kLive), &size), SampledPointers::Lookup::kTaken);
    }
  }
  for (uint64_t i = kBlocks - kLive; i < kBlocks; ++i) ASSERT_TRUE(set->MaybeSampled(block(i)));
  constexpr uint64_t kOthers = 200000;
  uint64_t maybe = 0;
  for (uint64_t i = 0; i < kOthers; ++i) maybe += set->MaybeSampled(0x560000000000 + i * 48);
  EXPECT_LT(maybe, kOthers / 100);
}

// A large heap: 131,072 live sampled blocks (4 GiB at the default rate) would set most bits of
// a fixed 65,536-bit filter, and most frees would then lock a shard and probe its table. Each
// shard's part grows instead: every live block still reads "maybe", few other addresses do,
// and taking them all leaves a filter that passes nothing.
TEST(SampledPointers, FilterGrowsWithTheHeap) {
  auto set = NewSet();
  constexpr uint64_t kLive = 131072;
  auto block = [](uint64_t i) { return 0x7f0000000000 + i * 4112; };
  const uint64_t first_bits = set->FilterBitsOfShard(block(0));
  for (uint64_t i = 0; i < kLive; ++i) ASSERT_TRUE(set->Insert(block(i), 4096));
  EXPECT_GE(set->FilterBitsOfShard(block(0)), 64 * first_bits);
  for (uint64_t i = 0; i < kLive; ++i) ASSERT_TRUE(set->MaybeSampled(block(i))) << i;
  constexpr uint64_t kOthers = 200000;
  uint64_t maybe = 0;
  for (uint64_t i = 0; i < kOthers; ++i) maybe += set->MaybeSampled(0x560000000000 + i * 48);
  EXPECT_LT(maybe, kOthers * 2 / 100);  // at most ~1.5% by design; 33% with a fixed filter
  uint64_t size = 0;
  for (uint64_t i = 0; i < kLive; ++i) {
    ASSERT_EQ(set->Take(block(i), &size), SampledPointers::Lookup::kTaken) << i;
  }
  maybe = 0;
  for (uint64_t i = 0; i < kLive; ++i) maybe += set->MaybeSampled(block(i));
  EXPECT_EQ(maybe, 0u);
  EXPECT_EQ(set->Count(), 0u);
}

// Threads insert and take their own blocks while others ask about blocks that were never
// sampled: no false "taken", no lost entry, nothing left at the end. A wait gives up (kBusy, or
// an Insert that returns false) only when a lock word stays unchanged for 100 ms, which a very
// busy machine could still cause; that is allowed, and counted apart from wrong answers.
TEST(SampledPointers, ManyThreads) {
  auto set = NewSet();
  constexpr int kThreads = 8;
  constexpr uint64_t kPerThread = 50000;
  std::atomic<uint64_t> wrong{0}, busy{0};
  std::vector<std::thread> threads;
  using Lookup = SampledPointers::Lookup;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      uint64_t base = (static_cast<uint64_t>(t) + 1) << 40;
      std::vector<bool> inserted(kPerThread);
      uint64_t size;
      auto take_mine = [&](uint64_t i) {
        // Other threads' removals clear filter bits and their insertions grow the filter's
        // parts (about 270,000 blocks live at the most) meanwhile: a live block's bit never
        // reads clear.
        if (inserted[i] && !set->MaybeSampled(base + i * 32)) ++wrong;
        Lookup got = set->Take(base + i * 32, &size);
        if (got == Lookup::kBusy) {
          ++busy;
        } else if (got != (inserted[i] ? Lookup::kTaken : Lookup::kAbsent) ||
                   (got == Lookup::kTaken && size != i + 1)) {
          ++wrong;
        }
      };
      for (uint64_t i = 0; i < kPerThread; ++i) {
        inserted[i] = set->Insert(base + i * 32, i + 1);
        if (!inserted[i]) ++busy;
        // Never inserted by anyone: must read as absent.
        Lookup never = set->Take(base + (uint64_t{1} << 39) + i * 32, &size);
        if (never == Lookup::kTaken) ++wrong;
        if (never == Lookup::kBusy) ++busy;
        if (i % 3 == 0) take_mine(i);  // free some at once, keep the rest live for a while
      }
      for (uint64_t i = 0; i < kPerThread; ++i) {
        if (i % 3 != 0) take_mine(i);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_LT(busy.load(), kThreads * kPerThread / 1000) << "bounded waits gave up too often";
  if (busy.load() == 0) {
    EXPECT_EQ(set->Count(), 0u);
  }
}

// A lock holder descheduled for a scheduler tick or more (common with more threads than cores):
// the waiter outlasts it instead of dropping the block. 128 spins and 384 yields alone gave up
// after well under a millisecond (churn with 4 threads on 2 cores lost sampled blocks in most
// runs).
TEST(SampledPointers, WaitsOutAPreemptedHolder) {
  auto set = NewSet();
  constexpr uint64_t kAddress = 0x7f0000001000;
  uint32_t seq;
  ASSERT_TRUE(set->LockShardOf(kAddress, &seq));
  std::thread holder([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    set->UnlockShardOf(kAddress, seq);
  });
  EXPECT_TRUE(set->Insert(kAddress, 64));
  holder.join();
  uint64_t size = 0;
  EXPECT_EQ(set->Take(kAddress, &size), SampledPointers::Lookup::kTaken);
  EXPECT_EQ(size, 64u);
}

// A holder that never comes back (a thread that jumped out of a signal handler mid-operation):
// the first waiter gives up after the stuck bound, the next ones at once, so the program slows
// down once, not on every sampled block of that shard; other shards are unaffected.
TEST(SampledPointers, GivesUpOnAHolderThatNeverReturns) {
  auto set = NewSet();
  constexpr uint64_t kLive = 0x7f0000001000;
  uint64_t same = kLive + 16, other = kLive + 16;  // one more in its shard, one elsewhere
  while (SampledPointers::ShardOf(same) != SampledPointers::ShardOf(kLive)) same += 16;
  while (SampledPointers::ShardOf(other) == SampledPointers::ShardOf(kLive)) other += 16;
  ASSERT_TRUE(set->Insert(kLive, 64));
  uint32_t seq;
  ASSERT_TRUE(set->LockShardOf(kLive, &seq));
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  EXPECT_FALSE(set->Insert(same, 32));
  auto first = Clock::now() - start;
  EXPECT_GE(first, std::chrono::milliseconds(100));
  EXPECT_LT(first, std::chrono::seconds(2));
  start = Clock::now();
  uint64_t size = 0;
  EXPECT_EQ(set->Take(kLive, &size), SampledPointers::Lookup::kBusy);
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(20));
  EXPECT_TRUE(set->Insert(other, 8));
  // Once the holder is back, the shard works again.
  set->UnlockShardOf(kLive, seq);
  EXPECT_TRUE(set->Insert(same, 32));
  EXPECT_EQ(set->Take(kLive, &size), SampledPointers::Lookup::kTaken);
  EXPECT_EQ(set->Take(same, &size), SampledPointers::Lookup::kTaken);
}

}  // namespace
}  // namespace memlens::agent
