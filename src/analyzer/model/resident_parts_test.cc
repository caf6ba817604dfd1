// Resident memory explained (resident_parts.h): every mapping finds its owner by its name, its
// file, glibc's shapes or a claim; pieces add up to each mapping's Rss exactly; malloc's and
// Python's pieces split into blocks, overhead and free space.
#include "analyzer/model/resident_parts.h"

#include <gtest/gtest.h>

namespace memlens::analyzer {
namespace {

using format::Mapping;
constexpr uint64_t kPage = 4096;
constexpr uint8_t kRw = Mapping::kRead | Mapping::kWrite;

Mapping Map(uint64_t start, uint64_t pages, uint8_t flags, std::string name, uint64_t rss_pages,
            uint64_t inode = 0, std::vector<uint64_t> runs = {}) {
  Mapping m;
  m.start = start;
  m.end = start + pages * kPage;
  m.flags = flags;
  m.inode = inode;
  m.name = std::move(name);
  m.rss = rss_pages * kPage;
  m.page_runs = std::move(runs);
  return m;
}

uint64_t Part(const ResidentSample& s, ResidentPart part) {
  return s.resident[static_cast<size_t>(part)];
}
uint64_t Virtual(const ResidentSample& s, ResidentPart part) {
  return s.virtual_[static_cast<size_t>(part)];
}

TEST(ResidentParts, EveryMappingFindsItsOwner) {
  format::MappingsRecord sample;
  const uint64_t arena = uint64_t{0x7f00} << 32;  // 64 MiB-aligned
  sample.mappings = {
      Map(0x400000, 2, Mapping::kRead | Mapping::kExec, "/usr/bin/prog", 2, 11),
      Map(0x402000, 1, kRw, "/usr/bin/prog", 1, 11),
      Map(0x403000, 3, kRw, "", 2),  // the program's bss
      Map(0x600000, 100, kRw, "[heap]", 60),
      Map(arena, 33, kRw, "", 33),                 // a thread arena's heap...
      Map(arena + 33 * kPage, 16384 - 33, 0, "", 0),  // ...and its PROT_NONE end
      Map(0x7f1000000000, 1, 0, "", 0),            // a thread stack's guard...
      Map(0x7f1000001000, 2047, kRw, "", 10),      // ...and the stack
      Map(0x7f2000000000, 512, Mapping::kRead, "/data/table.bin", 128, 12),
      Map(0x7f3000000000, 256, kRw | Mapping::kShared, "/dev/shm/ring", 256, 13),
      Map(0x7f4000000000, 8, kRw, "", 8),          // nothing claims it
      Map(0x7ffd00000000, 33, kRw, "[stack]", 5),
      Map(0x7ffd10000000, 2, Mapping::kRead | Mapping::kExec, "[vdso]", 2),
  };
  std::vector<MappingPiece> pieces = ClassifyMappings(sample, {});
  std::vector<Owner> owners;
  for (const MappingPiece& p : pieces) owners.push_back(p.owner);
  EXPECT_EQ(owners, (std::vector<Owner>{
                        Owner::kCodeAndData, Owner::kCodeAndData, Owner::kCodeAndData,
                        Owner::kMallocMain, Owner::kMallocArena, Owner::kReserved, Owner::kReserved,
                        Owner::kStack, Owner::kMappedFile, Owner::kShared, Owner::kUnexplained,
                        Owner::kStack, Owner::kKernel}));
  ResidentSample s = SplitParts(sample, pieces, {});
  EXPECT_EQ(Part(s, ResidentPart::kCodeAndData), 5 * kPage);
  EXPECT_EQ(Part(s, ResidentPart::kMallocFree), (60 + 33) * kPage);  // no block in use
  EXPECT_EQ(Part(s, ResidentPart::kStacks), 15 * kPage);
  EXPECT_EQ(Part(s, ResidentPart::kMappedFiles), 128 * kPage);
  EXPECT_EQ(Part(s, ResidentPart::kSharedMemory), 256 * kPage);
  EXPECT_EQ(Part(s, ResidentPart::kUnexplained), 8 * kPage);
  EXPECT_EQ(Virtual(s, ResidentPart::kReserved), (16384 - 33 + 1) * kPage);
  uint64_t resident = 0, size = 0;
  for (size_t i = 0; i < kResidentParts; ++i) {
    resident += s.resident[i];
    size += s.virtual_[i];
  }
  EXPECT_EQ(resident, s.resident_bytes);
  EXPECT_EQ(size, s.virtual_bytes);
}

// Claims cut an anonymous mapping the kernel joined: Python's arenas, a program's mapping and a
// block malloc mapped on its own, each with the resident pages that lie in it.
TEST(ResidentParts, ClaimsCutJoinedMappingsPageByPage) {
  format::MappingsRecord sample;
  const uint64_t base = 0x7f5000000000;
  // 1024 pages: pages 0-255 a pymalloc arena (all resident), 256-511 the program's mapping (the
  // first 16 resident), 512-767 nobody's (none), 768-1023 a mapped malloc block (4 resident).
  sample.mappings = {Map(base, 1024, kRw, "", 256 + 16 + 4, 0, {0, 256 + 16, 768 - 272, 4})};
  ClaimSet claims;
  claims.claims = {{base, base + 256 * kPage, Owner::kPymalloc},
                   {base + 256 * kPage, base + 512 * kPage, Owner::kProgramMapping}};
  const uint64_t block = base + 768 * kPage + 16;
  const uint64_t block_size = 256 * kPage - 4096;  // its mapping: 256 pages exactly
  claims.large_blocks = {{block, block_size}};
  ASSERT_EQ(MallocMappedBytes(block_size, kPage), 256 * kPage);
  std::vector<MappingPiece> pieces = ClassifyMappings(sample, claims);
  ASSERT_EQ(pieces.size(), 4u);
  EXPECT_EQ(pieces[0].owner, Owner::kPymalloc);
  EXPECT_EQ(pieces[0].resident, 256 * kPage);
  EXPECT_EQ(pieces[1].owner, Owner::kProgramMapping);
  EXPECT_EQ(pieces[1].resident, 16 * kPage);
  EXPECT_EQ(pieces[2].owner, Owner::kUnexplained);
  EXPECT_EQ(pieces[2].resident, 0u);
  EXPECT_EQ(pieces[3].owner, Owner::kMallocMapped);
  EXPECT_EQ(pieces[3].resident, 4 * kPage);

  HeapShare heap;
  heap.python_in_use = heap.python_in_use_resident = 100 * kPage;
  heap.malloc_in_use = block_size;
  heap.malloc_in_use_resident = 4 * kPage - 16;
  heap.malloc_overhead = 256 * kPage - block_size;
  heap.malloc_overhead_resident = 16;
  ResidentSample s = SplitParts(sample, pieces, heap);
  EXPECT_EQ(Part(s, ResidentPart::kHeapInUse), 100 * kPage + 4 * kPage - 16);
  EXPECT_EQ(Part(s, ResidentPart::kMallocOverhead), 16u);
  EXPECT_EQ(Part(s, ResidentPart::kMallocFree), 0u);
  EXPECT_EQ(Part(s, ResidentPart::kPythonFree), 156 * kPage);
  EXPECT_EQ(Virtual(s, ResidentPart::kPythonFree), 156 * kPage);
  EXPECT_EQ(Part(s, ResidentPart::kProgramMappings), 16 * kPage);
  EXPECT_EQ(Part(s, ResidentPart::kUnexplained), 0u);
}

// A mapping whose pages were not read splits by share, and its last piece takes the rounding:
// pieces always add up to the mapping's Rss.
TEST(ResidentParts, PiecesAddUpToTheMappingsRss) {
  format::MappingsRecord sample;
  sample.mappings = {Map(0x7f6000000000, 3, kRw, "", 1)};  // 1 of 3 pages, not read
  ClaimSet claims;
  claims.claims = {{0x7f6000000000, 0x7f6000001000, Owner::kProgramMapping}};
  std::vector<MappingPiece> pieces = ClassifyMappings(sample, claims);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].resident + pieces[1].resident, kPage);
  EXPECT_EQ(pieces[0].resident, kPage / 3);
}

