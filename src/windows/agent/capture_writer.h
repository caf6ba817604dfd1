// src/windows/agent/capture_writer.h
//
// CaptureWriter: the Windows agent's writer thread. Every 10 ms (sooner when a ring fills) it
// drains each thread's ring, interns the stacks (agent/writer/stack_interner.h), writes the
// module records the loader's notifications described, and encodes the events with the
// capture format's encoder; every 100 ms (or 64 Ki events) the records become one chunk,
// compressed and written: a process that dies without warning leaves a capture readable up to
// its last chunk. The events are the hooks' own (hooks.cc decides what each call is); a custom
// heap's block events get their heap's (and type's) annotation frames here.
//
// Runs on: its own thread (Run), and on the thread that ends the recording when the writer
// thread is gone (Finish, at process detach). Thread safety: one lock around a cycle's work.
#pragma once

#include <windows.h>

#include <cstdint>
#include <string>
#include <vector>

#include "agent/writer/stack_interner.h"
#include "format/chunk.h"
#include "format/record_encoder.h"
#include "windows/agent/module_list.h"
#include "windows/agent/thread_rings.h"

namespace memlens::windows {

class CaptureWriter {
 public:
  // `file`: the capture, opened for writing; the writer owns it from now on.
  CaptureWriter(HANDLE file, const format::ProcessRecord& process);
  ~CaptureWriter() = delete;  // lives as long as the process

  // The writer thread's body; returns once Stop was called and the capture is finished.
  void Run();
  // Asks Run to finish; waits up to `timeout_ms` for it. False when it did not, or when the
  // writer thread has not started yet (then Finish).
  bool Stop(HANDLE thread, format::EndReason reason, int64_t detail, DWORD timeout_ms);
  // Finishes the capture on the calling thread, when the writer thread is gone; skipped when
  // that thread died inside a cycle (its records are then lost past the last chunk).
  void Finish(format::EndReason reason, int64_t detail);
  // A library the loader just mapped (any thread, under the loader's lock): described there,
  // so that its record is written even when it is unloaded before the writer's next cycle.
  void Announce(LoadedModule module);
  // A library is being unloaded (any thread, under the loader's lock): its unload record is
  // written after the events drained in the writer's next cycle.
  void AnnounceUnload(uint64_t base);
  // Everything appended before the call is in the file when it returns true (memlens_flush).
  bool FlushNow(DWORD timeout_ms);

 private:
  void Cycle();
  void Drain(ThreadRing* ring);
  void AddEvent(uint32_t thread, const RingEvent& e, const uint64_t* frames);
  bool AsCustomHeapEvent(uint32_t thread, const RingEvent& e, const uint64_t* frames, uint32_t heap,
                         format::Event* out);
  void DescribeString(uint64_t id);
  uint64_t InternStack(const uint64_t* frames, int count, uint64_t custom_heap);
  void WriteModule(LoadedModule& module);
  void WriteUnloads(const std::vector<uint64_t>& bases);
  void Flush();
  void WriteEnd();
  void Write(const std::string& bytes);
  uint64_t SinceStartNs() const;

  HANDLE file_;
  CRITICAL_SECTION lock_;
  HANDLE finished_event_ = nullptr;  // set once the END record is written
  volatile LONG started_ = 0;  // Run has begun
  volatile LONG stop_ = 0;
  volatile LONG flush_requested_ = 0;
  volatile LONG flush_done_ = 0;
  format::EndReason end_reason_ = format::EndReason::kExit;
  int64_t end_detail_ = 0;
  bool finished_ = false;
  uint64_t start_ns_ = 0;
  uint64_t last_flush_ns_ = 0;
  uint64_t dropped_written_ = 0;

  std::string meta_;
  format::RecordEncoder meta_encoder_;
  format::RecordEncoder event_encoder_;
  format::ChunkCompressor compressor_;
  std::string chunk_;
  agent::StackInterner interner_;
  std::vector<uint64_t> stack_;  // innermost first, annotations in front

  struct KnownModule {
    uint64_t id, start, end;
    HMODULE handle;
    bool loaded;
  };
  std::vector<KnownModule> modules_;
  SRWLOCK announced_lock_ = SRWLOCK_INIT;
  std::vector<LoadedModule> announced_;  // under announced_lock_
  std::vector<uint64_t> unloaded_;       // bases, under announced_lock_
  uint64_t next_module_id_ = 1;
  std::vector<bool> threads_written_;
  std::vector<bool> strings_written_;
};

}  // namespace memlens::windows
