// src/attach/traced_thread.cc: ptrace, registers, and the kernel's system-call restart rules.
#include "attach/traced_thread.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace memlens::attach {
namespace {

#if !defined(__x86_64__)
#error "memlens attach drives x86-64 registers (src/attach/traced_thread.h)"
#endif

constexpr int kSyscallStop = SIGTRAP | 0x80;  // PTRACE_O_TRACESYSGOOD's mark

// The allocator's own system calls: a thread making one may hold the allocator's lock.
bool AllocatorSyscall(uint64_t nr) {
  return nr == SYS_mmap || nr == SYS_munmap || nr == SYS_brk || nr == SYS_mremap ||
         nr == SYS_mprotect || nr == SYS_madvise;
}

bool IsEventStop(int status) { return (status >> 16) == PTRACE_EVENT_STOP; }

int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

std::string EndedMessage(pid_t pid, int status) {
  if (WIFSIGNALED(status)) {
    return "process " + std::to_string(pid) + " was killed by signal " +
           std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  }
  return "process " + std::to_string(pid) + " exited";
}

}  // namespace

bool TracedThread::Seize(pid_t pid, pid_t tid, int wait_ms, const UnsafeCode& unsafe,
                         std::string* error) {
  pid_ = pid;
  tid_ = tid;
  if (ptrace(PTRACE_SEIZE, tid, nullptr, reinterpret_cast<void*>(PTRACE_O_TRACESYSGOOD)) != 0) {
    *error = std::strerror(errno);
    return false;
  }
  seized_ = true;
  mem_fd_ = open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDWR | O_CLOEXEC);
  if (mem_fd_ < 0) {
    *error = "cannot open the process's memory: " + std::string(std::strerror(errno));
    Detach(0);
    return false;
  }
  ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr);
  for (;;) {  // signals that were on their way are delivered first
    int status = 0;
    if (WaitForStop(&status, -1) != 1) {
      *error = "lost the thread while stopping it";
      seized_ = false;
      return false;
    }
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
      *error = EndedMessage(pid_, status);
      seized_ = false;
      return false;
    }
    if (IsEventStop(status)) {
      if (WSTOPSIG(status) != SIGTRAP) {  // a group stop: the process is stopped (SIGSTOP)
        *error = "process " + std::to_string(pid) + " is stopped (" +
                 strsignal(WSTOPSIG(status)) + "): continue it first (kill -CONT " +
                 std::to_string(pid) + ")";
        Detach(0);
        return false;
      }
      break;
    }
    ptrace(PTRACE_CONT, tid, nullptr, reinterpret_cast<void*>(intptr_t{WSTOPSIG(status)}));
  }
  if (ptrace(PTRACE_GETREGS, tid, nullptr, &saved_) != 0) {
    *error = "cannot read the thread's registers: " + std::string(std::strerror(errno));
    Detach(0);
    return false;
  }
  return StopAtSafePoint(wait_ms, unsafe, error);
}

bool TracedThread::StopAtSafePoint(int wait_ms, const UnsafeCode& unsafe, std::string* error) {
  // orig_rax >= 0: stopped on the way out of a system call (interrupted or finished).
  bool in_syscall = static_cast<int64_t>(saved_.orig_rax) >= 0;
  if (in_syscall ? !AllocatorSyscall(saved_.orig_rax) && !unsafe.InLoader(saved_.rip)
                 : !unsafe.InLibc(saved_.rip)) {
    return true;
  }
  int64_t deadline = NowMs() + wait_ms;
  int signal = 0;
  for (;;) {
    ptrace(PTRACE_SYSCALL, tid_, nullptr, reinterpret_cast<void*>(intptr_t{signal}));
    signal = 0;
    int status = 0;
    int waited = WaitForStop(&status, static_cast<int>(std::max<int64_t>(0, deadline - NowMs())));
    if (waited == 1 && (WIFEXITED(status) || WIFSIGNALED(status))) {
      *error = EndedMessage(pid_, status);
      seized_ = false;
      return false;
    }
    if (waited != 1) break;
    if (WSTOPSIG(status) == kSyscallStop) {
      __ptrace_syscall_info info{};
      if (ptrace(PTRACE_GET_SYSCALL_INFO, tid_, reinterpret_cast<void*>(sizeof info), &info) > 0 &&
          info.op == PTRACE_SYSCALL_INFO_ENTRY && !AllocatorSyscall(info.entry.nr) &&
          !unsafe.InLoader(info.instruction_pointer) &&
          ptrace(PTRACE_GETREGS, tid_, nullptr, &saved_) == 0) {
        restart_syscall_ = true;
        return true;
      }
    } else if (!IsEventStop(status)) {
      signal = WSTOPSIG(status);  // the program's: deliver it
    }
  }
  // No safe point in time: stop the thread once more and let it go as it is.
  ptrace(PTRACE_INTERRUPT, tid_, nullptr, nullptr);
  for (;;) {
    int status = 0;
    if (WaitForStop(&status, -1) != 1 || WIFEXITED(status) || WIFSIGNALED(status)) {
      seized_ = false;
      break;
    }
    if (IsEventStop(status) || WSTOPSIG(status) == kSyscallStop) {
      Detach(signal);
      break;
    }
    signal = WSTOPSIG(status);
    ptrace(PTRACE_CONT, tid_, nullptr, nullptr);  // held back: delivered by the detach
  }
  *error = "the thread ran in the C library for " + std::to_string(wait_ms / 1000) +
           " s without a system call where memlens could stop it safely; try again";
  return false;
}

