// src/python/python_hooks.cc
//
// libmemlens_python<tag>.so (tag: 3.11, 3.13, 3.13t...; one per interpreter memlens is built
// for): loaded by the agent (src/agent/python_support.cc) into a Python process before the
// interpreter initializes. It wraps Python's three allocator
// domains and pymalloc's arena allocator (PEP 445) so every allocation is recorded once, with
// its domain, and gives the agent the calling thread's Python frames for every allocation,
// native ones included.
//
// Runs on: application threads, inside allocation hooks, with or without a GIL: no allocation
// of our own except when a code object is seen for the first time, no locks. Interned code
// objects are kept alive (one reference each) so their ids are never reused.
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sched.h>

#include <atomic>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <utility>

#include "agent/python_bridge.h"
#include "agent/recorder/sample_countdown.h"
#include "agent/recorder/sampled_pointers.h"
#include "format/records.h"
#include "python/interpreter_frames.h"

namespace memlens::python {
namespace {

using format::EventKind;

const MemlensAgentBridge* g_bridge = nullptr;
PyMemAllocatorEx g_original[3];  // by PyMemAllocatorDomain: RAW, MEM, OBJ
PyObjectArenaAllocator g_original_arena;
constexpr EventKind kDomainKinds[3] = {EventKind::kPyRawAlloc, EventKind::kPyMemAlloc,
                                       EventKind::kPyObjAlloc};

// --- code objects -> ids: insert-only, lock-free for readers ---------------------------------

// 2 MiB, mapped untouched. A slot is the code object's address over 256, wrapping every
// 32 MiB of address space: code objects made near each other share pages of the table, so the
// program pays for the pages its code objects' spread needs rather than all 2 MiB, as with a
// mixing hash. Over 16 wrapped every 2 MiB, which a large heap's code objects span: the
// program's own peak with over 16 and over 256, py_objects 19.8 and 19.0 MiB, black 58.6 and
// 57.5 MiB. Two code objects within 256 bytes (each is over 100) take neighbouring slots.
constexpr size_t kCodeSlots = size_t{1} << 17;
struct CodeSlot {
  std::atomic<PyCodeObject*> code;
  std::atomic<uint64_t> id;
};
CodeSlot* g_code_slots = nullptr;  // mapped once (map_memory)
std::atomic<size_t> g_code_count{0};

size_t SlotOf(PyCodeObject* code) {
  return (reinterpret_cast<uintptr_t>(code) >> 8) & (kCodeSlots - 1);
}

// UTF-8 of a str, read from its characters without calling into the interpreter: no
// allocation, no exception state, and none of the locks a free-threaded build takes to fill a
// str's UTF-8 cache (a thread that waits on one inside an allocation hook lets a collection run
// while the block just allocated is not yet an object). Longer text is cut at a character.
class Utf8Text {
 public:
  explicit Utf8Text(PyObject* text) {
    if (!text || !PyUnicode_Check(text)) return;
    if (PyUnicode_IS_COMPACT_ASCII(text)) {
      text_ = static_cast<const char*>(PyUnicode_DATA(text));
      return;
    }
    const int kind = PyUnicode_KIND(text);
    const void* data = PyUnicode_DATA(text);
    size_t n = 0;
    for (Py_ssize_t i = 0; i < PyUnicode_GET_LENGTH(text); ++i) {
      const Py_UCS4 c = PyUnicode_READ(kind, data, i);
      const size_t width = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
      if (n + width >= sizeof(buffer_)) break;
      if (width == 1) {
        buffer_[n++] = static_cast<char>(c);
        continue;
      }
      static constexpr unsigned char kLead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
      for (size_t k = width; k-- > 1;) {  // continuation bytes: 6 bits each, lowest last
        buffer_[n + k] = static_cast<char>(0x80 | ((c >> (6 * (width - 1 - k))) & 0x3F));
      }
      buffer_[n] = static_cast<char>(kLead[width] | (c >> (6 * (width - 1))));
      n += width;
    }
    buffer_[n] = '\0';
    text_ = buffer_;
  }
  const char* get() const { return text_; }

