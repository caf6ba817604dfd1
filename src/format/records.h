// src/format/records.h
//
// The capture format: the contract between the agent (which writes) and the analyzer (which
// reads). Byte-level specification: docs/capture-format.md; keep the two in step, and bump
// kFormatMinor for a compatible addition, kFormatMajor for anything an older reader would
// misread.
//
// A capture is a 16-byte file header followed by chunks (chunk.h). Each chunk's payload is a
// sequence of records: a varint record type followed by that type's fields. The structs below
// are the decoded form of each record; RecordEncoder and RecordDecoder convert.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace memlens::format {

inline constexpr char kFileMagic[8] = {'M', 'L', 'E', 'N', 'S', 'C', 'A', 'P'};
inline constexpr uint16_t kFormatMajor = 1;
inline constexpr uint16_t kFormatMinor = 0;
inline constexpr size_t kFileHeaderSize = 16;

enum class RecordType : uint8_t {
  kProcess = 1,       // once, first: who was recorded
  kModule = 2,        // a loaded ELF object (at start, and after each dlopen)
  kModuleUnload = 3,  // an object went away (dlclose); its frames stay resolvable
  kThread = 4,        // a thread index was given to an OS thread
  kStackNode = 5,     // a new node of the stack trie: (parent, instruction pointer)
  kEvents = 6,        // a batch of allocation events from one thread
  kTime = 7,          // the global sequence counter at a monotonic time
  kEnd = 8,           // the recording ended (exit, exec, fatal signal)
  kDrops = 9,         // events lost since the last kDrops record (full buffer, failing sink)
};

// What an event did. The analyzer pairs frees with allocations by address; see
// docs/capture-format.md for how realloc and mremap are split into two events.
enum class EventKind : uint8_t {
  kMalloc = 1,
  kCalloc = 2,
  kRealloc = 3,        // the new block of a successful realloc/reallocarray
  kPosixMemalign = 4,
  kAlignedAlloc = 5,
  kMemalign = 6,
  kValloc = 7,
  kPvalloc = 8,
  kReallocArray = 9,
  kFree = 16,
  kReallocOld = 17,     // realloc is about to release this block (recorded before the call)
  kReallocFailed = 18,  // ...but failed: the block recorded by kReallocOld lives on
  kMmap = 32,           // anonymous mapping
  kMunmap = 33,         // any munmap (the analyzer keeps only what overlaps tracked mappings)
  kMremapOld = 34,      // mremap is about to move/resize this range
  kMremapNew = 35,      // ...and this is the result
  kMremapFailed = 36,   // ...or it failed, the old range lives on
};

inline bool IsHeapAlloc(EventKind k) { return static_cast<uint8_t>(k) < 16; }
inline bool HasStack(EventKind k) {
  return IsHeapAlloc(k) || k == EventKind::kMmap || k == EventKind::kMremapNew;
}
inline bool HasSize(EventKind k) {
  return HasStack(k) || k == EventKind::kMunmap || k == EventKind::kMremapOld;
}
// Address coding in event batches (docs/capture-format.md): a delta from the previous event of
// the same chain (allocations; releases), taken on the address rotated right by 4 bits, since
// nearly every block is 16-byte aligned and its low nibble carries nothing.
inline int AddressChain(EventKind k) { return HasStack(k) ? 0 : 1; }
inline uint64_t RotateAddress(uint64_t a) { return (a >> 4) | (a << 60); }
inline uint64_t UnrotateAddress(uint64_t r) { return (r << 4) | (r >> 60); }
const char* EventKindName(EventKind kind);
bool IsKnownEventKind(uint8_t kind);

enum class EndReason : uint8_t { kExit = 1, kExec = 2, kSignal = 3, kExplicitStop = 4 };

struct ProcessRecord {
  uint64_t pid = 0;
  uint64_t ppid = 0;
  uint64_t start_realtime_ns = 0;   // wall clock at agent start (CLOCK_REALTIME)
  uint64_t start_monotonic_ns = 0;  // CLOCK_MONOTONIC at agent start; kTime is relative to it
  std::string executable;
  std::vector<std::string> argv;
  std::string agent_version;
};

struct Segment {
  uint64_t start = 0;  // absolute address
  uint64_t size = 0;
};

struct ModuleRecord {
  uint64_t id = 0;
  uint64_t load_bias = 0;  // dlpi_addr: absolute address = bias + ELF virtual address
  std::string path;
  std::string build_id;  // raw bytes of NT_GNU_BUILD_ID, empty when absent
  std::vector<Segment> segments;
};

struct ModuleUnloadRecord {
  uint64_t id = 0;
};

struct ThreadRecord {
  uint64_t index = 0;
  uint64_t tid = 0;
};

// Node ids are implicit: the n-th kStackNode record of a capture is node n (the root, 0,
// is never written). A stack id is the id of its innermost node.
struct StackNodeRecord {
  uint64_t parent = 0;
  uint64_t ip = 0;  // a return address (or the faulting pc of the innermost frame)
};

struct Event {
  uint64_t seq = 0;
  EventKind kind = EventKind::kMalloc;
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t stack = 0;   // 0 when HasStack(kind) is false
  uint32_t thread = 0;  // thread index (kThread)
};

struct TimeRecord {
  uint64_t monotonic_ns = 0;  // since ProcessRecord::start_monotonic_ns
  uint64_t seq = 0;           // every event with a smaller seq happened before this time
};

struct EndRecord {
  EndReason reason = EndReason::kExit;
  uint64_t monotonic_ns = 0;  // since start
  uint64_t events = 0;        // events recorded over the whole run
  uint64_t dropped = 0;       // events lost over the whole run
  int64_t detail = 0;         // the signal number for kSignal
};

struct DropsRecord {
  uint64_t count = 0;
};

}  // namespace memlens::format
