// src/agent/hooks/cxx_interposers.cc
//
// C++'s replaceable operator new and delete, all twenty. libstdc++'s operator new calls malloc,
// which the agent interposes anyway; but an allocator preloaded or linked after us (jemalloc,
// tcmalloc) defines its own operator new that calls its malloc directly, and every `new` and
// `delete` of the program then went past us: under jemalloc half of churn's allocations were
// missing from the capture. Defined here, ahead of any library in the search order, they
// allocate through malloc's own paths (allocation_paths.h): sampled or recorded in full, with
// the program's caller as the site, whatever allocator serves them.
//
// A program that replaces some of them itself (the executable's definitions come first) must
// keep the standard's wiring between them: its `operator new` serves the default `new[]`, its
// `operator delete` the default sized delete, and memory from its allocator must never reach
// another's free. So the first call checks where each of the twenty resolves: all here, and
// these serve every form; any elsewhere, and each form here forwards to the next definition
// (libstdc++'s, or the allocator's), exactly what ran without memlens, whose malloc calls
// the malloc interposer still sees.
//
// A failed allocation is handed to the next definition too: it runs the program's
// new_handler and throws std::bad_alloc (or returns null) from the program's own C++ runtime.
// One of the agent's own fails differently: it waits for memory (writer.h, WaitForAgentMemory),
// since a C program that copes with malloc's null has no C++ runtime to forward to.
// The agent is built without exceptions; the throw unwinds through these frames, which hold
// nothing to clean up, by their unwind tables.
//
// Runs on: application threads. Hot-path rules apply (docs/hot-path-rules.md).
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

#include "agent/hooks/allocation_paths.h"
#include "agent/hooks/cxx_forms.h"
#include "agent/recorder/recorder.h"
#include "agent/recorder/unwinder.h"
#include "agent/writer/writer.h"

namespace real = memlens::agent::real;
using memlens::agent::hooks::AlignedFull;
using memlens::agent::hooks::FreeFrom;
using memlens::agent::hooks::MallocFrom;

