// src/analyzer/reader/event_orderer.h
//
// EventOrderer: restores the global order of events. The writer drains thread buffers one
// after another, so a capture holds each thread's events in order but threads interleaved
// loosely. Sequence numbers are dense (every number is used once, see agent recorder.h), so an
// event can be released as soon as every smaller number has been. A gap that never fills (a
// capture cut short) is skipped once too many events wait behind it, or at the end.
//
// Runs on: the analyzer's reading thread. Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

#include "format/records.h"

namespace memlens::analyzer {

class EventOrderer {
 public:
  using Sink = std::function<void(const format::Event&)>;
  explicit EventOrderer(Sink sink, size_t max_pending = size_t{1} << 22)
      : sink_(std::move(sink)), max_pending_(max_pending) {}

  void Add(const format::Event& event);
  // Releases everything still held, in order, skipping gaps. Call at the end of the capture.
  void Finish();
  // Starts over at sequence number 0 (a new program image after exec); call Finish first.
  void Restart() {
    next_seq_ = 0;
    gaps_ = 0;  // the figures describe the last image only
  }
  // Events before this sequence number are dropped: a read resumed from a checkpoint. Call
  // before the first event (or right after Restart).
  void SkipTo(uint64_t seq) { next_seq_ = seq; }
  uint64_t gaps() const { return gaps_; }  // missing sequence numbers skipped

 private:
  void Release(bool force);

  struct Head {
    uint64_t seq;
    uint32_t thread;
    bool operator>(const Head& o) const { return seq > o.seq; }
  };
  Sink sink_;
  size_t max_pending_;
  uint64_t next_seq_ = 0;
  size_t pending_ = 0;
  uint64_t gaps_ = 0;

  // A thread's waiting events, in order: a ring that doubles when full. Nearly every event of a
  // multi-threaded capture waits here a moment; a deque allocated a block for every ten of them.
  class Ring {
   public:
    bool empty() const { return head_ == tail_; }
    const format::Event& front() const { return slots_[head_ & (slots_.size() - 1)]; }
    const format::Event& back() const { return slots_[(tail_ - 1) & (slots_.size() - 1)]; }
    void pop_front() { ++head_; }
    // Once empty, a ring grown for a long wait gives its memory back.
    void TrimIfEmpty() {
      if (empty() && slots_.size() > kKeptSlots) *this = Ring();
    }
    void push_back(const format::Event& event) {
      if (tail_ - head_ == slots_.size()) Grow();
      slots_[tail_++ & (slots_.size() - 1)] = event;
    }

   private:
    static constexpr size_t kKeptSlots = size_t{1} << 16;  // 3 MiB: more than a batch
    void Grow();
    std::vector<format::Event> slots_;  // a power of two of them
    uint64_t head_ = 0;  // counts of events taken and put, ever; an index is one mod the size
    uint64_t tail_ = 0;
  };
  Ring& Queue(uint32_t thread) {
    if (thread >= queues_.size()) queues_.resize(thread + 1);
    return queues_[thread];
  }

  // Per thread index (small dense integers from the agent), in order.
  std::vector<Ring> queues_;
  std::priority_queue<Head, std::vector<Head>, std::greater<Head>> heads_;  // one per queue
};

}  // namespace memlens::analyzer
