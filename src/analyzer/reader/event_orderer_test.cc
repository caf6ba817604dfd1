// EventOrderer: interleaved per-thread runs come out in global sequence order; gaps that never
// fill are skipped and counted.
#include "analyzer/reader/event_orderer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace memlens::analyzer {
namespace {

format::Event E(uint64_t seq, uint32_t thread) {
  format::Event e;
  e.seq = seq;
  e.thread = thread;
  return e;
}

TEST(EventOrderer, RestoresOrderAcrossThreads) {
  std::vector<uint64_t> out;
  EventOrderer orderer([&](const format::Event& e) { out.push_back(e.seq); });
  // Thread 1 holds 0,2,4..; thread 2 holds 1,3,5..; the writer drained them batch by batch.
  std::vector<format::Event> t1, t2;
  for (uint64_t s = 0; s < 1000; ++s) (s % 2 ? t2 : t1).push_back(E(s, s % 2 ? 2 : 1));
  for (size_t batch = 0; batch < 500; batch += 100) {
    for (size_t i = batch; i < batch + 100; ++i) orderer.Add(t2[i]);
    for (size_t i = batch; i < batch + 100; ++i) orderer.Add(t1[i]);
  }
  orderer.Finish();
  ASSERT_EQ(out.size(), 1000u);
  for (uint64_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], i);
  EXPECT_EQ(orderer.gaps(), 0u);
}

// The writer drains threads in batches of any length, so a thread's queue fills, wraps around
// and grows while it is half taken, and gives its memory back once empty after a long batch:
// every event must still come out once, in order, whole.
TEST(EventOrderer, RestoresOrderThroughQueuesThatWrapAndGrow) {
  constexpr uint64_t kEvents = 600000;
  constexpr uint32_t kThreads = 4;
  std::mt19937_64 random(6);
  std::vector<std::vector<format::Event>> by_thread(kThreads);
  std::vector<uint32_t> thread_of(kEvents);
  for (uint64_t s = 0; s < kEvents; ++s) {
    thread_of[s] = static_cast<uint32_t>(random() % kThreads);
    format::Event e = E(s, thread_of[s]);
    e.address = s * 16 + 1;
    by_thread[thread_of[s]].push_back(e);
  }
  std::vector<format::Event> out;
  EventOrderer orderer([&](const format::Event& e) { out.push_back(e); });
  std::vector<size_t> next(kThreads, 0);
  for (size_t left = kEvents; left > 0;) {
    uint32_t t = static_cast<uint32_t>(random() % kThreads);
    size_t batch = 1 + random() % (random() % 50 ? 700 : 150000);
    for (; batch > 0 && next[t] < by_thread[t].size(); --batch, --left) orderer.Add(by_thread[t][next[t]++]);
  }
  orderer.Finish();
  ASSERT_EQ(out.size(), kEvents);
  for (uint64_t s = 0; s < kEvents; ++s) {
    ASSERT_EQ(out[s].seq, s);
    ASSERT_EQ(out[s].thread, thread_of[s]);
    ASSERT_EQ(out[s].address, s * 16 + 1);
  }
  EXPECT_EQ(orderer.gaps(), 0u);
}

TEST(EventOrderer, SkipsGapsThatNeverFill) {
  std::vector<uint64_t> out;
  EventOrderer orderer([&](const format::Event& e) { out.push_back(e.seq); }, /*max_pending=*/8);
  orderer.Add(E(0, 1));
  for (uint64_t s = 5; s < 30; ++s) orderer.Add(E(s, 1));  // 1..4 were lost
  orderer.Finish();
  ASSERT_EQ(out.size(), 26u);
  EXPECT_EQ(out[1], 5u);
  EXPECT_TRUE(std::is_sorted(out.begin(), out.end()));
  EXPECT_EQ(orderer.gaps(), 4u);
}

}  // namespace
}  // namespace memlens::analyzer
