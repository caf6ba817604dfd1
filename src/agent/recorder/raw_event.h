// src/agent/recorder/raw_event.h
//
// RawEvent: the fixed-size header of every record an application thread appends to its
// ThreadBuffer; an allocation's return addresses (innermost first) follow it, then, in a
// Python process, the thread's Python frames (innermost first, see python_bridge.h) up to the
// end of the record. A custom heap's block event (HasAnnotationWord) has one more word right
// after the header, before the frames: the heap id (high 32 bits) and the string id of the
// block's type name (low 32 bits, 0 for none). Agent-internal:
// the writer thread turns RawEvents into capture records (src/format/records.h).
#pragma once

#include <cstdint>

#include "format/records.h"

namespace memlens::agent {

struct RawEvent {
  uint64_t seq;          // global order (see Recorder)
  uint64_t address;
  uint64_t size;
  uint8_t kind;          // format::EventKind, or kPadKind
  uint8_t truncated;     // 1 when the stack was deeper than kMaxFrames
  uint16_t frame_count;  // native return addresses that follow this header
  uint32_t record_size;  // bytes of this record, frames included
};
static_assert(sizeof(RawEvent) == 32, "RawEvent is part of the buffer layout");

inline bool HasAnnotationWord(uint8_t kind) {
  return kind == static_cast<uint8_t>(format::EventKind::kHeapAlloc) ||
         kind == static_cast<uint8_t>(format::EventKind::kHeapRealloc) ||
         kind == static_cast<uint8_t>(format::EventKind::kHeapFree);
}

inline constexpr uint8_t kPadKind = 0xff;  // filler up to the end of the ring
inline constexpr int kMaxNativeFrames = 512;
inline constexpr int kMaxPythonFrames = 512;
inline constexpr int kMaxFrames = 1024;  // native and Python frames together
// The header, an annotation word and every frame.
inline constexpr uint32_t kMaxRecordSize = sizeof(RawEvent) + (1 + kMaxFrames) * sizeof(uint64_t);

}  // namespace memlens::agent
