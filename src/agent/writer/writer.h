// src/agent/writer/writer.h
//
// The writer thread: drains every ThreadBuffer, interns stacks, records modules and threads,
// encodes, compresses and writes chunks to the capture file, at least every 100 ms.
//
// Runs on: its own thread, with every signal blocked and recording disabled for itself.
// StartWriter/RequestWriterStop/WaitForWriter are called by agent.cc on application threads
// (WaitForWriter also from a signal handler: it only polls atomics and sleeps).
#pragma once

#include <cstdint>

#include "format/records.h"

namespace memlens::agent {

// Takes ownership of fd. write_file_header is false when appending to the capture of the image
// this one replaced by exec. Returns false when the thread cannot be started.
bool StartWriter(int fd, const format::ProcessRecord& process, bool write_file_header);
// Asks for a last drain, an END record, and the file closed.
void RequestWriterStop(format::EndReason reason, int64_t detail);
// Waits until the writer has finished, or until timeout_ms pass without progress.
void WaitForWriter(int timeout_ms);
bool IsWriterThread();
// dlopen/dlclose happened: rescan modules on the next round.
void NoteModulesChangedForWriter();
// Before an exec: the writer drains, writes an END record (reason exec) and flushes, then
// writes nothing until ResumeWriter, so the new image can append to a file with no chunk cut
// in half. Waits at most timeout_ms. If the exec fails, ResumeWriter and recording goes on.
void PauseWriterForExec(int timeout_ms);
void ResumeWriter();
// Waits (at most timeout_ms) until the writer has drained everything committed so far. Used
// before dlclose, so frames of the closing library are interned while it is still mapped.
void DrainNow(int timeout_ms);

}  // namespace memlens::agent