namespace {

// The twenty (cxx_forms.h): the index is the form's slot in g_next.
#define MEMLENS_FORM_ENUMERATOR(form, mangled) form,
#define MEMLENS_FORM_NAME(form, mangled) #mangled,
enum Form { MEMLENS_CXX_FORMS(MEMLENS_FORM_ENUMERATOR) kForms };
constexpr const char* kMangled[kForms] = {MEMLENS_CXX_FORMS(MEMLENS_FORM_NAME)};
#undef MEMLENS_FORM_ENUMERATOR
#undef MEMLENS_FORM_NAME

enum Mode { kUnresolved, kOurs, kForward };
std::atomic<int> g_mode{kUnresolved};
std::atomic<void*> g_next[kForms];  // the definition after ours of each form

bool DefinedHere(void* symbol) {
  Dl_info found, here;
  return dladdr(symbol, &found) && dladdr(reinterpret_cast<void*>(&DefinedHere), &here) &&
         found.dli_fbase == here.dli_fbase;
}

// Once (racing threads compute the same answer). dlsym may allocate: that goes through malloc.
__attribute__((noinline)) int Resolve() {
  bool ours = true;
  for (int form = 0; form < kForms; ++form) {
    g_next[form].store(dlsym(RTLD_NEXT, kMangled[form]), std::memory_order_relaxed);
    void* first = dlsym(RTLD_DEFAULT, kMangled[form]);
    if (first && !DefinedHere(first)) ours = false;
  }
  real::ForgetDlError();  // a C program has none of these symbols
  int mode = ours ? kOurs : kForward;
  g_mode.store(mode, std::memory_order_release);
  return mode;
}

// The agent's own C++ code, and the C++ runtime linked into it, allocate through these too
// (the agent links with -Bsymbolic-functions, so its calls never reach a program's replacement):
// theirs always take malloc's paths, unrecorded since the caller is ours, never a program's
// arena, whatever the program replaced.
inline bool FromAgent(const void* caller) {
  if (__builtin_expect(memlens::agent::g_self_end[0] == 0, 0)) memlens::agent::FindSelfRange();
  return memlens::agent::IsOwnCode(reinterpret_cast<uintptr_t>(caller));
}

inline bool Ours(const void* caller) {
  int mode = g_mode.load(std::memory_order_acquire);
  return (mode == kUnresolved ? Resolve() : mode) == kOurs || FromAgent(caller);
}

template <typename Fn>
Fn Next(Form form) {
  void* next = g_next[form].load(std::memory_order_relaxed);
  if (!next) {  // no C++ runtime behind us, yet someone calls operator new: nothing to forward to
    static const char kMessage[] = "memlens: no operator new or delete to forward to; aborting\n";
    ::write(2, kMessage, sizeof kMessage - 1);
    ::abort();
  }
  return reinterpret_cast<Fn>(next);
}

using NewFn = void* (*)(size_t);
using NewNothrowFn = void* (*)(size_t, const std::nothrow_t&);
using NewAlignedFn = void* (*)(size_t, std::align_val_t);
using NewAlignedNothrowFn = void* (*)(size_t, std::align_val_t, const std::nothrow_t&);
using DeleteFn = void (*)(void*);
using DeleteSizedFn = void (*)(void*, size_t);
using DeleteNothrowFn = void (*)(void*, const std::nothrow_t&);
using DeleteAlignedFn = void (*)(void*, std::align_val_t);
using DeleteSizedAlignedFn = void (*)(void*, size_t, std::align_val_t);
using DeleteAlignedNothrowFn = void (*)(void*, std::align_val_t, const std::nothrow_t&);

// The slow paths, out of line, so that the forms' fast paths below need no frame: the first
// call (which resolves), full tracing, a sample point, a failure, another's replacement.
template <typename Fn, typename... Args>
__attribute__((noinline)) void* NewSlow(Form form, const void* caller, size_t size, Args... args) {
  if (Ours(caller)) {
    if (void* p = MallocFrom(caller, size ? size : 1)) return p;
    if (FromAgent(caller)) {  // never abort the program for the agent's own memory
      if (void* p = memlens::agent::WaitForAgentMemory(size ? size : 1, 16)) return p;
    }
  }
  return Next<Fn>(form)(size, args...);
}

template <typename Fn, typename... Args>
__attribute__((noinline)) void* NewAligned(Form form, const void* caller, size_t size,
                                           std::align_val_t alignment, Args... args) {
  if (Ours(caller)) {
    if (void* p = AlignedFull(caller, static_cast<size_t>(alignment), size ? size : 1)) return p;
    if (FromAgent(caller)) {
      size_t rounded = ((size ? size : 1) + static_cast<size_t>(alignment) - 1) &
                       ~(static_cast<size_t>(alignment) - 1);
      if (void* p = memlens::agent::WaitForAgentMemory(rounded, static_cast<size_t>(alignment))) {
        return p;
      }
    }
  }
  return Next<Fn>(form)(size, alignment, args...);
}

template <typename Fn, typename... Args>
__attribute__((noinline)) void DeleteSlow(Form form, const void* caller, void* ptr, Args... args) {
  if (Ours(caller)) return FreeFrom(caller, ptr);
  Next<Fn>(form)(ptr, args...);
}

// Sampling's direct path (sampler.h), as malloc and free take it: the count of an unsampled
// allocation, the filter's answer for an unsampled block's free, then the C library. The caller
// is read only on the slow path.
inline bool NewFast(size_t size) {
  return g_mode.load(std::memory_order_relaxed) == kOurs &&
         memlens::agent::g_direct_short_path && memlens::agent::PassesUnsampled(size);
}

inline bool DeleteFast(void* ptr) {
  return g_mode.load(std::memory_order_relaxed) == kOurs &&
         memlens::agent::g_direct_short_path && ptr && !real::IsBootstrapPointer(ptr) &&
         memlens::agent::ReleasesUnsampled(ptr);
}

}  // namespace

