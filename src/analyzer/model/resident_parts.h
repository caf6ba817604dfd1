// src/analyzer/model/resident_parts.h
//
// Resident memory explained (`memlens rss`, docs/rss.md): the process's mappings as the writer
// sampled them (format::MappingsRecord) cut into pieces, each owned by one thing a user knows —
// malloc's arenas, Python's allocator, a mapping the program made, a thread's stack, a file —
// and the parts (ResidentPart) that add up to what the kernel reported. Owners come from the
// mappings themselves (names, files, the shapes glibc gives its arenas and thread stacks) and
// from what the replay knows at the sample (Claims: Python's arenas, the program's mappings,
// the blocks malloc mapped on their own). ResidentTimeline is the replay's accumulator that
// gives the parts at every sample; views/rss.h splits one sample block by block.
//
// glibc's layout is assumed for the malloc family (docs/rss.md says what holds elsewhere).
// Runs on: the analyzer's main thread.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "format/records.h"

namespace memlens::analyzer {

// The parts resident and virtual memory are split into, in the order views show them.
enum class ResidentPart : uint8_t {
  kHeapInUse,
  kMallocOverhead,
  kMallocFree,
  kPythonFree,
  kProgramMappings,
  kStacks,
  kCodeAndData,
  kMappedFiles,
  kSharedMemory,
  kMemlens,
  kKernel,
  kReserved,
  kUnexplained,
};
inline constexpr size_t kResidentParts = 13;
struct ResidentPartInfo {
  char glyph;               // how `memlens timeline --parts` draws the part
  const char* id;           // JSON and report
  const char* title;        // text
  const char* explanation;  // one line a user understands
};
const ResidentPartInfo& PartInfo(ResidentPart part);
inline ResidentPart PartAt(size_t i) { return static_cast<ResidentPart>(i); }

// Who a piece of a mapping belongs to.
enum class Owner : uint8_t {
  kMallocMain,     // glibc's main arena: [heap]
  kMallocArena,    // a heap of one of glibc's other arenas (64 MiB-aligned)
  kMallocMapped,   // a block malloc mapped on its own (glibc: at or above its mmap threshold)
  kPymalloc,       // an arena of Python's small-object allocator
  kMimalloc,       // what mimalloc mapped in a free-threaded Python
  kProgramMapping,
  kStack,
  kCodeAndData,
  kMappedFile,
  kShared,
  kMemlens,
  kKernel,
  kReserved,       // PROT_NONE
  kUnexplained,
};
const char* OwnerName(Owner owner);
inline bool IsMalloc(Owner o) {
  return o == Owner::kMallocMain || o == Owner::kMallocArena || o == Owner::kMallocMapped;
}
inline bool IsPythonAllocator(Owner o) { return o == Owner::kPymalloc || o == Owner::kMimalloc; }
// The part a piece of this owner counts in; none for malloc's and Python's pieces, which
// SplitParts divides into blocks in use, overhead and free room.
std::optional<ResidentPart> PartOf(Owner owner);

// What the replay knows owns a range of anonymous memory.
struct Claim {
  uint64_t start = 0;
  uint64_t end = 0;
  Owner owner = Owner::kUnexplained;
};

// A piece of one sampled mapping with one owner.
struct MappingPiece {
  uint64_t start = 0;
  uint64_t end = 0;
  uint32_t mapping = 0;  // index in the sample
  Owner owner = Owner::kUnexplained;
  uint64_t resident = 0;
};

// What ClassifyMappings needs besides the sample.
struct ClaimSet {
  std::vector<Claim> claims;  // Python's arenas, the program's mappings: any order
  // Blocks of the malloc family large enough to have been mapped on their own: (address, size).
  std::vector<std::pair<uint64_t, uint64_t>> large_blocks;
};

// The pieces of every mapping of the sample, by address.
std::vector<MappingPiece> ClassifyMappings(const format::MappingsRecord& sample,
                                           const ClaimSet& claims);

// Resident bytes of a mapping in [start, end) (clipped to it): page by page when the writer
// read its pages, else all, none, or (pages not read) the range's share of the mapping's.
class ResidentPages {
 public:
  ResidentPages(const format::Mapping& m, uint64_t page_size);
  uint64_t In(uint64_t start, uint64_t end) const;

