// Replay of hand-built captures: exact totals, peak contributions, leaks, realloc and
// partial munmap accounting, and the reader's handling of cut-short files.
#include "analyzer/model/replay.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "analyzer/model/snapshot_index.h"
#include "format/chunk.h"
#include "format/record_encoder.h"

namespace memlens::analyzer {
namespace {

using format::EventKind;

class CaptureBuilder {
 public:
  explicit CaptureBuilder(uint64_t sample_rate = 0) : enc_(&payload_) {
    enc_.Process({1, 0, 0, 0, "/bin/test", {"test"}, "0"});
    if (sample_rate) enc_.Sampling({sample_rate});
    for (int i = 0; i < 4; ++i) enc_.StackNode({0, 0x1000u + i});  // stacks 1..4, depth 1
  }
  // Events are given in order; each lands in the batch of its thread.
  void Add(EventKind kind, uint64_t address, uint64_t size = 0, uint64_t stack = 0,
           uint32_t thread = 1) {
    enc_.BeginEvents(thread);
    enc_.AddEvent({seq_++, kind, address, size, stack, thread});
    enc_.EndEvents();
  }
  format::RecordEncoder& encoder() { return enc_; }
  // The next sequence number, for events written through encoder() directly.
  uint64_t NextSeq() { return seq_++; }
  // Ends the chunk being written; what follows goes into the next one.
  void NextChunk() {
    enc_.FinishEvents();
    format::ChunkCompressor().AppendChunk(payload_, &chunks_);
    payload_.clear();
    enc_.NextChunk();
  }
  std::string File(bool with_end) {
    enc_.FinishEvents();
    if (with_end) enc_.End({format::EndReason::kExit, 1000, seq_, 0, 0});
    std::string file = format::EncodeFileHeader() + chunks_;
    format::ChunkCompressor().AppendChunk(payload_, &file);
    return file;
  }

 private:
  std::string chunks_;  // the chunks ended so far
  std::string payload_;
  format::RecordEncoder enc_;
  uint64_t seq_ = 0;
};

std::string Save(const std::string& bytes) {
  char path[] = "/tmp/memlens-replay-test-XXXXXX";
  int fd = mkstemp(path);
  EXPECT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  close(fd);
  return path;
}

Profile Load(const std::string& bytes) {
  std::string path = Save(bytes);
  Profile p;
  std::string error;
  EXPECT_TRUE(LoadProfile(path, &p, &error)) << error;
  std::remove(path.c_str());
  return p;
}

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

TEST(Replay, TruncatedCaptureKeepsWhatWasRead) {
  CaptureBuilder b;
  b.Add(EventKind::kMalloc, 0xa0, 100, 1);
  std::string first = b.File(false);
  std::string file = first + first.substr(format::kFileHeaderSize, 30);  // half a second chunk
  Profile p = Load(file);
  EXPECT_EQ(p.totals.allocated_bytes, 100u);
  EXPECT_NE(p.read.damage.find("truncated"), std::string::npos) << p.read.damage;
}

TEST(Replay, CaptureWithoutRecordsIsAnError) {
  std::string path = Save(format::EncodeFileHeader());
  Profile p;
  std::string error;
  EXPECT_FALSE(LoadProfile(path, &p, &error));
  EXPECT_NE(error.find("holds no recording"), std::string::npos) << error;
  std::remove(path.c_str());
  EXPECT_FALSE(LoadProfile("/nonexistent/capture.mlens", &p, &error));
  EXPECT_NE(error.find("No such file"), std::string::npos) << error;
}

}  // namespace
}  // namespace memlens::analyzer

namespace memlens::analyzer {
namespace {

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
  EXPECT_EQ(p.checkpoints[0].live.at(1), (std::pair<uint64_t, uint64_t>{100, 1}));
  EXPECT_EQ(p.checkpoints[0].live.count(2), 0u);
  EXPECT_EQ(p.checkpoints[1].heap_bytes, 5100u);
  EXPECT_EQ(p.checkpoints[1].live.at(3).first, 5000u);

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

}  // namespace
}  // namespace memlens::analyzer

