// src/windows/agent/hooks.cc
//
// The hooks that the import tables point at (hooked_functions.h): each calls the real function
// and records what it did, with the caller's stack. Rules as on Linux (docs/hot-path-rules.md):
// a release is recorded before the real call (a block handed out again is always seen released
// first), nothing is recorded while the thread is inside the agent (the guard: the CRT's
// malloc calling HeapAlloc is one allocation, not two), no heap of our own, and the thread's
// last error is what the real function left.
//
// Runs on: application threads.
#include <windows.h>

#include <atomic>
#include <cstring>

#include "agent/api/string_table.h"
#include "windows/agent/agent.h"
#include "windows/agent/import_patcher.h"
#include "windows/agent/recording.h"
#include "windows/agent/thread_rings.h"

namespace memlens::windows {
namespace {

using format::EventKind;

HookTables g_tables;
constexpr uint64_t kPage = 4096;

// Runs the real function with the guard up: what it calls (the CRT's malloc calling HeapAlloc)
// is part of this one call, not recorded again.
template <typename Call>
auto Guarded(ThreadState* state, Call&& call) {
  if (state == nullptr) return call();
  Guard guard(state);
  return call();
}

template <typename Fn>
Fn Real(CrtFamily family, CrtFunction f) {
  return reinterpret_cast<Fn>(g_tables.crt_real[family][f]);
}
template <typename Fn>
Fn Real(KernelFunction f) {
  return reinterpret_cast<Fn>(g_tables.kernel_real[f]);
}

uint64_t Address(const void* p) { return reinterpret_cast<uint64_t>(p); }

// realloc's events around `call`: the old block released before it, the new block after it,
// or, when it failed, the old block alive again (realloc(p, 0) frees p: no new block).
// Inlined into each hook: the stack walk skips exactly one frame, the hook's.
template <typename Call>
__attribute__((always_inline)) inline void* Reallocated(void* old, size_t size, Call&& call) {
  ThreadState* state = Entering();
  if (state && old) Record(state, EventKind::kReallocOld, Address(old), 0, 0, false);
  void* p = Guarded(state, call);
  if (state && p) {
    Record(state, EventKind::kRealloc, Address(p), size, 0, true);
  } else if (state && old && size != 0) {
    Record(state, EventKind::kReallocFailed, Address(old), 0, 0, false);
  }
  return p;
}

// --- the C runtime's functions, one set per runtime ----------------------------------------

template <CrtFamily F>
struct Crt {
  static void* __cdecl malloc(size_t size) {
    ThreadState* state = Entering();
    void* p = Guarded(state, [&] { return Real<void*(__cdecl*)(size_t)>(F, k_malloc)(size); });
    if (state && p) Record(state, EventKind::kMalloc, Address(p), size, 0, true);
    return p;
  }
  static void* __cdecl calloc(size_t count, size_t size) {
    ThreadState* state = Entering();
    void* p = Guarded(
        state, [&] { return Real<void*(__cdecl*)(size_t, size_t)>(F, k_calloc)(count, size); });
    if (state && p) Record(state, EventKind::kCalloc, Address(p), count * size, 0, true);
    return p;
  }
  static void* __cdecl realloc(void* old, size_t size) {
    return Reallocated(
        old, size, [&] { return Real<void*(__cdecl*)(void*, size_t)>(F, k_realloc)(old, size); });
  }
  static void __cdecl free(void* p) {
    ThreadState* state = Entering();
    if (state && p) Record(state, EventKind::kFree, Address(p), 0, 0, false);
    Guarded(state, [&] { return Real<void(__cdecl*)(void*)>(F, k_free)(p); });
  }
  static void* __cdecl _aligned_malloc(size_t size, size_t alignment) {
    ThreadState* state = Entering();
    void* p = Guarded(state, [&] {
      return Real<void*(__cdecl*)(size_t, size_t)>(F, k__aligned_malloc)(size, alignment);
    });
    if (state && p) Record(state, EventKind::kAlignedAlloc, Address(p), size, 0, true);
    return p;
  }
  static void* __cdecl _aligned_realloc(void* old, size_t size, size_t alignment) {
    return Reallocated(old, size, [&] {
      return Real<void*(__cdecl*)(void*, size_t, size_t)>(F, k__aligned_realloc)(old, size,
                                                                                 alignment);
    });
  }
  static void __cdecl _aligned_free(void* p) {
    ThreadState* state = Entering();
    if (state && p) Record(state, EventKind::kFree, Address(p), 0, 0, false);
    Guarded(state, [&] { return Real<void(__cdecl*)(void*)>(F, k__aligned_free)(p); });
  }
};

// --- kernel32's ------------------------------------------------------------------------------
// A heap made by HeapCreate while recording is a custom heap ("HeapCreate #N"): its events are
// custom heap events, decided here, where the order of create, use and destroy across threads
// is the program's own. The process heap and heaps made before the agent started hold ordinary
// heap allocations.

// HeapCreate's heaps: handle -> custom heap id. Open addressing, lock-free; a destroyed heap's
// slot becomes a tombstone (handle 1, never a heap's).
struct HeapSlot {
  std::atomic<uint64_t> handle{0};
  std::atomic<uint32_t> id{0};
};
constexpr size_t kHeapSlots = 4096;
constexpr uint64_t kTombstone = 1;
HeapSlot g_heaps[kHeapSlots];

size_t HeapHash(uint64_t handle) { return (handle >> 12 ^ handle >> 24) % kHeapSlots; }

uint32_t CustomHeapId(HANDLE heap) {
  const uint64_t handle = Address(heap);
  for (size_t i = 0, k = HeapHash(handle); i < kHeapSlots; ++i, k = (k + 1) % kHeapSlots) {
    const uint64_t h = g_heaps[k].handle.load(std::memory_order_acquire);
    if (h == handle) return g_heaps[k].id.load(std::memory_order_relaxed);
    if (h == 0) return 0;
  }
  return 0;
}

// False when the table is full: the heap's blocks are then ordinary heap allocations.
bool AddCustomHeap(HANDLE heap, uint32_t id) {
  const uint64_t handle = Address(heap);
  for (size_t i = 0, k = HeapHash(handle); i < kHeapSlots; ++i, k = (k + 1) % kHeapSlots) {
    uint64_t h = g_heaps[k].handle.load(std::memory_order_relaxed);
    if (h != 0 && h != kTombstone) continue;
    g_heaps[k].id.store(id, std::memory_order_relaxed);
    if (g_heaps[k].handle.compare_exchange_strong(h, handle, std::memory_order_release)) {
      return true;
    }
  }
  return false;
}

void RemoveCustomHeap(HANDLE heap) {
  const uint64_t handle = Address(heap);
  for (size_t i = 0, k = HeapHash(handle); i < kHeapSlots; ++i, k = (k + 1) % kHeapSlots) {
    const uint64_t h = g_heaps[k].handle.load(std::memory_order_acquire);
    if (h == 0) return;
    if (h == handle) {
      g_heaps[k].handle.store(kTombstone, std::memory_order_release);
      return;
    }
  }
}

// "HeapCreate #N" without a formatting library (wsprintfA would load user32 into the program).
void HeapName(uint32_t id, char* out) {
  static const char kPrefix[] = "HeapCreate #";
  std::memcpy(out, kPrefix, sizeof kPrefix - 1);
  char digits[10];
  int n = 0;
  do digits[n++] = static_cast<char>('0' + id % 10);
  while ((id /= 10) != 0);
  char* p = out + sizeof kPrefix - 1;
  while (n) *p++ = digits[--n];
  *p = '\0';
}

HANDLE WINAPI HookHeapCreate(DWORD options, SIZE_T initial, SIZE_T maximum) {
  ThreadState* state = Entering();
  HANDLE heap = Guarded(
      state, [&] { return Real<decltype(&HeapCreate)>(k_HeapCreate)(options, initial, maximum); });
  if (state && heap) {
    const uint32_t id = NewHeapId();
    char name[32];
    HeapName(id, name);
    uint32_t name_id;
    {
      Guard guard(state);
      name_id = agent::InternString(name);
    }
    if (AddCustomHeap(heap, id)) Record(state, EventKind::kHeapCreate, id, name_id, 0, true);
  }
  return heap;
}

BOOL WINAPI HookHeapDestroy(HANDLE heap) {
  ThreadState* state = Entering();
  if (const uint32_t id = state ? CustomHeapId(heap) : 0) {
    Record(state, EventKind::kHeapDestroy, id, 0, 0, false);  // its blocks with it
    RemoveCustomHeap(heap);
  }
  return Guarded(state, [&] { return Real<decltype(&HeapDestroy)>(k_HeapDestroy)(heap); });
}

LPVOID WINAPI HookHeapAlloc(HANDLE heap, DWORD flags, SIZE_T size) {
  ThreadState* state = Entering();
  void* p =
      Guarded(state, [&] { return Real<decltype(&HeapAlloc)>(k_HeapAlloc)(heap, flags, size); });
  if (state && p) {
    if (const uint32_t id = CustomHeapId(heap)) {
      Record(state, EventKind::kHeapAlloc, Address(p), size, CustomHeapExtra(id, 0), true);
    } else {
      const EventKind kind = flags & HEAP_ZERO_MEMORY ? EventKind::kCalloc : EventKind::kMalloc;
      Record(state, kind, Address(p), size, 0, true);
    }
  }
  return p;
}

// A custom heap's block: released before the call (kHeapFree), and the new block after it, or
// the old one again when the call failed (its size asked of the heap first).
LPVOID CustomHeapReAlloc(ThreadState* state, uint32_t id, HANDLE heap, DWORD flags, LPVOID old,
                         SIZE_T size) {
  const uint64_t extra = CustomHeapExtra(id, 0);
  const bool in_place = flags & HEAP_REALLOC_IN_PLACE_ONLY;
  SIZE_T old_size = 0;
  if (!in_place) {
    old_size = Guarded(state, [&] { return HeapSize(heap, 0, old); });
    Record(state, EventKind::kHeapFree, Address(old), 0, extra, false);
  }
  void* p = Guarded(
      state, [&] { return Real<decltype(&HeapReAlloc)>(k_HeapReAlloc)(heap, flags, old, size); });
  if (p) {
    if (in_place) Record(state, EventKind::kHeapFree, Address(old), 0, extra, false);
    Record(state, EventKind::kHeapRealloc, Address(p), size, extra, true);
  } else if (!in_place && old_size != static_cast<SIZE_T>(-1)) {
    Record(state, EventKind::kHeapAlloc, Address(old), old_size, extra, true);
  }
  return p;
}

LPVOID WINAPI HookHeapReAlloc(HANDLE heap, DWORD flags, LPVOID old, SIZE_T size) {
  ThreadState* state = Entering();
  if (const uint32_t id = state && old ? CustomHeapId(heap) : 0) {
    return CustomHeapReAlloc(state, id, heap, flags, old, size);
  }
  // In place only: the block stays where it is or the call fails, so nothing is released.
  const bool in_place = flags & HEAP_REALLOC_IN_PLACE_ONLY;
  if (state && old && !in_place) {
    Record(state, EventKind::kReallocOld, Address(old), 0, 0, false);
  }
  void* p = Guarded(
      state, [&] { return Real<decltype(&HeapReAlloc)>(k_HeapReAlloc)(heap, flags, old, size); });
  if (state && p) {
    if (in_place) Record(state, EventKind::kReallocOld, Address(old), 0, 0, false);
    Record(state, EventKind::kRealloc, Address(p), size, 0, true);
  } else if (state && old && !in_place) {
    Record(state, EventKind::kReallocFailed, Address(old), 0, 0, false);
  }
  return p;
}

BOOL WINAPI HookHeapFree(HANDLE heap, DWORD flags, LPVOID p) {
  ThreadState* state = Entering();
  if (state && p) {
    const uint32_t id = CustomHeapId(heap);
    Record(state, id ? EventKind::kHeapFree : EventKind::kFree, Address(p), 0,
           id ? CustomHeapExtra(id, 0) : 0, false);
  }
  return Guarded(state, [&] { return Real<decltype(&HeapFree)>(k_HeapFree)(heap, flags, p); });
}

// The pages [address, address + size) as VirtualAlloc and VirtualFree round them.
void PageRange(uint64_t address, uint64_t size, uint64_t* start, uint64_t* bytes) {
  *start = address & ~(kPage - 1);
  *bytes = ((address + size + kPage - 1) & ~(kPage - 1)) - *start;
}

// The whole region VirtualAlloc reserved at `base` (what MEM_RELEASE gives back).
uint64_t RegionBytes(void* base) {
  uint64_t bytes = 0;
  MEMORY_BASIC_INFORMATION info;
  auto* at = static_cast<char*>(base);
  while (VirtualQuery(at + bytes, &info, sizeof info) == sizeof info &&
         info.AllocationBase == base && info.State != MEM_FREE) {
    bytes += info.RegionSize;
  }
  return bytes;
}

bool Accessible(DWORD protect) {
  return (protect & 0xff) != PAGE_NOACCESS && !(protect & PAGE_GUARD);
}

LPVOID WINAPI HookVirtualAlloc(LPVOID address, SIZE_T size, DWORD type, DWORD protect) {
  ThreadState* state = Entering();
  void* p = Guarded(state, [&] {
    return Real<decltype(&VirtualAlloc)>(k_VirtualAlloc)(address, size, type, protect);
  });
  if (state && p && (type & (MEM_RESERVE | MEM_COMMIT))) {
    uint64_t start, bytes;
    PageRange(Address(p), size, &start, &bytes);
    EventKind kind = EventKind::kMmapReserved;  // address space only
    if ((type & MEM_COMMIT) && Accessible(protect)) {
      // Committing inside a reservation makes pages of it usable (as mprotect does on Linux);
      // a new region committed at once is a mapping of its own.
      kind = (type & MEM_RESERVE) || address == nullptr ? EventKind::kMmap : EventKind::kProtect;
    } else if (!(type & MEM_RESERVE)) {
      return p;  // committed inaccessible pages of a reservation: still no memory to the program
    }
    Record(state, kind, start, bytes, 0, true);
  }
  return p;
}

BOOL WINAPI HookVirtualFree(LPVOID address, SIZE_T size, DWORD type) {
  ThreadState* state = Entering();
  if (state && address) {
    if (type & MEM_RELEASE) {
      Record(state, EventKind::kMunmap, Address(address), RegionBytes(address), 0, false);
    } else if (type & MEM_DECOMMIT) {
      uint64_t start, bytes;
      PageRange(Address(address), size ? size : RegionBytes(address), &start, &bytes);
      Record(state, EventKind::kProtectNone, start, bytes, 0, false);
    }
  }
  return Guarded(state,
                 [&] { return Real<decltype(&VirtualFree)>(k_VirtualFree)(address, size, type); });
}

LPTOP_LEVEL_EXCEPTION_FILTER WINAPI
HookSetUnhandledExceptionFilter(LPTOP_LEVEL_EXCEPTION_FILTER filter) {
  return ExchangeProgramFilter(filter);
}

void WINAPI HookExitProcess(UINT code) {
  EndRecording(format::EndReason::kExit, 0);
  Real<decltype(&ExitProcess)>(k_ExitProcess)(code);
}

template <CrtFamily F>
void FillCrtHooks(HookTables& t) {
#define MEMLENS_HOOK(name) t.crt_hooks[F][k_##name] = reinterpret_cast<void*>(&Crt<F>::name);
  MEMLENS_WINDOWS_CRT_HOOKS(MEMLENS_HOOK)
#undef MEMLENS_HOOK
}

HookTables& Filled() {
  FillCrtHooks<kMsvcrt>(g_tables);
  FillCrtHooks<kUcrt>(g_tables);
  FillCrtHooks<kOtherCrt>(g_tables);
#define MEMLENS_HOOK(name) g_tables.kernel_hooks[k_##name] = reinterpret_cast<void*>(&Hook##name);
  MEMLENS_WINDOWS_KERNEL_HOOKS(MEMLENS_HOOK)
#undef MEMLENS_HOOK
  return g_tables;
}

}  // namespace

HookTables& Hooks() {
  static HookTables& tables = Filled();
  return tables;
}

}  // namespace memlens::windows