 private:
  const format::Mapping* m_;
  std::vector<uint64_t> starts_, ends_;  // the resident stretches, by address
  std::vector<uint64_t> before_;         // resident bytes in the stretches before each
};

// glibc's chunk for a block of `size` bytes: the bytes it takes in an arena (header included,
// rounded to 16, at least 32), and the mapping malloc makes for one it maps on its own.
inline uint64_t MallocChunkBytes(uint64_t size) {
  uint64_t chunk = (size + 8 + 15) & ~uint64_t{15};
  return chunk < 32 ? 32 : chunk;
}
inline uint64_t MallocMappedBytes(uint64_t size, uint64_t page_size) {
  return (MallocChunkBytes(size) + 8 + page_size - 1) & ~(page_size - 1);
}
// The smallest block glibc may map on its own (its default mmap threshold).
inline constexpr uint64_t kMallocMappedFrom = 128 * 1024;

// The parts at one sample.
struct ResidentSample {
  double seconds = 0;
  uint64_t seq = 0;
  uint64_t read_ns = 0;         // how long the writer took to read the mappings
  uint64_t resident_bytes = 0;  // over every mapping: the kernel's figure
  uint64_t virtual_bytes = 0;
  std::array<uint64_t, kResidentParts> resident{};
  std::array<uint64_t, kResidentParts> virtual_{};
};

// What the in-use blocks of one owner class hold, for SplitParts.
struct HeapShare {
  uint64_t malloc_in_use = 0;    // blocks of the malloc family (and Python's that went to it)
  uint64_t malloc_overhead = 0;  // their chunks beyond their bytes
  uint64_t malloc_in_use_resident = 0;  // of those, on resident pages (or: as if all were)
  uint64_t malloc_overhead_resident = 0;
  uint64_t python_in_use = 0;    // blocks inside Python's allocator's arenas
  uint64_t python_in_use_resident = 0;
};

// Adds up the pieces into parts: malloc's and Python's pieces are split into blocks in use,
// overhead and free space by `heap`.
ResidentSample SplitParts(const format::MappingsRecord& sample,
                          const std::vector<MappingPiece>& pieces, const HeapShare& heap);

// The replay's accumulator (ReplayOptions::resident_parts): the blocks' totals by owner kept
// as events come, and the parts at each sample (Profile::resident_samples). Inline checks on
// every event; the work only when asked for.
class ResidentTimeline {
 public:
  void OnMappings(const format::MappingsRecord& r) { pending_.push_back(r); }
  void ForgetSamples() {
    pending_.clear();
    have_last_ = false;
    last_change_seq = 0;  // a forked child's numbering starts again
  }
  bool Due(uint64_t seq) const { return !pending_.empty() && pending_.front().seq <= seq; }
  // A heap block came (+) or went (-); `bytes` its weight (a sampled capture's estimate).
  void OnBlock(uint64_t address, uint64_t size, uint64_t bytes, bool added);
  // Python's arenas come and go (kinds 40-43). Kept here by address, which Arenas
  // (replay_figures.h) does not need: a block is Python's allocator's when it lies in one.
  void OnArenaEvent(const format::Event& e);
  // The samples due before the event `before_seq`, with the program's mappings now.
  template <typename ForEachMapping>
  void Take(uint64_t before_seq, const ForEachMapping& program_mappings,
            std::vector<ResidentSample>* out);
  // The last sample taken and what it was taken with (views/rss.h splits it again).
  const format::MappingsRecord* last() const { return have_last_ ? &last_ : nullptr; }
  // Python's arenas now, by address.
  std::vector<Claim> PythonArenas() const;
  uint64_t last_change_seq = 0;  // the last event that changed the blocks (set by the replay)

 private:
  ResidentSample TakeOne(const format::MappingsRecord& r, const ClaimSet& claims);
  bool InPythonArena(uint64_t address) const;

  std::deque<format::MappingsRecord> pending_;
  format::MappingsRecord last_;
  bool have_last_ = false;
  std::map<uint64_t, Claim> arenas_;                 // Python's, by start
  std::map<uint64_t, uint64_t> large_blocks_;        // malloc's, by address: size
  uint64_t malloc_in_use_ = 0, malloc_overhead_ = 0, python_in_use_ = 0;
};

template <typename ForEachMapping>
void ResidentTimeline::Take(uint64_t before_seq, const ForEachMapping& program_mappings,
                            std::vector<ResidentSample>* out) {
  while (Due(before_seq)) {
    ClaimSet claims;
    claims.claims = PythonArenas();
    program_mappings([&](uint64_t start, uint64_t end) {
      claims.claims.push_back({start, end, Owner::kProgramMapping});
    });
    for (const auto& [address, size] : large_blocks_) claims.large_blocks.push_back({address, size});
    out->push_back(TakeOne(pending_.front(), claims));
    last_ = std::move(pending_.front());
    have_last_ = true;
    pending_.pop_front();
  }
}

}  // namespace memlens::analyzer