 private:
  const char* text_ = "";
  char buffer_[1024];
};

// A slot's id while the thread that claimed it registers the code, and after that failed.
constexpr uint64_t kFilling = 0;
constexpr uint64_t kFailed = ~uint64_t{0};

// The id of a slot another thread is filling: a registration takes microseconds (three small
// mallocs), so the wait is short unless that thread is preempted; past the bound the frame is
// recorded as unknown code rather than waiting on.
uint64_t AwaitId(const CodeSlot& slot) {
  for (int i = 0; i < (1 << 20); ++i) {
    const uint64_t id = slot.id.load(std::memory_order_acquire);
    if (id != kFilling) return id == kFailed ? 0 : id;
    if (i < 1024) {
      __builtin_ia32_pause();
    } else {
      sched_yield();  // only while two threads meet a new code object at once
    }
  }
  return 0;
}

// The id of a code object. A new one is registered by the thread that claims its empty slot
// with a compare-and-swap: concurrent inserters (free-threaded builds have no GIL to serialize
// them) either claim another slot or wait for this one's id. Only a thread attached to the
// interpreter (holding the GIL, or its thread state attached without one) registers, because
// it takes a reference; others write 0.
uint64_t CodeId(PyCodeObject* code) {
  for (size_t slot = SlotOf(code);; slot = (slot + 1) & (kCodeSlots - 1)) {
    CodeSlot& entry = g_code_slots[slot];
    PyCodeObject* seen = entry.code.load(std::memory_order_acquire);
    if (seen == nullptr) {
      if (!PyGILState_Check() ||
          g_code_count.load(std::memory_order_relaxed) * 4 > kCodeSlots * 3) {
        return 0;
      }
      if (entry.code.compare_exchange_strong(seen, code, std::memory_order_acq_rel)) {
        g_code_count.fetch_add(1, std::memory_order_relaxed);
        Py_INCREF(code);  // atomic where there is no GIL
        Utf8Text file(code->co_filename), name(CodeName(code));
        uint64_t id = g_bridge->register_code(file.get(), name.get(),
                                              static_cast<uint64_t>(code->co_firstlineno));
        entry.id.store(id != 0 ? id : kFailed, std::memory_order_release);
        return id;
      }
      // Another thread took the slot first: `seen` is now what it put there.
    }
    if (seen == code) return AwaitId(entry);
  }
}

// Frames by position (FramePosition: the address of the frame's last instruction, inside its
// code object), per thread: the id of the code (a probe of the 2 MiB code table), the line
// (CPython walks the code's line table from its start, thousands of instructions in a long
// function) and whether the position is a frame's set-up are found once per call site, not
// once per frame of every event, and a hit reads nothing of the code object. Only positions in
// registered code objects are cached: memlens holds a reference to each, so their addresses
// never come to mean another code. Two ways per set, the most recently used first: with one
// way, two hot sites that shared a slot evicted each other on every event (py_objects missed
// 28,677 times, 3,100 instructions each).
struct FrameCacheEntry {
  uintptr_t position;  // 0 when empty
  uint64_t frame;      // format::PythonFrameIp(id, line), or kSetUpPosition
};
constexpr uint64_t kSetUpPosition = 0;  // no PythonFrameIp is 0 (its tag bit is set)
constexpr int kFrameCacheSetBits = 9;
constexpr size_t kFrameCacheSets = size_t{1} << kFrameCacheSetBits;
struct FrameCacheSet {
  FrameCacheEntry way[2];
};
template <typename T>
inline T* AgentThreadLocal(ptrdiff_t offset) {
  return reinterpret_cast<T*>(static_cast<char*>(__builtin_thread_pointer()) + offset);
}

// The calling thread's cache, kept by the agent with the thread's ring (python_bridge.h:
// MemlensPythonFrameReader): mapped on first use (we are inside an allocation hook), emptied
// when the ring's last thread filled it; nullptr when it could not be mapped.
FrameCacheSet* ThreadFrameCache(MemlensFrameCache* cache, uint32_t thread) {
  constexpr size_t kBytes = kFrameCacheSets * sizeof(FrameCacheSet);
  if (cache->thread != thread || !cache->memory) {  // once per thread: no store per event
    if (!cache->memory) {
      cache->memory = g_bridge->map_memory(kBytes);
    } else {
      memset(cache->memory, 0, kBytes);
    }
    cache->thread = thread;
  }
  return static_cast<FrameCacheSet*>(cache->memory);
}

uint64_t FrameWord(InterpreterFrame* f, uint64_t id) {
  int line = InstructionLine(FrameCode(f), FrameInstruction(f));
  return format::PythonFrameIp(id, line > 0 ? line : 0);
}

// What the cache keeps for the frame's position: its word for the record, or kSetUpPosition.
uint64_t LookUpFrame(InterpreterFrame* f, uint64_t* id) {
  *id = CodeId(FrameCode(f));
  return IsAtSetUp(f) ? kSetUpPosition : FrameWord(f, *id);
}

uint64_t FrameOf(FrameCacheSet* cache, InterpreterFrame* f) {
  const uintptr_t position = FramePosition(f);
  FrameCacheSet* set =
      cache ? cache + ((position * 0x9E3779B97F4A7C15ull) >> (64 - kFrameCacheSetBits)) : nullptr;
  uint64_t frame;
  if (set && set->way[0].position == position) {
    frame = set->way[0].frame;
  } else if (set && set->way[1].position == position) {
    std::swap(set->way[0], set->way[1]);
    frame = set->way[0].frame;
  } else {
    uint64_t id = 0;
    frame = LookUpFrame(f, &id);
    if (set && id != 0) {
      set->way[1] = set->way[0];
      set->way[0] = {position, frame};
    }
  }
  // A generator's frame at its set-up is not skipped (IsAtSetUp): looked up afresh (rare).
  if (frame == kSetUpPosition && IsGeneratorFrame(f)) frame = FrameWord(f, CodeId(FrameCode(f)));
  return frame;
}

// Reads the calling thread's Python frames, innermost first, into out.
int ReadFrames(uint64_t* out, int max, MemlensFrameCache* frame_cache, uint32_t thread) {
  FrameCacheSet* cache = ThreadFrameCache(frame_cache, thread);
  int n = 0;
  for (InterpreterFrame* f = InnermostFrame(); f && n < max; f = OuterFrame(f)) {
    if (!IsCodeFrame(f)) continue;
    uint64_t frame = FrameOf(cache, f);
    if (frame == kSetUpPosition) continue;
    if (IsEntryFrame(f)) frame |= MEMLENS_PYTHON_ENTRY_BIT;
    out[n++] = frame;
  }
  return n;
}

// --- the allocator wrappers; ctx is the domain ------------------------------------------------

inline int DomainOf(void* ctx) { return static_cast<int>(reinterpret_cast<intptr_t>(ctx)); }

// Sampling's short path (python_bridge.h), on the agent's thread-locals: no call into the agent.
bool g_sampling = false;
ptrdiff_t g_countdown_offset = 0;
ptrdiff_t g_in_hook_offset = 0;
const agent::SampledPointers* g_sampled = nullptr;

// An allocation of `size` bytes needs nothing recorded: it holds no sample point (its bytes
// then counted down), or the thread is inside the agent.
inline bool PassesUnsampled(size_t size) {
  return *AgentThreadLocal<bool>(g_in_hook_offset) ||
         agent::CountsDownUnsampled(AgentThreadLocal<uint64_t>(g_countdown_offset), size);
}

inline bool ReleasesUnsampled(const void* ptr) {
  return !g_sampled->MaybeSampled(reinterpret_cast<uintptr_t>(ptr));
}

// By domain: true where the original allocator is pymalloc's (the MEM and OBJ domains of a
// release build, unless something replaced them before us). pymalloc serves a request of 1 to
// 512 bytes from its pools and makes no call through our other wrappers or the C library's
// malloc while doing so, except rarely through ones that guard themselves (a new arena) or that
// record a real allocation of the interpreter's (growing its array of arenas). Such a call's
// short path needs no guard, so it jumps straight to pymalloc: the guard's two thread-local
// stores and the frame around the call cost py_objects 0.016 of its run time. Larger requests,
// and any other allocator behind us, go to the C library's malloc, which must see the guard so
// that it does not count the bytes a second time.
bool g_pymalloc_domain[3] = {false, false, false};

inline bool ServedByPymalloc(void* ctx, size_t size) {
  return g_pymalloc_domain[DomainOf(ctx)] && size - 1 < kPymallocLargest;
}

// The thread marked as inside the agent for a scope, as the agent's HookGuard does.
class InsideAgent {
 public:
  InsideAgent() : in_hook_(AgentThreadLocal<bool>(g_in_hook_offset)), was_(*in_hook_) {
    *in_hook_ = true;
  }
  ~InsideAgent() { *in_hook_ = was_; }

