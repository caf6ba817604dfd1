/* include/memlens/memlens.h
 *
 * The memlens instrumentation API: a program tells the profiler about its own heaps (pools,
 * arenas), the types of the blocks they hand out, and the moments that matter (markers on the
 * timeline, snapshot requests). C (C99) and C++ (C++11); C++ conveniences at the end.
 *
 * Zero cost when not profiled. This header is all a program needs: it links nothing of memlens.
 * The first call in each translation unit looks the functions up in the process
 * (dlsym(RTLD_DEFAULT), glibc 2.34+ has it in libc; older glibc: link with -ldl; on Windows
 * GetProcAddress on memlens_agent.dll, with gcc or clang: docs/windows.md) and caches them. Without the agent (the program runs on its own) every call is then one well-predicted
 * branch on a cached pointer. With the agent (`memlens run`, which preloads libmemlens.so) the
 * calls reach the agent, which records them when this process is being recorded and returns at
 * once when it is not. Nothing here ever fails, blocks for long, throws or aborts the program:
 * misuse (a double free, a free of an unknown pointer, a block freed after its heap was reset)
 * is recorded as an anomaly and shown by `memlens summary`.
 *
 * Runs on: any thread of the program. Every function is thread-safe. Events of all threads are
 * ordered by one global sequence, so a heap used from several threads must (as any allocator
 * must) call memlens_heap_free for a block before that block can be handed out again, and
 * memlens_heap_alloc after it was handed out: report a free before putting the block back on
 * the free list, an allocation after taking it off.
 *
 * Lifetime of what is passed in: strings (heap, marker, category, snapshot and type names) are
 * copied during the call (the first 255 bytes; a name seen before is not copied again): the
 * caller may free or reuse them as soon as the call returns. Pointers given to the heap
 * functions are only recorded as numbers, never read or written. A memlens_heap handle is valid
 * from memlens_heap_create until memlens_heap_destroy; a null handle (what memlens_heap_create
 * returns when the process is not being recorded) is accepted everywhere and does nothing.
 *
 * Names: every function is memlens_<noun>_<verb> for heaps and memlens_<verb>_<noun> otherwise
 * (memlens_heap_alloc, memlens_add_marker). The agent exports the same names (its side:
 * src/agent/api.cc, which defines MEMLENS_AGENT_BUILD to get only the declarations).
 * User guide: docs/api.md.
 */
#ifndef MEMLENS_MEMLENS_H_
#define MEMLENS_MEMLENS_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* An opaque handle to a custom heap. */
typedef struct memlens_heap memlens_heap;

