// src/agent/hooks/interposers.cc
//
// The extern "C" definitions that stand in front of libc's allocator, mmap, dlopen/dlclose, exec
// and _exit (the list: hooked_functions.h). Each one calls the real function and records what
// happened; when the thread is already inside the agent, or the process is not recorded, it
// only forwards.
//
// Runs on: application threads. Hot-path rules apply (recorder.h).
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include "agent/agent.h"
#include "agent/got/caller_dlopen.h"
#include "agent/got/got_patcher.h"
#include "agent/hooks/allocation_paths.h"
#include "agent/hooks/real_functions.h"
#include "agent/python_support.h"
#include "agent/recorder/recorder.h"
#include "agent/recorder/sampler.h"
#include "agent/recorder/unwinder.h"

using memlens::agent::g_direct_short_path;
using memlens::agent::g_guarded_short_path;
using memlens::agent::HookGuard;
using memlens::agent::PassesUnsampled;
using memlens::agent::hooks::FreeFull;
using memlens::agent::hooks::MallocFull;
using memlens::agent::RecordAlloc;
using memlens::agent::RecordRelease;
using memlens::agent::ReleasesUnsampled;
using memlens::format::EventKind;
namespace real = memlens::agent::real;

namespace {

// True when this call should be recorded. The first interposed call of the process resolves
// the real functions and decides whether this process records at all. A macro, so that
// __builtin_return_address names the caller of the interposer itself.
inline bool EnterFrom(const void* caller) {
  if (__builtin_expect(memlens::agent::g_state.load(std::memory_order_relaxed) ==
                           memlens::agent::kUninitialized, 0)) {
    memlens::agent::InitializeOnce();
  }
  return memlens::agent::ShouldRecord(caller);
}
#define Enter() EnterFrom(__builtin_return_address(0))

// A call that is not recorded (the agent's own, or one made while not recording) still runs the
// real function under the guard: an allocator other than the C library's may map memory or
// allocate through our hooks while serving it, and none of that is the program's.
template <typename Call>
inline auto Unrecorded(Call call) {
  HookGuard guard;
  return call();
}

// exec returned: it failed, and this image records on.
void AfterFailedExec() {
  int saved_errno = errno;
  memlens::agent::ResumeAfterFailedExec();
  errno = saved_errno;
}

void* BootstrapCalloc(size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) return nullptr;
  return real::BootstrapAlloc(total, 16);  // the static arena starts zeroed and is never reused
}

}  // namespace

namespace memlens::agent::hooks {

void* MallocFull(const void* caller, size_t size) {
  if (real::Resolving()) return real::BootstrapAlloc(size, 16);
  if (g_guarded_short_path && PassesUnsampled(size)) {
    return Unrecorded([&] { return real::malloc(size); });
  }
  if (!EnterFrom(caller)) {
    void* p = Unrecorded([&] { return real::malloc(size); });
    if (p) PassOverUnrecorded(size);
    return p;
  }
  HookGuard guard;
  void* p = real::malloc(size);
  if (p) RecordAlloc(EventKind::kMalloc, p, size);
  return p;
}

void FreeFull(const void* caller, void* ptr) {
  if ((g_guarded_short_path && ReleasesUnsampled(ptr)) || !EnterFrom(caller)) {
    return Unrecorded([&] { real::free(ptr); });
  }
  HookGuard guard;
  RecordRelease(EventKind::kFree, ptr, 0);  // before the real free: see recorder.h
  real::free(ptr);
}

void* AlignedFull(const void* caller, size_t alignment, size_t size) {
  if (real::Resolving()) return real::BootstrapAlloc(size, alignment);
  // aligned_alloc wants a multiple of the alignment (C11); the program asked for `size`.
  size_t rounded = (size + alignment - 1) & ~(alignment - 1);
  if (rounded < size) return nullptr;  // overflow
  if (!EnterFrom(caller)) return Unrecorded([&] { return real::aligned_alloc(alignment, rounded); });
  HookGuard guard;
  void* p = real::aligned_alloc(alignment, rounded);
  if (p) RecordAlloc(EventKind::kAlignedAlloc, p, size);
  return p;
}

}  // namespace memlens::agent::hooks

