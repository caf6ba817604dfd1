// src/agent/writer/exchange.h
//
// The exchange: one memory file that `memlens run` creates before it starts the program and
// the agent maps (its descriptor is named by MEMLENS_EXCHANGE), so that the writer runs in
// `memlens run` rather than in the program (docs/agent.md, "The hosted writer"). It holds:
//   - the header: the control words both sides meet at (WriterControl), the counters of the
//     END record, and the layout;
//   - the names log: the records the writer cannot make without the program's address space
//     (its process record, modules, Python code names, the API's strings), each encoded by the
//     agent (format/record_encoder.h) and appended before any event can refer to it;
//   - the slots: one ThreadBuffer (header page, Python frames page, ring) per recorded thread.
// The two processes map it at different addresses: everything in it is found by offset, never
// by a pointer, and `memlens run` checks every size and offset it reads from it (a program that
// scribbles over it must not crash memlens run).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "agent/recorder/raw_event.h"
#include "agent/recorder/thread_buffer.h"

namespace memlens::agent {

// The words the writer and the program's threads meet at: in the agent's memory for the
// in-process writer, in the exchange's header for the hosted one.
struct WriterControl {
  std::atomic<uint32_t> wake{0};  // futex: producers bump it and wake the writer
  std::atomic<uint32_t> stop_requested{0};
  std::atomic<uint32_t> modules_changed{0};
  // A new thread found no free ring and made one: the writer looks for exited threads' rings
  // to free at once, not at its usual pace (Writer::RetireExitedThreads).
  std::atomic<uint32_t> ring_wanted{0};
  std::atomic<uint32_t> paused{0};
  std::atomic<uint64_t> rounds{0};  // the writer's progress (drain rounds)
  std::atomic<uint64_t> drain_requested{0};  // DrainNow tickets...
  std::atomic<uint64_t> drain_done{0};       // ...and the last one a finished round covered
  std::atomic<uint64_t> pause_requested{0};  // PauseWriterForExec tickets...
  std::atomic<uint64_t> pause_done{0};       // ...and the last one honoured
  std::atomic<uint64_t> flush_requested{0};  // FlushWriter tickets...
  std::atomic<uint64_t> flush_done{0};       // ...and the last one written to the file
  std::atomic<uint64_t> mappings_requested{0};  // ReadMappingsBeforeMarker tickets...
  std::atomic<uint64_t> mappings_done{0};       // ...and the last one a reading covered
  std::atomic<uint64_t> mappings_due_ns{0};  // CLOCK_MONOTONIC: the cost rule allows a reading
};

// One mapping the agent made for itself (own_mappings.h): start 0 is a free slot, bytes 0 one
// being filled or emptied.
struct OwnMappingSlot {
  std::atomic<uint64_t> start{0};
  std::atomic<uint64_t> bytes{0};
};
// Each ring takes up to four (the ring, its unwinder's state and arrays, the Python hooks'
// frame cache), three under memlens run, whose rings are in the exchange: room for its 512
// rings and the tables. (A full list leaves a mapping out: memlens rss counts it unexplained,
// as it did for 250 rings at 384 slots.)
inline constexpr size_t kOwnMappingSlots = 1600;

inline constexpr uint64_t kExchangeMagic = 0x33787868736d6c6dull;  // "mlmshxx3"
inline constexpr size_t kExchangePage = 4096;
inline constexpr size_t kExchangeLogBytes = size_t{16} << 20;
inline constexpr uint32_t kExchangeSlots = 512;  // threads recorded at once (more: dropped)
// A slot: the ThreadBuffer's page, the Python frames' page, the ring at its largest.
inline constexpr size_t kSlotFramesBytes = kMaxPythonFrames * sizeof(uint64_t);
inline constexpr size_t kSlotHeaderBytes = kExchangePage + kSlotFramesBytes;
inline constexpr size_t kSlotBytes = kSlotHeaderBytes + ThreadBuffer::kMaxHostedCapacity;
inline constexpr size_t kExchangeHeaderBytes = 8 * kExchangePage;  // with its own-mapping list
inline constexpr size_t kExchangeLogOffset = kExchangeHeaderBytes;
inline constexpr size_t kExchangeSlotsOffset = kExchangeLogOffset + kExchangeLogBytes;
inline constexpr size_t kExchangeBytes = kExchangeSlotsOffset + kExchangeSlots * kSlotBytes;
static_assert(sizeof(ThreadBuffer) <= kExchangePage && kSlotFramesBytes % kExchangePage == 0);

struct ExchangeHeader {
  uint64_t magic;  // written by memlens run, with the layout constants above (one build)
  uint64_t bytes;
  WriterControl control;
  // Each image of the program (exec) sets `images` to one more once its log records and its
  // reset slots are published; memlens run then starts a writer for it.
  std::atomic<uint32_t> images;
  // One more as each image starts attaching, before it resets the slots: a writer of an earlier
  // image (one that did not pause in time for the exec) then drains no ring again.
  std::atomic<uint32_t> attached;
  std::atomic<uint64_t> image_log_start;  // the log's length when the last image attached
  std::atomic<uint32_t> slots_used;  // slots [0, slots_used) have been taken at least once
  std::atomic<uint64_t> log_bytes;   // committed bytes of the names log
  std::atomic<uint64_t> dropped;     // events left out for want of room
  std::atomic<uint64_t> unrecorded_children;
  std::atomic<uint64_t> start_monotonic_ns;  // the image's process record's
  std::atomic<uint64_t> sample_rate;  // 0: full tracing (the writer's pace, writer_core.cc)
  std::atomic<uint64_t> eval_begin, eval_end;  // python_support.h: g_eval_begin/end
  // memlens run's process, and 1 once its writer has quit (it failed): the agent then waits
  // for it no more (hosted.h, HostedWriterGone).
  std::atomic<int32_t> host_pid;
  std::atomic<uint32_t> host_gone;
  // What this image's agent mapped for itself outside the exchange (own_mappings.h).
  OwnMappingSlot own_mappings[kOwnMappingSlots];
};
static_assert(sizeof(ExchangeHeader) <= kExchangeHeaderBytes);

// A names-log entry: this header, then `bytes` bytes of encoded records, then padding to 8.
struct ExchangeLogEntry {
  uint32_t bytes;
  uint32_t reserved;
};

}  // namespace memlens::agent
