// src/agent/fatal_signals.h
//
// Every event made before a fatal signal reaches the capture. For each signal whose default
// action ends the process (SIGPIPE, SIGTERM, SIGSEGV, ... and the real-time signals) and whose
// disposition is the default, the agent installs a handler that finishes the capture, restores
// the default action and raises the signal again: the process dies of the same signal, with
// the same core dump and the same status seen by its parent.
//
// The program never sees the stand-in: sigaction, signal, bsd_signal and sysv_signal are
// interposed (hooks/signal_interposers.cc) so that asking for a disposition the agent stands
// in for answers what the program (or its parent) set, SIG_DFL; setting SIG_DFL keeps (or puts
// back) the stand-in; anything else replaces it, as it replaces SIG_DFL. Ignored signals stay
// ignored (and are inherited as SIG_IGN across exec, as before). exec resets handlers, the
// stand-in included, to SIG_DFL; a forked child keeps it, and dies of the signal as before.
//
// Runs on: application threads, the handler in any thread that takes the signal.
#pragma once

#include <signal.h>

namespace memlens::agent {

// At start, after the writer runs: stand in for every fatal signal left at its default.
void InstallFatalSignalHandlers();

// The interposed sigaction: see above. (The agent's own calls use real::sigaction.)
int ProgramSigaction(int signo, const struct sigaction* act, struct sigaction* old);

}  // namespace memlens::agent