extern "C" {

// malloc, free, calloc and realloc try sampling's direct path first (sampler.h): inline, a
// jump to the real function with no frame of their own in the common case. The full path is out
// of line. (malloc and free spell out MallocFrom and FreeFrom, allocation_paths.h: there the
// caller, an argument, is read before the test, which gives the direct path a frame.)
__attribute__((visibility("default"))) void* malloc(size_t size) {
  if (g_direct_short_path && PassesUnsampled(size)) return real::malloc(size);
  return MallocFull(__builtin_return_address(0), size);
}

__attribute__((visibility("default"))) void free(void* ptr) {
  if (!ptr || real::IsBootstrapPointer(ptr)) return;
  if (g_direct_short_path && ReleasesUnsampled(ptr)) return real::free(ptr);
  FreeFull(__builtin_return_address(0), ptr);
}

__attribute__((noinline)) static void* CallocFull(const void* caller, size_t n, size_t size) {
  if (real::Resolving()) return BootstrapCalloc(n, size);
  size_t total;
  if (g_guarded_short_path && !__builtin_mul_overflow(n, size, &total) && PassesUnsampled(total)) {
    return Unrecorded([&] { return real::calloc(n, size); });
  }
  if (!EnterFrom(caller)) {
    void* p = Unrecorded([&] { return real::calloc(n, size); });
    if (p) memlens::agent::PassOverUnrecorded(n * size);
    return p;
  }
  HookGuard guard;
  void* p = real::calloc(n, size);
  if (p) RecordAlloc(EventKind::kCalloc, p, n * size);
  return p;
}

__attribute__((visibility("default"))) void* calloc(size_t n, size_t size) {
  size_t total;
  if (g_direct_short_path && !__builtin_mul_overflow(n, size, &total) && PassesUnsampled(total)) {
    return real::calloc(n, size);  // an overflowing product is the full path's to refuse
  }
  return CallocFull(__builtin_return_address(0), n, size);
}

// realloc is a release (recorded before the call, so the old address cannot be seen reused
// first) followed by an allocation; a failed realloc leaves the old block alive.
__attribute__((noinline)) static void* ReallocCommon(const void* caller, void* ptr, size_t size,
                                                     EventKind kind,
                                                     void* (*call)(void*, size_t, size_t),
                                                     size_t n) {
  size_t total;
  bool overflow = __builtin_mul_overflow(n, size, &total);
  if (g_guarded_short_path && (!ptr || ReleasesUnsampled(ptr)) && !overflow &&
      PassesUnsampled(total)) {
    return Unrecorded([&] { return call(ptr, n, size); });
  }
  if (!EnterFrom(caller)) {
    void* p = Unrecorded([&] { return call(ptr, n, size); });
    if (p) memlens::agent::PassOverUnrecorded(total);
    return p;
  }
  HookGuard guard;
  if (ptr) RecordRelease(EventKind::kReallocOld, ptr, 0);
  void* p = call(ptr, n, size);
  if (p) {
    RecordAlloc(kind, p, total);
  } else if (ptr && (total != 0 || overflow)) {  // realloc(p, 0) frees; anything else failed
    RecordRelease(EventKind::kReallocFailed, ptr, 0);
  }
  return p;
}

static void* CallRealloc(void* ptr, size_t n, size_t size) { return real::realloc(ptr, size); }
static void* CallReallocArray(void* ptr, size_t n, size_t size) {
  return real::reallocarray(ptr, n, size);
}

// A bootstrap block being grown: moved to a fresh bootstrap block (sizes are tiny). Out of
// line, so that realloc's short path needs no frame of its own.
__attribute__((noinline)) static void* ReallocBootstrap(void* ptr, size_t size) {
  void* p = real::BootstrapAlloc(size, 16);
  if (p && ptr) std::memcpy(p, ptr, size);  // the arena is larger than any old block
  return p;
}

__attribute__((visibility("default"))) void* realloc(void* ptr, size_t size) {
  if (real::Resolving() || real::IsBootstrapPointer(ptr)) return ReallocBootstrap(ptr, size);
  if (g_direct_short_path && (!ptr || ReleasesUnsampled(ptr)) && PassesUnsampled(size)) {
    return real::realloc(ptr, size);  // an unsampled block, replaced by one with no sample point
  }
  return ReallocCommon(__builtin_return_address(0), ptr, size, EventKind::kRealloc, CallRealloc,
                       1);
}

__attribute__((visibility("default"))) void* reallocarray(void* ptr, size_t n, size_t size) {
  return ReallocCommon(__builtin_return_address(0), ptr, size, EventKind::kReallocArray,
                       CallReallocArray, n);
}

__attribute__((visibility("default"))) int posix_memalign(void** out, size_t alignment, size_t size) {
  if (real::Resolving()) {
    *out = real::BootstrapAlloc(size, alignment);
    return *out ? 0 : ENOMEM;
  }
  if (!Enter()) return Unrecorded([&] { return real::posix_memalign(out, alignment, size); });
  HookGuard guard;
  int rc = real::posix_memalign(out, alignment, size);
  if (rc == 0) RecordAlloc(EventKind::kPosixMemalign, *out, size);
  return rc;
}

#define MEMLENS_ALIGNED_INTERPOSER(name, kind)                                        \
  __attribute__((visibility("default"))) void* name(size_t alignment, size_t size) { \
    if (real::Resolving()) return real::BootstrapAlloc(size, alignment);              \
    if (!Enter()) return Unrecorded([&] { return real::name(alignment, size); });     \
    HookGuard guard;                                                                  \
    void* p = real::name(alignment, size);                                            \
    if (p) RecordAlloc(kind, p, size);                                                \
    return p;                                                                         \
  }
MEMLENS_ALIGNED_INTERPOSER(aligned_alloc, EventKind::kAlignedAlloc)
MEMLENS_ALIGNED_INTERPOSER(memalign, EventKind::kMemalign)
#undef MEMLENS_ALIGNED_INTERPOSER

__attribute__((visibility("default"))) void* valloc(size_t size) {
  if (!Enter()) return Unrecorded([&] { return real::valloc(size); });
  HookGuard guard;
  void* p = real::valloc(size);
  if (p) RecordAlloc(EventKind::kValloc, p, size);
  return p;
}

__attribute__((visibility("default"))) void* pvalloc(size_t size) {
  if (!Enter()) return Unrecorded([&] { return real::pvalloc(size); });
  HookGuard guard;
  void* p = real::pvalloc(size);
  // pvalloc rounds the size up to whole pages; record what the program received.
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (p) RecordAlloc(EventKind::kPvalloc, p, size == 0 ? page : (size + page - 1) & ~(page - 1));
  return p;
}

// --- mmap family: only anonymous mappings count as allocations -----------------------------
// Only the memory the program can use counts (format::MappingCounts): a PROT_NONE mapping is a
// reservation, and mprotect commits parts of it (or gives them back). The analyzer ignores an
// mprotect of anything that is not a tracked anonymous mapping (a malloc'd block, a file).

// mimalloc maps its arenas from inside the Python hooks' allocator wrappers, where the thread
// is already inside the agent: recorded all the same, as mimalloc's own figure (never as the
// program's mappings), with the flag cleared so that what recording maps is not counted.
bool RecordingMimalloc() {
  return __builtin_expect(memlens::agent::t_in_mimalloc, 0) &&
         memlens::agent::g_state.load(std::memory_order_relaxed) == memlens::agent::kRecording;
}

void RecordMimalloc(EventKind kind, const void* address, size_t size) {
  memlens::agent::t_in_mimalloc = false;
  HookGuard guard;
  if (kind == EventKind::kMimallocMap) {
    RecordAlloc(kind, address, size);
  } else {
    RecordRelease(kind, address, size);
  }
  memlens::agent::t_in_mimalloc = true;
}

__attribute__((visibility("default"))) void* mmap(void* addr, size_t len, int prot, int flags,
                                                 int fd, off_t off) {
  if (real::Resolving() || !real::mmap) {
    return reinterpret_cast<void*>(syscall(SYS_mmap, addr, len, prot, flags, fd, off));
  }
  const bool anonymous = flags & MAP_ANONYMOUS;
  if (anonymous && RecordingMimalloc()) {
    void* p = real::mmap(addr, len, prot, flags, fd, off);
    if (p != MAP_FAILED) RecordMimalloc(EventKind::kMimallocMap, p, len);
    return p;
  }
  if (!Enter() || (!anonymous && !(flags & MAP_FIXED))) {
    return real::mmap(addr, len, prot, flags, fd, off);
  }
  HookGuard guard;
  if (!anonymous) {  // a file mapped over an anonymous mapping replaces it, as munmap would
    RecordRelease(EventKind::kMunmap, addr, len);
    return real::mmap(addr, len, prot, flags, fd, off);
  }
  void* p = real::mmap(addr, len, prot, flags, fd, off);
  if (p != MAP_FAILED) {
    RecordAlloc(memlens::format::MappingCounts(prot) ? EventKind::kMmap : EventKind::kMmapReserved,
                p, len);
  }
  return p;
}

__attribute__((visibility("default"), alias("mmap"))) void* mmap64(void*, size_t, int, int, int,
                                                                  off_t);

__attribute__((visibility("default"))) int munmap(void* addr, size_t len) {
  if (real::Resolving() || !real::munmap) return static_cast<int>(syscall(SYS_munmap, addr, len));
  if (RecordingMimalloc()) RecordMimalloc(EventKind::kMimallocUnmap, addr, len);
  if (!Enter()) return real::munmap(addr, len);
  HookGuard guard;
  RecordRelease(EventKind::kMunmap, addr, len);
  return real::munmap(addr, len);
}

// Recorded after the call, and only when it succeeded: a failed mprotect changes nothing. A
// program that commits and decommits the same range from two threads orders the two calls
// itself, and each is recorded before its call returns.
__attribute__((visibility("default"))) int mprotect(void* addr, size_t len, int prot) {
  if (real::Resolving() || !real::mprotect) {
    return static_cast<int>(syscall(SYS_mprotect, addr, len, prot));
  }
  if (!Enter()) return real::mprotect(addr, len, prot);
  HookGuard guard;
  int rc = real::mprotect(addr, len, prot);
  if (rc == 0 && memlens::format::MappingCounts(prot)) {
    RecordAlloc(EventKind::kProtect, addr, len);
  } else if (rc == 0) {
    RecordRelease(EventKind::kProtectNone, addr, len);
  }
  return rc;
}

__attribute__((visibility("default"))) void* mremap(void* old, size_t old_len, size_t new_len,
                                                   int flags, ...) {
  void* new_addr = nullptr;
  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    new_addr = va_arg(ap, void*);
    va_end(ap);
  }
  if (!Enter()) return real::mremap(old, old_len, new_len, flags, new_addr);
  HookGuard guard;
  RecordRelease(EventKind::kMremapOld, old, old_len);
  void* p = real::mremap(old, old_len, new_len, flags, new_addr);
  if (p != MAP_FAILED) {
    RecordAlloc(EventKind::kMremapNew, p, new_len);
  } else {
    RecordRelease(EventKind::kMremapFailed, old, old_len);
  }
  return p;
}

