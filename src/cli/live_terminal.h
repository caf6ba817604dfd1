// src/cli/live_terminal.h
//
// The live view in a terminal (`memlens live CAPTURE`, `memlens run --live`): every interval it
// loads the capture at its end as the agent has written it so far (the agent writes a chunk at
// least every 100 ms), builds the live view (analyzer/views/live.h) and draws it on the
// terminal's alternate screen; keys sort, filter, pause and quit. It loads at idle priority
// (SCHED_IDLE): with the CPU time the program leaves, so the program never runs slower for it. It only ever reads the
// capture: quitting leaves the program running and the capture as it is, and the program never
// waits on the view (a slow view shows an older moment, nothing more).
//
// Runs on: the calling thread (memlens live's main thread, or a thread of memlens run).
#pragma once

#include <signal.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace memlens::cli {

struct LiveSettings {
  std::string capture;
  double interval_seconds = 1.0;
  // Set by memlens run when its program has ended and the capture is complete (the view then
  // says so and stops loading); null for memlens live, which reads the END record.
  const std::atomic<bool>* program_ended = nullptr;
  // memlens live: Ctrl-C, SIGTERM and SIGHUP close the view. memlens run --live keeps its own
  // handlers (it forwards signals to the program); there only q closes the view.
  bool own_signals = true;
  // memlens run --live: once the program has ended, the view closes by itself when this is
  // set (memlens run passed a SIGTERM or SIGHUP on to the program: nobody waits to press q).
  const volatile sig_atomic_t* close_after_end = nullptr;
};

// The calling thread gets only the CPU time others leave (SCHED_IDLE, else nice 19): the live
// views load the capture so.
void RunAtIdlePriority();

// Why `memlens run --live` cannot draw on this terminal ("" when it can): there is none, or
// the program would read or write it too (its standard input, output or error is a terminal).
std::string LiveTerminalRefusal();

// Runs the view on the controlling terminal until the user quits (q, Ctrl-C). Returns 0, or
// prints one line and returns kExitBadInput when there is no terminal.
int RunLiveTerminal(const LiveSettings& settings);

// Has process `pid` drop a marker (or ask for a snapshot) named `name` now, through `memlens
// mark` run as a process of its own (the tracer must not be memlens run, which waits for its
// program): what it said, one line. The terminal's keys m and n, the web page's buttons.
std::string AskForMoment(uint64_t pid, const std::string& name, bool snapshot);

// One frame of the view as plain text, `width` columns (`memlens live --once`): 0, or one line
// on stderr and kExitBadInput when the capture cannot be read.
int PrintLiveFrame(const std::string& capture, int width);

}  // namespace memlens::cli
