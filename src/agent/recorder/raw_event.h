// src/agent/recorder/raw_event.h
//
// RawEvent: the fixed-size header of every record an application thread appends to its
// ThreadBuffer. Agent-internal: the writer thread turns RawEvents into capture records
// (src/format/records.h).
//
// An allocation's stack is relative to the thread's previous one (unwinder.h). Its record
// (flags & kHasStack) holds, after the header: for a custom heap's block event
// (HasAnnotationWord) one annotation word, the heap id (high 32 bits) and the string id of the
// block's type name (low 32 bits, 0 for none); then one word `kept`, then frame_count return
// addresses that changed (innermost first), then, in a Python process, the thread's Python
// frames (innermost first, see python_bridge.h) up to the end of the record. The full native
// stack is those frames, then the outermost `kept` frames of the thread's previous stack.
// Changed frames that do not fit in one record come first in stack pieces (kind
// kStackPieceKind, frame_count frames each, innermost first, the first one flagged
// kFirstPiece); the allocation that follows them is flagged kAfterPieces. Pieces take no
// sequence number; pieces not followed by their allocation (it was dropped) are discarded.
#pragma once

#include <cstdint>

#include "format/records.h"

namespace memlens::agent {

struct RawEvent {
  uint64_t seq;          // global order (see Recorder)
  uint64_t address;
  uint64_t size;
  uint8_t kind;          // format::EventKind, or kPadKind
  uint8_t flags;         // kHasStack, kTruncated, kAfterPieces, kFirstPiece
  uint16_t frame_count;  // native return addresses in this record
  uint32_t record_size;  // bytes of this record, frames included
};
static_assert(sizeof(RawEvent) == 32, "RawEvent is part of the buffer layout");

inline bool HasAnnotationWord(uint8_t kind) {
  return kind == static_cast<uint8_t>(format::EventKind::kHeapAlloc) ||
         kind == static_cast<uint8_t>(format::EventKind::kHeapRealloc) ||
         kind == static_cast<uint8_t>(format::EventKind::kHeapFree);
}

inline constexpr uint8_t kPadKind = 0xff;         // filler up to the end of the ring
inline constexpr uint8_t kStackPieceKind = 0xfe;  // changed frames ahead of their allocation

inline constexpr uint8_t kHasStack = 1;     // the `kept` word and frames follow the header
inline constexpr uint8_t kTruncated = 2;    // deeper than kMaxStackFrames (unwinder.h)
inline constexpr uint8_t kAfterPieces = 4;  // the stack pieces just before this record lead it
inline constexpr uint8_t kFirstPiece = 8;   // a stack piece that starts a new stack

inline constexpr int kMaxPythonFrames = 512;
// Words after the header: the annotation word, `kept`, and every frame.
inline constexpr int kMaxFrames = 1024;
inline constexpr uint32_t kMaxRecordSize = sizeof(RawEvent) + kMaxFrames * sizeof(uint64_t);
static_assert(kMaxPythonFrames < kMaxFrames - 2, "an allocation record has room for one frame");

}  // namespace memlens::agent
