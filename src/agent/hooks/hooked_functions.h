// src/agent/hooks/hooked_functions.h
//
// The one list of functions the agent interposes, as an X-macro:
//   X(name, return type, (parameters), (argument names))
// real_functions.cc expands it to resolve the next definition of each (dlsym RTLD_NEXT);
// interposers.cc defines each interposer by hand, because each records something different
// (the descriptor and signal ones: fd_interposers.cc, signal_interposers.cc); exports.map.in
// exports each.
#pragma once

// The version script (exports.map.in) reads the names only, without the types' headers.
#ifndef MEMLENS_NAMES_ONLY
#include <dlfcn.h>
#include <signal.h>
#include <spawn.h>
#include <stddef.h>
#include <sys/types.h>
#endif

#define MEMLENS_HOOKED_FUNCTIONS(X)                                                         \
  X(malloc, void*, (size_t size), (size))                                                   \
  X(free, void, (void* ptr), (ptr))                                                         \
  X(calloc, void*, (size_t n, size_t size), (n, size))                                      \
  X(realloc, void*, (void* ptr, size_t size), (ptr, size))                                  \
  X(reallocarray, void*, (void* ptr, size_t n, size_t size), (ptr, n, size))                \
  X(posix_memalign, int, (void** out, size_t alignment, size_t size), (out, alignment, size)) \
  X(aligned_alloc, void*, (size_t alignment, size_t size), (alignment, size))               \
  X(memalign, void*, (size_t alignment, size_t size), (alignment, size))                    \
  X(valloc, void*, (size_t size), (size))                                                   \
  X(pvalloc, void*, (size_t size), (size))                                                  \
  X(mmap, void*, (void* addr, size_t len, int prot, int flags, int fd, off_t off),          \
    (addr, len, prot, flags, fd, off))                                                      \
  X(munmap, int, (void* addr, size_t len), (addr, len))                                     \
  X(mprotect, int, (void* addr, size_t len, int prot), (addr, len, prot))                   \
  X(mremap, void*, (void* old, size_t old_len, size_t new_len, int flags, ...),            \
    (old, old_len, new_len, flags, new_addr))                                               \
  X(dlopen, void*, (const char* file, int mode), (file, mode))                              \
  X(dlclose, int, (void* handle), (handle))                                                 \
  X(execve, int, (const char* path, char* const argv[], char* const envp[]),                \
    (path, argv, envp))                                                                     \
  X(execv, int, (const char* path, char* const argv[]), (path, argv))                       \
  X(execvp, int, (const char* file, char* const argv[]), (file, argv))                      \
  X(execvpe, int, (const char* file, char* const argv[], char* const envp[]),               \
    (file, argv, envp))                                                                     \
  X(fork, pid_t, (void), ())                                                                \
  X(posix_spawn, int,                                                                       \
    (pid_t* pid, const char* path, const posix_spawn_file_actions_t* actions,               \
     const posix_spawnattr_t* attr, char* const argv[], char* const envp[]),                \
    (pid, path, actions, attr, argv, envp))                                                 \
  X(posix_spawnp, int,                                                                      \
    (pid_t* pid, const char* file, const posix_spawn_file_actions_t* actions,               \
     const posix_spawnattr_t* attr, char* const argv[], char* const envp[]),                \
    (pid, file, actions, attr, argv, envp))                                                 \
  X(_exit, void, (int status), (status))                                                    \
  X(_Exit, void, (int status), (status))                                                    \
  X(close, int, (int fd), (fd))                                                             \
  X(close_range, int, (unsigned first, unsigned last, int flags), (first, last, flags))     \
  X(closefrom, void, (int lowfd), (lowfd))                                                  \
  X(dup2, int, (int oldfd, int newfd), (oldfd, newfd))                                      \
  X(dup3, int, (int oldfd, int newfd, int flags), (oldfd, newfd, flags))                    \
  X(sigaction, int, (int signo, const struct sigaction* act, struct sigaction* old),        \
    (signo, act, old))                                                                      \
  X(signal, sighandler_t, (int signo, sighandler_t handler), (signo, handler))              \
  X(bsd_signal, sighandler_t, (int signo, sighandler_t handler), (signo, handler))          \
  X(sysv_signal, sighandler_t, (int signo, sighandler_t handler), (signo, handler))