 private:
  bool* in_hook_;
  bool was_;
};

// The wrappers come in two sets: kMimalloc for the domains whose original allocator is
// mimalloc (MEM and OBJ of a free-threaded build), whose real calls run with the thread marked
// for the agent, which then records the memory mimalloc maps (its arenas) as a figure of its own
// (python_bridge.h: mimalloc_offset); the other set costs pymalloc's calls nothing for it (the
// mark's stores were 0.6% of py_objects' instructions on 3.11).
ptrdiff_t g_mimalloc_offset = 0;

template <bool kMimalloc>
class MimallocScope {
 public:
  MimallocScope() {
    if constexpr (kMimalloc) *AgentThreadLocal<bool>(g_mimalloc_offset) = true;
  }
  ~MimallocScope() {
    if constexpr (kMimalloc) *AgentThreadLocal<bool>(g_mimalloc_offset) = false;
  }
};

// The real calls, with the thread marked as inside the agent. Out of line, and reached by a
// tail jump: the short paths then need no frame, and no saved registers, of their own (7 of
// the 27 instructions of an unguarded pymalloc call went to setting them up and taking them
// down).
template <bool kMimalloc>
__attribute__((noinline)) void* GuardedMalloc(void* ctx, size_t size) {
  const PyMemAllocatorEx& real = g_original[DomainOf(ctx)];
  InsideAgent guard;
  MimallocScope<kMimalloc> scope;
  return real.malloc(real.ctx, size);
}

template <bool kMimalloc>
__attribute__((noinline)) void* GuardedCalloc(void* ctx, size_t count, size_t size) {
  const PyMemAllocatorEx& real = g_original[DomainOf(ctx)];
  InsideAgent guard;
  MimallocScope<kMimalloc> scope;
  return real.calloc(real.ctx, count, size);
}

template <bool kMimalloc>
__attribute__((noinline)) void* GuardedRealloc(void* ctx, void* ptr, size_t size) {
  const PyMemAllocatorEx& real = g_original[DomainOf(ctx)];
  InsideAgent guard;
  MimallocScope<kMimalloc> scope;
  return real.realloc(real.ctx, ptr, size);
}

template <bool kMimalloc>
__attribute__((noinline)) void GuardedFree(void* ctx, void* ptr) {
  const PyMemAllocatorEx& real = g_original[DomainOf(ctx)];
  InsideAgent guard;
  MimallocScope<kMimalloc> scope;
  real.free(real.ctx, ptr);
}

// Each wrapper tries the short path inline and leaves the full path, which records, out of line:
// the short path then needs no frame of its own. `caller` is the wrapper's return address.
template <bool kMimalloc>
__attribute__((noinline)) void* MallocFull(void* ctx, size_t size, const void* caller) {
  const PyMemAllocatorEx& real = g_original[DomainOf(ctx)];
  if (!g_bridge->enter(caller)) return real.malloc(real.ctx, size);
  void* p;
  {
    MimallocScope<kMimalloc> scope;
    p = real.malloc(real.ctx, size);
  }
  if (p) g_bridge->record_alloc(static_cast<uint8_t>(kDomainKinds[DomainOf(ctx)]), p, size);
  g_bridge->leave();
  return p;
}

template <bool kMimalloc>
void* Malloc(void* ctx, size_t size) {
  if (g_sampling && PassesUnsampled(size)) {
    const PyMemAllocatorEx& real = g_original[DomainOf(ctx)];
    if (ServedByPymalloc(ctx, size)) return real.malloc(real.ctx, size);
    return GuardedMalloc<kMimalloc>(ctx, size);
  }
  return MallocFull<kMimalloc>(ctx, size, __builtin_return_address(0));
}

template <bool kMimalloc>
__attribute__((noinline)) void* CallocFull(void* ctx, size_t count, size_t size,
                                           const void* caller) {
  const PyMemAllocatorEx& real = g_original[DomainOf(ctx)];
  if (!g_bridge->enter(caller)) return real.calloc(real.ctx, count, size);
  void* p;
  {
    MimallocScope<kMimalloc> scope;
    p = real.calloc(real.ctx, count, size);
  }
  if (p) g_bridge->record_alloc(static_cast<uint8_t>(kDomainKinds[DomainOf(ctx)]), p, count * size);
  g_bridge->leave();
  return p;
}

template <bool kMimalloc>
void* Calloc(void* ctx, size_t count, size_t size) {
  size_t total;  // an overflowing product is the full path's to refuse
  if (g_sampling && !__builtin_mul_overflow(count, size, &total) && PassesUnsampled(total)) {
    const PyMemAllocatorEx& real = g_original[DomainOf(ctx)];
    if (ServedByPymalloc(ctx, total)) return real.calloc(real.ctx, count, size);
    return GuardedCalloc<kMimalloc>(ctx, count, size);
  }
  return CallocFull<kMimalloc>(ctx, count, size, __builtin_return_address(0));
}

// As the agent's realloc: the release before the call, the new block after, undone on failure.
template <bool kMimalloc>
__attribute__((noinline)) void* ReallocFull(void* ctx, void* ptr, size_t size,
                                            const void* caller) {
  const PyMemAllocatorEx& real = g_original[DomainOf(ctx)];
  if (!g_bridge->enter(caller)) return real.realloc(real.ctx, ptr, size);
  if (ptr) g_bridge->record_release(static_cast<uint8_t>(EventKind::kReallocOld), ptr, 0);
  void* p;
  {
    MimallocScope<kMimalloc> scope;
    p = real.realloc(real.ctx, ptr, size);
  }
  if (p) {
    g_bridge->record_alloc(static_cast<uint8_t>(kDomainKinds[DomainOf(ctx)]), p, size);
  } else if (ptr) {
    g_bridge->record_release(static_cast<uint8_t>(EventKind::kReallocFailed), ptr, 0);
  }
  g_bridge->leave();
  return p;
}

template <bool kMimalloc>
void* Realloc(void* ctx, void* ptr, size_t size) {
  if (g_sampling && (!ptr || ReleasesUnsampled(ptr)) && PassesUnsampled(size)) {
    return GuardedRealloc<kMimalloc>(ctx, ptr, size);
  }
  return ReallocFull<kMimalloc>(ctx, ptr, size, __builtin_return_address(0));
}

template <bool kMimalloc>
__attribute__((noinline)) void FreeFull(void* ctx, void* ptr, const void* caller) {
  const PyMemAllocatorEx& real = g_original[DomainOf(ctx)];
  if (!ptr || !g_bridge->enter(caller)) return real.free(real.ctx, ptr);
  g_bridge->record_release(static_cast<uint8_t>(EventKind::kFree), ptr, 0);
  {
    MimallocScope<kMimalloc> scope;
    real.free(real.ctx, ptr);
  }
  g_bridge->leave();
}

template <bool kMimalloc>
void Free(void* ctx, void* ptr) {
  if (ptr && g_sampling && ReleasesUnsampled(ptr)) {
    const PyMemAllocatorEx& real = g_original[DomainOf(ctx)];
    // A block pymalloc did not make goes on to PyMem_RawFree, whose wrapper asks the same
    // filter about the same (unsampled) address and guards the C library's free itself.
    if (g_pymalloc_domain[DomainOf(ctx)]) return real.free(real.ctx, ptr);
    return GuardedFree<kMimalloc>(ctx, ptr);
  }
  FreeFull<kMimalloc>(ctx, ptr, __builtin_return_address(0));
}

// pymalloc takes and returns arenas from inside an object allocation or free, whose wrapper
// has already marked the thread as inside the agent: arenas are recorded all the same (and the
// mmap/munmap under them, being nested, are not).
void* ArenaAlloc(void* ctx, size_t size) {
  int entered = g_bridge->enter(__builtin_return_address(0));
  void* p = g_original_arena.alloc(g_original_arena.ctx, size);
  if (p && (entered || g_bridge->recording())) {
    g_bridge->record_alloc(static_cast<uint8_t>(EventKind::kPyArenaAlloc), p, size);
  }
  if (entered) g_bridge->leave();
  return p;
}

void ArenaFree(void* ctx, void* ptr, size_t size) {
  int entered = g_bridge->enter(__builtin_return_address(0));
  if (entered || g_bridge->recording()) {
    g_bridge->record_release(static_cast<uint8_t>(EventKind::kPyArenaFree), ptr, size);
  }
  g_original_arena.free(g_original_arena.ctx, ptr, size);
  if (entered) g_bridge->leave();
}

// --- the end of the program's own code -------------------------------------------------------
//
// "At exit" for a Python program is the moment its own code ended: the main module returned,
// raised, or called sys.exit (docs/python.md). Py_FinalizeEx then calls threading._shutdown,
// which calls the functions given to threading._register_atexit (last registered first), then
// joins the non-daemon threads; the atexit handlers and the freeing of the modules come after.
// So, just before the main code runs (the interpreter's "cpython.run_*" audit event, raised by
// Py_RunMain for a file, -m, -c or stdin), we register a function there that tells the agent.
// Public API only, the same on every version. What the program could notice (docs/python.md):
// threading imported before its code runs, and CPython building each audit event's arguments
// now that a hook exists.

PyObject* ProgramEnded(PyObject*, PyObject*) {
  g_bridge->program_end();
  Py_RETURN_NONE;
}

PyMethodDef g_program_end_def = {"memlens_program_end", ProgramEnded, METH_NOARGS, nullptr};

// Registers ProgramEnded with threading; any error is cleared (the program's own exception, if
// one is pending, is kept).
void WatchProgramEnd() {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  PyObject* threading = PyImport_ImportModule("threading");
  PyObject* callback = PyCFunction_New(&g_program_end_def, nullptr);
  PyObject* done = threading && callback
                       ? PyObject_CallMethod(threading, "_register_atexit", "O", callback)
                       : nullptr;
  if (!done) PyErr_Clear();
  Py_XDECREF(done);
  Py_XDECREF(callback);
  Py_XDECREF(threading);
  PyErr_Restore(type, value, traceback);
}

// "cpython.run_file", "cpython.run_module", "cpython.run_command" or "cpython.run_stdin".
bool IsRunEvent(const char* event) {
  if (std::strncmp(event, "cpython.run_", 12) != 0) return false;
  const char* what = event + 12;
  return !std::strcmp(what, "file") || !std::strcmp(what, "module") ||
         !std::strcmp(what, "command") || !std::strcmp(what, "stdin");
}

// Called by the interpreter for every audit event, by a thread attached to it (also in a forked
// child, which inherits the hook and the registration). It must cost next to nothing and never
// fail: it answers 0 always. One check per thing to catch: add another check below, not another hook.
std::atomic<bool> g_program_end_watched{false};

int AuditHook(const char* event, PyObject*, void*) {
  if (event[0] == 'c' && !g_program_end_watched.load(std::memory_order_relaxed) &&
      IsRunEvent(event) && !g_program_end_watched.exchange(true)) {
    WatchProgramEnd();
  }
  return 0;
}

// The address range of the executable segment holding `address`.
bool TextRangeOf(const void* address, uintptr_t* begin, uintptr_t* end) {
  struct Query {
    uintptr_t address, begin = 0, end = 0;
  } query{reinterpret_cast<uintptr_t>(address)};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* q = static_cast<Query*>(data);
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          uintptr_t start = info->dlpi_addr + ph.p_vaddr;
          if (ph.p_type == PT_LOAD && q->address - start < ph.p_memsz) {
            q->begin = start;
            q->end = start + ph.p_memsz;
            return 1;
          }
        }
        return 0;
      },
      &query);
  *begin = query.begin;
  *end = query.end;
  return query.end != 0;
}

