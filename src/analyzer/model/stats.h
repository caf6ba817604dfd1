// src/analyzer/model/stats.h
//
// The figures of a replay: per call stack (StackStats) and for the whole capture (Totals), and
// each one's list of fields, kept once here for whoever goes over them all (StackStats::Add,
// the replay's blocks in 1/65536ths, the snapshot index's saved state, the JSON writer, the
// totals of a filtered profile):
// a new figure is one line in its struct and one in its list.
// Runs on: the analyzer's main thread.
#pragma once

#include <cmath>
#include <cstdint>
#include <iterator>

namespace memlens::analyzer {

struct StackStats {
  uint64_t allocations = 0;
  uint64_t allocated_bytes = 0;
  uint64_t peak_bytes = 0;  // live bytes of this stack at the moment of the global peak
  uint64_t peak_blocks = 0;
  uint64_t in_use_bytes = 0;  // live bytes at the snapshot (during a replay: now)
  uint64_t in_use_blocks = 0;
  // The parts of the byte counts above that came from Python's allocator (the MEM and OBJ
  // domains and RAW); the rest is native memory (malloc, mmap...).
  uint64_t python_allocated_bytes = 0;
  uint64_t python_peak_bytes = 0;
  uint64_t python_in_use_bytes = 0;
  // The parts that were anonymous mappings the program made itself (mmap, or a reservation's
  // range that mprotect committed); the rest, heap, is the malloc family and Python's.
  uint64_t mapping_allocated_bytes = 0;
  uint64_t mapping_peak_bytes = 0;
  uint64_t mapping_in_use_bytes = 0;
  // Temporary allocations: freed by the thread that made them before it allocated anything
  // else (a buffer made, used and dropped at once, the pattern worth hoisting or reusing).
  uint64_t temporary = 0;
  uint64_t temporary_bytes = 0;
  // A sampled capture: the Horvitz-Thompson variance of each sampled figure above (the sum over
  // its recorded blocks of s^2(1-p)/p^2 for bytes, (1-p)/p^2 for blocks; 0 in a full capture),
  // in the units of ErrorScale below. Additive like the figures.
  uint64_t allocations_var = 0;
  uint64_t allocated_bytes_var = 0;
  uint64_t peak_bytes_var = 0;
  uint64_t peak_blocks_var = 0;
  uint64_t in_use_bytes_var = 0;
  uint64_t in_use_blocks_var = 0;
  uint64_t python_allocated_bytes_var = 0;
  uint64_t python_peak_bytes_var = 0;
  uint64_t python_in_use_bytes_var = 0;
  uint64_t temporary_var = 0;
  uint64_t temporary_bytes_var = 0;

