// src/agent/hooks/signal_interposers.cc
//
// sigaction and the three forms of signal(): the program sets and sees its own signal
// dispositions exactly as without memlens, while the agent's stand-in for a fatal default
// action stays invisible (fatal_signals.h). The signal() forms are built on sigaction here, as
// the C library builds them (its own calls of sigaction would not come through us).
//
// Runs on: application threads, possibly in signal handlers. No allocation.
#include <errno.h>
#include <signal.h>

#include "agent/fatal_signals.h"

namespace {

sighandler_t SignalWith(int signo, sighandler_t handler, bool one_shot) {
  if (handler == SIG_ERR || signo <= 0 || signo >= NSIG) {
    errno = EINVAL;
    return SIG_ERR;
  }
  struct sigaction sa {}, old {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  if (one_shot) {  // System V: reset on delivery, not blocked while it runs, no restart
    sa.sa_flags = SA_RESETHAND | SA_NODEFER;
  } else {  // BSD (glibc's signal): blocked while it runs, interrupted calls restarted
    sigaddset(&sa.sa_mask, signo);
    sa.sa_flags = SA_RESTART;
  }
  if (memlens::agent::ProgramSigaction(signo, &sa, &old) != 0) return SIG_ERR;
  return old.sa_handler;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int sigaction(int signo, const struct sigaction* act,
                                                     struct sigaction* old) {
  return memlens::agent::ProgramSigaction(signo, act, old);
}

__attribute__((visibility("default"))) sighandler_t signal(int signo, sighandler_t handler) {
  return SignalWith(signo, handler, false);
}

__attribute__((visibility("default"))) sighandler_t bsd_signal(int signo, sighandler_t handler) {
  return SignalWith(signo, handler, false);
}

__attribute__((visibility("default"))) sighandler_t sysv_signal(int signo, sighandler_t handler) {
  return SignalWith(signo, handler, true);
}

}  // extern "C"