#ifdef Py_GIL_DISABLED
constexpr bool kFreeThreaded = true;
#else
constexpr bool kFreeThreaded = false;
#endif

}  // namespace
}  // namespace memlens::python

namespace memlens::python {
namespace {

// The wrappers of each domain, and whether they are in place (Install, Uninstall).
PyMemAllocatorEx g_wrappers[3];
PyObjectArenaAllocator g_arena_wrapper = {nullptr, ArenaAlloc, ArenaFree};
bool g_installed = false;

bool SameAllocator(const PyMemAllocatorEx& a, const PyMemAllocatorEx& b) {
  return a.ctx == b.ctx && a.malloc == b.malloc && a.calloc == b.calloc &&
         a.realloc == b.realloc && a.free == b.free;
}

// Our wrappers go on top of whatever each domain has now. A domain whose allocator is still the
// one we wrapped keeps its g_original, which threads outside the GIL (the RAW domain) may be
// reading.
void Install() {
  for (int domain : {PYMEM_DOMAIN_RAW, PYMEM_DOMAIN_MEM, PYMEM_DOMAIN_OBJ}) {
    auto d = static_cast<PyMemAllocatorDomain>(domain);
    PyMemAllocatorEx current;
    PyMem_GetAllocator(d, &current);
    if (SameAllocator(current, g_wrappers[domain])) continue;  // still ours (never taken off)
    if (!SameAllocator(current, g_original[domain])) g_original[domain] = current;
    PyMem_SetAllocator(d, &g_wrappers[domain]);
  }
  PyObjectArenaAllocator arena;
  PyObject_GetArenaAllocator(&arena);
  if (arena.alloc != ArenaAlloc) {
    g_original_arena = arena;
    PyObject_SetArenaAllocator(&g_arena_wrapper);
  }
  g_installed = true;
}

// Puts back what each domain had, where ours is still on top. Where another tool has put its
// own on top of ours (tracemalloc.start() after memlens.start()), ours stay under it, idle:
// taking them out would cut that tool's chain.
void Uninstall() {
  for (int domain : {PYMEM_DOMAIN_RAW, PYMEM_DOMAIN_MEM, PYMEM_DOMAIN_OBJ}) {
    auto d = static_cast<PyMemAllocatorDomain>(domain);
    PyMemAllocatorEx current;
    PyMem_GetAllocator(d, &current);
    if (SameAllocator(current, g_wrappers[domain])) PyMem_SetAllocator(d, &g_original[domain]);
  }
  PyObjectArenaAllocator arena;
  PyObject_GetArenaAllocator(&arena);
  if (arena.alloc == ArenaAlloc) PyObject_SetArenaAllocator(&g_original_arena);
  g_installed = false;
}

// Late (a span started in a running interpreter, docs/agent.md "Spans"): the calling thread may
// not hold the GIL (a C caller, or ctypes.CDLL), and allocators change only under it.
class HoldInterpreter {
 public:
  HoldInterpreter() : late_(Py_IsInitialized()) {
    if (late_) state_ = PyGILState_Ensure();
  }
  ~HoldInterpreter() {
    if (late_) PyGILState_Release(state_);
  }
  bool late() const { return late_; }

