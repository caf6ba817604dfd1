// src/windows/agent/agent.h
//
// The Windows agent's life: started from DllMain when memlens.exe injects memlens_agent.dll
// into a program created suspended (src/windows/launcher), ended once, by whichever comes
// first of ExitProcess, an unhandled exception or the process's detach notification, with the
// capture's last events and its END record written.
//
// Runs on: any thread. Thread safety: Start runs once under the loader lock; End is safe to
// call from several threads at once (the first one ends the recording).
#pragma once

#include <windows.h>

#include <cstdint>

#include "format/records.h"

namespace memlens::windows {

// True between a successful start and the end: the hooks record only then.
bool Recording();
// Drains every thread's events, writes the END record and closes the capture. `detail`: the
// exception code for EndReason::kSignal (an unhandled exception), else 0.
void EndRecording(format::EndReason reason, int64_t detail);
// The program's SetUnhandledExceptionFilter (hooked): its filter runs from the agent's, which
// stays installed, so that a crash still ends the capture. Returns the program's previous one.
LPTOP_LEVEL_EXCEPTION_FILTER ExchangeProgramFilter(LPTOP_LEVEL_EXCEPTION_FILTER filter);
// Everything recorded before the call is in the capture file when it returns (a bounded wait).
void FlushCapture(DWORD timeout_ms);
// The agent's own module (never patched, never recorded).
HMODULE AgentModule();

}  // namespace memlens::windows
