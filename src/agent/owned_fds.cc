// src/agent/owned_fds.cc: see owned_fds.h.
#include "agent/owned_fds.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

namespace memlens::agent {
namespace {

// The capture or the exchange, and the writer's /proc/self statm, smaps and pagemap.
constexpr int kSlots = 6;
std::atomic<int> g_fds[kSlots] = {-1, -1, -1, -1, -1, -1};
std::atomic<bool> g_locked{false};

// Above the numbers programs use (the first free ones, and the 10s that shells dup2 to), yet
// under the soft RLIMIT_NOFILE, which F_DUPFD must respect: 1024 on most systems gives 992.
int HighBase() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 992;
  rlim_t top = limit.rlim_cur < 1024 ? limit.rlim_cur : 1024;
  return top > 64 ? static_cast<int>(top - 32) : 3;
}

// A copy of fd at a high number, close-on-exec; fd itself when none can be made, or when it is
// high already (the exchange an exec'd image inherits keeps the number its environment names:
// a shell passes on the value it read at its start). Raw system calls: the interposed close
// must not refuse the agent its own descriptors.
int MoveHigh(int fd) {
  if (fd >= HighBase()) {
    syscall(SYS_fcntl, fd, F_SETFD, FD_CLOEXEC);
    return fd;
  }
  int high = static_cast<int>(syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, HighBase()));
  if (high < 0) return fd;
  syscall(SYS_close, fd);
  return high;
}

}  // namespace

void LockOwnedFds() {
  while (g_locked.exchange(true, std::memory_order_acquire)) sched_yield();
}
void UnlockOwnedFds() { g_locked.store(false, std::memory_order_release); }
void ResetOwnedFdsAfterFork() { g_locked.store(false, std::memory_order_relaxed); }

int OwnFd(int fd) {
  int high = MoveHigh(fd);
  for (int slot = 0; slot < kSlots; ++slot) {
    int expected = -1;
    if (g_fds[slot].compare_exchange_strong(expected, high)) return slot;
  }
  syscall(SYS_close, high);
  return -1;
}

int FdOf(int slot) { return slot < 0 ? -1 : g_fds[slot].load(std::memory_order_acquire); }

void DisownFd(int slot, bool close_it) {
  if (slot < 0) return;
  LockOwnedFds();
  int fd = g_fds[slot].exchange(-1, std::memory_order_acq_rel);
  UnlockOwnedFds();
  if (close_it && fd >= 0) syscall(SYS_close, fd);
}

void ReplaceFd(int slot, int new_fd) {
  int high = MoveHigh(new_fd);
  LockOwnedFds();
  g_fds[slot].store(high, std::memory_order_release);
  UnlockOwnedFds();
}

bool IsOwnedFd(int fd) {
  if (fd < 0) return false;
  for (const auto& owned : g_fds) {
    if (owned.load(std::memory_order_relaxed) == fd) return true;
  }
  return false;
}

void MoveOwnedFdAway(int fd) {
  LockOwnedFds();
  for (auto& owned : g_fds) {
    if (owned.load(std::memory_order_relaxed) != fd) continue;
    // The program's dup2 replaces `fd` (closing it) right after: leave it open until then.
    int moved = static_cast<int>(syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, HighBase()));
    if (moved < 0) moved = static_cast<int>(syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, 3));
    owned.store(moved, std::memory_order_release);  // -1 (out of descriptors): the slot is lost
  }
  UnlockOwnedFds();
}

int CloseRangeSparingOwned(unsigned first, unsigned last, int flags,
                           int (*close_fds)(unsigned, unsigned, int)) {
  int result = 0, error = 0;
  unsigned from = first;
  for (;;) {
    // The lowest owned descriptor in [from, last], if any.
    long next = -1;
    for (const auto& owned : g_fds) {
      int fd = owned.load(std::memory_order_relaxed);
      if (fd >= 0 && static_cast<unsigned>(fd) >= from && static_cast<unsigned>(fd) <= last &&
          (next < 0 || fd < next)) {
        next = fd;
      }
    }
    unsigned to = next < 0 ? last : static_cast<unsigned>(next) - 1;
    if (next != static_cast<long>(from) && close_fds(from, to, flags) != 0 && result == 0) {
      result = -1;
      error = errno;
    }
    if (next < 0 || static_cast<unsigned>(next) >= last) break;
    from = static_cast<unsigned>(next) + 1;
  }
  if (result) errno = error;
  return result;
}

}  // namespace memlens::agent
