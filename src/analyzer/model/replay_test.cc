// Replay of hand-built captures: exact totals, peak contributions, leaks, realloc and
// partial munmap accounting, temporaries, histograms, checkpoints, the address map, sampling.
// (The load policy's tests: load_profile_test.cc.)
#include "analyzer/model/replay.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "analyzer/model/replay_test_capture.h"

namespace memlens::analyzer {
namespace {

using format::EventKind;
using testing::CaptureBuilder;
using testing::Load;
using testing::Save;

TEST(Replay, PeakLeaksAndPerStackShares) {
  CaptureBuilder b;
  b.Add(EventKind::kMalloc, 0xa0, 100, 1);
  b.Add(EventKind::kMalloc, 0xb0, 200, 2);
  b.Add(EventKind::kMalloc, 0xc0, 300, 1);  // peak: 600 = stack1 400 + stack2 200
  b.Add(EventKind::kFree, 0xa0);
  b.Add(EventKind::kFree, 0xc0);
  b.Add(EventKind::kMalloc, 0xd0, 50, 3);   // 250 live: below the peak
  b.Add(EventKind::kFree, 0xdead);          // never allocated while recording
  Profile p = Load(b.File(true));
  EXPECT_EQ(p.totals.allocations, 4u);
  EXPECT_EQ(p.totals.allocated_bytes, 650u);
  EXPECT_EQ(p.totals.frees, 2u);
  EXPECT_EQ(p.totals.peak_bytes, 600u);
  EXPECT_EQ(p.totals.peak_blocks, 3u);
  EXPECT_EQ(p.totals.peak_seq, 2u);
  EXPECT_EQ(p.totals.in_use_bytes, 250u);
  EXPECT_EQ(p.totals.in_use_blocks, 2u);
  EXPECT_EQ(p.totals.unmatched_frees, 1u);
  EXPECT_EQ(p.stacks[1].peak_bytes, 400u);
  EXPECT_EQ(p.stacks[1].in_use_bytes, 0u);
  EXPECT_EQ(p.stacks[2].peak_bytes, 200u);
  EXPECT_EQ(p.stacks[2].in_use_bytes, 200u);
  EXPECT_EQ(p.stacks[3].peak_bytes, 0u);
  EXPECT_EQ(p.stacks[3].in_use_bytes, 50u);
  EXPECT_TRUE(p.warnings.empty());
}

TEST(Replay, ReallocMovesTheBlockToTheNewSite) {
  CaptureBuilder b;
  b.Add(EventKind::kMalloc, 0xa0, 100, 1);
  b.Add(EventKind::kReallocOld, 0xa0);
  b.Add(EventKind::kRealloc, 0xe0, 1000, 2);
  b.Add(EventKind::kReallocOld, 0xe0);
  b.Add(EventKind::kReallocFailed, 0xe0);  // the block at 0xe0 survives a failed realloc
  Profile p = Load(b.File(true));
  EXPECT_EQ(p.totals.allocations, 2u);
  EXPECT_EQ(p.totals.in_use_bytes, 1000u);
  EXPECT_EQ(p.stacks[2].in_use_blocks, 1u);
  EXPECT_EQ(p.stacks[1].in_use_bytes, 0u);
  EXPECT_EQ(p.totals.peak_bytes, 1000u);
}

TEST(Replay, PartialMunmapKeepsTheRest) {
  CaptureBuilder b;
  b.Add(EventKind::kMmap, 0x10000, 0x4000, 4);  // four pages
  b.Add(EventKind::kMunmap, 0x11000, 0x1000);    // punch out the second
  b.Add(EventKind::kMunmap, 0x90000, 0x1000);    // not ours (a file mapping)
  b.Add(EventKind::kMremapOld, 0x12000, 0x2000);
  b.Add(EventKind::kMremapNew, 0x20000, 0x8000, 3);  // grown and moved
  Profile p = Load(b.File(true));
  EXPECT_EQ(p.totals.peak_bytes, 0x9000u);  // after the mremap grew it: 0x1000 + 0x8000
  EXPECT_EQ(p.totals.in_use_bytes, 0x1000u + 0x8000u);
  EXPECT_EQ(p.totals.mapping_in_use_bytes, 0x9000u);
  EXPECT_EQ(p.stacks[4].in_use_bytes, 0x1000u);
  EXPECT_EQ(p.stacks[3].in_use_bytes, 0x8000u);
  EXPECT_EQ(p.stacks[4].allocations, 1u);  // splitting is not allocating
}

// mimalloc's arenas in a free-threaded Python: their own figure, in no heap total; an unmap of
// a mapping's start keeps the rest, one of memory it never mapped changes nothing.
TEST(Replay, MimallocMappingsAreTheirOwnFigure) {
  CaptureBuilder b;
  b.Add(EventKind::kPyObjAlloc, 0x40000010, 64, 1);               // an object inside the arena
  b.Add(EventKind::kMimallocMap, 0x40000000, 0x40000000, 2);      // the 1 GiB arena
  b.Add(EventKind::kMimallocMap, 0x90000000, 0x200000, 2);        // 2 MiB more
  b.Add(EventKind::kMimallocUnmap, 0x90000000, 0x100000);         // its first half trimmed
  b.Add(EventKind::kMimallocUnmap, 0x70000000, 0x1000);           // not mimalloc's
  Profile p = Load(b.File(true));
  EXPECT_EQ(p.totals.mimalloc_peak_bytes, 0x40200000u);
  EXPECT_EQ(p.totals.mimalloc_in_use_bytes, 0x40100000u);
  EXPECT_EQ(p.totals.peak_bytes, 64u);
  EXPECT_EQ(p.totals.in_use_bytes, 64u);
  EXPECT_EQ(p.totals.arena_peak_bytes, 0u);
}

// A runtime's reservation (issue 25): only the accessible pieces count, from the mprotect
// that commits them, at its stack; MAP_FIXED over a committed piece replaces it.
TEST(Replay, ReservedRangesCountOnlyOnceCommitted) {
  CaptureBuilder b;
  b.Add(EventKind::kMalloc, 0xa0, 100, 1);
  b.Add(EventKind::kMmapReserved, 0x100000, 0x100000, 2);  // 1 MiB of address space
  b.Add(EventKind::kProtect, 0x100000, 0x8000, 3);         // commit 32 KiB
  b.Add(EventKind::kProtect, 0x108000, 0x4000, 4);         // and 16 KiB after it
  b.Add(EventKind::kProtect, 0x100000, 0x8000, 4);         // RW to RX: still the same memory
  b.Add(EventKind::kProtect, 0x900000, 0x1000, 4);         // not a tracked mapping: ignored
  b.Add(EventKind::kMmap, 0x10a000, 0x4000, 2);  // MAP_FIXED: half over the 16 KiB, half reserved
  b.Add(EventKind::kProtectNone, 0x102000, 0x6000);        // decommit 24 KiB of the 32
  b.Add(EventKind::kMunmap, 0x10a000, 0xf6000);            // the MAP_FIXED range and the rest
  Profile p = Load(b.File(true));
  EXPECT_EQ(p.totals.peak_bytes, 100u + 0x8000 + 0x2000 + 0x4000);
  EXPECT_EQ(p.totals.peak_seq, 6u);
  EXPECT_EQ(p.totals.in_use_bytes, 100u + 0x2000 + 0x2000);
  EXPECT_EQ(p.totals.heap_peak_bytes, 100u);
  EXPECT_EQ(p.totals.mapping_peak_bytes, 0xe000u);
  EXPECT_EQ(p.totals.mapping_at_peak_bytes, 0xe000u);
  EXPECT_EQ(p.totals.mapping_in_use_bytes, 0x4000u);
  EXPECT_EQ(p.totals.mapping_allocated_bytes, 0x8000u + 0x4000 + 0x4000);
  EXPECT_EQ(p.totals.reserved_bytes, 0x6000u);
  EXPECT_EQ(p.totals.allocations, 4u);  // the malloc, two commits, the MAP_FIXED mapping
  EXPECT_EQ(p.stacks[2].allocated_bytes, 0x4000u);  // the MAP_FIXED mapping, not the reservation
  EXPECT_EQ(p.stacks[3].peak_bytes, 0x8000u);
  EXPECT_EQ(p.stacks[3].in_use_bytes, 0x2000u);
  EXPECT_EQ(p.stacks[3].mapping_in_use_bytes, 0x2000u);
  EXPECT_EQ(p.stacks[4].allocated_bytes, 0x4000u);
  EXPECT_EQ(p.stacks[4].peak_bytes, 0x2000u);
  EXPECT_EQ(p.stacks[1].mapping_peak_bytes, 0u);
}

TEST(Replay, OutOfOrderThreadsAreReorderedBySeq) {
  CaptureBuilder b;
  format::RecordEncoder& enc = b.encoder();
  // Thread 2's batch (seq 1, a free) is written before thread 1's (seq 0, the malloc).
  enc.BeginEvents(2);
  enc.AddEvent({1, EventKind::kFree, 0xa0, 0, 0, 2});
  enc.EndEvents();
  enc.BeginEvents(1);
  enc.AddEvent({0, EventKind::kMalloc, 0xa0, 64, 1, 1});
  enc.EndEvents();
  Profile p = Load(b.File(false));
  EXPECT_EQ(p.totals.in_use_bytes, 0u);
  EXPECT_EQ(p.totals.unmatched_frees, 0u);
  ASSERT_FALSE(p.warnings.empty());  // no END record: the profile says it is incomplete
  EXPECT_NE(p.warnings[0].find("did not finish"), std::string::npos);
}

// A heap whose table of live blocks outgrows 1 MiB is replayed through the grouped,
// prefetching path (Replayer::WantsUpcoming); its figures stay exact, across chunks and with
// two threads' events written out of order.
TEST(Replay, LargeHeapsReplayExactlyThroughTheGroupedPath) {
  CaptureBuilder b;
  format::RecordEncoder& enc = b.encoder();
  constexpr uint64_t kBlocks = 60000, kOthers = 1000, kKept = 10;
  auto block = [](uint64_t i) { return 0x10000000 + 64 * i; };
  auto other = [](uint64_t j) { return 0x70000000 + 128 * j; };
  enc.BeginEvents(1);
  for (uint64_t i = 0; i < kBlocks; ++i) {
    enc.AddEvent({b.NextSeq(), EventKind::kMalloc, block(i), 32, 1 + i % 4, 1});
  }
  enc.EndEvents();
  b.NextChunk();
  // Thread 2 allocates 100 bytes and thread 1 frees 32, alternately in sequence order, each
  // thread's events in a batch of its own (thread 2's first): the orderer interleaves them.
  std::vector<format::Event> allocs, frees;
  for (uint64_t j = 0; j < kOthers; ++j) {
    allocs.push_back({b.NextSeq(), EventKind::kMalloc, other(j), 100, 2, 2});
    frees.push_back({b.NextSeq(), EventKind::kFree, block(j), 0, 0, 1});
  }
  for (const auto* batch : {&allocs, &frees}) {
    enc.BeginEvents(batch->front().thread);
    for (const format::Event& e : *batch) enc.AddEvent(e);
    enc.EndEvents();
  }
  b.NextChunk();
  enc.BeginEvents(1);
  for (uint64_t i = kOthers; i < kBlocks; ++i) {
    enc.AddEvent({b.NextSeq(), EventKind::kFree, block(i), 0, 0, 1});
  }
  enc.EndEvents();
  enc.BeginEvents(2);
  for (uint64_t j = kKept; j < kOthers; ++j) {
    enc.AddEvent({b.NextSeq(), EventKind::kFree, other(j), 0, 0, 2});
  }
  enc.EndEvents();
  Profile p = Load(b.File(true));
  EXPECT_EQ(p.totals.allocations, kBlocks + kOthers);
  EXPECT_EQ(p.totals.allocated_bytes, kBlocks * 32 + kOthers * 100);
  EXPECT_EQ(p.totals.frees, kBlocks + kOthers - kKept);
  EXPECT_EQ(p.totals.unmatched_frees, 0u);
  // The peak comes right after thread 2's last allocation: each pair before it added 68 bytes.
  EXPECT_EQ(p.totals.peak_bytes, kBlocks * 32 + 68 * (kOthers - 1) + 100);
  EXPECT_EQ(p.totals.peak_blocks, kBlocks + 1);
  EXPECT_EQ(p.totals.in_use_bytes, kKept * 100);
  EXPECT_EQ(p.totals.in_use_blocks, kKept);
}

TEST(Replay, TemporariesHistogramCheckpointsAndAddressMap) {
  CaptureBuilder b;
  format::RecordEncoder& enc = b.encoder();
  b.Add(EventKind::kMalloc, 0x100000, 100, 1);   // kept
  b.Add(EventKind::kMalloc, 0x100100, 3000, 2);  // freed at once: temporary
  b.Add(EventKind::kFree, 0x100100);
  enc.Time({1'000'000'000, 3});                   // 1 s: events 0..2 happened before
  b.Add(EventKind::kMalloc, 0x100200, 40, 2);    // not temporary: another allocation follows
  b.Add(EventKind::kMalloc, 0x900000, 5000, 3);  // 9 MiB away from the others: its own region
  b.Add(EventKind::kFree, 0x100200);
  enc.Time({2'000'000'000, 6});
  std::string path = Save(b.File(true));
  Profile p;
  std::string error;
  ReplayOptions options;
  options.checkpoint_seconds = {0.5, 1.5};
  options.address_map = true;
  options.stack_size_histograms = true;
  ASSERT_TRUE(LoadProfile(path, SnapshotSpec{}, options, &p, &error)) << error;
  std::remove(path.c_str());

  EXPECT_EQ(p.totals.temporary, 1u);
  EXPECT_EQ(p.stacks[2].temporary, 1u);
  EXPECT_EQ(p.stacks[2].temporary_bytes, 3000u);
  EXPECT_EQ(p.stacks[1].temporary, 0u);

  EXPECT_EQ(p.size_histogram[SizeBucketOf(100)].count, 1u);  // [64, 128)
  EXPECT_EQ(p.size_histogram[6].bytes, 100u);
  EXPECT_EQ(p.size_histogram[11].count, 1u);                 // 3000 in [2048, 4096)
  EXPECT_EQ(p.size_histogram[5].count, 1u);                  // 40 in [32, 64)
  EXPECT_EQ(p.stack_size_histograms[2][11].bytes, 3000u);
  EXPECT_EQ(p.stack_size_histograms[2][5].count, 1u);

  ASSERT_EQ(p.checkpoints.size(), 2u);
  EXPECT_EQ(p.checkpoints[0].heap_bytes, 100u);  // at the 1 s mark: only the kept block
  EXPECT_EQ(p.checkpoints[0].live.at(1), (LiveFigures{100, 1}));
  EXPECT_EQ(p.checkpoints[0].live.count(2), 0u);
  EXPECT_EQ(p.checkpoints[1].heap_bytes, 5100u);
  EXPECT_EQ(p.checkpoints[1].live.at(3).bytes, 5000u);

  ASSERT_EQ(p.address_map.size(), 2u);
  EXPECT_EQ(p.address_map[0].begin, 0x100000u);
  EXPECT_EQ(p.address_map[0].end, 0x100064u);
  EXPECT_EQ(p.address_map[0].in_use_bytes, 100u);
  EXPECT_EQ(p.address_map[1].begin, 0x900000u);
  EXPECT_EQ(p.address_map[1].top_stack, 3u);
}

TEST(Replay, AddressMapLargestGap) {
  CaptureBuilder b;
  b.Add(EventKind::kMalloc, 0x10000, 0x100, 1);
  b.Add(EventKind::kMalloc, 0x10100, 0x100, 1);
  b.Add(EventKind::kMalloc, 0x30000, 0x100, 2);  // a 0x1fe00-byte gap before it
  b.Add(EventKind::kMalloc, 0x30200, 0x100, 2);  // and a 0x100-byte one
  std::string path = Save(b.File(true));
  Profile p;
  std::string error;
  ReplayOptions options;
  options.address_map = true;
  ASSERT_TRUE(LoadProfile(path, SnapshotSpec{}, options, &p, &error)) << error;
  std::remove(path.c_str());
  ASSERT_EQ(p.address_map.size(), 1u);
  EXPECT_EQ(p.address_map[0].largest_gap, 0x30000u - 0x10200u);
  EXPECT_EQ(p.address_map[0].end - p.address_map[0].begin, 0x30300u - 0x10000u);
  EXPECT_EQ(p.address_map[0].in_use_bytes, 0x400u);
  EXPECT_EQ(p.address_map[0].blocks, 4u);
}


// docs/sampling.md: a recorded block of s bytes stands for s/p bytes and 1/p blocks, where
// p = 1 - exp(-s/rate) is the chance it was recorded.
double Chance(double size, double rate) { return -std::expm1(-size / rate); }

TEST(Replay, SampledBlocksAreScaledBackByTheirChance) {
  constexpr double kRate = 1000;
  CaptureBuilder b(1000);
  b.Add(EventKind::kMalloc, 0xa0, 1000, 1);   // p = 0.632: 1582 bytes, 1.58 blocks
  b.Add(EventKind::kMalloc, 0xb0, 1000, 1);
  b.Add(EventKind::kMalloc, 0xc0, 1000, 1);
  b.Add(EventKind::kMalloc, 0xd0, 10, 2);     // p = 0.00995: 1005 bytes, 100.5 blocks
  b.Add(EventKind::kFree, 0xa0);
  b.Add(EventKind::kMmap, 0x100000, 8192, 3);  // mappings are recorded in full: weight 1
  b.Add(EventKind::kReallocOld, 0xb0);         // a failed realloc puts the block back whole
  b.Add(EventKind::kReallocFailed, 0xb0);
  Profile p = Load(b.File(true));
  EXPECT_EQ(p.sample_rate, 1000u);
  const double big = 1000 / Chance(1000, kRate), small = 10 / Chance(10, kRate);
  const uint64_t big_bytes = std::llround(big), small_bytes = std::llround(small);
  EXPECT_EQ(big_bytes, 1582u);
  EXPECT_EQ(small_bytes, 1005u);
  EXPECT_EQ(p.totals.allocated_bytes, 3 * big_bytes + small_bytes + 8192);
  // Counts add up in fractions before rounding: 3 x 1.582 + 100.5 + 1 = 106.25, not 3 x 2 + ...
  EXPECT_EQ(p.totals.allocations, std::llround(3 / Chance(1000, kRate) + 1 / Chance(10, kRate) + 1));
  EXPECT_EQ(p.totals.allocations, 106u);
  EXPECT_EQ(p.totals.frees, 2u);  // the free (1.58 blocks), rounded
  EXPECT_EQ(p.totals.peak_bytes, 3 * big_bytes + small_bytes + 8192 - big_bytes);
  EXPECT_EQ(p.totals.in_use_bytes, 2 * big_bytes + small_bytes + 8192);
  EXPECT_EQ(p.stacks.at(1).allocated_bytes, 3 * big_bytes);
  EXPECT_EQ(p.stacks.at(1).in_use_bytes, 2 * big_bytes);
  EXPECT_EQ(p.stacks.at(1).in_use_blocks, 3u);  // 2 x 1.582
  EXPECT_EQ(p.stacks.at(2).in_use_blocks, 101u);  // 100.5 (100.50083) rounds up
  EXPECT_EQ(p.stacks.at(3).in_use_bytes, 8192u);
  EXPECT_EQ(p.stacks.at(3).in_use_blocks, 1u);
  EXPECT_EQ(p.size_histogram[SizeBucketOf(10)].count, 101u);
  EXPECT_EQ(p.size_histogram[SizeBucketOf(10)].bytes, small_bytes);
}

// Each figure's Horvitz-Thompson variance, by hand from docs/sampling.md: a recorded block of
// s bytes recorded with probability p adds s^2(1-p)/p^2 to its byte figures' variance and
// (1-p)/p^2 to its block figures'; a free takes back what its allocation added.
double BytesVariance(double size, double rate) {
  double p = Chance(size, rate);
  return size * size * (1 - p) / (p * p);
}
double BlocksVariance(double size, double rate) {
  double p = Chance(size, rate);
  return (1 - p) / (p * p);
}

TEST(Replay, SampledFiguresCarryTheirVariance) {
  constexpr double kRate = 1000;
  CaptureBuilder b(1000);
  b.Add(EventKind::kMmap, 0x100000, 8192, 3);  // recorded in full: no variance
  b.Add(EventKind::kMalloc, 0xa0, 1000, 1);
  b.Add(EventKind::kMalloc, 0xb0, 1000, 1);
  b.Add(EventKind::kMalloc, 0xc0, 10, 2);
  b.Add(EventKind::kMalloc, 0xd0, 3000, 2);    // the peak: everything so far
  b.Add(EventKind::kFree, 0xa0);
  b.Add(EventKind::kReallocOld, 0xb0);         // a failed realloc puts the block back whole
  b.Add(EventKind::kReallocFailed, 0xb0);
  Profile p = Load(b.File(true));
  const ErrorScale e{p.sample_rate};
  ASSERT_TRUE(e.sampled());
  const double b1000 = BytesVariance(1000, kRate), b10 = BytesVariance(10, kRate),
               b3000 = BytesVariance(3000, kRate);
  const double n1000 = BlocksVariance(1000, kRate), n10 = BlocksVariance(10, kRate),
               n3000 = BlocksVariance(3000, kRate);
  // Each block's variance is rounded to a whole unit (rate^2/65536 bytes^2, 1/256 block^2).
  auto near = [](double se, double variance) {
    EXPECT_NEAR(se, std::sqrt(variance), std::sqrt(variance) * 1e-3 + 0.1) << variance;
  };
  const Totals& t = p.totals;
  near(e.Bytes(t.allocated_bytes_var), 2 * b1000 + b10 + b3000);
  near(e.Blocks(t.allocations_var), 2 * n1000 + n10 + n3000);
  near(e.Bytes(t.peak_bytes_var), 2 * b1000 + b10 + b3000);
  near(e.Blocks(t.peak_blocks_var), 2 * n1000 + n10 + n3000);
  near(e.Bytes(t.in_use_bytes_var), b1000 + b10 + b3000);  // 0xa0 freed, 0xb0 put back
  near(e.Blocks(t.in_use_blocks_var), n1000 + n10 + n3000);
  near(e.Blocks(t.frees_var), n1000);  // the realloc's release was undone
  const StackStats& one = p.stacks.at(1);
  near(e.Bytes(one.allocated_bytes_var), 2 * b1000);
  near(e.Bytes(one.peak_bytes_var), 2 * b1000);
  near(e.Bytes(one.in_use_bytes_var), b1000);
  near(e.Blocks(one.in_use_blocks_var), n1000);
  const StackStats& two = p.stacks.at(2);
  near(e.Bytes(two.in_use_bytes_var), b10 + b3000);
  near(e.Blocks(two.allocations_var), n10 + n3000);
  EXPECT_EQ(p.stacks.at(3).in_use_bytes_var, 0u);  // the mapping
  // Small figures look as uncertain as they are: one block of 1,000 bytes at this rate reads
  // 1,582 bytes ±960 (61%); one of 10 bytes stands for ~100 blocks ±100.
  EXPECT_GT(e.Blocks(two.allocations_var), 99.0);
  EXPECT_GT(e.Bytes(one.in_use_bytes_var), 0.6 * 1000 / Chance(1000, kRate));
}

// The heap's own peak and the checkpoints carry their variances too.
TEST(Replay, SampledHeapPeakAndCheckpointsCarryTheirVariance) {
  constexpr double kRate = 1000;
  CaptureBuilder b(1000);
  format::RecordEncoder& enc = b.encoder();
  b.Add(EventKind::kMalloc, 0xa0, 1000, 1);
  b.Add(EventKind::kMalloc, 0xb0, 3000, 2);     // the heap's own peak: both blocks
  enc.Time({1'000'000'000, 2});                  // 1 s: a checkpoint holds both
  b.Add(EventKind::kFree, 0xb0);
  b.Add(EventKind::kMmap, 0x100000, 1 << 20, 3);  // the whole peak: 0xa0 and the mapping
  enc.Time({2'000'000'000, 4});
  std::string path = Save(b.File(true));
  Profile p;
  std::string error;
  ReplayOptions options;
  options.checkpoint_seconds = {0.5, 1.5};
  ASSERT_TRUE(LoadProfile(path, SnapshotSpec{}, options, &p, &error)) << error;
  std::remove(path.c_str());
  const ErrorScale e{p.sample_rate};
  auto near = [](double se, double variance) {
    EXPECT_NEAR(se, std::sqrt(variance), std::sqrt(variance) * 1e-3 + 0.1) << variance;
  };
  const double b1000 = BytesVariance(1000, kRate), b3000 = BytesVariance(3000, kRate);
  EXPECT_EQ(p.totals.heap_peak_bytes, std::llround(1000 / Chance(1000, kRate)) +
                                          std::llround(3000 / Chance(3000, kRate)));
  near(e.Bytes(p.totals.heap_peak_bytes_var), b1000 + b3000);
  near(e.Bytes(p.totals.peak_bytes_var), b1000);  // the mapping is exact
  ASSERT_EQ(p.checkpoints.size(), 2u);
  near(e.Bytes(p.checkpoints[0].heap_bytes_var), b1000 + b3000);
  near(e.Bytes(p.checkpoints[0].live.at(2).bytes_var), b3000);
  near(e.Blocks(p.checkpoints[0].live.at(2).blocks_var), BlocksVariance(3000, kRate));
  near(e.Bytes(p.checkpoints[1].heap_bytes_var), b1000);
  EXPECT_EQ(p.checkpoints[1].live.count(2), 0u);
  EXPECT_EQ(p.checkpoints[1].live.at(3).bytes_var, 0u);
}

TEST(Replay, FullCapturesHaveNoVariance) {
  CaptureBuilder b;
  b.Add(EventKind::kMalloc, 0xa0, 1000, 1);
  b.Add(EventKind::kMalloc, 0xb0, 10, 2);
  b.Add(EventKind::kFree, 0xa0);
  Profile p = Load(b.File(true));
  EXPECT_FALSE(ErrorScale{p.sample_rate}.sampled());
  for (const TotalsField& f : kTotalsFields) {
    if (f.variance) EXPECT_EQ(p.totals.*f.variance, 0u) << f.json_key;
  }
  for (const StackStatField& f : kStackStatFields) {
    if (f.variance) EXPECT_EQ(p.stacks.at(1).*f.variance, 0u) << f.json_key;
  }
}

TEST(Replay, FullCapturesStayExact) {
  CaptureBuilder b;
  for (uint64_t i = 0; i < 5; ++i) b.Add(EventKind::kMalloc, 0x1000 + 0x100 * i, 1000, 1);
  b.Add(EventKind::kFree, 0x1000);
  Profile p = Load(b.File(true));
  EXPECT_EQ(p.sample_rate, 0u);
  EXPECT_EQ(p.totals.allocated_bytes, 5000u);
  EXPECT_EQ(p.totals.allocations, 5u);
  EXPECT_EQ(p.totals.frees, 1u);
  EXPECT_EQ(p.totals.in_use_blocks, 4u);
}

// A damaged capture (found by tests/fuzz) may name any stack and any thread index: they index
// vectors, so they must not size them. The events still count, the stack as none.
TEST(Replay, DamagedStackIdsAndThreadIndexesDoNotSizeTables) {
  CaptureBuilder b;
  b.encoder().Thread({uint64_t{1} << 40, 77});  // a thread record's index sized a table too
  b.Add(EventKind::kMalloc, 0xa0, 100, uint64_t{1} << 62);  // no capture holds that stack
  b.Add(EventKind::kMalloc, 0xb0, 200, 1, 0xfffffff0u);     // nor that many threads
  b.Add(EventKind::kFree, 0xb0, 0, 0, 0xfffffff0u);
  Profile p = Load(b.File(true));
  EXPECT_EQ(p.totals.allocations, 2u);
  EXPECT_EQ(p.totals.allocated_bytes, 300u);
  EXPECT_EQ(p.totals.in_use_bytes, 100u);
  EXPECT_EQ(p.stacks[0].in_use_bytes, 100u);
  EXPECT_EQ(p.stacks[1].in_use_bytes, 0u);
  EXPECT_EQ(p.thread_count, 1u);
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("1 events name a stack it does not hold"), std::string::npos)
      << p.warnings[0];
}

// A damaged capture may claim any size: it lands in the last bucket, never past the table (the
// fuzzer's input corpus/capture/crash-size-past-the-buckets wrote past it).
TEST(Replay, SizesPastTheLastBucketLandInIt) {
  EXPECT_EQ(SizeBucketOf((uint64_t{1} << 47) + 1), kSizeBuckets - 1);
  EXPECT_EQ(SizeBucketOf(uint64_t{1} << 48), kSizeBuckets - 1);
  EXPECT_EQ(SizeBucketOf(UINT64_MAX), kSizeBuckets - 1);
  EXPECT_EQ(SizeBucketOf(4096), 12);
}

// ReplayOptions::blocks lists the live set block by block, by address, with each block's domain;
// peak_since_marker restarts the peak at the last marker of that name.
TEST(Replay, BlocksAndPeakSinceMarker) {
  CaptureBuilder b;
  b.encoder().String({7, "reset"});
  b.Add(EventKind::kMalloc, 0x300000, 100000, 1);  // the whole capture's peak
  b.Add(EventKind::kFree, 0x300000);
  b.Add(EventKind::kPyObjAlloc, 0x200000, 64, 2);  // kept: Python's allocator
  b.Add(EventKind::kMarker, 7);
  b.Add(EventKind::kMalloc, 0x100000, 3000, 3);   // kept
  b.Add(EventKind::kMalloc, 0x400000, 20000, 3);  // the peak since the marker
  b.Add(EventKind::kFree, 0x400000);
  b.Add(EventKind::kMmap, 0x500000, 8192, 4);  // kept: a mapping
  std::string path = Save(b.File(true));
  Profile p;
  std::string error;
  ReplayOptions options;
  options.blocks = true;
  options.peak_since_marker = "reset";
  ASSERT_TRUE(LoadProfile(path, SnapshotSpec{}, options, &p, &error)) << error;

  ASSERT_EQ(p.blocks.size(), 3u);
  EXPECT_EQ(p.blocks[0].address, 0x100000u);
  EXPECT_EQ(p.blocks[0].size, 3000u);
  EXPECT_EQ(p.blocks[0].stack, 3u);
  EXPECT_EQ(p.blocks[0].domain, LiveBlockRow::kNative);
  EXPECT_EQ(p.blocks[1].address, 0x200000u);
  EXPECT_EQ(p.blocks[1].domain, LiveBlockRow::kPython);
  EXPECT_EQ(p.blocks[2].size, 8192u);
  EXPECT_EQ(p.blocks[2].domain, LiveBlockRow::kMapping);
  EXPECT_EQ(p.totals.peak_bytes, 100000u);
  EXPECT_EQ(p.peak_since_bytes, 64u + 3000u + 20000u);
  EXPECT_EQ(p.peak_since_marker_seq, 3u);

  // A marker the capture does not have: the peak since the start, the capture's.
  Profile whole;
  options.peak_since_marker = "other";
  ASSERT_TRUE(LoadProfile(path, SnapshotSpec{}, options, &whole, &error)) << error;
  EXPECT_EQ(whole.peak_since_bytes, 100000u);
  EXPECT_EQ(whole.peak_since_marker_seq, 0u);
  EXPECT_EQ(whole.next_seq, 8u);

  // Since a sequence number: the window opens just before that event (what is in use then
  // counts), or after the last event (what is in use at the end).
  for (auto [seq, peak] : {std::pair<uint64_t, uint64_t>{5, 64 + 3000 + 20000},
                           {6, 64 + 3000 + 20000},
                           {7, 64 + 3000 + 8192},
                           {100, 64 + 3000 + 8192}}) {
    Profile since;
    options.peak_since_marker.clear();
    options.peak_since_seq = seq;
    ASSERT_TRUE(LoadProfile(path, SnapshotSpec{}, options, &since, &error)) << error;
    EXPECT_EQ(since.peak_since_bytes, peak) << seq;
  }
  std::remove(path.c_str());
}

// ReplayOptions::leave_out_python_file: the blocks of stacks with a Python frame of that file
// (a tool's own memory) are not part of peak_since_bytes nor listed in blocks; the totals keep
// them.
TEST(Replay, PeakLeavesOutAFilesBlocks) {
  CaptureBuilder b;
  format::RecordEncoder& enc = b.encoder();
  enc.PythonCode({1, "/tool/own.py", "ask", 1});
  enc.PythonCode({2, "/app/main.py", "work", 1});
  enc.StackNode({0, format::PythonFrameIp(2, 10)});  // 5: main.py:10
  enc.StackNode({5, format::PythonFrameIp(1, 20)});  // 6: own.py:20, called from main.py:10
  enc.StackNode({6, 0x1000});                        // 7: native, under own.py
  b.Add(EventKind::kPyObjAlloc, 0x1000, 500, 5);     // the program's
  b.Add(EventKind::kMalloc, 0x2000, 90000, 7);       // the tool's, for a moment
  b.Add(EventKind::kFree, 0x2000);
  b.Add(EventKind::kPyObjAlloc, 0x3000, 700, 5);
  b.Add(EventKind::kMalloc, 0x4000, 33, 7);  // the tool's, kept
  std::string path = Save(b.File(true));
  Profile p;
  std::string error;
  ReplayOptions options;
  options.leave_out_python_file = "/tool/own.py";
  options.blocks = true;
  ASSERT_TRUE(LoadProfile(path, SnapshotSpec{}, options, &p, &error)) << error;
  std::remove(path.c_str());
  EXPECT_EQ(p.peak_since_bytes, 1200u);
  EXPECT_EQ(p.totals.peak_bytes, 90500u);
  EXPECT_EQ(p.totals.in_use_bytes, 1233u);
  ASSERT_EQ(p.blocks.size(), 2u);  // not the tool's
  EXPECT_EQ(p.blocks[0].address, 0x1000u);
  EXPECT_EQ(p.blocks[1].address, 0x3000u);
}

}  // namespace
}  // namespace memlens::analyzer