// --- loader: the writer rescans the module list after each change -------------------------
// dlopen searches a bare name as its caller would (caller_dlopen.h: glibc's dlopen looks at its
// return address, which here is ours); while the agent is patched into GOTs (got_patcher.h),
// the objects it loaded are patched before it returns.

__attribute__((visibility("default"))) void* dlopen(const char* file, int mode) {
  Enter();
  void* handle =
      memlens::agent::got::DlopenAsCaller(__builtin_return_address(0), file, mode, real::dlopen);
  if (handle) memlens::agent::got::PatchNewObjects();
  memlens::agent::NoteModulesChanged();
  return handle;
}

__attribute__((visibility("default"))) int dlclose(void* handle) {
  Enter();
  memlens::agent::BeforeDlclose();
  int rc = real::dlclose(handle);
  // Unwind rules and previous stacks may name the unmapped code: every thread forgets them.
  memlens::agent::g_code_generation.fetch_add(1, std::memory_order_release);
  memlens::agent::NoteModulesChanged();
  return rc;
}

// --- child processes: not recorded (docs/agent.md), but counted for the END record, unless
// memlens run follows them (a child that execs records into a capture of its own) -----------

namespace {
// A spawn's result passed through, its child counted when it started one.
int CountSpawned(int rc) {
  if (rc == 0 && !memlens::agent::FollowingChildren()) memlens::agent::CountUnrecordedChild();
  return rc;
}
}  // namespace

