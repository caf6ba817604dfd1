// src/python/python_hooks.cc
//
// libmemlens_python<tag>.so (tag: 3.11, 3.13, 3.13t...; one per interpreter memlens is built
// for): loaded by the agent (src/agent/python_support.cc) into a Python process before the
// interpreter initializes. It wraps Python's three allocator
// domains and pymalloc's arena allocator (PEP 445) so every allocation is recorded once, with
// its domain, and gives the agent the calling thread's Python frames for every allocation,
// native ones included.
//
// Runs on: application threads, inside allocation hooks: no allocation of our own except when
// a code object is seen for the first time (under the GIL), no locks. Interned code objects
// are kept alive (one reference each) so their ids are never reused.
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>

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

constexpr size_t kCodeSlots = size_t{1} << 17;  // 2 MiB: slots are hashed, so all get touched
struct CodeSlot {
  std::atomic<PyCodeObject*> code;
  std::atomic<uint64_t> id;
};
CodeSlot* g_code_slots = nullptr;  // mmap'd once
std::atomic<size_t> g_code_count{0};

size_t SlotOf(PyCodeObject* code) {
  uint64_t h = reinterpret_cast<uintptr_t>(code);
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ULL;
  return (h ^ (h >> 32)) & (kCodeSlots - 1);
}

// UTF-8 of a str without calling into the interpreter for the common (ASCII) case; otherwise
// through the API with any pending exception kept intact.
const char* Utf8(PyObject* text) {
  if (!text || !PyUnicode_Check(text)) return "";
  if (PyUnicode_IS_COMPACT_ASCII(text)) return static_cast<const char*>(PyUnicode_DATA(text));
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  const char* utf8 = PyUnicode_AsUTF8(text);
  if (!utf8) PyErr_Clear();
  PyErr_Restore(type, value, traceback);
  return utf8 ? utf8 : "?";
}

