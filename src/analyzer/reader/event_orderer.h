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
#include <deque>
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
  std::deque<format::Event>& Queue(uint32_t thread);

  // Per thread index (small dense integers from the agent), in order.
  std::vector<std::deque<format::Event>> queues_;
  std::priority_queue<Head, std::vector<Head>, std::greater<Head>> heads_;  // one per queue
};

}  // namespace memlens::analyzer
