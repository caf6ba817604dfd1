// src/agent/owned_fds.h
//
// The descriptors the agent keeps open inside the program (the capture, and the writer's
// /proc/self statm, smaps and pagemap).
// A program may close every descriptor it inherited (a close loop, closefrom, close_range,
// Python's os.closerange) and then open files of its own: had the agent's descriptor been
// closed, the next file the program opened would get its number and the agent's chunks would
// land in it. So the agent's descriptors sit at high numbers, and the fd interposers
// (hooks/fd_interposers.cc) keep the program's calls from reaching them while letting the
// program see exactly what it would have seen without memlens: close() of one says EBADF (no
// such descriptor without memlens), closefrom/close_range close everything else in the range,
// and dup2/dup3 onto one first move the agent's descriptor to another number. A raw system
// call gets past all this: the writer checks before every chunk that its descriptor is still
// the file it opened (SinkStillOurs) and reopens the file by path if not.
//
// Runs on: application threads (the interposers, Own at start) and the writer thread (Lock
// around each system call on an owned descriptor). The lock is held only around such a call
// and by a dup2/dup3 that moves a descriptor; never on the allocation path.
#pragma once

namespace memlens::agent {

// Takes fd over: moves it to a high number (F_DUPFD_CLOEXEC), closes the original and registers
// the result, whose number the agent then reads with FdOf(slot). Returns the slot, or -1 when no
// slot is left (the descriptor is closed).
int OwnFd(int fd);
// The descriptor in `slot` now (it moves when the program dup2s onto it); -1 if none.
int FdOf(int slot);
// Unregisters the slot; closes its descriptor when `close_it` (not when the program has taken
// the number over).
void DisownFd(int slot, bool close_it);
// Replaces the slot's descriptor with new_fd (moved high first), without closing the old one.
void ReplaceFd(int slot, int new_fd);

// Held around every system call on an owned descriptor, so that it never moves under the call.
void LockOwnedFds();
void UnlockOwnedFds();
// In a child just forked (one thread): a lock its parent's writer held at the fork is let go.
void ResetOwnedFdsAfterFork();

// For the interposers.
bool IsOwnedFd(int fd);
// The program is about to make `fd` (an owned one) a copy of another: move ours elsewhere.
void MoveOwnedFdAway(int fd);
// Calls close_fds(from, to, flags) for every part of [first, last] that holds no owned
// descriptor and returns the first failure (-1, errno set), else 0.
int CloseRangeSparingOwned(unsigned first, unsigned last, int flags,
                           int (*close_fds)(unsigned, unsigned, int));

}  // namespace memlens::agent
