// DrainChecked (thread_buffer.h): the hosted writer reads rings another process writes, so a
// ring whose records were scribbled over must end the drain, never make it read outside.
#include "agent/recorder/thread_buffer.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

namespace memlens::agent {
namespace {

struct Ring {
  std::unique_ptr<uint8_t[]> bytes{new uint8_t[ThreadBuffer::kInitialCapacity]()};
  ThreadBuffer buffer;
  Ring() { buffer.data = bytes.get(); }

  // A malloc of `size` with a stack of `frames` changed frames (the `kept` word first).
  RawEvent* Malloc(uint64_t seq, uint64_t size, uint16_t frames) {
    const uint32_t bytes = sizeof(RawEvent) + (1 + frames) * sizeof(uint64_t);
    RawEvent* e = buffer.Reserve(bytes);
    e->seq = seq;
    e->address = 0x1000 + seq * 64;
    e->size = size;
    e->kind = static_cast<uint8_t>(format::EventKind::kMalloc);
    e->flags = kHasStack;
    e->frame_count = frames;
    e->record_size = bytes;
    auto* words = reinterpret_cast<uint64_t*>(e + 1);
    words[0] = 0;
    for (int i = 0; i < frames; ++i) words[1 + i] = 0x400000 + i;
    buffer.Commit(bytes);
    return e;
  }

  std::vector<uint64_t> DrainSeqs() {
    std::vector<uint64_t> seqs;
    alignas(8) static uint8_t copy[kMaxRecordSize];
    buffer.DrainChecked(bytes.get(), ~uint64_t{0}, copy, [&](const RawEvent& e) {
      EXPECT_TRUE(RecordIsWhole(e, e.record_size));
      seqs.push_back(e.seq);
    });
    return seqs;
  }
};

TEST(ThreadBufferDrainChecked, WholeRecordsComeThroughAsCommitted) {
  Ring ring;
  for (uint64_t i = 0; i < 100; ++i) ring.Malloc(i, 24 + i, static_cast<uint16_t>(i % 5));
  std::vector<uint64_t> seqs = ring.DrainSeqs();
  ASSERT_EQ(seqs.size(), 100u);
  for (uint64_t i = 0; i < 100; ++i) EXPECT_EQ(seqs[i], i);
  EXPECT_EQ(ring.buffer.UsedBytes(), 0u);
}

TEST(ThreadBufferDrainChecked, ARecordThatIsNotWholeEndsTheDrainAndEmptiesTheRing) {
  for (int damage = 0; damage < 3; ++damage) {
    Ring ring;
    for (uint64_t i = 0; i < 3; ++i) ring.Malloc(i, 8, 2);
    RawEvent* bad = ring.Malloc(3, 8, 2);
    for (uint64_t i = 4; i < 6; ++i) ring.Malloc(i, 8, 2);
    if (damage == 0) bad->record_size = 1u << 30;      // beyond the ring
    if (damage == 1) bad->frame_count = 1000;          // more frames than the record holds
    if (damage == 2) bad->kind = 200;                  // no such event
    EXPECT_EQ(ring.DrainSeqs(), (std::vector<uint64_t>{0, 1, 2})) << damage;
    EXPECT_EQ(ring.buffer.UsedBytes(), 0u);
    ring.Malloc(6, 8, 2);  // the ring goes on
    EXPECT_EQ(ring.DrainSeqs(), (std::vector<uint64_t>{6}));
  }
}

TEST(ThreadBufferDrainChecked, RandomBytesNeverReadOutsideTheRing) {
  std::mt19937_64 random(7);
  for (int round = 0; round < 200; ++round) {
    Ring ring;
    for (uint64_t i = 0; i < 300; ++i) ring.Malloc(i, 8, static_cast<uint16_t>(i % 9));
    const size_t used = ring.buffer.UsedBytes();
    for (int i = 0; i < 64; ++i) ring.bytes[random() % used] = static_cast<uint8_t>(random());
    EXPECT_LE(ring.DrainSeqs().size(), 300u);  // under ASan/valgrind: no read past the ring
    EXPECT_EQ(ring.buffer.UsedBytes(), 0u);
  }
}

}  // namespace
}  // namespace memlens::agent