// The replay's accumulator: Python's blocks inside its arenas, malloc's elsewhere with their
// chunks, and a large block taken as mapped on its own when it lies outside the arenas.
TEST(ResidentParts, TimelineKeepsTheBlocksByOwner) {
  ResidentTimeline t;
  const uint64_t arena = 0x7f7000000000;
  format::Event e;
  e.kind = format::EventKind::kPyArenaAlloc;
  e.address = arena;
  e.size = 256 * kPage;
  t.OnArenaEvent(e);
  t.OnBlock(arena + 64, 32, 32, true);        // Python's, in its arena
  t.OnBlock(0x600010, 100, 100, true);        // malloc's: a 112-byte chunk
  const uint64_t big = 0x7f8000000010;
  t.OnBlock(big, 200000, 200000, true);       // malloc's, mapped on its own
  format::MappingsRecord sample;
  sample.seq = 10;
  sample.monotonic_ns = 2500000000;
  sample.mappings = {Map(0x600000, 33, kRw, "[heap]", 33), Map(arena, 256, kRw, "", 256),
                     Map(0x7f8000000000, 49, kRw, "", 49)};
  t.OnMappings(sample);
  ASSERT_TRUE(t.Due(10));
  std::vector<ResidentSample> out;
  t.Take(10, [](const auto&) {}, &out);
  ASSERT_EQ(out.size(), 1u);
  const ResidentSample& s = out[0];
  EXPECT_DOUBLE_EQ(s.seconds, 2.5);
  EXPECT_EQ(Part(s, ResidentPart::kHeapInUse), 32u + 100 + 200000);
  EXPECT_EQ(Part(s, ResidentPart::kPythonFree), 256 * kPage - 32);
  EXPECT_EQ(Part(s, ResidentPart::kMallocOverhead), 12u + (49 * kPage - 200000));
  EXPECT_EQ(Part(s, ResidentPart::kMallocFree), 33 * kPage - 112);
  EXPECT_EQ(Part(s, ResidentPart::kUnexplained), 0u);
  ASSERT_NE(t.last(), nullptr);
  EXPECT_EQ(t.last()->seq, 10u);
}

}  // namespace
}  // namespace memlens::analyzer
