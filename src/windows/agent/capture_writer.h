// src/windows/agent/capture_writer.h
//
// CaptureWriter: the Windows agent's writer thread. Every 10 ms (sooner when a ring fills) it
// drains each thread's ring, interns the stacks (agent/writer/stack_interner.h), writes module
// records for the modules the stacks reach, and encodes the events with the capture format's
// encoder; every 100 ms (or 64 Ki events) the records become one chunk, compressed and
// written: a process that dies without warning leaves a capture readable up to its last chunk.
//
// What a ring's event becomes: the CRT's and the process heap's blocks are heap allocations
// (kMalloc...); a heap made by HeapCreate while recording is a custom heap ("HeapCreate #N",
// kHeapCreate/kHeapAlloc/kHeapFree/kHeapDestroy: destroying it releases its blocks at once);
// VirtualAlloc and VirtualFree are mappings (kMmap, kMmapReserved, kProtect, kMunmap,
// kProtectNone).
//
// Runs on: its own thread (Run), and on the thread that ends the recording when the writer
// thread is gone (Finish, at process detach). Thread safety: one lock around a cycle's work.
#pragma once

#include <windows.h>

#include <cstdint>
#include <string>
#include <unordered_map>
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
  // Asks Run to finish; waits up to `timeout_ms` for it. False when it did not (then Finish).
  bool Stop(HANDLE thread, format::EndReason reason, int64_t detail, DWORD timeout_ms);
  // Finishes the capture on the calling thread, when the writer thread is gone; skipped when
  // that thread died inside a cycle (its records are then lost past the last chunk).
  void Finish(format::EndReason reason, int64_t detail);
  // A library the loader just mapped (any thread, under the loader's lock): described there,
  // so that its record is written even when it is unloaded before the writer's next cycle.
  void Announce(LoadedModule module);
  // A library is being unloaded: its unload record is written after the events before it.
  void NoteModulesChanged() { modules_changed_ = 1; }
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
  void KnowAddress(uint64_t ip);
  void RescanModules();
  void WriteModule(LoadedModule& module);
  void WriteUnloads();
  void Flush();
  void WriteEnd();
  void Write(const std::string& bytes);
  uint64_t SinceStartNs() const;

  HANDLE file_;
  CRITICAL_SECTION lock_;
  volatile LONG modules_changed_ = 0;
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
  uint64_t next_module_id_ = 1;
  std::vector<bool> threads_written_;
  std::unordered_map<uint64_t, uint32_t> private_heaps_;  // HeapCreate's handle -> heap id
  std::vector<bool> strings_written_;
  // Per thread index: the block a HeapReAlloc on a custom heap is releasing (its kReallocOld),
  // written as a kHeapFree once the new block is known, dropped when the call failed.
  std::unordered_map<uint32_t, RingEvent> pending_heap_release_;
};

}  // namespace memlens::windows
