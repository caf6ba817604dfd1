// src/agent/writer/writer.h
//
// The writer thread inside the program: runs the writer's loop (writer_core.h) over the
// program's own memory. Under `memlens run` with an exchange (exchange.h), the loop runs in
// `memlens run` instead and these calls reach it through the exchange's control words.
//
// Runs on: its own thread, with every signal blocked and recording disabled for itself.
// StartWriter/RequestWriterStop/WaitForWriter are called by agent.cc on application threads
// (WaitForWriter also from a signal handler: it only polls atomics and sleeps).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "format/records.h"

namespace memlens::agent {

struct WriterControl;
// Where the writer and the program's threads meet: the agent's own words, or the exchange's
// (g_control_shared: its futex is then not a private one).
extern WriterControl g_local_control;  // the in-process writer's
extern WriterControl* g_control;
extern bool g_control_shared;

// The records that name a Python code object and an API string, from the agent's tables.
format::PythonCodeRecord PythonCodeRecordOf(uint64_t id);
format::StringRecord StringRecordOf(uint64_t id);

// Writes to the owned descriptor in fd_slot (owned_fds.h), opened at `path`, and closes it at
// the end. Called again for each span (agent.h), once the last writer has finished. write_file_header is false when appending to the capture of the image this one
// replaced by exec. Returns false when the thread cannot be started.
bool StartWriter(int fd_slot, const std::string& path, const format::ProcessRecord& process,
                 bool write_file_header);
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
// Waits (at most timeout_ms) until everything committed so far is written to the file, in
// whole chunks a reader can read (memlens_flush).
void FlushWriter(int timeout_ms);
// A marker or a snapshot request is about to be recorded: when the writer's cost rule allows a
// reading of the mappings now (writer_core.cc), waits (at most timeout_ms) until it has read
// them, so that the reading comes just before the marker and `memlens rss CAPTURE@marker:NAME`
// describes that moment (docs/rss.md). Otherwise returns at once.
void ReadMappingsBeforeMarker(int timeout_ms);
// Drops what the rings still hold from an earlier span (events committed after its writer's
// last round). Only while no writer runs: the caller is then the rings' one consumer.
void DiscardBufferedEvents();
// In a child just forked (agent.cc): the parent's writer is not this process's. Its copy is
// forgotten without a word written (the capture's descriptor closed), so that StartWriter can
// start this process's own.
void ForgetWriterAfterFork();
// The agent's own operator new found no memory: the program has taken it all (under ulimit -v,
// say), and copes with malloc's null, which the agent, built without exceptions, cannot. Waits
// for the program to free some, retrying every millisecond. After kAgentMemoryWaitMs, on the
// writer thread: recording stops for good, with one line on stderr, the capture ends at its last
// chunk and the thread parks (this never returns; the program goes on unrecorded). On another
// thread it returns null (and the caller aborts, as it did before).
void* WaitForAgentMemory(size_t size, size_t alignment);

}  // namespace memlens::agent
