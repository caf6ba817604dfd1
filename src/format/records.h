// src/format/records.h
//
// The capture format: the contract between the agent (which writes) and the analyzer (which
// reads). Byte-level specification: docs/capture-format.md; keep the two in step. Records
// carry no length, so a reader cannot skip what it does not know: a new record type or event
// kind bumps kFormatMajor (kFormatMinor is for additions an older reader can ignore: 8.1
// writes kEnd reason 4, "stopped", at the end of a span). Nothing was released before Python
// support, which is part of 1.0; the
// instrumentation API (custom heaps, markers, snapshots, type tags) and sampled captures
// (kSampling) made it 2.0, back-references in the event batches 3.0, stack-node parents coded
// relative to the node and back-references that reach into the previous chunk 4.0,
// back-references that reach kReleaseReachChunks chunks back 5.0, allocations coded as a
// block released earlier in the chunk (the reuses column) 6.0, and the protection of
// anonymous mappings (reservations, mprotect: kinds 37-39) 7.0, and mimalloc's mappings in a
// free-threaded Python (kinds 42, 43) with the end of a Python program's own code (kind 58)
// 8.0, and allocations coded as starting where a block in reach ends (the neighbours column,
// record kEventColumns) 9.0, with kSampling's exact_from and the python-stacks mark of
// kProcess's agent_version; 9.1 codes a followed process's recorded parent inside
// agent_version, 9.2 where a forked process's capture starts in its parent's; the process's
// mappings with what of each is resident (kMappings) 10.0. Readers read their own major and
// 8.x and 9.x (kOldestReadableMajor).
//
// A capture is a 16-byte file header followed by chunks (chunk.h). Each chunk's payload is a
// sequence of records: a one-byte record type followed by that type's fields. The structs below
// are the decoded form of each record; RecordEncoder and RecordDecoder convert.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "format/sampling_model.h"