 private:
  bool late_;
  PyGILState_STATE state_{};
};

// A span starts in a running program: the code objects on the calling thread's stack are
// registered now, with the GIL held. The span's first allocation under one of them may come
// without it (an extension that released the GIL), when no code object can be registered
// (CodeId), and its line would be unknown code.
void RegisterStackCodes() {
  PyFrameObject* frame = PyThreadState_GetFrame(PyThreadState_Get());
  while (frame) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    CodeId(code);
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
  }
}

}  // namespace
}  // namespace memlens::python

// Called by the agent at its start (memlens run: before the interpreter initializes) or at each
// span's start (late); a second call only puts the wrappers back on.
extern "C" __attribute__((visibility("default"))) int memlens_python_attach(
    const MemlensAgentBridge* bridge) {
  using namespace memlens::python;
  if (g_bridge) {
    HoldInterpreter hold;
    if (!g_installed) Install();
    RegisterStackCodes();
    return 0;
  }
  if (!bridge || bridge->version != MEMLENS_PYTHON_BRIDGE_VERSION) return 1;
  // The agent picks the library by the same two facts; a library loaded by hand, or renamed,
  // must still never read another layout.
  bool free_threaded = dlsym(RTLD_DEFAULT, MEMLENS_FREE_THREADED_SYMBOL) != nullptr;
  if ((Py_Version >> 16) != (PY_VERSION_HEX >> 16) || free_threaded != kFreeThreaded) {
    char line[200];
    snprintf(line, sizeof line,
             "these Python hooks were built for Python %d.%d%s, not for this Python %lu.%lu%s: "
             "Python frames are not recorded, only native allocations",
             PY_MAJOR_VERSION, PY_MINOR_VERSION, kFreeThreaded ? "t" : "",
             static_cast<unsigned long>(Py_Version >> 24),
             static_cast<unsigned long>((Py_Version >> 16) & 0xff), free_threaded ? "t" : "");
    bridge->say(line);
    return 1;
  }
  void* slots = bridge->map_memory(kCodeSlots * sizeof(CodeSlot));
  if (!slots) return 1;
  g_code_slots = static_cast<CodeSlot*>(slots);
  g_bridge = bridge;
  g_countdown_offset = bridge->countdown_offset;
  g_in_hook_offset = bridge->in_hook_offset;
  g_sampled = static_cast<const memlens::agent::SampledPointers*>(bridge->sampled_blocks);
  g_sampling = bridge->sampling != 0 && g_sampled;

  // Where the eval loop is, so the writer can put Python frames in its place.
  uintptr_t hooks_begin, hooks_end, eval_begin = 0, eval_end = 0;
  TextRangeOf(reinterpret_cast<const void*>(&ReadFrames), &hooks_begin, &hooks_end);
  Dl_info info;
  ElfW(Sym)* symbol = nullptr;
  void* eval = dlsym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault");
  if (eval && dladdr1(eval, &info, reinterpret_cast<void**>(&symbol), RTLD_DL_SYMENT) && symbol) {
    eval_begin = reinterpret_cast<uintptr_t>(eval);
    eval_end = eval_begin + symbol->st_size;
  }
  bridge->set_python_ranges(hooks_begin, hooks_end, eval_begin, eval_end);

  HoldInterpreter hold;
  // Before our wrappers are in place: the hook's entry (PyMem_RawMalloc) is the interpreter's
  // for good, not an allocation of the program's. Late, the program's code is already running:
  // nothing to watch for (a span ends at memlens_stop).
  if (!hold.late() && PySys_AddAuditHook(AuditHook, nullptr) != 0) {
    bridge->say("cannot watch for the end of the program's code: in use at exit is taken at "
                "the end of the process");
  }

  // Asked before our wrappers are in place: afterwards the answer would be "custom".
  const char* allocator = CurrentAllocatorName();
  bool pymalloc = allocator && std::strcmp(allocator, "pymalloc") == 0;
  g_pymalloc_domain[PYMEM_DOMAIN_MEM] = g_pymalloc_domain[PYMEM_DOMAIN_OBJ] = pymalloc;
  bool mimalloc = allocator && std::strcmp(allocator, "mimalloc") == 0;  // MEM and OBJ
  g_mimalloc_offset = bridge->mimalloc_offset;
  for (int domain : {PYMEM_DOMAIN_RAW, PYMEM_DOMAIN_MEM, PYMEM_DOMAIN_OBJ}) {
    void* ctx = reinterpret_cast<void*>(static_cast<intptr_t>(domain));
    g_wrappers[domain] = mimalloc && domain != PYMEM_DOMAIN_RAW
                             ? PyMemAllocatorEx{ctx, Malloc<true>, Calloc<true>, Realloc<true>,
                                                Free<true>}
                             : PyMemAllocatorEx{ctx, Malloc<false>, Calloc<false>,
                                                Realloc<false>, Free<false>};
  }
  Install();
  bridge->set_frame_reader(ReadFrames);
  if (hold.late()) RegisterStackCodes();
  return 0;
}

// A span ended: our wrappers come off where they are still on top (Uninstall). Blocks they
// handed out are freed by the allocator they wrapped, which made them.
extern "C" __attribute__((visibility("default"))) void memlens_python_detach(void) {
  using namespace memlens::python;
#if PY_VERSION_HEX >= 0x030D0000
  const bool finalizing = Py_IsFinalizing();
#else
  const bool finalizing = _Py_IsFinalizing();
#endif
  if (!g_bridge || !g_installed || !Py_IsInitialized() || finalizing) return;
  HoldInterpreter hold;
  Uninstall();
}
