// src/agent/hooks/fd_interposers.cc
//
// close, close_range, closefrom, dup2 and dup3: the program's calls keep away from the agent's
// own descriptors (owned_fds.h) and otherwise do exactly what they would have done without
// memlens, with the same results, errno and descriptor numbers. An owned descriptor does not
// exist as far as the program knows: close() of it and dup2 from it fail with EBADF, as they
// would have without memlens; a range close skips it; dup2/dup3 onto it move it first.
//
// Runs on: application threads, possibly in signal handlers (close and dup2 are
// async-signal-safe): no allocation; only dup2/dup3 onto an owned descriptor takes its lock.
// Before the real functions are known (a call this early, or from a signal handler that
// interrupted their resolution), the system calls stand in for them.
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/hooks/real_functions.h"
#include "agent/owned_fds.h"

namespace real = memlens::agent::real;
using memlens::agent::IsOwnedFd;

namespace {

int RealClose(int fd) {
  return real::close ? real::close(fd) : static_cast<int>(syscall(SYS_close, fd));
}

int RealCloseRange(unsigned first, unsigned last, int flags) {
  return real::close_range ? real::close_range(first, last, flags)
                           : static_cast<int>(syscall(SYS_close_range, first, last, flags));
}

int Refuse() {
  errno = EBADF;
  return -1;
}

template <typename Call>
int DupOnto(int oldfd, int newfd, Call call) {
  if (IsOwnedFd(oldfd)) return Refuse();  // no such descriptor without memlens
  if (!IsOwnedFd(newfd)) return call();
  memlens::agent::MoveOwnedFdAway(newfd);
  int rc = call();
  // Failed: newfd still holds our old copy, which the program never had; close it.
  if (rc < 0) {
    int saved = errno;
    syscall(SYS_close, newfd);
    errno = saved;
  }
  return rc;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int close(int fd) {
  if (IsOwnedFd(fd)) return Refuse();
  return RealClose(fd);
}

// With CLOSE_RANGE_CLOEXEC nothing is closed (ours are close-on-exec already); with
// CLOSE_RANGE_UNSHARE the first part unshares the table and the others close in it.
__attribute__((visibility("default"))) int close_range(unsigned first, unsigned last, int flags) {
  return memlens::agent::CloseRangeSparingOwned(first, last, flags, RealCloseRange);
}

__attribute__((visibility("default"))) void closefrom(int lowfd) {
  unsigned first = lowfd < 0 ? 0 : static_cast<unsigned>(lowfd);
  if (memlens::agent::CloseRangeSparingOwned(first, ~0u, 0, RealCloseRange) == 0) return;
  // A kernel without close_range (before 5.9): one by one, as the C library would.
  for (long fd = first, top = sysconf(_SC_OPEN_MAX); fd < top; ++fd) {
    if (!IsOwnedFd(static_cast<int>(fd))) RealClose(static_cast<int>(fd));
  }
}

__attribute__((visibility("default"))) int dup2(int oldfd, int newfd) {
  return DupOnto(oldfd, newfd, [&] {
    return real::dup2 ? real::dup2(oldfd, newfd)
                      : static_cast<int>(syscall(SYS_dup2, oldfd, newfd));
  });
}

__attribute__((visibility("default"))) int dup3(int oldfd, int newfd, int flags) {
  return DupOnto(oldfd, newfd, [&] {
    return real::dup3 ? real::dup3(oldfd, newfd, flags)
                      : static_cast<int>(syscall(SYS_dup3, oldfd, newfd, flags));
  });
}

}  // extern "C"