// The id of a code object; a new one is registered only by a thread holding the GIL (the
// interpreter's lock then serializes insertions, and taking a reference is safe).
uint64_t CodeId(PyCodeObject* code) {
  for (size_t slot = SlotOf(code);; slot = (slot + 1) & (kCodeSlots - 1)) {
    PyCodeObject* seen = g_code_slots[slot].code.load(std::memory_order_acquire);
    if (seen == code) return g_code_slots[slot].id.load(std::memory_order_relaxed);
    if (seen != nullptr) continue;
    if (!PyGILState_Check() || g_code_count.load() * 4 > kCodeSlots * 3) return 0;
    uint64_t id = g_bridge->register_code(Utf8(code->co_filename), Utf8(CodeName(code)),
                                          static_cast<uint64_t>(code->co_firstlineno));
    Py_INCREF(code);
    g_code_slots[slot].id.store(id, std::memory_order_relaxed);
    g_code_slots[slot].code.store(code, std::memory_order_release);
    g_code_count.fetch_add(1);
    return id;
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
ptrdiff_t g_frame_cache_offset = 0;  // the agent's thread-local that holds a thread's cache

template <typename T>
inline T* AgentThreadLocal(ptrdiff_t offset) {
  return reinterpret_cast<T*>(static_cast<char*>(__builtin_thread_pointer()) + offset);
}

// The calling thread's cache, mapped on first use (we are inside an allocation hook), or
// nullptr when that failed. Kept in the agent's static thread-local storage (python_bridge.h
// says why not in one of ours).
FrameCacheSet* ThreadFrameCache() {
  FrameCacheSet** slot = AgentThreadLocal<FrameCacheSet*>(g_frame_cache_offset);
  if (*slot) return *slot;
  void* mem = mmap(nullptr, kFrameCacheSets * sizeof(FrameCacheSet), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return nullptr;
  return *slot = static_cast<FrameCacheSet*>(mem);
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
int ReadFrames(uint64_t* out, int max) {
  FrameCacheSet* cache = ThreadFrameCache();
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

// The real calls, with the thread marked as inside the agent. Out of line, and reached by a
// tail jump: the short paths then need no frame, and no saved registers, of their own (7 of
// the 27 instructions of an unguarded pymalloc call went to setting them up and taking them
// down).
__attribute__((noinline)) void* GuardedMalloc(void* ctx, size_t size) {
  const PyMemAllocatorEx& real = g_original[DomainOf(ctx)];
  InsideAgent guard;
  return real.malloc(real.ctx, size);
}

__attribute__((noinline)) void* GuardedCalloc(void* ctx, size_t count, size_t size) {
  const PyMemAllocatorEx& real = g_original[DomainOf(ctx)];
  InsideAgent guard;
  return real.calloc(real.ctx, count, size);
}

__attribute__((noinline)) void* GuardedRealloc(void* ctx, void* ptr, size_t size) {
  const PyMemAllocatorEx& real = g_original[DomainOf(ctx)];
  InsideAgent guard;
  return real.realloc(real.ctx, ptr, size);
}

__attribute__((noinline)) void GuardedFree(void* ctx, void* ptr) {
  const PyMemAllocatorEx& real = g_original[DomainOf(ctx)];
  InsideAgent guard;
  real.free(real.ctx, ptr);
}

// Each wrapper tries the short path inline and leaves the full path, which records, out of line:
// the short path then needs no frame of its own. `caller` is the wrapper's return address.
__attribute__((noinline)) void* MallocFull(void* ctx, size_t size, const void* caller) {
  const PyMemAllocatorEx& real = g_original[DomainOf(ctx)];
  if (!g_bridge->enter(caller)) return real.malloc(real.ctx, size);
  void* p = real.malloc(real.ctx, size);
  if (p) g_bridge->record_alloc(static_cast<uint8_t>(kDomainKinds[DomainOf(ctx)]), p, size);
  g_bridge->leave();
  return p;
}

void* Malloc(void* ctx, size_t size) {
  if (g_sampling && PassesUnsampled(size)) {
    const PyMemAllocatorEx& real = g_original[DomainOf(ctx)];
    if (ServedByPymalloc(ctx, size)) return real.malloc(real.ctx, size);
    return GuardedMalloc(ctx, size);
  }
  return MallocFull(ctx, size, __builtin_return_address(0));
}

__attribute__((noinline)) void* CallocFull(void* ctx, size_t count, size_t size,
                                           const void* caller) {
  const PyMemAllocatorEx& real = g_original[DomainOf(ctx)];
  if (!g_bridge->enter(caller)) return real.calloc(real.ctx, count, size);
  void* p = real.calloc(real.ctx, count, size);
  if (p) g_bridge->record_alloc(static_cast<uint8_t>(kDomainKinds[DomainOf(ctx)]), p, count * size);
  g_bridge->leave();
  return p;
}

void* Calloc(void* ctx, size_t count, size_t size) {
  size_t total;  // an overflowing product is the full path's to refuse
  if (g_sampling && !__builtin_mul_overflow(count, size, &total) && PassesUnsampled(total)) {
    const PyMemAllocatorEx& real = g_original[DomainOf(ctx)];
    if (ServedByPymalloc(ctx, total)) return real.calloc(real.ctx, count, size);
    return GuardedCalloc(ctx, count, size);
  }
  return CallocFull(ctx, count, size, __builtin_return_address(0));
}

// As the agent's realloc: the release before the call, the new block after, undone on failure.
__attribute__((noinline)) void* ReallocFull(void* ctx, void* ptr, size_t size,
                                            const void* caller) {
  const PyMemAllocatorEx& real = g_original[DomainOf(ctx)];
  if (!g_bridge->enter(caller)) return real.realloc(real.ctx, ptr, size);
  if (ptr) g_bridge->record_release(static_cast<uint8_t>(EventKind::kReallocOld), ptr, 0);
  void* p = real.realloc(real.ctx, ptr, size);
  if (p) {
    g_bridge->record_alloc(static_cast<uint8_t>(kDomainKinds[DomainOf(ctx)]), p, size);
  } else if (ptr) {
    g_bridge->record_release(static_cast<uint8_t>(EventKind::kReallocFailed), ptr, 0);
  }
  g_bridge->leave();
  return p;
}

void* Realloc(void* ctx, void* ptr, size_t size) {
  if (g_sampling && (!ptr || ReleasesUnsampled(ptr)) && PassesUnsampled(size)) {
    return GuardedRealloc(ctx, ptr, size);
  }
  return ReallocFull(ctx, ptr, size, __builtin_return_address(0));
}

__attribute__((noinline)) void FreeFull(void* ctx, void* ptr, const void* caller) {
  const PyMemAllocatorEx& real = g_original[DomainOf(ctx)];
  if (!ptr || !g_bridge->enter(caller)) return real.free(real.ctx, ptr);
  g_bridge->record_release(static_cast<uint8_t>(EventKind::kFree), ptr, 0);
  real.free(real.ctx, ptr);
  g_bridge->leave();
}

void Free(void* ctx, void* ptr) {
  if (ptr && g_sampling && ReleasesUnsampled(ptr)) {
    const PyMemAllocatorEx& real = g_original[DomainOf(ctx)];
    // A block pymalloc did not make goes on to PyMem_RawFree, whose wrapper asks the same
    // filter about the same (unsampled) address and guards the C library's free itself.
    if (g_pymalloc_domain[DomainOf(ctx)]) return real.free(real.ctx, ptr);
    return GuardedFree(ctx, ptr);
  }
  FreeFull(ctx, ptr, __builtin_return_address(0));
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

extern "C" __attribute__((visibility("default"))) int memlens_python_attach(
    const MemlensAgentBridge* bridge) {
  using namespace memlens::python;
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
  void* slots = mmap(nullptr, kCodeSlots * sizeof(CodeSlot), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (slots == MAP_FAILED) return 1;
  g_code_slots = static_cast<CodeSlot*>(slots);
  g_bridge = bridge;
  g_countdown_offset = bridge->countdown_offset;
  g_in_hook_offset = bridge->in_hook_offset;
  g_frame_cache_offset = bridge->frame_cache_offset;
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

  // Asked before our wrappers are in place: afterwards the answer would be "custom".
  const char* allocator = CurrentAllocatorName();
  bool pymalloc = allocator && std::strcmp(allocator, "pymalloc") == 0;
  g_pymalloc_domain[PYMEM_DOMAIN_MEM] = g_pymalloc_domain[PYMEM_DOMAIN_OBJ] = pymalloc;
  static PyMemAllocatorEx wrappers[3];
  for (int domain : {PYMEM_DOMAIN_RAW, PYMEM_DOMAIN_MEM, PYMEM_DOMAIN_OBJ}) {
    PyMem_GetAllocator(static_cast<PyMemAllocatorDomain>(domain), &g_original[domain]);
    wrappers[domain] = {reinterpret_cast<void*>(static_cast<intptr_t>(domain)), Malloc, Calloc,
                        Realloc, Free};
    PyMem_SetAllocator(static_cast<PyMemAllocatorDomain>(domain), &wrappers[domain]);
  }
  static PyObjectArenaAllocator arena_wrapper;
  PyObject_GetArenaAllocator(&g_original_arena);
  arena_wrapper = {nullptr, ArenaAlloc, ArenaFree};
  PyObject_SetArenaAllocator(&arena_wrapper);
  bridge->set_frame_reader(ReadFrames);
  return 0;
}
