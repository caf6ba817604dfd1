// src/agent/writer/writer_core.cc: see writer_core.h.
#include "agent/writer/writer_core.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "agent/api/string_table.h"
#include "agent/python_support.h"
#include "agent/recorder/unwinder.h"
#include "base/monotonic_clock.h"

namespace memlens::agent {
namespace {

constexpr uint64_t kFlushIntervalNs = 100 * 1000000ull;  // the capture is never staler than this
constexpr long kBusyRoundNs = 1000000;    // between rounds while events flow (full tracing)
constexpr long kQuietRoundNs = 10000000;  // otherwise, and always in sampling mode
constexpr size_t kChunkEvents = 1 << 16;  // events per chunk: see docs/agent.md, "Limits and costs"
constexpr uint64_t kTruncatedMarkerIp = 1;               // outermost frame of a cut-off stack
constexpr uint64_t kLivenessCheckNs = 50 * 1000000ull;  // how often exited threads are sought
constexpr uint64_t kRingWantedCheckNs = 1000000;        // ... when a new thread found no ring
constexpr uint64_t kResidentSampleNs = 10 * 1000000ull;  // how often RSS is sampled
// The mappings (kMappings, for memlens rss) are read at most every 100 ms, the timeline's
// period, and the next reading starts no sooner than 100 times the last one's duration after
// its start: a reading costs at most 1% of one core, and a process with many mappings (or
// much memory to look up page by page) is read less often, not at a greater cost.
constexpr uint64_t kMappingsPeriodNs = 100 * 1000000ull;
constexpr uint64_t kMappingsCostFactor = 100;
// A marker or snapshot request asks for a reading just before it (ReadMappingsBeforeMarker):
// granted once 10 times the last reading's duration has passed, so that even a program that
// marks every frame spends at most a tenth of a core on them, and a marker after a busy phase
// (whose readings took long) still gets its own.
constexpr uint64_t kMarkerCostFactor = 10;
constexpr uint64_t kMarkerMaxWaitNs = 20 * 1000000ull;  // a marker waits for no longer reading
// The reading before an END record holds up the exit (or exec): not taken when the last one
// took longer than this (a huge process), so that the END and the last events are written.
constexpr uint64_t kMaxEndReadingNs = 500 * 1000000ull;
// A reading the same as the last one written says nothing new: written only once a second, so
// an idle program's capture grows by a kilobyte or two a second, not ten times that.
constexpr uint64_t kMappingsHeartbeatNs = 1000 * 1000000ull;
// Pages looked up in pagemap per reading, in all (8 bytes each): 4 GiB of address space.
constexpr uint64_t kMaxPagemapBytes = uint64_t{4} << 30;
constexpr size_t kMaxMetaBytes = 8 << 20;  // stack nodes etc. per chunk (chunks stay < 64 MiB)

}  // namespace

// The writer's copy of one thread's previous native stack (see raw_event.h): allocation
// records carry only the frames that changed, relative to it.
struct ThreadStacks {
  std::vector<uint64_t> frames;  // outermost first
  std::vector<uint64_t> nodes;   // nodes[i]: interner id of frames[0..i] (may be shorter)
  uint64_t generation = 0;       // the interner generation of nodes and merged_nodes
  std::vector<uint64_t> pieces;  // changed frames (innermost first) of the allocation to come
  // The last stack with Python frames, merged (python_merger.h), and merged_nodes[i] the
  // interner id of its frames [0, i]: the next one is looked up only past the part it shares.
  PythonMerger merger;
  std::vector<uint64_t> merged_nodes;

