// src/analyzer/reader/event_orderer.cc: see event_orderer.h.
#include "analyzer/reader/event_orderer.h"

namespace memlens::analyzer {

void EventOrderer::Add(const format::Event& event) {
  if (event.seq == next_seq_) {  // the common case: the one due (every waiting one is later)
    ++next_seq_;
    sink_(event);
    if (pending_ > 0) Release(false);  // those waiting for it
    return;
  }
  if (event.seq < next_seq_) return;  // a duplicate or a late event behind a skipped gap
  auto& queue = Queue(event.thread);
  if (!queue.empty() && queue.back().seq >= event.seq) return;  // out of order within a thread
  if (queue.empty()) heads_.push({event.seq, event.thread});
  queue.push_back(event);
  ++pending_;
  Release(pending_ > max_pending_);
}

void EventOrderer::Ring::Grow() {
  std::vector<format::Event> larger(slots_.empty() ? 64 : slots_.size() * 2);
  for (uint64_t i = 0; head_ + i < tail_; ++i) larger[i] = slots_[(head_ + i) & (slots_.size() - 1)];
  tail_ -= head_;
  head_ = 0;
  slots_.swap(larger);
}

void EventOrderer::Finish() {
  while (pending_ > 0) Release(true);
}

void EventOrderer::Release(bool force) {
  while (!heads_.empty()) {
    Head head = heads_.top();
    if (head.seq != next_seq_) {
      if (!force) return;
      gaps_ += head.seq - next_seq_;  // give up on the missing numbers
      next_seq_ = head.seq;
      force = pending_ > max_pending_ / 2;
    }
    heads_.pop();
    Ring& queue = queues_[head.thread];  // a head is only pushed for a queue that exists
    // Drain this thread's run of consecutive numbers without going back to the heap.
    while (!queue.empty() && queue.front().seq == next_seq_) {
      sink_(queue.front());
      queue.pop_front();
      --pending_;
      ++next_seq_;
    }
    if (!queue.empty()) {
      heads_.push({queue.front().seq, head.thread});
    } else {
      queue.TrimIfEmpty();
    }
  }
}

}  // namespace memlens::analyzer