int TracedThread::WaitForStop(int* status, int wait_ms) {
  int64_t deadline = wait_ms < 0 ? 0 : NowMs() + wait_ms;
  for (;;) {
    pid_t got = waitpid(tid_, status, __WALL | (wait_ms < 0 ? 0 : WNOHANG));
    if (got == tid_) return 1;
    if (got < 0 && errno != EINTR) return -1;
    if (wait_ms >= 0) {
      if (NowMs() >= deadline) return 0;
      usleep(1000);
    }
  }
}

bool TracedThread::Call(uint64_t function, std::initializer_list<uint64_t> args, uint64_t* result,
                        std::string* error) {
  if (!seized_) {
    *error = "the thread is not stopped";
    return false;
  }
  // Below the red zone, 16-byte aligned at the call, as the ABI wants; the return address is 0,
  // so the function's return stops the thread with SIGSEGV at address 0.
  uint64_t sp = ((saved_.rsp - 512) & ~uint64_t{15}) - 8;
  const uint64_t return_address = 0;
  if (!Write(sp, &return_address, sizeof return_address, error)) return false;
  user_regs_struct regs = saved_;
  regs.rsp = sp;
  regs.rip = function;
  regs.rax = 0;
  regs.orig_rax = static_cast<uint64_t>(-1);  // no system call restart on the way in
  unsigned long long* slots[] = {&regs.rdi, &regs.rsi, &regs.rdx, &regs.rcx, &regs.r8, &regs.r9};
  size_t i = 0;
  for (uint64_t arg : args) *slots[i++] = arg;
  if (ptrace(PTRACE_SETREGS, tid_, nullptr, &regs) != 0) {
    *error = "cannot set the thread's registers: " + std::string(std::strerror(errno));
    return false;
  }
  changed_ = true;
  int signal = 0;
  for (;;) {
    ptrace(PTRACE_CONT, tid_, nullptr, reinterpret_cast<void*>(intptr_t{signal}));
    signal = 0;
    int status = 0;
    if (WaitForStop(&status, -1) != 1) {
      *error = "lost the thread during the call";
      seized_ = false;
      return false;
    }
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
      *error = EndedMessage(pid_, status) + " during the call";
      seized_ = false;
      return false;
    }
    if (IsEventStop(status) || WSTOPSIG(status) == kSyscallStop) continue;
    if (WSTOPSIG(status) == SIGSEGV) {
      user_regs_struct after;
      if (ptrace(PTRACE_GETREGS, tid_, nullptr, &after) == 0 && after.rip == 0) {
        *result = after.rax;
        return true;
      }
      *error = "the call crashed (SIGSEGV)";
      return false;  // Release puts the registers back: the crash is not delivered
    }
    signal = WSTOPSIG(status);  // the program's own: delivered as it would have been
  }
}

bool TracedThread::Write(uint64_t address, const void* data, size_t size, std::string* error) {
  if (pwrite(mem_fd_, data, size, static_cast<off_t>(address)) == static_cast<ssize_t>(size)) {
    return true;
  }
  *error = "cannot write the process's memory: " + std::string(std::strerror(errno));
  return false;
}

bool TracedThread::Read(uint64_t address, void* data, size_t size) {
  return pread(mem_fd_, data, size, static_cast<off_t>(address)) == static_cast<ssize_t>(size);
}

std::string TracedThread::ReadString(uint64_t address, size_t max) {
  std::string text(max, '\0');
  ssize_t n = pread(mem_fd_, text.data(), max, static_cast<off_t>(address));
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return text.substr(0, text.find('\0'));
}

void TracedThread::KeepErrno(uint64_t errno_address) {
  if (Read(errno_address, &saved_errno_, sizeof saved_errno_)) errno_address_ = errno_address;
}

void TracedThread::Release() {
  if (!seized_) return;
  if (changed_) {
    std::string ignored;
    if (errno_address_) Write(errno_address_, &saved_errno_, sizeof saved_errno_, &ignored);
    user_regs_struct regs = saved_;
    if (restart_syscall_) {  // stopped at its entry, before the kernel ran it: make it again
      regs.rip -= 2;         // `syscall` is two bytes
      regs.rax = regs.orig_rax;
      regs.orig_rax = static_cast<uint64_t>(-1);
    }
    // Otherwise the registers as they were: an interrupted call (rax -ERESTART...) is
    // restarted by the kernel on the way out, as after a signal the program ignores.
    ptrace(PTRACE_SETREGS, tid_, nullptr, &regs);
  }
  Detach(0);
}

void TracedThread::Detach(int signal) {
  ptrace(PTRACE_DETACH, tid_, nullptr, reinterpret_cast<void*>(intptr_t{signal}));
  seized_ = false;
  if (mem_fd_ >= 0) close(mem_fd_);
  mem_fd_ = -1;
}

}  // namespace memlens::attach