  void Clear() {
    frames.clear();
    nodes.clear();
    pieces.clear();
    merger.Clear();
    merged_nodes.clear();
  }
};

bool ResidentBytesOfStatm(const char* text, uint64_t* bytes) {
  unsigned long long size_pages = 0, resident_pages = 0;
  if (sscanf(text, "%llu %llu", &size_pages, &resident_pages) != 2) return false;
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  *bytes = resident_pages * page;
  return true;
}

Writer::Writer(WriterIo* io, WriterControl* control, bool write_file_header)
    : io_(io),
      control_(control),
      write_file_header_(write_file_header),
      meta_encoder_(&meta_),
      event_encoder_(&meta_) {}

Writer::~Writer() = default;

void Writer::ForgetThreadStacks(void* stacks) {
  if (stacks) static_cast<ThreadStacks*>(stacks)->Clear();
}

void Writer::DeleteThreadStacks(void* stacks) { delete static_cast<ThreadStacks*>(stacks); }

void Writer::Run() {
  if (write_file_header_) io_->Write(format::EncodeFileHeader());
  if (io_->pipelined()) pipeline_ = std::make_unique<ChunkPipeline>(io_);
  io_->Begin(&meta_encoder_, &meta_);
  MaybeSampleMappings(true);
  Flush();
  for (;;) {
    const uint32_t wake_seen = control_->wake.load(std::memory_order_acquire);
    if (control_->pause_requested.load(std::memory_order_acquire) >
        control_->pause_done.load(std::memory_order_relaxed)) {
      if (PauseForExec()) return;  // a new image: its own writer goes on
    }
    const bool stopping = control_->stop_requested.load(std::memory_order_acquire);
    const uint64_t drain_ticket = control_->drain_requested.load(std::memory_order_acquire);
    const uint64_t flush_ticket = control_->flush_requested.load(std::memory_order_acquire);
    if (control_->modules_changed.exchange(0, std::memory_order_acq_rel)) RescanModules();
    size_t drained = DrainAll();
    control_->drain_done.store(drain_ticket, std::memory_order_release);
    // A marker waits for a reading (ReadMappingsBeforeMarker): every event before it is drained.
    const uint64_t mappings_ticket = control_->mappings_requested.load(std::memory_order_acquire);
    if (mappings_ticket != control_->mappings_done.load(std::memory_order_relaxed)) {
      MaybeSampleMappings(true);
      control_->mappings_done.store(mappings_ticket, std::memory_order_release);
    }
    if (flush_ticket != control_->flush_done.load(std::memory_order_relaxed)) {
      MaybeRecordTime(true);
      Flush(/*written=*/true);
      control_->flush_done.store(flush_ticket, std::memory_order_release);
    }
    control_->rounds.fetch_add(1, std::memory_order_release);
    MaybeRecordTime(stopping);
    MaybeSampleResident(stopping);
    if (stopping) break;  // the last reading of the mappings comes with the END record
    MaybeSampleMappings(false);
    uint64_t now = MonotonicNs();
    if (event_encoder_.pending_events() >= kChunkEvents || meta_.size() >= kMaxMetaBytes ||
        now - last_flush_ns_ >= kFlushIntervalNs) {
      Flush();
    }
    // Sleep until a producer nudges us or the next round is due: short while events flow in
    // full tracing. Sampling's trickle of events waits the long round: each wake-up costs the
    // program more than the events it drains (churn on 4 threads: 0.05 of its run time).
    // A hosted writer's word is in memory shared with the program: not a private futex.
    // A new thread waiting for exited threads' rings to be freed (ring_wanted): no later
    // than the next check they may have.
    const bool ring_wanted = control_->ring_wanted.load(std::memory_order_relaxed);
    timespec timeout{0, (drained && !io_->sampling()) || ring_wanted ? kBusyRoundNs
                                                                    : kQuietRoundNs};
    syscall(SYS_futex, &control_->wake, io_->checked() ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE,
            wake_seen, &timeout, nullptr, 0);
  }
  // Final round: everything committed before the stop request is in the buffers now.
  DrainAll();
  MaybeSampleResident(true);
  WriteEnd(stop_reason_, stop_detail_);
}

void Writer::WriteEnd(format::EndReason reason, int64_t detail) {
  // What the image held at its end (exit or exec), unless reading it would hold that up long.
  if (last_mappings_cost_ns_ <= kMaxEndReadingNs) MaybeSampleMappings(true);
  MaybeRecordTime(true);
  uint64_t dropped = io_->TakeDroppedEvents();
  if (dropped) meta_encoder_.Drops({dropped});
  format::EndRecord end;
  end.reason = reason;
  end.detail = detail;
  end.monotonic_ns = MonotonicNs() - io_->StartMonotonicNs();
  end.events = io_->NextSeq(drained_next_);
  end.dropped = io_->DroppedEventsTotal();
  end.unrecorded_children = io_->UnrecordedChildren();
  meta_encoder_.End(end);
  Flush(/*written=*/true);
}
// The image is about to be replaced: leave the file whole for the next one, then write nothing
// until resumed (a failed exec) or stopped. Returns true when the new image has started (a
// hosted writer: the program's next image gets a writer of its own).
bool Writer::PauseForExec() {
  uint64_t ticket = control_->pause_requested.load(std::memory_order_acquire);
  DrainAll();
  WriteEnd(format::EndReason::kExec, 0);
  control_->pause_done.store(ticket, std::memory_order_release);
  // A failed exec followed at once by another (a shell trying each PATH entry) flips `paused`
  // to 0 and back within one nap: the next exec's ticket ends this pause, and the loop honours
  // it, instead of both sides waiting out the timeout.
  while (control_->paused.load(std::memory_order_acquire) &&
         control_->pause_requested.load(std::memory_order_acquire) == ticket &&
         !control_->stop_requested.load(std::memory_order_acquire)) {
    if (io_->ImageReplaced()) return true;
    timespec pause{0, 1000000};
    nanosleep(&pause, nullptr);
  }
  if (io_->ImageReplaced()) return true;
  // Stopped while still paused: the image ended in its exec, whose END is written. (Still
  // paused, not stopped: the next exec's pause, which the loop honours next.)
  return control_->stop_requested.load(std::memory_order_acquire) &&
         control_->paused.load(std::memory_order_acquire);
}

// A thread that has exited can write nothing more: its buffer, once drained, is free for the
// next new thread. (A reused thread id only delays this.) Sought every 50 ms, and within a
// millisecond when a new thread had to make a ring (ring_wanted): a program that starts short
// threads one after another (a thread per request) then needs a few rings, not one per thread
// started in the 50 ms (each holds up to 2 MiB and its unwinder's state, all of it the
// program's memory). The cost is one tgkill per live thread's ring, at most once a millisecond.
void Writer::RetireExitedThreads() {
  uint64_t now = MonotonicNs();
  const bool wanted = control_->ring_wanted.load(std::memory_order_acquire);
  if (now - last_liveness_check_ns_ < (wanted ? kRingWantedCheckNs : kLivenessCheckNs)) return;
  last_liveness_check_ns_ = now;
  if (wanted) control_->ring_wanted.store(0, std::memory_order_relaxed);
  for (const RingView& ring : rings_) {
    ThreadBuffer* b = ring.buffer;
    if (b->state.load(std::memory_order_acquire) != ThreadBuffer::kActive) continue;
    const uint32_t index = b->thread_index;
    if (!io_->ThreadAlive(b->tid)) {
      // A new thread may take over an exited thread's ring meanwhile (AcquireThreadBuffer): not
      // over its claim (the compare-exchange), nor once it holds the ring (its thread_index, set
      // before its release of kActive, which the exchange's success acquired).
      int active = ThreadBuffer::kActive;
      if (b->state.compare_exchange_strong(active, ThreadBuffer::kRetired,
                                           std::memory_order_acq_rel) &&
          b->thread_index != index) {
        b->state.store(ThreadBuffer::kActive, std::memory_order_release);
      }
    }
  }
}

size_t Writer::DrainAll() {
  size_t before = event_encoder_.pending_events();
  // Exited threads are sought among the last round's rings before this round's ends are
  // taken: a thread found gone has committed its last record by then, so the drain below
  // reaches it. (Sought after, a thread that committed more and exited in between had its
  // ring freed with records in it: lost, or read as the next thread's.)
  RetireExitedThreads();
  io_->Rings(&rings_);
  // A hosted writer's names (modules, Python code, strings) come through the exchange's log,
  // read after the rings' ends were taken: everything the events up to them name is in it.
  if (io_->checked()) RescanModules();
  for (const RingView& ring : rings_) {
    int state = ring.buffer->state.load(std::memory_order_acquire);
    if (state == ThreadBuffer::kFree || state == ThreadBuffer::kClaimed) continue;
    DrainRing(ring);
    if (state == ThreadBuffer::kRetired) {
      *ring.announced = 0;
      ForgetThreadStacks(*ring.stacks);
      ring.buffer->state.store(ThreadBuffer::kFree, std::memory_order_release);
    }
  }
  uint64_t dropped = io_->TakeDroppedEvents();
  if (dropped) meta_encoder_.Drops({dropped});
  return event_encoder_.pending_events() - before;
}

void Writer::DrainRing(const RingView& ring) {
  if (!*ring.stacks) *ring.stacks = new ThreadStacks();
  if (io_->checked()) {
    ring.buffer->DrainChecked(ring.data, ring.limit, record_copy_,
                              [&](const RawEvent& raw) { EncodeEvent(ring, raw); });
  } else {
    ring.buffer->Drain([&](const RawEvent& raw) { EncodeEvent(ring, raw); });
  }
  if (in_batch_) {
    event_encoder_.EndEvents();
    in_batch_ = false;
  }
}

void Writer::EncodeEvent(const RingView& ring, const RawEvent& raw) {
  auto* stacks = static_cast<ThreadStacks*>(*ring.stacks);
  // A thread of its own from this record on: one that took over the ring of a thread that had
  // exited (AcquireThreadBuffer) starts with a whole stack, relative to nothing of the last one.
  const uint32_t thread_index = ring.buffer->thread_index;
  if (*ring.announced != thread_index) {
    if (*ring.announced != 0) stacks->Clear();
    meta_encoder_.Thread({thread_index, ring.buffer->tid});
    *ring.announced = thread_index;
  }
  if (raw.kind == kStackPieceKind) {
    if (raw.flags & kFirstPiece) stacks->pieces.clear();
    // No stack is deeper (unwinder.h): more pieces are a scribbled ring's, not to be kept.
    if (stacks->pieces.size() + raw.frame_count > kMaxStackFrames) return;
    const auto* frames = reinterpret_cast<const uint64_t*>(&raw + 1);
    stacks->pieces.insert(stacks->pieces.end(), frames, frames + raw.frame_count);
    return;
  }
  if (!in_batch_ || batch_thread_ != thread_index) {
    if (in_batch_) event_encoder_.EndEvents();
    event_encoder_.BeginEvents(thread_index);
    batch_thread_ = thread_index;
    in_batch_ = true;
  }
  format::Event event;
  event.seq = raw.seq;
  if (raw.seq >= drained_next_) drained_next_ = raw.seq + 1;
  event.kind = static_cast<format::EventKind>(raw.kind);
  event.address = raw.address;
  event.size = raw.size;
  event.stack = format::HasStack(event.kind) && (raw.flags & kHasStack) ? InternStack(stacks, raw) : 0;
  DescribeStrings(event);
  event_encoder_.AddEvent(event);
  if (event_encoder_.pending_events() >= kChunkEvents || meta_.size() >= kMaxMetaBytes) {
    // keep chunks bounded, even in the middle of a batch
    event_encoder_.EndEvents();
    in_batch_ = false;
    Flush();
  }
}

// A custom heap's block event (HasAnnotationWord) gets its heap, and its type when it has one,
// as annotation frames innermost in the stack (docs/capture-format.md, section 6).
uint64_t Writer::InternStack(ThreadStacks* stacks, const RawEvent& raw) {
  const auto* words = reinterpret_cast<const uint64_t*>(&raw + 1);
  int word_count = static_cast<int>((raw.record_size - sizeof(RawEvent)) / sizeof(uint64_t));
  const bool annotated = HasAnnotationWord(raw.kind);
  uint64_t annotation = 0;
  if (annotated) {
    annotation = *words++;
    --word_count;
  }
  const uint64_t* changed = words + 1;
  int count = raw.frame_count;
  int python = word_count - 1 - count;
  // The native stack: the kept outermost frames of the previous one, then what changed.
  std::vector<uint64_t>& frames = stacks->frames;
  size_t kept = std::min<size_t>(words[0], frames.size());  // never more: the agent mirrors us
  // A stack never grows past the unwinder's depth; a scribbled ring's might, without end.
  if (kept + count > kMaxStackFrames) kept = 0;
  frames.resize(kept);
  if (stacks->nodes.size() > kept) stacks->nodes.resize(kept);
  // One insert, not a push_back per frame: this runs for every event.
  frames.insert(frames.end(), std::make_reverse_iterator(changed + count),
                std::make_reverse_iterator(changed));
  if (raw.flags & kAfterPieces) frames.insert(frames.end(), stacks->pieces.rbegin(), stacks->pieces.rend());
  stacks->pieces.clear();
  auto on_new_node = [&](uint64_t parent, uint64_t ip) {
    if (format::IsPythonFrameIp(ip)) {
      DescribePythonCode(format::PythonFrameCode(ip));
    } else if (ip != kTruncatedMarkerIp && !format::IsAnnotationFrameIp(ip) &&
               !io_->KnownModule(ip)) {
      RescanModules();  // a frame outside every known module: something was loaded since
    }
    meta_encoder_.StackNode({parent, ip});
  };

  if (stacks->generation != interner_.generation()) {  // ids were forgotten (a dlclose)
    stacks->nodes.clear();
    stacks->merger.Clear();
    stacks->merged_nodes.clear();
    stacks->generation = interner_.generation();
  }
  const bool plain = !(raw.flags & kTruncated) && !annotated;
  if (python > 0 && plain) {
    // A Python program's stacks change mostly at their innermost lines: only the frames past
    // the part shared with this thread's previous merged stack are merged and looked up.
    size_t common = stacks->merger.Merge(frames.data(), frames.size(), kept, changed + count,
                                         python, io_->EvalLoop());
    const uint64_t* merged = stacks->merger.merged();
    const size_t n = stacks->merger.merged_size();
    std::vector<uint64_t>& nodes = stacks->merged_nodes;
    common = std::min(common, nodes.size());
    nodes.resize(n);
    const uint64_t id = common ? nodes[common - 1] : 0;
    return interner_.ExtendPath(id, merged + common, n - common, nodes.data() + common,
                                on_new_node);
  }
  // Any other stack: the merger's next `kept` would refer to a native stack it has not seen.
  stacks->merger.Forget();
  if (python <= 0 && plain) {
    // Only the frames past the part shared with the previous stack are looked up.
    const size_t known = stacks->nodes.size();
    const uint64_t id = known ? stacks->nodes.back() : 0;
    stacks->nodes.resize(frames.size());
    return interner_.ExtendPath(id, frames.data() + known, frames.size() - known,
                                stacks->nodes.data() + known, on_new_node);
  }
  frames_.clear();
  if (annotated) {
    auto heap = static_cast<uint32_t>(annotation >> 32), type = static_cast<uint32_t>(annotation);
    frames_.push_back(format::AnnotationFrameIp(format::Annotation::kHeap, heap));
    if (type) {
      DescribeString(type);
      frames_.push_back(format::AnnotationFrameIp(format::Annotation::kType, type));
    }
  }
  if (python > 0) {
    MergeInnermostFirst(frames.data(), frames.size(), changed + count, python,
                        io_->EvalLoop(), &frames_);
  } else {
    frames_.insert(frames_.end(), frames.rbegin(), frames.rend());
  }
  if (raw.flags & kTruncated) frames_.push_back(kTruncatedMarkerIp);
  return interner_.Intern(frames_.data(), static_cast<int>(frames_.size()), on_new_node);
}

// The names an event refers to by id, each written once before its first use.
void Writer::DescribeStrings(const format::Event& event) {
  switch (event.kind) {
    case format::EventKind::kHeapCreate: DescribeString(event.size); break;
    case format::EventKind::kMarker:
      DescribeString(event.address);
      if (event.size) DescribeString(event.size);
      break;
    case format::EventKind::kSnapshot: DescribeString(event.address); break;
    default: break;
  }
}
namespace {

// Ids come from the rings: a program that scribbled over its ring (a hosted writer's) may give
// any number, which must neither index nor size anything. Such an id stays undescribed.
// True the first time `id` (below `limit`) is seen: it is then marked in *described.
bool FirstSight(std::vector<bool>* described, uint64_t id, uint64_t limit) {
  if (id >= limit) return false;
  if (id >= described->size()) described->resize(std::min<uint64_t>(id + 1024, limit));
  if ((*described)[id]) return false;
  (*described)[id] = true;
  return true;
}

}  // namespace

void Writer::DescribeString(uint64_t id) {
  if (FirstSight(&described_strings_, id, kMaxStringIds)) {
    io_->DescribeString(id, &meta_encoder_, &meta_);
  }
}

void Writer::DescribePythonCode(uint64_t id) {
  if (FirstSight(&described_codes_, id, kMaxPythonCodes)) {
    io_->DescribePythonCode(id, &meta_encoder_, &meta_);
  }
}

void Writer::RescanModules() {
  // A library loaded later at the same address must not inherit the closed one's nodes.
  if (io_->RescanModules(&meta_encoder_, &meta_)) interner_.ForgetPaths();
}

// Time marks: at most one a millisecond while events flow, and one every 10 ms while none do
// (a mark with an unchanged sequence number says that nothing happened until then: without
// it, a snapshot at a time inside a quiet phase would land at the next burst of events).
void Writer::MaybeRecordTime(bool force) {
  uint64_t seq = io_->NextSeq(drained_next_);  // read before the clock: see TimeRecord
  uint64_t now = MonotonicNs() - io_->StartMonotonicNs();
  uint64_t since = now - last_time_ns_;
  if (!force && since < (seq == last_time_seq_ ? 10000000u : 1000000u)) return;
  meta_encoder_.Time({now, seq});
  last_time_seq_ = seq;
  last_time_ns_ = now;
}

// Resident memory beside the heap shows what the allocator keeps from the system.
void Writer::MaybeSampleResident(bool force) {
  uint64_t now = MonotonicNs();
  if (!force && now - last_resident_ns_ < kResidentSampleNs) return;
  last_resident_ns_ = now;
  uint64_t bytes = 0;
  if (io_->Resident(&bytes)) meta_encoder_.Resident({now - io_->StartMonotonicNs(), bytes});
}

// The process's mappings and what of each is resident (kMappings: docs/agent.md, "Resident
// memory"), from /proc/PID/smaps and pagemap. Nothing here waits on the program: no allocator
// call (mallinfo and malloc_info lock every arena and walk every free chunk, stalling the
// program's mallocs for tens of ms with millions of free chunks; the allocator's share is
// worked out offline from the live blocks and these mappings). The kernel takes the process's
// mmap lock for reading while it lists mappings and page tables, a piece at a time: the
// program's mmap, munmap and brk wait for a piece (a huge mapping's page walk is one), and the
// period rule above keeps that to 1% of the time.
void Writer::MaybeSampleMappings(bool force) {
  const uint64_t now = MonotonicNs();
  const uint64_t since = now - last_mappings_ns_;
  if (!force &&
      (since < kMappingsPeriodNs || since < kMappingsCostFactor * last_mappings_cost_ns_)) {
    return;
  }
  const uint64_t start = MonotonicNs();
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const bool read = io_->Mappings(kMaxPagemapBytes / page, &mappings_);
  const uint64_t end = MonotonicNs();
  // Taken once the reading is done, and what the rings hold by then drained (a hosted writer
  // knows the sequence numbers it has drained, not the program's counter): every event
  // numbered below it had happened. A reading takes a while, and a mapping made during it (a
  // large block malloc maps) is in it as often as not: its block is then in the live set the
  // analyzer lays over the reading.
  DrainAll();
  const uint64_t seq = io_->NextSeq(drained_next_);
  last_mappings_ns_ = start;
  last_mappings_cost_ns_ = end - start;
  // A marker may ask for the next reading once the cost rule allows it, before the period's;
  // never when a reading takes long: the marker's thread would wait that long.
  control_->mappings_due_ns.store(last_mappings_cost_ns_ <= kMarkerMaxWaitNs
                                      ? start + kMarkerCostFactor * last_mappings_cost_ns_
                                      : UINT64_MAX,
                                  std::memory_order_release);
  if (!read) return;
  if (!force && mappings_.mappings == written_mappings_.mappings &&
      start - last_mappings_written_ns_ < kMappingsHeartbeatNs) {
    return;
  }
  mappings_.monotonic_ns = start - io_->StartMonotonicNs();
  mappings_.seq = seq;
  mappings_.read_ns = end - start;
  meta_encoder_.Mappings(mappings_);
  last_mappings_written_ns_ = start;
  std::swap(mappings_, written_mappings_);  // the next reading reuses the older one's room
}

void Writer::Flush(bool written) {
  if (in_batch_) {  // a batch never spans chunks
    event_encoder_.EndEvents();
    in_batch_ = false;
  }
  last_flush_ns_ = MonotonicNs();
  event_encoder_.FinishEvents();
  if (!meta_.empty()) {
    // Each event column compressed as a block of its own (the events record is in meta_, so its
    // offsets are the payload's).
    if (pipeline_) {
      pipeline_->Submit(&meta_, event_encoder_.block_starts());
    } else {
      chunk_.clear();
      compressor_.AppendChunk(meta_, &chunk_, &event_encoder_.block_starts());
      io_->Write(chunk_);
    }
    event_encoder_.NextChunk();  // releases may refer to this chunk's allocations, no further
    meta_.clear();
  }
  if (written && pipeline_) pipeline_->Wait();
}


}  // namespace memlens::agent
