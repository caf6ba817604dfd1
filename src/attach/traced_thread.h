// src/attach/traced_thread.h
//
// TracedThread: one thread of another process, stopped with ptrace where a function call is
// safe, made to call functions of its own process (the C library's dlopen, the agent's
// memlens_start_with), then let go exactly as it was. This is how `memlens attach` loads the
// agent into a running program and how `memlens detach` stops it.
//
// Where the thread is stopped (docs/attach.md, "How the agent gets in"): only at a system call
// of a short list that holds no lock of the C library's (kSafeSyscalls in the .cc: reads,
// writes, waits, sleeps, polls, futex), made outside the dynamic loader and while no dlopen or
// dlclose is under way (the loader's r_state; a library's constructor may wait on a read):
// - blocked in one (a server in accept, a Python program in sleep or read): interrupted there;
//   on release the kernel restarts it, or returns EINTR, as after a signal;
// - otherwise the thread runs on to the return of its next such call. No stop in user code:
//   an allocator or an interpreter may hold a lock there. A thread that makes no such call
//   within the time given is let go untouched and Seize fails.
// While the thread is borrowed its signals are blocked (but SIGSEGV, by which a call returns):
// the program's signals wait, and are delivered on release with the usual restart rules. Its
// general, vector and x87 registers, errno and signal mask are put back on release. The
// process's other threads run on throughout.
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
#include <vector>

namespace memlens::attach {

class TracedThread {
 public:
  TracedThread() = default;
  TracedThread(const TracedThread&) = delete;
  TracedThread& operator=(const TracedThread&) = delete;
  ~TracedThread() { Release(); }

  // Where the dynamic loader is mapped in the process, [begin, end), and its _r_debug (0:
  // unknown), whose r_state says whether a dlopen or dlclose is under way.
  struct Loader {
    uint64_t begin = 0, end = 0;
    uint64_t r_debug = 0;
    bool Contains(uint64_t pc) const { return pc >= begin && pc < end; }
  };

  // Seizes thread `tid` of process `pid` and stops it at a safe point (above), waiting at most
  // `wait_ms` for one. False with a one-line reason (the thread is then untouched and free).
  bool Seize(pid_t pid, pid_t tid, int wait_ms, const Loader& loader, std::string* error);

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

  // Puts the registers, errno (when KeepErrno was called) and signal mask back and lets the
  // thread go.
  void Release();
  // Saves the thread's errno, at `errno_address` (what __errno_location returned in it), so
  // that Release puts it back.
  void KeepErrno(uint64_t errno_address);

 private:
  bool StopAtSafePoint(int wait_ms, const Loader& loader, std::string* error);
  // Whether the thread, stopped with saved_ in a system call, may be borrowed there.
  bool SafeHere(const Loader& loader);
  // At a syscall stop: whether it is a safe call's return (saved_ then holds the registers).
  bool AtSafeSyscallExit(const Loader& loader);
  bool GiveUp(const Loader& loader, std::string* error);
  bool Borrow(std::string* error);
  // Waits for the thread's next stop or end, at most wait_ms (-1: no limit). 1: *status
  // holds it; 0: the time ran out; -1: waitpid failed.
  int WaitForStop(int* status, int wait_ms);
  // Lets go of the thread, delivering `signal` (0: none).
  void Detach(int signal);
  bool Ended(int status, std::string* error);

  pid_t pid_ = 0;
  pid_t tid_ = 0;
  int mem_fd_ = -1;
  bool seized_ = false;
  bool borrowed_ = false;            // mask, vector registers saved: Release puts them back
  bool stop_pending_ = false;        // a SIGSTOP came during a call: delivered on release
  bool changed_ = false;             // registers set since the stop
  user_regs_struct saved_{};         // the registers as the thread was stopped
  std::vector<uint8_t> xstate_;      // its vector and x87 state (NT_X86_XSTATE)
  uint64_t saved_mask_ = 0;          // its blocked signals
  uint64_t errno_address_ = 0;
  int saved_errno_ = 0;
};

}  // namespace memlens::attach