namespace memlens::analyzer {
namespace {

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

// A damaged snapshot index: sizes that wrap around, or that claim more than the compressed
// frame holds, are refused before anything is allocated for them.
TEST(SnapshotIndex, DamagedSizesAreRefusedNotAllocated) {
  CaptureBuilder b;
  for (uint64_t i = 0; i < 8; ++i) b.Add(EventKind::kMalloc, 0x100 * (i + 1), 10, 1);
  const std::string path = Save(b.File(true));
  setenv("MEMLENS_INDEX_SPACING", "2", 1);
  setenv("XDG_CACHE_HOME", "/nonexistent", 1);
  SnapshotIndex index;
  std::string error, state;
  ASSERT_TRUE(BuildSnapshotIndex(path, &index, &error)) << error;
  ASSERT_TRUE(LoadSnapshotIndex(path, &index));
  ASSERT_FALSE(index.checkpoints.empty());
  IndexCheckpoint claimed = index.checkpoints[0];
  claimed.raw_size = uint64_t{1} << 40;  // the frame says otherwise
  EXPECT_FALSE(ReadCheckpointState(index, claimed, &state));
  claimed = index.checkpoints[0];
  claimed.blob_size = ~uint64_t{0} - claimed.blob_offset + 1;  // offset + size wraps to 0
  EXPECT_FALSE(ReadCheckpointState(index, claimed, &state));
  EXPECT_TRUE(ReadCheckpointState(index, index.checkpoints[0], &state));

  // The trailer's table offset and size add up to the file's size only by wrapping around.
  std::FILE* f = std::fopen(index.path.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(fseeko(f, 0, SEEK_END), 0);
  const uint64_t file_size = ftello(f), stored_size = ~uint64_t{0} - 7,
                 table_offset = file_size - 32 - stored_size;  // modulo 2^64
  ASSERT_EQ(fseeko(f, file_size - 32, SEEK_SET), 0);
  ASSERT_EQ(std::fwrite(&table_offset, 8, 1, f), 1u);
  ASSERT_EQ(std::fwrite(&stored_size, 8, 1, f), 1u);
  std::fclose(f);
  SnapshotIndex damaged;
  EXPECT_FALSE(LoadSnapshotIndex(path, &damaged));
  unsetenv("MEMLENS_INDEX_SPACING");
  unsetenv("XDG_CACHE_HOME");
  std::remove(index.path.c_str());
  std::remove(path.c_str());
}

}  // namespace

// A damaged capture may claim any size: it lands in the last bucket, never past the table (the
// fuzzer's input corpus/capture/crash-size-past-the-buckets wrote past it).
TEST(Replay, SizesPastTheLastBucketLandInIt) {
  EXPECT_EQ(SizeBucketOf((uint64_t{1} << 47) + 1), kSizeBuckets - 1);
  EXPECT_EQ(SizeBucketOf(uint64_t{1} << 48), kSizeBuckets - 1);
  EXPECT_EQ(SizeBucketOf(UINT64_MAX), kSizeBuckets - 1);
  EXPECT_EQ(SizeBucketOf(4096), 12);
}

// A Python program's own end (kProgramEnd) is "exit" by default; @end is still the process's.
TEST(Replay, ExitIsTheProgramsEndWhenTheCaptureHasOne) {
  CaptureBuilder b;
  b.Add(EventKind::kMalloc, 0xa0, 100, 1);  // a module global
  b.Add(EventKind::kProgramEnd, 0);
  b.Add(EventKind::kMalloc, 0xb0, 30, 2);  // an atexit handler's, never freed
  b.Add(EventKind::kFree, 0xa0);           // the interpreter's shutdown
  std::string path = Save(b.File(true));
  std::string error;
  for (bool indexed : {false, true}) {  // the second time, from the index the first one built
    SnapshotSpec spec;
    Profile at_exit;
    ASSERT_TRUE(LoadProfile(path, spec, &at_exit, &error)) << error;
    EXPECT_TRUE(at_exit.AtProgramEndByDefault()) << indexed;
    EXPECT_EQ(at_exit.program_end_seq, 1u);
    EXPECT_EQ(at_exit.totals.in_use_bytes, 100u);
    EXPECT_EQ(at_exit.stacks[1].in_use_bytes, 100u);
    EXPECT_EQ(at_exit.stacks.count(2), 0u);
    EXPECT_EQ(at_exit.SnapshotLabel(), "exit");
    Profile process_end;
    std::string file;
    ASSERT_TRUE(ParseCaptureArgument(path + "@end", &file, &spec, &error));
    ASSERT_TRUE(LoadProfile(file, spec, &process_end, &error)) << error;
    EXPECT_EQ(process_end.totals.in_use_bytes, 30u);
    EXPECT_EQ(process_end.SnapshotLabel(), "the end of the process");
    Profile program_end;
    ASSERT_TRUE(ParseCaptureArgument(path + "@program-end", &file, &spec, &error));
    EXPECT_EQ(spec.kind, SnapshotSpec::kProgramEnd);
    ASSERT_TRUE(LoadProfile(file, spec, &program_end, &error)) << error;
    EXPECT_EQ(program_end.totals.in_use_bytes, 100u);
    EXPECT_FALSE(program_end.AtProgramEndByDefault());
  }
  std::remove(path.c_str());
  for (const std::string& index : IndexPathsFor(path)) std::remove(index.c_str());
}

TEST(Replay, WithoutTheProgramsEndExitIsTheProcesssEnd) {
  CaptureBuilder b;
  b.Add(EventKind::kMalloc, 0xa0, 100, 1);
  b.Add(EventKind::kFree, 0xa0);
  std::string path = Save(b.File(true));
  Profile p;
  std::string error, file;
  ASSERT_TRUE(LoadProfile(path, &p, &error)) << error;
  EXPECT_EQ(p.snapshot.kind, SnapshotSpec::kEnd);
  EXPECT_EQ(p.SnapshotLabel(), "exit");
  SnapshotSpec spec;
  ASSERT_TRUE(ParseCaptureArgument(path + "@program-end", &file, &spec, &error));
  Profile none;
  EXPECT_FALSE(LoadProfile(file, spec, &none, &error));
  EXPECT_NE(error.find("no end of a Python program's code"), std::string::npos) << error;
  std::remove(path.c_str());
  for (const std::string& index : IndexPathsFor(path)) std::remove(index.c_str());
}

}  // namespace memlens::analyzer