namespace memlens::format {

inline constexpr char kFileMagic[8] = {'M', 'L', 'E', 'N', 'S', 'C', 'A', 'P'};
inline constexpr uint16_t kFormatMajor = 10;
inline constexpr uint16_t kFormatMinor = 0;
// The oldest major a reader still reads: 8.x differs only in its event batches (kEvents).
inline constexpr uint16_t kOldestReadableMajor = 8;
inline constexpr size_t kFileHeaderSize = 16;
// How many chunks back a release may name an allocation of its thread (docs/capture-format.md,
// section 5): a reader keeps the allocations of this many chunks.
inline constexpr size_t kReleaseReachChunks = 4;
// An allocation coded as a reused block takes the address of a block its thread released
// earlier in the same chunk; that address was last coded in full at most this many chunks
// before (section 5), so no address depends on chunks further back.
inline constexpr size_t kReuseOriginChunks = 2;
// How many chunks a reader resuming mid-capture decodes, for their allocations, before the
// first it delivers: the delivered chunk's releases reach kReleaseReachChunks back; the
// addresses there were coded in full at most kReuseOriginChunks before; and a chunk's reuse
// codes need the sizes of the blocks its releases name, kReleaseReachChunks further back.
inline constexpr size_t kResumeChunks = 2 * kReleaseReachChunks + kReuseOriginChunks;

enum class RecordType : uint8_t {
  kProcess = 1,       // first, and again for each new program image after an exec
  kModule = 2,        // a loaded ELF object (at start, and after each dlopen)
  kModuleUnload = 3,  // an object went away (dlclose); its frames stay resolvable
  kThread = 4,        // a thread index was given to an OS thread
  kStackNode = 5,     // a new node of the stack trie: (parent, instruction pointer)
  kEvents = 6,        // a batch of allocation events from one thread
  kTime = 7,          // the global sequence counter at a monotonic time
  kEnd = 8,           // the recording ended (exit, exec, fatal signal)
  kDrops = 9,         // events lost since the last kDrops record (full buffer, failing sink)
  kPythonCode = 10,   // a Python code object that stack nodes refer to (see PythonFrameIp)
  kResident = 11,     // the process's resident memory (RSS), sampled by the writer
  kString = 12,       // an interned string (heap, marker, snapshot and type names) by id
  kEventColumns = 13,  // a batch of events, 9.0's layout (kEvents: 8.x's, read, not written)
  kMappings = 14,     // the process's mappings and what of each is resident, sampled by the writer
  kSampling = 16,     // this image's heap allocations are sampled (right after its kProcess)
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
  kPyObjAlloc = 10,  // Python's object allocator (PYMEM_DOMAIN_OBJ), malloc/calloc/realloc
  kPyMemAlloc = 11,  // PYMEM_DOMAIN_MEM
  kPyRawAlloc = 12,  // PYMEM_DOMAIN_RAW
  kFree = 16,
  kReallocOld = 17,     // realloc is about to release this block (recorded before the call)
  kReallocFailed = 18,  // ...but failed: the block recorded by kReallocOld lives on
  kMmap = 32,           // anonymous mapping the program can access (MappingCounts)
  kMunmap = 33,         // any munmap (the analyzer keeps only what overlaps tracked mappings)
  kMremapOld = 34,      // mremap is about to move/resize this range
  kMremapNew = 35,      // ...and this is the result
  kMremapFailed = 36,   // ...or it failed, the old range lives on
  kMmapReserved = 37,   // anonymous mapping with PROT_NONE: address space, not memory
  kProtect = 38,        // mprotect made a range accessible (the stack: where it was committed)
  kProtectNone = 39,    // mprotect made a range PROT_NONE (decommitted, still reserved)
  kPyArenaAlloc = 40,   // an arena of Python's small-object allocator (pymalloc): not a user
  kPyArenaFree = 41,    // allocation, reported as its own figure
  kMimallocMap = 42,    // an anonymous mapping mimalloc (a free-threaded Python's allocator) made
  kMimallocUnmap = 43,  // or unmapped inside Python's allocator: its own figure, like arenas
  // The instrumentation API (include/memlens/memlens.h). A custom heap's block events carry
  // the heap (and the type) as annotation frames, innermost in their stacks (see below).
  kHeapCreate = 48,   // address = heap id, size = name string id; stack: where
  kHeapAlloc = 49,    // a block handed out by a custom heap; stack: [heap][type] + where
  kHeapRealloc = 50,  // the new block of a custom heap's realloc (its old one: a kHeapFree)
  kHeapFree = 51,     // a block given back to its custom heap; stack: [heap] + where
  kHeapReset = 52,    // address = heap id: every block of the heap released at once
  kHeapDestroy = 53,  // address = heap id: the heap and its blocks are gone
  kMarker = 56,       // address = name string id, size = category string id (0: none)
  kSnapshot = 57,     // address = name string id: the program asked for a snapshot here
  // A Python program's own code ended (its main module returned, raised, or called sys.exit),
  // before atexit handlers and the interpreter's finalization (docs/python.md); once per image.
  kProgramEnd = 58,
};

inline bool IsHeapAlloc(EventKind k) { return static_cast<uint8_t>(k) < 16; }
inline bool IsPythonAlloc(EventKind k) {
  return k == EventKind::kPyObjAlloc || k == EventKind::kPyMemAlloc || k == EventKind::kPyRawAlloc;
}
// A custom heap's events: 48..53.
inline bool IsCustomHeapEvent(EventKind k) {
  return static_cast<uint8_t>(k) >= 48 && static_cast<uint8_t>(k) <= 53;
}
inline bool HasStack(EventKind k) {
  return IsHeapAlloc(k) || k == EventKind::kMmap || k == EventKind::kMremapNew ||
         k == EventKind::kMmapReserved || k == EventKind::kProtect ||
         k == EventKind::kPyArenaAlloc || k == EventKind::kMimallocMap ||
         (static_cast<uint8_t>(k) >= 48 && static_cast<uint8_t>(k) <= 51);
}
inline bool HasSize(EventKind k) {
  return (HasStack(k) && k != EventKind::kHeapFree) || k == EventKind::kMunmap ||
         k == EventKind::kMremapOld || k == EventKind::kProtectNone ||
         k == EventKind::kPyArenaFree || k == EventKind::kMimallocUnmap || k == EventKind::kMarker;
}
// The one rule of what an anonymous mapping counts as: memory in use when the program can
// access it at all (read, write or execute: JIT code is memory too), address space only under
// PROT_NONE, which runtimes (the JVM, V8) use to reserve gigabytes they commit piece by piece.
// The agent picks the event kind of an mmap or mprotect by it. prot: Linux's PROT_* bits.
inline bool MappingCounts(int prot) { return (prot & 0x7) != 0; }  // PROT_READ|WRITE|EXEC

// A stack node's ip is either a native return address or, with bit 63 set, a Python frame:
// bits 24..62 the id of a kPythonCode record, bits 0..23 the line (0 when unknown).
inline constexpr uint64_t kPythonFrameTag = uint64_t{1} << 63;
inline constexpr uint64_t kMaxPythonLine = (uint64_t{1} << 24) - 1;
inline bool IsPythonFrameIp(uint64_t ip) { return (ip & kPythonFrameTag) != 0; }
inline uint64_t PythonFrameIp(uint64_t code_id, uint64_t line) {
  return kPythonFrameTag | (code_id << 24) | (line > kMaxPythonLine ? 0 : line);
}
inline uint64_t PythonFrameCode(uint64_t ip) { return (ip & ~kPythonFrameTag) >> 24; }
inline uint64_t PythonFrameLine(uint64_t ip) { return ip & kMaxPythonLine; }
// An ip with bit 62 set and bit 63 clear is an annotation frame, written by the agent innermost
// in the stack of a custom heap's block event: bits 32..39 the annotation's kind, bits 0..31
// its value (a heap id, or the string id of a type name). No code address has bit 62 set.
enum class Annotation : uint8_t { kHeap = 1, kType = 2 };
inline constexpr uint64_t kAnnotationFrameTag = uint64_t{1} << 62;
inline bool IsAnnotationFrameIp(uint64_t ip) { return (ip >> 62) == 1; }
inline uint64_t AnnotationFrameIp(Annotation kind, uint32_t value) {
  return kAnnotationFrameTag | (uint64_t{static_cast<uint8_t>(kind)} << 32) | value;
}
inline Annotation AnnotationKind(uint64_t ip) { return static_cast<Annotation>((ip >> 32) & 0xff); }
inline uint32_t AnnotationValue(uint64_t ip) { return static_cast<uint32_t>(ip); }
// Address coding in event batches (docs/capture-format.md, section 5): chain 0 are
// allocations, which back-references can name; chain 1 are releases, each either such a
// back-reference (to an allocation of its thread in the same chunk or the kReleaseReachChunks
// chunks before) or a delta from the previous event's address, taken on addresses rotated right
// by 4 bits, since nearly every block is 16-byte aligned and its low nibble carries nothing. An
// allocation is either a reused block (ReusedBlocks) or such a delta.
inline int AddressChain(EventKind k) { return HasStack(k) ? 0 : 1; }
inline uint64_t RotateAddress(uint64_t a) { return (a >> 4) | (a << 60); }
inline uint64_t UnrotateAddress(uint64_t r) { return (r << 4) | (r >> 60); }
const char* EventKindName(EventKind kind);
// Inline: the decoder asks it of every event.
inline bool IsKnownEventKind(uint8_t k) {
  return (k >= 1 && k <= 12) || (k >= 16 && k <= 18) || (k >= 32 && k <= 43) ||
         (k >= 48 && k <= 53) || (k >= 56 && k <= 58);
}

// kStopped: a span's end (memlens_stop), format 8.1.
enum class EndReason : uint8_t { kExit = 1, kExec = 2, kSignal = 3, kStopped = 4 };
const char* EndReasonName(EndReason reason);  // "exit", "exec", "signal", "stopped"

struct ProcessRecord {
  uint64_t pid = 0;
  uint64_t ppid = 0;
  uint64_t start_realtime_ns = 0;   // wall clock at agent start (CLOCK_REALTIME)
  uint64_t start_monotonic_ns = 0;  // CLOCK_MONOTONIC at agent start; kTime is relative to it
  std::string executable;
  std::vector<std::string> argv;
  std::string agent_version;  // 9.0: ends in kPythonStacksMark in Python-lines-only mode
  // 9.1: the pid of the process's nearest recorded ancestor, when that is not its parent
  // (memlens run --follow-children: a shell's subshell forked it, and only programs that exec
  // are recorded); 0 otherwise. Coded inside agent_version (kRecordedParentMark), ahead of
  // kPythonStacksMark, so that a 9.0 reader takes it for part of the version.
  uint64_t recorded_parent = 0;
  // 9.2: a process forked while its parent recorded, recording from the fork on (memlens run
  // --follow-children): it inherited the parent's blocks in use, which the parent's capture
  // holds. fork_parent_image_ns is that parent image's start_monotonic_ns (0: not forked), and
  // fork_seq the parent's sequence number at the fork: its events before it happened before.
  // Coded inside agent_version too (kForkParentImageMark, kForkSeqMark).
  uint64_t fork_parent_image_ns = 0;
  uint64_t fork_seq = 0;
  bool Forked() const { return fork_parent_image_ns != 0; }
};
inline constexpr char kRecordedParentMark[] = " recorded-parent=";
inline constexpr char kForkParentImageMark[] = " forked-from-image=";
inline constexpr char kForkSeqMark[] = " forked-at-seq=";
// agent_version as the capture holds it, and back (the decoder): the numbers above in and out.
std::string CodedAgentVersion(const ProcessRecord& p);
void DecodeAgentVersion(const std::string& coded, ProcessRecord* p);
// How kProcess's agent_version starts when the Windows agent wrote it (src/windows/agent): no
// mapping samples (kMappings), no Python.
inline constexpr char kWindowsAgentPrefix[] = "memlens-windows ";
inline bool WindowsAgent(const ProcessRecord& p) {
  return p.agent_version.rfind(kWindowsAgentPrefix, 0) == 0;
}
// Appended to kProcess's agent_version by an agent recording Python lines only, without native
// unwinding (memlens run --python-stacks): its stacks lack native frames on purpose.
inline constexpr char kPythonStacksMark[] = " python-stacks";
inline bool PythonStacksOnly(const ProcessRecord& p) {
  const std::string& v = p.agent_version;
  const size_t n = sizeof(kPythonStacksMark) - 1;
  return v.size() >= n && v.compare(v.size() - n, n, kPythonStacksMark) == 0;
}

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

// Node ids are implicit: the n-th kStackNode record of a program image (since its kProcess
// record) is node n (the root, 0, is never written). A stack id is the id of its innermost node.
// The file holds n - 1 - parent (0 when the parent is the node just before, as along a new
// path): the decoded form holds the parent itself.
struct StackNodeRecord {
  uint64_t parent = 0;  // < the node's own id
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
  uint64_t unrecorded_children = 0;  // child processes the image started, none recorded
};

struct DropsRecord {
  uint64_t count = 0;
};

struct ResidentRecord {
  uint64_t monotonic_ns = 0;  // since ProcessRecord::start_monotonic_ns
  uint64_t bytes = 0;         // resident set size
};

// One mapping of the process as /proc/PID/smaps lists it (a VMA: the kernel joins adjacent
// mappings of the same kind into one), with what of it is resident. Sizes in bytes, multiples
// of the page size.
struct Mapping {
  enum Flags : uint8_t { kRead = 1, kWrite = 2, kExec = 4, kShared = 8 };
  uint64_t start = 0;
  uint64_t end = 0;
  uint8_t flags = 0;
  uint64_t offset = 0;   // in the file
  uint64_t inode = 0;    // 0: not backed by a file
  std::string name;      // the path, "[heap]", "[stack]", "[vdso]", "[anon:...]", "" for none
  uint64_t rss = 0;
  uint64_t anonymous = 0;  // of rss: private pages not from a file (or copied from it)
  uint64_t swap = 0;
  // Which pages are resident, when the writer read them (/proc/PID/pagemap): runs of pages,
  // alternately absent and present, starting with absent (that run may be 0). Empty when not
  // read: then none is resident (rss 0), all are (rss == end - start), or it is not known
  // which (a mapping the writer does not read page by page, see docs/capture-format.md).
  std::vector<uint64_t> page_runs;
  bool operator==(const Mapping&) const = default;
};

// The process's mappings at one moment: what `memlens rss` explains. Every event numbered
// below `seq` had happened when the writer finished reading them (what happened during the
// reading may or may not show in it).
struct MappingsRecord {
  uint64_t monotonic_ns = 0;  // since ProcessRecord::start_monotonic_ns, as kResident
  uint64_t seq = 0;
  uint64_t read_ns = 0;       // how long the reading took
  uint64_t page_size = 4096;
  std::vector<Mapping> mappings;  // by address
  // What memlens mapped for itself in the process (its rings and tables): (start, bytes), by
  // start. The kernel may join them with the program's memory beside them.
  std::vector<std::pair<uint64_t, uint64_t>> own;
  bool operator==(const MappingsRecord&) const = default;
};

// Strings are interned by the agent: ids 1, 2, 3... per program image, each written once before
// the first event or annotation frame that refers to it. Id 0 is "no name" (or the agent's
// table was full).
struct StringRecord {
  uint64_t id = 0;
  std::string text;
};

// A sampled image: each byte of a heap allocation (kinds 1-12) smaller than exact_from was
// sampled with probability 1/rate, so such a block of size s is recorded with probability
// 1 - exp(-s/rate); a block of exact_from bytes or more is always recorded; a free only when its
// block was recorded. Mappings and pymalloc arenas are recorded in full. Readers scale each
// recorded block back by 1 / SamplingModel{rate, exact_from}.RecordProbability(s)
// (sampling_model.h, docs/sampling.md). 8.x captures have no threshold.
struct SamplingRecord {
  uint64_t rate = 0;                          // mean bytes between samples; > 0
  uint64_t exact_from = kNoExactThreshold;  // blocks of this size or more are recorded whole
};

struct PythonCodeRecord {
  uint64_t id = 0;
  std::string filename;  // co_filename
  std::string name;      // co_qualname
  uint64_t first_line = 0;
};

}  // namespace memlens::format
