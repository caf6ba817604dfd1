// src/agent/agent.h
//
// The agent's life cycle: deciding whether this process records, starting the writer when the
// library is initialized, and finishing the capture on every way out (exit, _exit, exec, fatal
// signal). fork: the child does not record; exec: the new image records on, into the same
// capture (docs/agent.md).
//
// Runs on: application threads, and signal handlers (the Stop* functions are async-signal-safe:
// they only touch atomics, sleep and call sigaction).
#pragma once

#include <string>

namespace memlens::agent {

// Spans (memlens_start, memlens_stop, memlens_flush in memlens.h; docs/agent.md, "Spans"), on
// application threads, serialized among themselves. StartSpan records from now on into a new
// capture at `path` (%p, %e; null: MEMLENS_OUTPUT or the default) with `options`
// ("sample_rate=N,sample_exact_from=N,sample_seed=N,python_frames=N,native=0|1,
// python_stacks=0|1,quiet=0|1"); StopSpan
// ends it with an END record (reason "stopped") and returns once the capture is complete. On
// false, *error says why, in one line, and nothing changed.
bool StartSpan(const char* path, const char* options, std::string* error);
bool StopSpan(std::string* error);
// Everything recorded before the call is in the span's capture file when it returns.
void FlushSpan();

// What the agent has to tell the program's user, one line ("memlens: " is put before it):
// written on stderr, unless the span was started with quiet=1 (memlens attach: the program's
// stderr is its own). Then the first such line of the span is kept for QuietNote instead, and
// later ones are dropped (the capture records what went wrong).
void SayToUser(const std::string& line);
// The line kept since the quiet span started ("" for none).
const char* QuietNote();
// A quiet span is recording: writes on stderr that cannot allocate (SayToUser's callers that
// must not) are skipped.
bool Quiet();

// memlens run --follow-children: the processes this one starts record too, each into a capture
// of its own, when they exec a program (docs/agent.md, "Processes").
bool FollowingChildren();

void NoteModulesChanged();
void BeforeDlclose();  // lets the writer intern the closing library's frames first
// exec: the capture is made whole for the new image; a failed exec resumes recording.
// path: the program's, or null when the C library searches PATH for it; envp: the new image's
// environment. Returns the environment to exec with: envp, or a copy of it whose memlens
// variables name this process's capture (a forked child's: agent.cc).
char* const* PauseBeforeExec(const char* path, char* const envp[]);
void ResumeAfterFailedExec();
void StopBeforeExit(int status);
// The agent's handler for a fatal signal (fatal_signals.h): finishes the capture.
void FinishOnFatalSignal(int signo);
// This process (not a forked child) is recording now.
bool RecordingHere();

}  // namespace memlens::agent