#define MEMLENS_API_FUNCTIONS(X)                                                              \
  /* A new named heap. Returns null when the process is not being recorded. Naming a second \
     live heap like an existing one is an anomaly (both are shown under that name). */      \
  X(memlens_heap*, memlens_heap_create, (const char* name), (name), return 0, return)         \
  /* The heap handed out `size` bytes at `ptr`. */                                           \
  X(void, memlens_heap_alloc, (memlens_heap* heap, const void* ptr, size_t size),            \
    (heap, ptr, size), return, )                                                             \
  /* The same, for a block holding a `type_name` (see memlens::TypeName<T>() in C++). */     \
  X(void, memlens_heap_alloc_typed,                                                          \
    (memlens_heap* heap, const void* ptr, size_t size, const char* type_name),               \
    (heap, ptr, size, type_name), return, )                                                  \
  /* The block at `ptr` goes back to the heap. Null is ignored. */                           \
  X(void, memlens_heap_free, (memlens_heap* heap, const void* ptr), (heap, ptr), return, )   \
  /* The block at `old_ptr` became `new_size` bytes at `new_ptr` (maybe the same address).   \
     A null old_ptr is an allocation. */                                                     \
  X(void, memlens_heap_realloc,                                                              \
    (memlens_heap* heap, const void* old_ptr, const void* new_ptr, size_t new_size),         \
    (heap, old_ptr, new_ptr, new_size), return, )                                            \
  /* Every block of the heap is released at once (an arena rewound, a pool cleared). */      \
  X(void, memlens_heap_reset, (memlens_heap* heap), (heap), return, )                        \
  /* The heap is gone, with its blocks; the handle must not be used again. */                \
  X(void, memlens_heap_destroy, (memlens_heap* heap), (heap), return, )                      \
  /* A point on the timeline: `name`, and a `category` (null for none). Usable as            \
     FILE@marker:NAME (its first occurrence) and FILE@marker:NAME#K (its K-th, from 1). */   \
  X(void, memlens_add_marker, (const char* name, const char* category), (name, category),    \
    return, )                                                                                \
  /* Asks for a snapshot of what is in use now, named: FILE@snapshot:NAME. */                \
  X(void, memlens_take_snapshot, (const char* name), (name), return, )                       \
  /* 1 when this process is being recorded now, else 0. */                                  \
  X(int, memlens_is_recording, (void), (), return 0, return)                                 \
  /* Spans (docs/api.md, "Spans"): record from now on into a capture of its own at `path`    \
     (%p: the pid, %e: the program's name; null: MEMLENS_OUTPUT or memlens-%e-%p.mlens),     \
     with the settings of the environment, as under memlens run. 0: recording. -1: not       \
     started (a span is already recording, the process is recorded whole by memlens run, the \
     file cannot be written...), with the reason on stderr; the program is unharmed. */     \
  X(int, memlens_start, (const char* path), (path), return -1, return)                       \
  /* The same with `options` over the environment's: "sample_rate=N,sample_seed=N,           \
     python_frames=N,native=0|1,python_stacks=0|1,quiet=0|1" (null or "": none). On -1 the  \
     reason is written, one line, into error[0..error_size) (truncated, always terminated)   \
     instead of stderr. quiet=1: the agent writes nothing on stderr during the span; on 0    \
     the first line it would have written (a warning) is in error[] ("" for none). */        \
  X(int, memlens_start_with,                                                                 \
    (const char* path, const char* options, char* error, size_t error_size),                 \
    (path, options, error, error_size), return -1, return)                                   \
  /* Ends the span: 0 once its capture is complete (an END record, reason "stopped"); -1     \
     when no span was recording (the reason on stderr). */                                   \
  X(int, memlens_stop, (void), (), return -1, return)                                        \
  /* The same, the reason for -1 written, one line, into error[0..error_size) (truncated,     \
     always terminated) instead of stderr (`memlens detach` stops a span this way). */       \
  X(int, memlens_stop_with, (char* error, size_t error_size), (error, error_size), return -1, \
    return)                                                                                  \
  /* Everything recorded before the call is in the span's capture file when it returns (a   \
     bounded wait), so the analyzer can read a capture that is still growing. */             \
  X(void, memlens_flush, (void), (), return, )

#ifdef MEMLENS_AGENT_BUILD

#ifdef _WIN32 /* memlens_agent.dll exports them */
#define MEMLENS_EXPORT __declspec(dllexport)
#else
#define MEMLENS_EXPORT __attribute__((visibility("default")))
#endif
#define MEMLENS_DECLARE(ret, name, params, args, none, ret_kw) MEMLENS_EXPORT ret name params;
MEMLENS_API_FUNCTIONS(MEMLENS_DECLARE)
#undef MEMLENS_DECLARE

#else /* the program's side: look the agent's functions up once, then call through them */

#ifdef _WIN32
#include <windows.h>
/* The agent is memlens_agent.dll, which memlens.exe loads into the program (docs/windows.md). */
#define MEMLENS_LOOKUP_(name)                                                             \
  (GetModuleHandleA("memlens_agent.dll")                                                  \
       ? (void*)GetProcAddress(GetModuleHandleA("memlens_agent.dll"), name)               \
       : (void*)0)
#else
#include <dlfcn.h>
#define MEMLENS_LOOKUP_(name) dlsym(RTLD_DEFAULT, name)
#endif

/* One cached pointer per function, per translation unit; `resolved` is set last. Two threads
 * resolving at once store the same values: atomics make that race harmless. */
struct memlens_api_table_ {
#define MEMLENS_FIELD(ret, name, params, args, none, ret_kw) ret(*name) params;
  MEMLENS_API_FUNCTIONS(MEMLENS_FIELD)
#undef MEMLENS_FIELD
  int resolved;
};
static struct memlens_api_table_ memlens_api_table_;

