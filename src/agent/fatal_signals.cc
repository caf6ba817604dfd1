// src/agent/fatal_signals.cc: see fatal_signals.h.
#include "agent/fatal_signals.h"

#include <errno.h>
#include <string.h>

#include <atomic>

#include "agent/agent.h"
#include "agent/hooks/real_functions.h"

namespace memlens::agent {
namespace {

// The signals whose default action is to end the process (signal(7)), apart from the
// real-time ones, and SIGKILL and SIGSTOP, which nobody can catch.
constexpr int kFatalSignals[] = {SIGHUP,  SIGINT,    SIGQUIT, SIGILL,  SIGTRAP, SIGABRT,
                                 SIGBUS,  SIGFPE,    SIGUSR1, SIGSEGV, SIGUSR2, SIGPIPE,
                                 SIGALRM, SIGTERM,   SIGSTKFLT, SIGXCPU, SIGXFSZ, SIGVTALRM,
                                 SIGPROF, SIGIO,     SIGPWR,  SIGSYS};

bool KillsByDefault(int signo) {
  for (int s : kFatalSignals) {
    if (s == signo) return true;
  }
  return signo >= SIGRTMIN && signo <= SIGRTMAX;
}

// What the program last set (or found) as the default action of each signal we stand in for,
// mask and flags included: a query gets it back as it was.
struct sigaction g_program_default[NSIG];

int RealSigaction(int signo, const struct sigaction* act, struct sigaction* old) {
  real::EnsureResolved();
  return real::sigaction(signo, act, old);
}

void OnFatalSignal(int signo) {
  int saved_errno = errno;
  FinishOnFatalSignal(signo);
  // Die the way the program would have without us.
  struct sigaction dfl = g_program_default[signo];
  dfl.sa_handler = SIG_DFL;
  RealSigaction(signo, &dfl, nullptr);
  raise(signo);  // blocked in this handler: delivered (and fatal) as soon as it returns
  errno = saved_errno;
}

bool IsStandIn(const struct sigaction& sa) {
  return !(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == OnFatalSignal;
}

struct sigaction StandIn() {
  struct sigaction sa {};
  sa.sa_handler = OnFatalSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  return sa;
}

}  // namespace

void InstallFatalSignalHandlers() {
  const struct sigaction stand_in = StandIn();
  for (int signo = 1; signo < NSIG; ++signo) {
    if (!KillsByDefault(signo)) continue;
    struct sigaction old {};
    if (RealSigaction(signo, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) continue;
    g_program_default[signo] = old;
    RealSigaction(signo, &stand_in, nullptr);
  }
}

int ProgramSigaction(int signo, const struct sigaction* act, struct sigaction* old) {
  struct sigaction stand_in;
  const struct sigaction* use = act;
  const bool valid = signo > 0 && signo < NSIG;
  if (act && valid && act->sa_handler == SIG_DFL && KillsByDefault(signo) && RecordingHere()) {
    stand_in = StandIn();
    use = &stand_in;
  }
  struct sigaction previous;
  int rc = RealSigaction(signo, use, &previous);
  if (rc != 0) return rc;
  if (old) *old = IsStandIn(previous) ? g_program_default[signo] : previous;
  if (use == &stand_in) {
    // As the kernel would hold it: the C library adds its restorer to every action it sets.
    g_program_default[signo] = *act;
    constexpr int kRestorerFlag = 0x04000000;  // SA_RESTORER, which <signal.h> does not show
    g_program_default[signo].sa_flags |= previous.sa_flags & kRestorerFlag;
    g_program_default[signo].sa_restorer = previous.sa_restorer;
  }
  return 0;
}

}  // namespace memlens::agent