  void Add(const StackStats& o);  // every field of kStackStatFields
};

// Variances are whole numbers, so that a free takes back exactly what its allocation added:
// bytes in units of rate^2/65536 (one block adds at most 65536 of them: s^2(1-p)/p^2 <= rate^2
// for every s), blocks in units of 1/256 block^2 (a tiny block's 1/p^2 is large, so the unit
// is coarser: a capture overflows only after ~10^11 sampled allocations of 1 byte).
inline constexpr double kByteVarianceUnits = 65536;  // per rate^2
inline constexpr double kBlockVarianceUnits = 256;   // per block^2
// Standard errors from those variances, for a capture sampled at `rate` (0: none).
struct ErrorScale {
  uint64_t rate = 0;
  bool sampled() const { return rate != 0; }
  double Bytes(uint64_t var) const {
    return static_cast<double>(rate) * std::sqrt(static_cast<double>(var) / kByteVarianceUnits);
  }
  double Blocks(uint64_t var) const {
    return std::sqrt(static_cast<double>(var) / kBlockVarianceUnits);
  }
  double Of(uint64_t var, bool blocks) const { return blocks ? Blocks(var) : Bytes(var); }
};

// One field of StackStats. json_key: its name in the JSON rows (docs/json-output.md: the
// in-use figures keep their old "leaked" keys), "" for a figure the rows do not carry; blocks:
// a count of blocks, which a replay keeps in 1/65536ths (replayer.h, kCountUnit); variance:
// the field holding its variance in a sampled capture (JSON: FIELD_error), nullptr for none.
struct StackStatField {
  uint64_t StackStats::*member;
  const char* json_key;
  bool blocks;
  uint64_t StackStats::*variance = nullptr;
};
// In the order of the JSON rows.
inline constexpr StackStatField kStackStatFields[] = {
    {&StackStats::allocations, "allocations", true, &StackStats::allocations_var},
    {&StackStats::allocated_bytes, "allocated_bytes", false, &StackStats::allocated_bytes_var},
    {&StackStats::peak_bytes, "peak_bytes", false, &StackStats::peak_bytes_var},
    {&StackStats::peak_blocks, "peak_blocks", true, &StackStats::peak_blocks_var},
    {&StackStats::in_use_bytes, "leaked_bytes", false, &StackStats::in_use_bytes_var},
    {&StackStats::in_use_blocks, "leaked_blocks", true, &StackStats::in_use_blocks_var},
    {&StackStats::python_allocated_bytes, "python_allocated_bytes", false,
     &StackStats::python_allocated_bytes_var},
    {&StackStats::python_peak_bytes, "python_peak_bytes", false,
     &StackStats::python_peak_bytes_var},
    {&StackStats::python_in_use_bytes, "python_leaked_bytes", false,
     &StackStats::python_in_use_bytes_var},
    {&StackStats::mapping_allocated_bytes, "mapping_allocated_bytes", false},
    {&StackStats::mapping_peak_bytes, "mapping_peak_bytes", false},
    {&StackStats::mapping_in_use_bytes, "mapping_leaked_bytes", false},
    {&StackStats::temporary, "", true, &StackStats::temporary_var},
    {&StackStats::temporary_bytes, "", false, &StackStats::temporary_bytes_var},
    {&StackStats::allocations_var, "", false},
    {&StackStats::allocated_bytes_var, "", false},
    {&StackStats::peak_bytes_var, "", false},
    {&StackStats::peak_blocks_var, "", false},
    {&StackStats::in_use_bytes_var, "", false},
    {&StackStats::in_use_blocks_var, "", false},
    {&StackStats::python_allocated_bytes_var, "", false},
    {&StackStats::python_peak_bytes_var, "", false},
    {&StackStats::python_in_use_bytes_var, "", false},
    {&StackStats::temporary_var, "", false},
    {&StackStats::temporary_bytes_var, "", false},
};

// A field added to StackStats and not to its list fails here.
static_assert(sizeof(StackStats) == std::size(kStackStatFields) * sizeof(uint64_t));

inline void StackStats::Add(const StackStats& o) {
  for (const StackStatField& f : kStackStatFields) this->*f.member += o.*f.member;
}

// The peak figures of a stack are its in-use figures at the moment of the global peak: the
// replay copies them over when a new peak is reached (lazily, replayer.h).
inline void CopyInUseToPeak(StackStats* s) {
  s->peak_bytes = s->in_use_bytes;
  s->peak_blocks = s->in_use_blocks;
  s->python_peak_bytes = s->python_in_use_bytes;
  s->mapping_peak_bytes = s->mapping_in_use_bytes;
}
inline void CopyInUseVarianceToPeak(StackStats* s) {
  s->peak_bytes_var = s->in_use_bytes_var;
  s->peak_blocks_var = s->in_use_blocks_var;
  s->python_peak_bytes_var = s->python_in_use_bytes_var;
}

struct Totals {
  uint64_t allocations = 0;
  uint64_t allocated_bytes = 0;
  uint64_t frees = 0;
  uint64_t peak_bytes = 0;
  uint64_t peak_blocks = 0;
  uint64_t peak_seq = 0;
  uint64_t in_use_bytes = 0;
  uint64_t in_use_blocks = 0;
  // In use at the snapshot but kept by the C/C++ runtime for the life of the process, once
  // SetRuntimeApart (runtime_allocations.h) has taken them out of in_use_*.
  uint64_t runtime_bytes = 0;
  uint64_t runtime_blocks = 0;
  uint64_t python_allocated_bytes = 0;  // part of allocated_bytes from Python's allocator
  // The heap (malloc family, Python's allocator) and the mappings apart (StackStats): each
  // one's own peak (the highest it reached, at whatever moment), its part of peak_bytes (the two
  // add up to it), and its part of in_use_bytes and allocated_bytes.
  uint64_t heap_peak_bytes = 0;
  uint64_t mapping_peak_bytes = 0;
  uint64_t mapping_at_peak_bytes = 0;
  uint64_t mapping_in_use_bytes = 0;
  uint64_t mapping_allocated_bytes = 0;
  // Address space the program's anonymous mappings reserved (PROT_NONE) at the snapshot: in no
  // figure above.
  uint64_t reserved_bytes = 0;
  // pymalloc's arenas: memory Python's small-object allocator holds from the system, apart
  // from the objects in them (which the totals above count).
  uint64_t arena_peak_bytes = 0;
  uint64_t arena_in_use_bytes = 0;
  // What replaces them in a free-threaded build: the address space mimalloc mapped from inside
  // Python's allocator (its arenas, reserved a GiB at a time and committed as used).
  uint64_t mimalloc_peak_bytes = 0;
  uint64_t mimalloc_in_use_bytes = 0;
  uint64_t temporary = 0;          // see StackStats::temporary
  uint64_t unmatched_frees = 0;    // frees of blocks allocated before recording began
  uint64_t dropped_events = 0;
  uint64_t events = 0;
  // Variances of the sampled figures (StackStats' *_var, same units).
  uint64_t allocations_var = 0;
  uint64_t allocated_bytes_var = 0;
  uint64_t frees_var = 0;
  uint64_t peak_bytes_var = 0;
  uint64_t peak_blocks_var = 0;
  uint64_t in_use_bytes_var = 0;
  uint64_t in_use_blocks_var = 0;
  uint64_t python_allocated_bytes_var = 0;
  uint64_t temporary_var = 0;
  uint64_t runtime_bytes_var = 0;
  uint64_t runtime_blocks_var = 0;
  // The heap's own peak: the variance of the heap's bytes in use when it was reached (the
  // mappings are recorded in full, so the heap's part of any figure has the figure's variance).
  uint64_t heap_peak_bytes_var = 0;
};

// One field of Totals. json_key: its name in the "totals" object of the JSON output, "" for
// one written elsewhere or not at all; blocks: as StackStatField::blocks; replayed: built up
// event by event, so part of the replay's saved state (the others are metadata, or set once
// the replay is over from the live set); per_stack: the StackStats figure it is the sum of over
// the stacks, which a filter that drops stacks sums again (stack_filter.h), nullptr for none;
// variance: as StackStatField::variance.
struct TotalsField {
  uint64_t Totals::*member;
  const char* json_key;
  bool blocks;
  bool replayed;
  uint64_t StackStats::*per_stack = nullptr;
  uint64_t Totals::*variance = nullptr;
};
inline constexpr TotalsField kTotalsFields[] = {
    {&Totals::allocations, "allocations", true, true, &StackStats::allocations,
     &Totals::allocations_var},
    {&Totals::allocated_bytes, "allocated_bytes", false, true, &StackStats::allocated_bytes,
     &Totals::allocated_bytes_var},
    {&Totals::frees, "frees", true, true, nullptr, &Totals::frees_var},
    {&Totals::peak_bytes, "peak_bytes", false, true, &StackStats::peak_bytes,
     &Totals::peak_bytes_var},
    {&Totals::peak_blocks, "peak_blocks", true, true, &StackStats::peak_blocks,
     &Totals::peak_blocks_var},
    {&Totals::peak_seq, "", false, true},
    {&Totals::in_use_bytes, "in_use_at_exit_bytes", false, false, &StackStats::in_use_bytes,
     &Totals::in_use_bytes_var},
    {&Totals::in_use_blocks, "in_use_at_exit_blocks", true, false, &StackStats::in_use_blocks,
     &Totals::in_use_blocks_var},
    {&Totals::runtime_bytes, "", false, false},
    {&Totals::runtime_blocks, "", false, false},
    {&Totals::python_allocated_bytes, "python_allocated_bytes", false, true,
     &StackStats::python_allocated_bytes, &Totals::python_allocated_bytes_var},
    {&Totals::heap_peak_bytes, "", false, true},
    {&Totals::mapping_peak_bytes, "", false, true},
    {&Totals::mapping_at_peak_bytes, "", false, false, &StackStats::mapping_peak_bytes},
    {&Totals::mapping_in_use_bytes, "", false, false, &StackStats::mapping_in_use_bytes},
    {&Totals::mapping_allocated_bytes, "", false, true, &StackStats::mapping_allocated_bytes},
    {&Totals::reserved_bytes, "", false, false},
    {&Totals::arena_peak_bytes, "pymalloc_arena_peak_bytes", false, true},
    {&Totals::arena_in_use_bytes, "pymalloc_arena_at_exit_bytes", false, false},
    {&Totals::mimalloc_peak_bytes, "mimalloc_mapped_peak_bytes", false, true},
    {&Totals::mimalloc_in_use_bytes, "mimalloc_mapped_at_exit_bytes", false, false},
    {&Totals::temporary, "temporary", true, true, &StackStats::temporary, &Totals::temporary_var},
    {&Totals::unmatched_frees, "unmatched_frees", false, true},
    {&Totals::dropped_events, "dropped_events", false, false},
    {&Totals::events, "events", false, true},
    {&Totals::allocations_var, "", false, true, &StackStats::allocations_var},
    {&Totals::allocated_bytes_var, "", false, true, &StackStats::allocated_bytes_var},
    {&Totals::frees_var, "", false, true},
    {&Totals::peak_bytes_var, "", false, true, &StackStats::peak_bytes_var},
    {&Totals::peak_blocks_var, "", false, true, &StackStats::peak_blocks_var},
    {&Totals::in_use_bytes_var, "", false, false, &StackStats::in_use_bytes_var},
    {&Totals::in_use_blocks_var, "", false, false, &StackStats::in_use_blocks_var},
    {&Totals::python_allocated_bytes_var, "", false, true, &StackStats::python_allocated_bytes_var},
    {&Totals::temporary_var, "", false, true, &StackStats::temporary_var},
    {&Totals::runtime_bytes_var, "", false, false},
    {&Totals::runtime_blocks_var, "", false, false},
    {&Totals::heap_peak_bytes_var, "", false, true},
};
static_assert(sizeof(Totals) == std::size(kTotalsFields) * sizeof(uint64_t));

}  // namespace memlens::analyzer
