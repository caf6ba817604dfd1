// src/agent/recorder/thread_buffer.h
//
// ThreadBuffer: the per-thread ring of RawEvents between one application thread (producer)
// and the writer thread (consumer).
//
// Runs on: the owning application thread (Reserve/Commit) and the writer thread (Drain).
// Hot-path rules apply to Reserve/Commit: no heap, no locks, no syscalls, no exceptions.
// Thread safety: single producer, single consumer; they meet only through head_ and tail_,
// published with release/acquire ordering. Buffers are mmap'd once and never unmapped: when
// the writer sees that a buffer's thread has exited, it retires the buffer (kRetired), drains
// it, and marks it kFree for the next new thread. A new thread that finds none free may take
// over the buffer of a thread that has exited, once the writer has drained it (kClaimed while
// it does): the writer tells the threads apart by thread_index, which every record is read with.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "agent/python_bridge.h"
#include "agent/recorder/raw_event.h"

namespace memlens::agent {

struct UnwindState;

class ThreadBuffer {
 public:
  enum State : int { kFree = 0, kActive = 1, kRetired = 2, kClaimed = 3 };
  // Powers of two. The ring's job is to hold what the thread records while the writer is busy
  // elsewhere. Every page of the ring a thread has wrapped over stays resident in the program,
  // and counts against issue 32's bar for its memory (+4 MiB): so a ring starts at
  // kInitialCapacity and doubles, up to its largest, each time its thread finds it full (Grow).
  // The writer inside the program compresses each chunk between drains (up to ~6 ms, in which
  // one churning thread records over 1 MiB: at 512 KiB it waited on a full ring 460 times a
  // run, 11-21 at 2 MiB): kMaxCapacity. The hosted writer compresses on a thread of its own
  // (chunk_pipeline.h) and keeps draining: kMaxHostedCapacity, an exchange slot's ring.
  // Mapped up front at the largest, untouched.
  static constexpr size_t kInitialCapacity = size_t{1} << 16;  // > 2 kMaxRecordSize
  static constexpr size_t kMaxCapacity = size_t{1} << 21;
  static constexpr size_t kMaxHostedCapacity = size_t{1} << 19;
  static_assert(kInitialCapacity >= 2 * kMaxRecordSize);

  // Returns room for a record of at most max_size bytes, or nullptr when the ring is full.
  RawEvent* Reserve(uint32_t max_size);
  // Publishes the record returned by the last Reserve; size <= the reserved max_size.
  void Commit(uint32_t size);
  size_t UsedBytes() const {
    return tail_.load(std::memory_order_relaxed) - head_.load(std::memory_order_relaxed);
  }
  size_t capacity() const { return capacity_.load(std::memory_order_relaxed); }
  // Whether the writer has read every committed record (a new thread may then take over the
  // buffer of one that has exited).
  bool Drained() const {
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire);
  }
  // Where the committed records end (the writer's limit for a later DrainChecked).
  uint64_t committed_end() const { return tail_.load(std::memory_order_acquire); }
  // Producer side, off the per-event path (the thread found the ring full): doubles the
  // capacity once the writer has drained the ring empty, so no record in it was placed by the
  // old capacity. Returns false while it is not empty, or at max_capacity.
  bool Grow();

  // Writer side: calls fn(const RawEvent&) for each committed record, oldest first, and frees
  // their space. Returns the number of records.
  template <typename Fn>
  size_t Drain(Fn&& fn);
  // Writer side, for a ring another process writes (the hosted writer, exchange.h): as Drain,
  // but from `ring` (this process's mapping of data), only up to `limit`, and each record is
  // checked (RecordIsWhole) and copied to `copy` (kMaxRecordSize bytes) before fn sees it, so
  // that a program scribbling over its ring cannot make the reader step outside it. A record
  // that is not whole ends the drain: the rest of the ring is skipped.
  template <typename Fn>
  size_t DrainChecked(const uint8_t* ring, uint64_t limit, uint8_t* copy, Fn&& fn);

