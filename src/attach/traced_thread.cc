// src/attach/traced_thread.cc: ptrace, registers, and the kernel's system-call restart rules.
#include "attach/traced_thread.h"

#include <elf.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "attach/process_objects.h"

namespace memlens::attach {
namespace {

#if !defined(__x86_64__)
#error "memlens attach drives x86-64 registers (src/attach/traced_thread.h)"
#endif

constexpr int kSyscallStop = SIGTRAP | 0x80;  // PTRACE_O_TRACESYSGOOD's mark
constexpr size_t kXstateBytes = 16384;        // the largest XSAVE area (AMX) fits
constexpr int kCallNoticeMs = 10000;          // a call this long is said to be slow

// System calls a thread makes holding no lock of the C library's or the loader's: where it may
// be borrowed. Not the allocator's (mmap, brk...), not fork/clone (which hold every malloc
// lock), not open or close (stdio's and the loader's), not signal or thread-setup calls.
constexpr long kSafeSyscalls[] = {
    SYS_read,          SYS_readv,         SYS_pread64,       SYS_preadv,
    SYS_write,         SYS_writev,        SYS_pwrite64,      SYS_recvfrom,
    SYS_recvmsg,       SYS_recvmmsg,      SYS_sendto,        SYS_sendmsg,
    SYS_accept,        SYS_accept4,       SYS_connect,       SYS_poll,
    SYS_ppoll,         SYS_select,        SYS_pselect6,      SYS_epoll_wait,
    SYS_epoll_pwait,   SYS_nanosleep,     SYS_clock_nanosleep, SYS_wait4,
    SYS_waitid,        SYS_pause,         SYS_rt_sigsuspend, SYS_rt_sigtimedwait,
    SYS_futex,         SYS_sched_yield,   SYS_msgrcv,        SYS_semop,
};

bool SafeSyscall(uint64_t nr) {
  for (long safe : kSafeSyscalls) {
    if (static_cast<uint64_t>(safe) == nr) return true;
  }
  return false;
}

bool IsEventStop(int status) { return (status >> 16) == PTRACE_EVENT_STOP; }

int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// The process ignores SIGSEGV (SigIgn in /proc/PID/status): a call's return, a SIGSEGV at
// address 0, would then reset it to the default (the kernel does so for a forced signal).
bool IgnoresSegv(pid_t pid) {
  std::string ignored = StatusField(pid, "SigIgn");
  return !ignored.empty() && ((std::stoull(ignored, nullptr, 16) >> (SIGSEGV - 1)) & 1);
}

}  // namespace

bool TracedThread::Ended(int status, std::string* error) {
  const bool exiting = (status >> 8) == (SIGTRAP | (PTRACE_EVENT_EXIT << 8));
  if (!WIFEXITED(status) && !WIFSIGNALED(status) && !exiting) return false;
  *error = WIFSIGNALED(status) ? "process " + std::to_string(pid_) + " was killed by signal " +
                                     std::to_string(WTERMSIG(status)) + " (" +
                                     strsignal(WTERMSIG(status)) + ")"
                               : "process " + std::to_string(pid_) + "'s main thread exited";
  if (exiting) ptrace(PTRACE_DETACH, tid_, nullptr, nullptr);  // it goes on exiting
  seized_ = false;
  if (mem_fd_ >= 0) close(mem_fd_);
  mem_fd_ = -1;
  return true;
}

bool TracedThread::SafeHere(const Loader& loader) {
  if (static_cast<int64_t>(saved_.orig_rax) < 0 || !SafeSyscall(saved_.orig_rax) ||
      loader.Contains(saved_.rip)) {
    return false;
  }
  int32_t r_state = 0;  // struct r_debug: r_version, r_map, r_brk, then r_state (RT_CONSISTENT 0)
  return loader.r_debug == 0 || (Read(loader.r_debug + 24, &r_state, sizeof r_state) && r_state == 0);
}

bool TracedThread::Seize(pid_t pid, pid_t tid, int wait_ms, const Loader& loader,
                         std::string* error) {
  pid_ = pid;
  tid_ = tid;
  if (ptrace(PTRACE_SEIZE, tid, nullptr,
             reinterpret_cast<void*>(PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACEEXIT)) != 0) {
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
  if (IgnoresSegv(pid)) {
    *error = "process " + std::to_string(pid) + " ignores SIGSEGV, which memlens's calls in it "
             "would reset: memlens cannot attach to it";
    Detach(0);
    return false;
  }
  ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr);
  for (;;) {  // signals that were on their way are delivered first
    int status = 0;
    if (WaitForStop(&status, -1) != 1) {
      *error = "lost the thread while stopping it";
      Detach(0);  // gone: nothing to put back
      return false;
    }
    if (Ended(status, error)) return false;
    if (IsEventStop(status)) {
      if (WSTOPSIG(status) != SIGTRAP) {  // a group stop: the process is stopped (SIGSTOP)
        *error = "process " + std::to_string(pid) + " is stopped (SIGSTOP or Ctrl-Z): continue "
                 "it first (kill -CONT " + std::to_string(pid) + ")";
        Detach(0);  // it stays stopped
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
  // orig_rax >= 0: stopped in a system call (blocked and interrupted, or just finished).
  if (!SafeHere(loader) && !StopAtSafePoint(wait_ms, loader, error)) return false;
  return Borrow(error);
}

bool TracedThread::AtSafeSyscallExit(const Loader& loader) {
  __ptrace_syscall_info info{};
  return ptrace(PTRACE_GET_SYSCALL_INFO, tid_, reinterpret_cast<void*>(sizeof info), &info) > 0 &&
         info.op == PTRACE_SYSCALL_INFO_EXIT &&
         ptrace(PTRACE_GETREGS, tid_, nullptr, &saved_) == 0 && SafeHere(loader);
}

// Runs the thread from system call to system call until one of the safe ones returns (its
// exit stop), at most wait_ms.
bool TracedThread::StopAtSafePoint(int wait_ms, const Loader& loader, std::string* error) {
  int64_t deadline = NowMs() + wait_ms;
  int signal = 0;
  for (;;) {
    ptrace(PTRACE_SYSCALL, tid_, nullptr, reinterpret_cast<void*>(intptr_t{signal}));
    signal = 0;
    int status = 0;
    int waited = WaitForStop(&status, static_cast<int>(std::max<int64_t>(0, deadline - NowMs())));
    if (waited != 1) return GiveUp(loader, error);
    if (Ended(status, error)) return false;
    if (WSTOPSIG(status) == kSyscallStop) {
      if (AtSafeSyscallExit(loader)) return true;
    } else if (IsEventStop(status)) {
      if (WSTOPSIG(status) != SIGTRAP) {
        *error = "process " + std::to_string(pid_) + " was stopped (SIGSTOP) while memlens "
                 "waited for it: continue it and try again";
        Detach(0);
        return false;
      }
    } else {
      signal = WSTOPSIG(status);  // the program's: delivered as the thread goes on
    }
  }
}

// No safe point in time: stop the thread where it is (a blocked call returns at once, and may
// be a safe one after all) and let it go.
bool TracedThread::GiveUp(const Loader& loader, std::string* error) {
  ptrace(PTRACE_INTERRUPT, tid_, nullptr, nullptr);
  for (;;) {
    int status = 0;
    if (WaitForStop(&status, -1) != 1) {
      Detach(0);  // gone: nothing to put back
      break;
    }
    if (Ended(status, error)) return false;
    if (WSTOPSIG(status) == kSyscallStop) {
      if (AtSafeSyscallExit(loader)) return true;  // interrupted in a safe call
      ptrace(PTRACE_SYSCALL, tid_, nullptr, nullptr);
      continue;
    }
    if (IsEventStop(status)) {
      Detach(0);
      break;
    }
    ptrace(PTRACE_SYSCALL, tid_, nullptr, reinterpret_cast<void*>(intptr_t{WSTOPSIG(status)}));
  }
  *error = "the process's main thread made no system call where memlens may stop it (a wait, "
           "a read, a sleep) in time: try again while it waits (busy computing, it is never "
           "stopped: it could hold a lock memlens needs)";
  return false;
}

// Before the first call: the thread's signal mask (signals are blocked while it is borrowed,
// but SIGSEGV, by which each call returns) and its vector and x87 registers are saved.
bool TracedThread::Borrow(std::string* error) {
  if (ptrace(PTRACE_GETSIGMASK, tid_, reinterpret_cast<void*>(sizeof saved_mask_),
             &saved_mask_) != 0) {
    *error = "cannot read the thread's signal mask: " + std::string(std::strerror(errno));
    Detach(0);
    return false;
  }
  xstate_.assign(kXstateBytes, 0);
  iovec xstate{xstate_.data(), xstate_.size()};
  if (ptrace(PTRACE_GETREGSET, tid_, reinterpret_cast<void*>(NT_X86_XSTATE), &xstate) != 0) {
    *error = "cannot read the thread's vector registers: " + std::string(std::strerror(errno));
    Detach(0);
    return false;
  }
  xstate_.resize(xstate.iov_len);
  uint64_t blocked = ~uint64_t{0} & ~(uint64_t{1} << (SIGSEGV - 1));
  ptrace(PTRACE_SETSIGMASK, tid_, reinterpret_cast<void*>(sizeof blocked), &blocked);
  borrowed_ = true;
  return true;
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
  if (ptrace(PTRACE_CONT, tid_, nullptr, nullptr) != 0) {
    *error = "cannot resume the thread: " + std::string(std::strerror(errno));
    return false;
  }
  int64_t started = NowMs();
  bool noticed = false;
  for (;;) {
    int status = 0;
    int waited = WaitForStop(&status, 1000);
    if (waited == 0) {
      if (!noticed && NowMs() - started > kCallNoticeMs) {
        noticed = true;  // never abandoned: the thread would return to address 0 untraced
        std::string notice = "memlens: the process's main thread has not returned from memlens's "
                             "call for 10 s; waiting on (stopping memlens now would crash it)\n";
        ssize_t ignored = write(2, notice.data(), notice.size());
        (void)ignored;
      }
      continue;
    }
    if (waited < 0) {
      *error = "lost the thread during the call";
      Detach(0);  // gone: nothing to put back
      return false;
    }
    if (Ended(status, error)) {
      *error += " during the call";
      return false;
    }
    if (IsEventStop(status) || WSTOPSIG(status) == kSyscallStop) {
      ptrace(PTRACE_CONT, tid_, nullptr, nullptr);  // a stop of the whole process: brief
      continue;
    }
    if (WSTOPSIG(status) == SIGSTOP) {  // not blockable: held until the thread is let go
      stop_pending_ = true;
      ptrace(PTRACE_CONT, tid_, nullptr, nullptr);
      continue;
    }
    user_regs_struct after;
    if (WSTOPSIG(status) == SIGSEGV && ptrace(PTRACE_GETREGS, tid_, nullptr, &after) == 0 &&
        after.rip == 0) {
      *result = after.rax;
      return true;
    }
    // Only a fault can stop it here (its other signals are blocked): the call crashed.
    *error = std::string("the call crashed (") + strsignal(WSTOPSIG(status)) + ")";
    return false;  // Release puts the registers back: the fault is not delivered
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
  bool restored = true;
  if (changed_) {
    std::string ignored;
    if (errno_address_) Write(errno_address_, &saved_errno_, sizeof saved_errno_, &ignored);
    // The registers as they were: a call that was interrupted (rax -ERESTART...) is restarted,
    // or returns EINTR, by the kernel's own rules on the way out.
    restored = ptrace(PTRACE_SETREGS, tid_, nullptr, &saved_) == 0;
  }
  if (borrowed_) {
    iovec xstate{xstate_.data(), xstate_.size()};
    restored &= ptrace(PTRACE_SETREGSET, tid_, reinterpret_cast<void*>(NT_X86_XSTATE), &xstate) == 0;
    // Signals that came meanwhile are pending: delivered now, with the restart rules.
    restored &= ptrace(PTRACE_SETSIGMASK, tid_, reinterpret_cast<void*>(sizeof saved_mask_),
                       &saved_mask_) == 0;
    borrowed_ = false;
  }
  if (!restored) {
    std::string notice = "memlens: could not put back all of process " + std::to_string(pid_) +
                         "'s main thread's state: " + std::strerror(errno) + "\n";
    ssize_t ignored = write(2, notice.data(), notice.size());
    (void)ignored;
  }
  Detach(stop_pending_ ? SIGSTOP : 0);
}

void TracedThread::Detach(int signal) {
  ptrace(PTRACE_DETACH, tid_, nullptr, reinterpret_cast<void*>(intptr_t{signal}));
  seized_ = false;
  if (mem_fd_ >= 0) close(mem_fd_);
  mem_fd_ = -1;
}

}  // namespace memlens::attach