__attribute__((visibility("default"))) pid_t fork(void) {
  Enter();
  pid_t pid = real::fork();
  if (pid > 0 && !memlens::agent::FollowingChildren()) memlens::agent::CountUnrecordedChild();
  return pid;
}

__attribute__((visibility("default"))) int posix_spawn(pid_t* pid, const char* path,
                                                      const posix_spawn_file_actions_t* actions,
                                                      const posix_spawnattr_t* attr,
                                                      char* const argv[], char* const envp[]) {
  Enter();
  return CountSpawned(real::posix_spawn(pid, path, actions, attr, argv, envp));
}

__attribute__((visibility("default"))) int posix_spawnp(pid_t* pid, const char* file,
                                                       const posix_spawn_file_actions_t* actions,
                                                       const posix_spawnattr_t* attr,
                                                       char* const argv[], char* const envp[]) {
  Enter();
  return CountSpawned(real::posix_spawnp(pid, file, actions, attr, argv, envp));
}

// --- leaving the process image: finish the capture first -----------------------------------

__attribute__((visibility("default"))) int execve(const char* path, char* const argv[],
                                                 char* const envp[]) {
  Enter();
  int rc = real::execve(path, argv, memlens::agent::PauseBeforeExec(path, envp));
  AfterFailedExec();
  return rc;
}