#define MEMLENS_CALLER __builtin_return_address(0)
#define MEMLENS_EXPORT __attribute__((visibility("default")))
// The direct path's block is returned at once; a null one (with the C library: out of memory)
// goes the slow way, to the program's new_handler.
#define MEMLENS_NEW(form, type, ...)                                \
  if (NewFast(size)) {                                              \
    if (void* p = real::malloc(size)) return p;                     \
  }                                                                 \
  return NewSlow<type>(form, MEMLENS_CALLER, size, ##__VA_ARGS__);
#define MEMLENS_DELETE(form, type, ...)                             \
  if (DeleteFast(ptr)) return real::free(ptr);                      \
  DeleteSlow<type>(form, MEMLENS_CALLER, ptr, ##__VA_ARGS__);

MEMLENS_EXPORT void* operator new(size_t size) { MEMLENS_NEW(kNew, NewFn) }
MEMLENS_EXPORT void* operator new[](size_t size) { MEMLENS_NEW(kNewArray, NewFn) }
MEMLENS_EXPORT void* operator new(size_t size, const std::nothrow_t& tag) noexcept {
  MEMLENS_NEW(kNewNothrow, NewNothrowFn, tag)
}
MEMLENS_EXPORT void* operator new[](size_t size, const std::nothrow_t& tag) noexcept {
  MEMLENS_NEW(kNewArrayNothrow, NewNothrowFn, tag)
}
MEMLENS_EXPORT void* operator new(size_t size, std::align_val_t alignment) {
  return NewAligned<NewAlignedFn>(kNewAligned, MEMLENS_CALLER, size, alignment);
}
MEMLENS_EXPORT void* operator new[](size_t size, std::align_val_t alignment) {
  return NewAligned<NewAlignedFn>(kNewArrayAligned, MEMLENS_CALLER, size, alignment);
}
MEMLENS_EXPORT void* operator new(size_t size, std::align_val_t alignment,
                                  const std::nothrow_t& tag) noexcept {
  return NewAligned<NewAlignedNothrowFn>(kNewAlignedNothrow, MEMLENS_CALLER, size, alignment, tag);
}
MEMLENS_EXPORT void* operator new[](size_t size, std::align_val_t alignment,
                                    const std::nothrow_t& tag) noexcept {
  return NewAligned<NewAlignedNothrowFn>(kNewArrayAlignedNothrow, MEMLENS_CALLER, size, alignment,
                                         tag);
}

// Every delete is free when the twenty are ours (malloc and aligned_alloc blocks alike).
MEMLENS_EXPORT void operator delete(void* ptr) noexcept { MEMLENS_DELETE(kDelete, DeleteFn) }
MEMLENS_EXPORT void operator delete[](void* ptr) noexcept { MEMLENS_DELETE(kDeleteArray, DeleteFn) }
MEMLENS_EXPORT void operator delete(void* ptr, size_t size) noexcept {
  MEMLENS_DELETE(kDeleteSized, DeleteSizedFn, size)
}
MEMLENS_EXPORT void operator delete[](void* ptr, size_t size) noexcept {
  MEMLENS_DELETE(kDeleteArraySized, DeleteSizedFn, size)
}
MEMLENS_EXPORT void operator delete(void* ptr, const std::nothrow_t& tag) noexcept {
  MEMLENS_DELETE(kDeleteNothrow, DeleteNothrowFn, tag)
}
MEMLENS_EXPORT void operator delete[](void* ptr, const std::nothrow_t& tag) noexcept {
  MEMLENS_DELETE(kDeleteArrayNothrow, DeleteNothrowFn, tag)
}
MEMLENS_EXPORT void operator delete(void* ptr, std::align_val_t alignment) noexcept {
  MEMLENS_DELETE(kDeleteAligned, DeleteAlignedFn, alignment)
}
MEMLENS_EXPORT void operator delete[](void* ptr, std::align_val_t alignment) noexcept {
  MEMLENS_DELETE(kDeleteArrayAligned, DeleteAlignedFn, alignment)
}
MEMLENS_EXPORT void operator delete(void* ptr, size_t size, std::align_val_t alignment) noexcept {
  MEMLENS_DELETE(kDeleteSizedAligned, DeleteSizedAlignedFn, size, alignment)
}
MEMLENS_EXPORT void operator delete[](void* ptr, size_t size, std::align_val_t alignment) noexcept {
  MEMLENS_DELETE(kDeleteArraySizedAligned, DeleteSizedAlignedFn, size, alignment)
}
MEMLENS_EXPORT void operator delete(void* ptr, std::align_val_t alignment,
                                    const std::nothrow_t& tag) noexcept {
  MEMLENS_DELETE(kDeleteAlignedNothrow, DeleteAlignedNothrowFn, alignment, tag)
}
MEMLENS_EXPORT void operator delete[](void* ptr, std::align_val_t alignment,
                                      const std::nothrow_t& tag) noexcept {
  MEMLENS_DELETE(kDeleteArrayAlignedNothrow, DeleteAlignedNothrowFn, alignment, tag)
}
