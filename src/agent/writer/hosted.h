// src/agent/writer/hosted.h
//
// The agent's side of the hosted writer (exchange.h, docs/agent.md "The hosted writer"): under
// `memlens run`, the program's rings live in the exchange, and the agent publishes there the
// names the writer in `memlens run` cannot read from the program's memory.
//
// Runs on: application threads (Attach and BeginImage at the start, the Publish calls where a
// name is made: a dlopen, a Python code object, an API string). Never on the allocation path.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "agent/writer/exchange.h"
#include "format/records.h"

namespace memlens::agent {

// The exchange this process's rings live in; null for the in-process writer.
extern ExchangeHeader* g_exchange;
// Nonzero in the process that attached the exchange; zero in a child made without the fork
// handlers (_Fork, a raw clone): the word lives in a page the kernel wipes on fork
// (MADV_WIPEONFORK), and such a child must not touch the parent's shared rings.
extern const volatile uint32_t* g_exchange_attached;
// Called by that child at its first event: it records nothing, and touches the exchange no more.
void LeaveExchangeInChild();
// In a child forked with the handlers that records on its own (agent.cc: memlens run
// --follow-children): the exchange is left as above, its descriptor closed, and the rings' guard
// word is no longer the wiped page.
void LeaveExchangeToRecordHere();

// Maps the exchange named by MEMLENS_EXCHANGE, its slots afresh (an exec's new image), before
// the first event: no allocation. False (nothing changed) when there is none, or it is not this
// build's: the in-process writer then records.
bool AttachExchange();
// The agent will not record (a bad setting, a descendant): the inherited exchange, if any, is
// closed and its variable removed, so that the program sees neither.
void DropExchange();
// This image starts (the agent's constructor): its process record, sampling rule and modules in
// the log; then `memlens run` starts its writer, which drains what the rings hold already.
void BeginHostedImage(const format::ProcessRecord& process, uint64_t sample_rate,
                      uint64_t sample_exact_from);
// A slot for a new thread's ring (kSlotBytes, mapped here), or null when all are taken.
void* TakeExchangeSlot();
// dlopen or dlclose happened: the modules that changed go to the log.
void PublishModules();
// A new Python code object (python_support.h) and a new API string (string_table.h).
void PublishPythonCode(uint64_t id);
void PublishString(uint32_t id);
void PublishEvalLoop(uint64_t begin, uint64_t end);
// Around an exec: the exchange's descriptor is kept across it (and closed again on failure).
void KeepExchangeAcrossExec(bool keep);
// Whether memlens run, which hosts this process's writer, is gone (killed, or its writer quit):
// then, for good, no writer runs (g_writer_running is cleared) and nobody waits for one.
bool HostedWriterGone();
// The counters of the END record the hosted writer cannot read from the program (recorder.h).
inline void NoteHostedCount(std::atomic<uint64_t> ExchangeHeader::*counter) {
  if (g_exchange) (g_exchange->*counter).fetch_add(1, std::memory_order_relaxed);
}

}  // namespace memlens::agent