__attribute__((visibility("default"))) int execv(const char* path, char* const argv[]) {
  Enter();
  // As execve with the environment, which a forked child's exec sets (agent.h).
  int rc = real::execve(path, argv, memlens::agent::PauseBeforeExec(path, environ));
  AfterFailedExec();
  return rc;
}

__attribute__((visibility("default"))) int execvp(const char* file, char* const argv[]) {
  Enter();
  // As execvpe with the environment, which a forked child's exec sets (agent.h).
  int rc = real::execvpe(file, argv, memlens::agent::PauseBeforeExec(file, environ));
  AfterFailedExec();
  return rc;
}

__attribute__((visibility("default"))) int execvpe(const char* file, char* const argv[],
                                                  char* const envp[]) {
  Enter();
  int rc = real::execvpe(file, argv, memlens::agent::PauseBeforeExec(file, envp));
  AfterFailedExec();
  return rc;
}

// The execl family takes its arguments inline; gather them and go through the vector forms.
#define MEMLENS_COLLECT_ARGS(first, argv, envp_out)                        \
  va_list ap;                                                              \
  size_t argc = 1;                                                         \
  va_start(ap, first);                                                     \
  while (va_arg(ap, const char*)) ++argc;                                  \
  va_end(ap);                                                              \
  char** argv = static_cast<char**>(__builtin_alloca((argc + 1) * sizeof(char*))); \
  argv[0] = const_cast<char*>(first);                                      \
  va_start(ap, first);                                                     \
  for (size_t i = 1; i <= argc; ++i) argv[i] = va_arg(ap, char*);          \
  envp_out;                                                                \
  va_end(ap);

__attribute__((visibility("default"))) int execl(const char* path, const char* arg, ...) {
  MEMLENS_COLLECT_ARGS(arg, argv, (void)0)
  return execv(path, argv);
}

__attribute__((visibility("default"))) int execlp(const char* file, const char* arg, ...) {
  MEMLENS_COLLECT_ARGS(arg, argv, (void)0)
  return execvp(file, argv);
}

__attribute__((visibility("default"))) int execle(const char* path, const char* arg, ...) {
  char* const* envp;
  MEMLENS_COLLECT_ARGS(arg, argv, envp = va_arg(ap, char* const*))
  return execve(path, argv, envp);
}
#undef MEMLENS_COLLECT_ARGS

__attribute__((visibility("default"), noreturn)) void _exit(int status) {
  Enter();
  memlens::agent::StopBeforeExit(status);
  real::_exit(status);
  __builtin_unreachable();
}

__attribute__((visibility("default"), noreturn)) void _Exit(int status) {
  Enter();
  memlens::agent::StopBeforeExit(status);
  real::_Exit(status);
  __builtin_unreachable();
}

}  // extern "C"