static __attribute__((noinline, cold, unused)) void memlens_api_resolve_(void) {
#define MEMLENS_RESOLVE(ret, name, params, args, none, ret_kw) \
  __atomic_store_n((void**)&memlens_api_table_.name, MEMLENS_LOOKUP_(#name), __ATOMIC_RELAXED);
  MEMLENS_API_FUNCTIONS(MEMLENS_RESOLVE)
#undef MEMLENS_RESOLVE
  __atomic_store_n(&memlens_api_table_.resolved, 1, __ATOMIC_RELEASE);
}

/* Each API function: make sure the table is resolved (once), then call the agent if present. */
#define MEMLENS_DEFINE(ret, name, params, args, none, ret_kw)                                   \
  static inline __attribute__((unused)) ret name params {                               \
    if (__builtin_expect(!__atomic_load_n(&memlens_api_table_.resolved, __ATOMIC_ACQUIRE), \
                         0)) {                                                          \
      memlens_api_resolve_();                                                           \
    }                                                                                   \
    ret(*fn) params = __atomic_load_n(&memlens_api_table_.name, __ATOMIC_RELAXED);     \
    if (__builtin_expect(fn == 0, 1)) none;                                             \
    ret_kw fn args;                                                                     \
  }
MEMLENS_API_FUNCTIONS(MEMLENS_DEFINE)
#undef MEMLENS_DEFINE

#endif /* MEMLENS_AGENT_BUILD */

#ifdef __cplusplus
} /* extern "C" */
#endif

/* --- C++ conveniences ---------------------------------------------------------------------- */
#if defined(__cplusplus) && !defined(MEMLENS_AGENT_BUILD)

#include <cstddef>
#include <new>
#include <typeinfo>

#if defined(__GNUG__)
#include <cxxabi.h>
#include <cstdlib>
#endif

namespace memlens {

/* The readable name of T ("Foo", "std::vector<int, std::allocator<int> >"), demangled once
 * per type and kept for the life of the program. Thread-safe (a function-local static). */
template <typename T>
const char* TypeName() {
  static const char* const name = [] {
    const char* mangled = typeid(T).name();
#if defined(__GNUG__)
    int status = 0;
    char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
    if (status == 0 && demangled) return static_cast<const char*>(demangled);  // kept for good
    std::free(demangled);
#endif
    return mangled;
  }();
  return name;
}

/* RAII: a named heap for the life of the object (memlens_heap_create/destroy). Not copyable. */
class Heap {
 public:
  explicit Heap(const char* name) : heap_(memlens_heap_create(name)) {}
  ~Heap() { memlens_heap_destroy(heap_); }
  Heap(const Heap&) = delete;
  Heap& operator=(const Heap&) = delete;

  void Alloc(const void* ptr, std::size_t size) const { memlens_heap_alloc(heap_, ptr, size); }
  void Free(const void* ptr) const { memlens_heap_free(heap_, ptr); }
  void Realloc(const void* old_ptr, const void* new_ptr, std::size_t size) const {
    memlens_heap_realloc(heap_, old_ptr, new_ptr, size);
  }
  void Reset() const { memlens_heap_reset(heap_); }
  /* A block holding `count` objects of type T, tagged with T's name. */
  template <typename T>
  void AllocTyped(const T* ptr, std::size_t count = 1) const {
    memlens_heap_alloc_typed(heap_, ptr, sizeof(T) * count, TypeName<T>());
  }
  memlens_heap* handle() const { return heap_; }

 private:
  memlens_heap* heap_;
};

/* RAII: markers "NAME" (category "begin") on construction and "NAME" (category "end") on
 * destruction, so a region shows as a span on the timeline. `name` is copied at each call. */
class ScopedRegion {
 public:
  explicit ScopedRegion(const char* name) : name_(name) { memlens_add_marker(name_, "begin"); }
  ~ScopedRegion() { memlens_add_marker(name_, "end"); }
  ScopedRegion(const ScopedRegion&) = delete;
  ScopedRegion& operator=(const ScopedRegion&) = delete;

 private:
  const char* name_;  // must outlive the region (a string literal, typically)
};

/* A minimal allocator (std::allocator_traits-compatible) that takes memory from ::operator new
 * and reports every block to a named heap, typed with T's name: containers using it show up
 * under that heap. The heap must outlive every container using the allocator. Memory from
 * ::operator new also stays in the system heap's figures: that is the backing memory. */
template <typename T>
class HeapAllocator {
 public:
  using value_type = T;
  explicit HeapAllocator(const Heap& heap) noexcept : heap_(heap.handle()) {}
  template <typename U>
  HeapAllocator(const HeapAllocator<U>& other) noexcept : heap_(other.heap_) {}

  T* allocate(std::size_t n) {
    T* p = static_cast<T*>(::operator new(n * sizeof(T)));
    memlens_heap_alloc_typed(heap_, p, n * sizeof(T), TypeName<T>());
    return p;
  }
  void deallocate(T* p, std::size_t) noexcept {
    memlens_heap_free(heap_, p);
    ::operator delete(p);
  }
  template <typename U>
  bool operator==(const HeapAllocator<U>& other) const noexcept { return heap_ == other.heap_; }
  template <typename U>
  bool operator!=(const HeapAllocator<U>& other) const noexcept { return heap_ != other.heap_; }

 private:
  template <typename U>
  friend class HeapAllocator;
  memlens_heap* heap_;
};

}  // namespace memlens

#endif /* __cplusplus && !MEMLENS_AGENT_BUILD */

#endif /* MEMLENS_MEMLENS_H_ */