  std::atomic<int> state{kFree};
  uint32_t thread_index = 0;  // set when a thread takes the buffer; stable until retired
  uint64_t tid = 0;
  uint32_t announced = 0;  // writer side: the thread_index whose kThread record is written
  bool wake_requested = false;  // producer side: asked the writer to drain early
  uint64_t gave_up_at_round = ~uint64_t{0};  // producer side: dropping until the writer moves
  size_t max_capacity = kMaxCapacity;  // producer side: kMaxHostedCapacity in an exchange slot
  ThreadBuffer* next = nullptr;  // registry list; written once before publication
  UnwindState* unwind = nullptr;  // producer side: the thread's previous stack (unwinder.h)
  void* writer_stacks = nullptr;  // writer side: its copy of that stack (writer.cc)
  // Producer side: the span (g_span_epoch, recorder.h) whose stacks `unwind` is relative to.
  uint32_t span_epoch = 0;
  // Producer side: the Python frames of the event being recorded (kMaxPythonFrames), in the
  // ring's mapping rather than in thread-local storage, which must stay small for the agent to
  // be dlopen'ed (docs/agent.md, "Loaded without memlens run"), and rather than on the
  // program's stack, which may be a coroutine's few kilobytes.
  uint64_t* python_frames = nullptr;
  // Producer side: the Python hooks' frame cache (python_bridge.h), mapped by them on first
  // use and kept with the buffer for its next threads.
  MemlensFrameCache python_frame_cache = {};

  uint8_t* data = nullptr;

 private:
  alignas(64) std::atomic<uint64_t> head_{0};  // consumer position (monotonic byte count)
  alignas(64) std::atomic<uint64_t> tail_{0};  // producer position
  // Written by the producer only, while the ring is empty; the consumer reads it after its
  // acquire load of tail_, so it sees the capacity every record up to that tail was placed by.
  std::atomic<size_t> capacity_{kInitialCapacity};
  uint64_t cached_head_ = 0;                   // producer's last view of head_
  uint64_t reserved_at_ = 0;                   // where the last reserved record starts
};

// Inline: every recorded event reserves and commits once.
inline RawEvent* ThreadBuffer::Reserve(uint32_t max_size) {
  uint64_t tail = tail_.load(std::memory_order_relaxed);
  const size_t capacity = capacity_.load(std::memory_order_relaxed);
  size_t pos = tail & (capacity - 1);
  size_t room = capacity - pos;
  size_t skip = room < max_size ? room : 0;  // records never wrap: skip to the start
  if (tail + skip + max_size - cached_head_ > capacity) {
    cached_head_ = head_.load(std::memory_order_acquire);
    if (tail + skip + max_size - cached_head_ > capacity) return nullptr;
  }
  if (skip >= sizeof(RawEvent)) {
    auto* pad = reinterpret_cast<RawEvent*>(data + pos);
    pad->kind = kPadKind;
    pad->record_size = static_cast<uint32_t>(skip);
  }
  reserved_at_ = tail + skip;
  return reinterpret_cast<RawEvent*>(data + (reserved_at_ & (capacity - 1)));
}

inline void ThreadBuffer::Commit(uint32_t size) {
  tail_.store(reserved_at_ + size, std::memory_order_release);
}

template <typename Fn>
size_t ThreadBuffer::Drain(Fn&& fn) {
  uint64_t head = head_.load(std::memory_order_relaxed);
  const uint64_t tail = tail_.load(std::memory_order_acquire);
  const size_t capacity = capacity_.load(std::memory_order_relaxed);
  size_t count = 0;
  while (head < tail) {
    size_t pos = head & (capacity - 1);
    size_t room = capacity - pos;
    if (room < sizeof(RawEvent)) {  // no record starts this close to the end: wrap
      head += room;
      continue;
    }
    const auto* event = reinterpret_cast<const RawEvent*>(data + pos);
    if (event->kind != kPadKind) {
      fn(*event);
      ++count;
    }
    head += event->record_size;
    if ((count & 1023) == 0) head_.store(head, std::memory_order_release);
  }
  head_.store(head, std::memory_order_release);
  return count;
}

