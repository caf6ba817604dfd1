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

namespace memlens::agent {

void NoteModulesChanged();
void BeforeDlclose();  // lets the writer intern the closing library's frames first
// exec: the capture is made whole for the new image; a failed exec resumes recording.
void PauseBeforeExec();
void ResumeAfterFailedExec();
void StopBeforeExit(int status);
// The agent's handler for a fatal signal (fatal_signals.h): finishes the capture.
void FinishOnFatalSignal(int signo);
// This process (not a forked child) is recording now.
bool RecordingHere();

}  // namespace memlens::agent
