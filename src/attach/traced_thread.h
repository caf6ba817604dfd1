// src/attach/traced_thread.h
//
// TracedThread: one thread of another process, stopped with ptrace where a function call is
// safe, made to call functions of its own process (the C library's dlopen, the agent's
// memlens_start_with), then let go exactly as it was. This is how `memlens attach` loads the
// agent into a running program and how `memlens detach` stops it.
//
// Where the thread is stopped (docs/attach.md, "How the agent gets in"):
// - blocked in a system call (a server in accept, a Python program in sleep or read) made
//   outside the loader (whose own calls mean a dlopen is under way) and not one of the
//   allocator's: the call is interrupted, and restarted on release as the kernel restarts it
//   after a signal;
// - running outside the C library and the loader: stopped there;
// - otherwise (inside malloc, say, which may hold the allocator's lock dlopen needs) it runs on
//   to its next system call that is not one of the allocator's (mmap, brk...), and is stopped
//   at its entry; that call is made afresh on release. A thread that makes no such call within
//   the time given is released untouched and Seize fails.
// The thread's errno is kept across the calls. Signals that arrive meanwhile are delivered to
// the program as they would have been. The process's other threads run on throughout.
//
// x86-64 only (registers and calling convention). Runs on: the memlens command's main thread,
// which must block SIGINT and SIGTERM while a thread is seized (a tracer that dies mid-call
// leaves the thread with borrowed registers).
#pragma once

#include <sys/types.h>
#include <sys/user.h>

#include <cstdint>
#include <initializer_list>
#include <string>

namespace memlens::attach {

class TracedThread {
 public:
  TracedThread() = default;
  TracedThread(const TracedThread&) = delete;
  TracedThread& operator=(const TracedThread&) = delete;
  ~TracedThread() { Release(); }

  // Where the C library and the dynamic loader are mapped in the process: [begin, end).
  struct UnsafeCode {
    uint64_t libc_begin = 0, libc_end = 0, loader_begin = 0, loader_end = 0;
    bool InLoader(uint64_t pc) const { return pc >= loader_begin && pc < loader_end; }
    bool InLibc(uint64_t pc) const { return (pc >= libc_begin && pc < libc_end) || InLoader(pc); }
  };

  // Seizes thread `tid` of process `pid` and stops it at a safe point (above), waiting at most
  // `wait_ms` for one. False with a one-line reason (the thread is then untouched and free).
  bool Seize(pid_t pid, pid_t tid, int wait_ms, const UnsafeCode& unsafe, std::string* error);

  // Calls the function at `function` with up to six integer or pointer arguments on the
  // thread's own stack and returns what it returned (rax) in *result. False with a reason
  // when the process ended or the call crashed.
  bool Call(uint64_t function, std::initializer_list<uint64_t> args, uint64_t* result,
            std::string* error);
  // Copies bytes to or from the process's memory.
  bool Write(uint64_t address, const void* data, size_t size, std::string* error);
  bool Read(uint64_t address, void* data, size_t size);
  // The NUL-terminated string at address (at most max bytes).
  std::string ReadString(uint64_t address, size_t max);

  // Puts the registers back (and errno, when KeepErrno was called) and lets the thread go.
  void Release();
  // Saves the thread's errno, at `errno_address` (what __errno_location returned in it), so
  // that Release puts it back.
  void KeepErrno(uint64_t errno_address);

 private:
  bool StopAtSafePoint(int wait_ms, const UnsafeCode& unsafe, std::string* error);
  // Waits for the thread's next stop or end, at most wait_ms (-1: no limit). 1: *status
  // holds it; 0: the time ran out; -1: waitpid failed.
  int WaitForStop(int* status, int wait_ms);
  // Lets go of the thread, delivering `signal` (0: none).
  void Detach(int signal);

  pid_t pid_ = 0;
  pid_t tid_ = 0;
  int mem_fd_ = -1;
  bool seized_ = false;
  bool changed_ = false;             // registers set since the stop
  user_regs_struct saved_{};         // the registers as the thread was stopped
  bool restart_syscall_ = false;     // stopped at a system call's entry: make it again
  uint64_t errno_address_ = 0;
  int saved_errno_ = 0;
};

}  // namespace memlens::attach