// Whether a record read from a ring another process writes holds what its header says: its
// size within bounds, its kind known, its frame counts within its size.
inline bool RecordIsWhole(const RawEvent& e, size_t room) {
  if (e.record_size < sizeof(RawEvent) || e.record_size > room || e.record_size % 8 != 0 ||
      e.record_size > kMaxRecordSize) {
    return false;
  }
  const size_t words = (e.record_size - sizeof(RawEvent)) / sizeof(uint64_t);
  if (e.kind == kPadKind) return true;
  if (e.kind == kStackPieceKind) return e.frame_count <= words;
  if (!format::IsKnownEventKind(e.kind)) return false;
  const auto kind = static_cast<format::EventKind>(e.kind);
  if (!format::HasStack(kind) || !(e.flags & kHasStack)) return true;
  const size_t fixed = 1 + (HasAnnotationWord(e.kind) ? 1 : 0);  // the `kept` word, annotation
  return words >= fixed + e.frame_count && words - fixed - e.frame_count <= kMaxPythonFrames;
}

template <typename Fn>
size_t ThreadBuffer::DrainChecked(const uint8_t* ring, uint64_t limit, uint8_t* copy, Fn&& fn) {
  uint64_t head = head_.load(std::memory_order_relaxed);
  uint64_t tail = tail_.load(std::memory_order_acquire);
  if (tail > limit) tail = limit;
  const size_t capacity = capacity_.load(std::memory_order_relaxed);
  if (capacity < kInitialCapacity || capacity > kMaxHostedCapacity || (capacity & (capacity - 1)) ||
      tail < head || tail - head > capacity) {
    head_.store(tail_.load(std::memory_order_relaxed), std::memory_order_release);
    return 0;
  }
  size_t count = 0;
  while (head < tail) {
    size_t pos = head & (capacity - 1);
    size_t room = capacity - pos;
    if (room < sizeof(RawEvent)) {
      head += room;
      continue;
    }
    memcpy(copy, ring + pos, sizeof(RawEvent));
    const auto* event = reinterpret_cast<const RawEvent*>(copy);
    if (!RecordIsWhole(*event, room) || head + event->record_size > tail) {
      head = tail;
      break;
    }
    if (event->kind != kPadKind) {
      memcpy(copy + sizeof(RawEvent), ring + pos + sizeof(RawEvent),
             event->record_size - sizeof(RawEvent));
      // The header again, from the copy: what was checked is what fn reads.
      fn(*event);
      ++count;
    }
    head += event->record_size;
    if ((count & 1023) == 0) head_.store(head, std::memory_order_release);
  }
  head_.store(head, std::memory_order_release);
  return count;
}

// Takes a free buffer (or maps a new one, and then sets *made) for the calling thread. Returns
// nullptr when no memory can be mapped. Not on the per-allocation path: once per thread.
ThreadBuffer* AcquireThreadBuffer(bool* made);
// The registry of every buffer ever mapped, for the writer to walk (lock-free push only).
ThreadBuffer* FirstThreadBuffer();
// In a child just forked, before it records on its own (agent.cc): the registry's buffers hold
// the parent's events, and its other threads are not here. Each is let go (a private ring
// unmapped; an exchange slot, which is the parent's, only forgotten) and the registry emptied.
// `current`, the calling thread's, stays mapped: a fork from a signal handler returns to a frame
// that may be writing into it. The thread takes a new buffer at its next event
// (ForgetBuffersAfterFork, recorder.h, calls this and forgets it).
void ForgetThreadBuffersAfterFork(const ThreadBuffer* current);

}  // namespace memlens::agent
