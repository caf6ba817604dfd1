// src/agent/writer/writer.cc: see writer.h.
#include "agent/writer/writer.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "agent/api/string_table.h"
#include "agent/hooks/real_functions.h"
#include "agent/owned_fds.h"
#include "agent/python_bridge.h"
#include "agent/python_support.h"
#include "agent/recorder/recorder.h"
#include "agent/recorder/thread_buffer.h"
#include "agent/writer/module_scanner.h"
#include "agent/writer/python_merger.h"
#include "agent/writer/stack_interner.h"
#include "base/monotonic_clock.h"
#include "format/chunk.h"
#include "agent/recorder/sampler.h"
#include "format/record_encoder.h"

namespace memlens::agent {
namespace {

constexpr uint64_t kFlushIntervalNs = 100 * 1000000ull;  // the capture is never staler than this
constexpr long kBusyRoundNs = 1000000;    // between rounds while events flow (full tracing)
constexpr long kQuietRoundNs = 10000000;  // otherwise, and always in sampling mode
constexpr size_t kChunkEvents = 1 << 16;  // events per chunk: see docs/agent.md, "Limits and costs"
constexpr uint64_t kTruncatedMarkerIp = 1;               // outermost frame of a cut-off stack

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
constexpr uint64_t kLivenessCheckNs = 50 * 1000000ull;  // how often exited threads are sought
constexpr uint64_t kResidentSampleNs = 10 * 1000000ull;  // how often RSS is sampled
constexpr size_t kMaxMetaBytes = 8 << 20;  // stack nodes etc. per chunk (chunks stay < 64 MiB)

std::atomic<bool> g_stop_requested{false};
std::atomic<bool> g_modules_changed{false};
std::atomic<uint64_t> g_drain_requested{0};  // DrainNow tickets...
std::atomic<uint64_t> g_drain_done{0};       // ...and the last one a finished round covered
std::atomic<uint64_t> g_pause_requested{0};  // PauseWriterForExec tickets...
std::atomic<uint64_t> g_pause_done{0};       // ...and the last one honoured
std::atomic<bool> g_paused{false};
std::atomic<uint64_t> g_flush_requested{0};  // FlushWriter tickets...
std::atomic<uint64_t> g_flush_done{0};       // ...and the last one written to the file
format::EndReason g_stop_reason = format::EndReason::kExit;
int64_t g_stop_detail = 0;
pthread_t g_writer_thread;

class Writer {
 public:
  Writer(int fd_slot, const std::string& path, int statm_slot,
         const format::ProcessRecord& process, bool write_file_header)
      : fd_slot_(fd_slot),
        statm_slot_(statm_slot),
        path_(path),
        write_file_header_(write_file_header),
        process_(process),
        meta_encoder_(&meta_),
        event_encoder_(&meta_) {}

  void Run();

 private:
  void WriteEnd(format::EndReason reason, int64_t detail);
  void PauseForExec();
  size_t DrainAll();
  void RetireExitedThreads();
  void DrainBuffer(ThreadBuffer* buffer);
  void EncodeEvent(ThreadBuffer* buffer, const RawEvent& raw);
  uint64_t InternStack(ThreadStacks* stacks, const RawEvent& raw);
  void DescribePythonCode(uint64_t id);
  void DescribeString(uint64_t id);
  void DescribeStrings(const format::Event& event);
  void RescanModules();
  void MaybeRecordTime(bool force);
  void MaybeSampleResident(bool force);
  void Flush();
  void WriteAll(const std::string& bytes);
  bool SinkStillOurs();
  void Fail(const char* reason);

  int fd_slot_;     // the capture (owned_fds.h: its number may move)
  int statm_slot_;  // /proc/self/statm, or -1
  std::string path_;
  dev_t sink_dev_ = 0;  // what fd_slot_ was opened on, checked before each chunk
  ino_t sink_ino_ = 0;
  bool said_reopened_ = false;
  bool write_file_header_;
  format::ProcessRecord process_;
  // The chunk's payload: threads, modules, stack nodes..., then the events record, which
  // refers to them. The event encoder holds its columns until Flush's FinishEvents, which
  // appends the events record here: no second copy of the payload (a few MiB of the program's
  // resident memory on churn, docs/agent.md).
  std::string meta_;
  std::string chunk_;  // the compressed chunk, header first
  format::RecordEncoder meta_encoder_;
  format::RecordEncoder event_encoder_;
  format::ChunkCompressor compressor_;
  StackInterner interner_;
  ModuleScanner modules_;
  std::vector<uint64_t> frames_;  // the stack being interned, innermost first
  std::vector<bool> described_codes_;  // kPythonCode records written, by code id
  std::vector<bool> described_strings_;  // kString records written, by string id
  bool failed_ = false;
  uint64_t last_time_seq_ = 0;
  uint64_t last_time_ns_ = 0;
  uint64_t last_flush_ns_ = 0;
  uint64_t last_liveness_check_ns_ = 0;
  uint64_t last_resident_ns_ = 0;
  uint32_t batch_thread_ = 0;
  bool in_batch_ = false;
};

Writer* g_writer = nullptr;

std::atomic<bool> g_writer_has_arena{false};

void* WriterMain(void* arg) {
  t_in_hook = true;  // the writer's own allocations are never recorded
  // The C library gives a thread its malloc arena on its first allocation, and a thread that
  // finds no address space for one then (a program that fills memory as it starts) never gets
  // one: each of its allocations can only map fresh memory, never reuse what the program frees,
  // and the writer would wait for memory forever. So the arena is made first, and StartWriter
  // waits for it when a limit makes that matter.
  real::free(real::malloc(1));
  g_writer_has_arena.store(true, std::memory_order_release);
  // Named, so that top -H, perf and /proc tell it from the program's own threads.
  prctl(PR_SET_NAME, "memlens-writer", 0, 0, 0);
  static_cast<Writer*>(arg)->Run();
  return nullptr;
}

void Writer::Run() {
  // A capture of its own (a span after an earlier one, docs/agent.md): the threads are announced
  // again, and the stacks the last writer knew are forgotten, as their producers forget theirs
  // (g_span_epoch, recorder.h).
  for (ThreadBuffer* b = FirstThreadBuffer(); b; b = b->next) {
    b->announced = false;
    if (b->writer_stacks) static_cast<ThreadStacks*>(b->writer_stacks)->Clear();
  }
  struct stat st;
  if (fstat(FdOf(fd_slot_), &st) == 0) {
    sink_dev_ = st.st_dev;
    sink_ino_ = st.st_ino;
  }
  if (write_file_header_) WriteAll(format::EncodeFileHeader());
  meta_encoder_.Process(process_);
  // Before any event of the image.
  if (g_sample_rate) meta_encoder_.Sampling({g_sample_rate, g_sample_exact_from});
  RescanModules();
  Flush();
  for (;;) {
    const uint32_t wake_seen = g_writer_wake.load(std::memory_order_acquire);
    if (g_pause_requested.load(std::memory_order_acquire) >
        g_pause_done.load(std::memory_order_relaxed)) {
      PauseForExec();
    }
    const bool stopping = g_stop_requested.load(std::memory_order_acquire);
    const uint64_t drain_ticket = g_drain_requested.load(std::memory_order_acquire);
    const uint64_t flush_ticket = g_flush_requested.load(std::memory_order_acquire);
    if (g_modules_changed.exchange(false, std::memory_order_acq_rel)) RescanModules();
    size_t drained = DrainAll();
    g_drain_done.store(drain_ticket, std::memory_order_release);
    if (flush_ticket != g_flush_done.load(std::memory_order_relaxed)) {
      MaybeRecordTime(true);
      Flush();
      g_flush_done.store(flush_ticket, std::memory_order_release);
    }
    g_writer_rounds.fetch_add(1, std::memory_order_release);
    MaybeRecordTime(stopping);
    MaybeSampleResident(stopping);
    if (stopping) break;
    uint64_t now = MonotonicNs();
    if (event_encoder_.pending_events() >= kChunkEvents || meta_.size() >= kMaxMetaBytes ||
        now - last_flush_ns_ >= kFlushIntervalNs) {
      Flush();
    }
    // Sleep until a producer nudges us or the next round is due: short while events flow in
    // full tracing. Sampling's trickle of events waits the long round: each wake-up costs the
    // program more than the events it drains (churn on 4 threads: 0.05 of its run time).
    timespec timeout{0, drained && !g_sample_rate ? kBusyRoundNs : kQuietRoundNs};
    syscall(SYS_futex, &g_writer_wake, FUTEX_WAIT_PRIVATE, wake_seen, &timeout, nullptr, 0);
  }
  // Final round: everything committed before the stop request is in the buffers now.
  DrainAll();
  MaybeSampleResident(true);
  WriteEnd(g_stop_reason, g_stop_detail);
  DisownFd(fd_slot_, true);  // -1 when the program took it: nothing closed
  DisownFd(statm_slot_, true);
}

void Writer::WriteEnd(format::EndReason reason, int64_t detail) {
  MaybeRecordTime(true);
  uint64_t dropped = TakeDroppedEvents();
  if (dropped) meta_encoder_.Drops({dropped});
  format::EndRecord end;
  end.reason = reason;
  end.detail = detail;
  end.monotonic_ns = MonotonicNs() - process_.start_monotonic_ns;
  end.events = EventsRecorded();
  end.dropped = DroppedEventsTotal();
  end.unrecorded_children = UnrecordedChildren();
  meta_encoder_.End(end);
  Flush();
}

// The image is about to be replaced: leave the file whole for the next one, then write nothing
// until resumed (a failed exec) or stopped.
void Writer::PauseForExec() {
  uint64_t ticket = g_pause_requested.load(std::memory_order_acquire);
  DrainAll();
  WriteEnd(format::EndReason::kExec, 0);
  g_pause_done.store(ticket, std::memory_order_release);
  // A failed exec followed at once by another (a shell trying each PATH entry) flips g_paused
  // to false and back within one nap: the next exec's ticket ends this pause, and the next
  // round honours it, instead of both sides waiting out the timeout.
  while (g_paused.load(std::memory_order_acquire) &&
         g_pause_requested.load(std::memory_order_acquire) == ticket &&
         !g_stop_requested.load(std::memory_order_acquire)) {
    timespec pause{0, 1000000};
    nanosleep(&pause, nullptr);
  }
}

// A thread that has exited can write nothing more: its buffer, once drained, is free for the
// next new thread. (A reused thread id only delays this.)
void Writer::RetireExitedThreads() {
  uint64_t now = MonotonicNs();
  if (now - last_liveness_check_ns_ < kLivenessCheckNs) return;
  last_liveness_check_ns_ = now;
  for (ThreadBuffer* b = FirstThreadBuffer(); b; b = b->next) {
    if (b->state.load(std::memory_order_acquire) != ThreadBuffer::kActive) continue;
    if (syscall(SYS_tgkill, getpid(), b->tid, 0) != 0 && errno == ESRCH) {
      b->state.store(ThreadBuffer::kRetired, std::memory_order_release);
    }
  }
}

size_t Writer::DrainAll() {
  size_t before = event_encoder_.pending_events();
  RetireExitedThreads();
  for (ThreadBuffer* b = FirstThreadBuffer(); b; b = b->next) {
    int state = b->state.load(std::memory_order_acquire);
    if (state == ThreadBuffer::kFree) continue;
    DrainBuffer(b);
    if (state == ThreadBuffer::kRetired) {
      b->announced = false;
      if (b->writer_stacks) static_cast<ThreadStacks*>(b->writer_stacks)->Clear();
      b->state.store(ThreadBuffer::kFree, std::memory_order_release);
    }
  }
  uint64_t dropped = TakeDroppedEvents();
  if (dropped) meta_encoder_.Drops({dropped});
  return event_encoder_.pending_events() - before;
}

void Writer::DrainBuffer(ThreadBuffer* buffer) {
  if (!buffer->writer_stacks) buffer->writer_stacks = new ThreadStacks();
  buffer->Drain([&](const RawEvent& raw) { EncodeEvent(buffer, raw); });
  if (in_batch_) {
    event_encoder_.EndEvents();
    in_batch_ = false;
  }
}

void Writer::EncodeEvent(ThreadBuffer* buffer, const RawEvent& raw) {
  auto* stacks = static_cast<ThreadStacks*>(buffer->writer_stacks);
  if (raw.kind == kStackPieceKind) {
    if (raw.flags & kFirstPiece) stacks->pieces.clear();
    const auto* frames = reinterpret_cast<const uint64_t*>(&raw + 1);
    stacks->pieces.insert(stacks->pieces.end(), frames, frames + raw.frame_count);
    return;
  }
  if (!buffer->announced) {
    meta_encoder_.Thread({buffer->thread_index, buffer->tid});
    buffer->announced = true;
  }
  if (!in_batch_ || batch_thread_ != buffer->thread_index) {
    if (in_batch_) event_encoder_.EndEvents();
    event_encoder_.BeginEvents(buffer->thread_index);
    batch_thread_ = buffer->thread_index;
    in_batch_ = true;
  }
  format::Event event;
  event.seq = raw.seq;
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
               !modules_.Contains(ip)) {
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
                                         python, EvalLoopRange{g_eval_begin, g_eval_end});
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
                        EvalLoopRange{g_eval_begin, g_eval_end}, &frames_);
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

void Writer::DescribeString(uint64_t id) {
  if (id >= described_strings_.size()) described_strings_.resize(id + 1024);
  if (described_strings_[id]) return;
  described_strings_[id] = true;
  size_t length = 0;
  const char* text = StringText(static_cast<uint32_t>(id), &length);
  // Id 0: a null name, or the agent's name table was full.
  meta_encoder_.String({id, id == 0 ? std::string("(no name)") : std::string(text, length)});
}

void Writer::DescribePythonCode(uint64_t id) {
  if (id >= described_codes_.size()) described_codes_.resize(id + 1024);
  if (described_codes_[id]) return;
  described_codes_[id] = true;
  const PythonCodeInfo* info = FindPythonCode(id);
  format::PythonCodeRecord record;
  record.id = id;
  if (info) {
    record.filename = info->filename;
    record.name = info->name;
    record.first_line = info->first_line;
  } else {
    record.name = "<unknown Python code>";
  }
  meta_encoder_.PythonCode(record);
}

void Writer::RescanModules() {
  std::vector<format::ModuleRecord> loaded;
  std::vector<uint64_t> unloaded;
  modules_.Rescan(&loaded, &unloaded);
  // A library loaded later at the same address must not inherit the closed one's nodes.
  if (!unloaded.empty()) interner_.ForgetPaths();
  for (uint64_t id : unloaded) meta_encoder_.ModuleUnload({id});
  for (const auto& m : loaded) meta_encoder_.Module(m);
}

// Time marks: at most one a millisecond while events flow, and one every 10 ms while none do
// (a mark with an unchanged sequence number says that nothing happened until then: without
// it, a snapshot at a time inside a quiet phase would land at the next burst of events).
void Writer::MaybeRecordTime(bool force) {
  uint64_t seq = g_seq.load(std::memory_order_acquire);  // read before the clock: see TimeRecord
  uint64_t now = MonotonicNs() - process_.start_monotonic_ns;
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
  char text[128];
  LockOwnedFds();
  int fd = FdOf(statm_slot_);
  ssize_t n = fd >= 0 ? pread(fd, text, sizeof text - 1, 0) : -1;
  int error = errno;
  UnlockOwnedFds();
  if (n < 0 && error == EBADF && statm_slot_ >= 0) {  // closed by a raw system call: open again
    int reopened = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (reopened >= 0) ReplaceFd(statm_slot_, reopened);
  }
  if (n <= 0) return;
  text[n] = '\0';
  unsigned long long size_pages = 0, resident_pages = 0;
  if (sscanf(text, "%llu %llu", &size_pages, &resident_pages) != 2) return;
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  meta_encoder_.Resident({now - process_.start_monotonic_ns, resident_pages * page});
}

void Writer::Flush() {
  if (in_batch_) {  // a batch never spans chunks
    event_encoder_.EndEvents();
    in_batch_ = false;
  }
  last_flush_ns_ = MonotonicNs();
  event_encoder_.FinishEvents();
  if (meta_.empty()) return;
  chunk_.clear();
  // Each event column compressed as a block of its own (the events record is in meta_, so its
  // offsets are the payload's).
  compressor_.AppendChunk(meta_, &chunk_, &event_encoder_.block_starts());
  WriteAll(chunk_);
  event_encoder_.NextChunk();  // releases may refer to this chunk's allocations, no further
  meta_.clear();
}

// A program that closed our descriptor with a raw system call (the interposers see every other
// way, owned_fds.h) may have got its number for a file of its own: before each chunk, the
// descriptor must still be the file we opened, else the file is opened again by path, for
// appending. Returns false when that is impossible (the capture ends there).
bool Writer::SinkStillOurs() {
  struct stat st;
  int fd = FdOf(fd_slot_);
  if (fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == sink_dev_ && st.st_ino == sink_ino_) {
    return true;
  }
  // The number, if open, is the program's now: never closed nor written by us again.
  int reopened = open(path_.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (reopened >= 0 && (fstat(reopened, &st) != 0 || st.st_dev != sink_dev_ ||
                        st.st_ino != sink_ino_)) {
    syscall(SYS_close, reopened);  // another file at that path now: not ours to write
    reopened = -1;
  }
  if (reopened < 0) {
    ReplaceFd(fd_slot_, -1);
    return false;
  }
  fcntl(reopened, F_SETFL, O_APPEND);  // blocking again (a FIFO opened without waiting)
  flock(reopened, LOCK_EX | LOCK_NB);  // "still recording" (agent.cc): the old lock went with it
  ReplaceFd(fd_slot_, reopened);
  if (!said_reopened_) {
    said_reopened_ = true;
    static const char kMessage[] =
        "memlens: the program closed the capture's descriptor; memlens opened the capture again\n";
    ssize_t ignored = ::write(2, kMessage, sizeof kMessage - 1);
    (void)ignored;
  }
  return true;
}

void Writer::Fail(const char* reason) {
  // A failing disk must not take the program down: say it once, keep draining, count.
  failed_ = true;
  char message[256];
  int len = snprintf(message, sizeof message,
                     "memlens: writing the capture failed (%s); the program continues, the "
                     "capture ends here\n",
                     reason);
  if (len > 0) {
    ssize_t ignored = ::write(2, message, static_cast<size_t>(len));
    (void)ignored;
  }
}

void Writer::WriteAll(const std::string& bytes) {
  if (failed_) return;
  if (!SinkStillOurs()) return Fail("the program closed its descriptor and the file is gone");
  size_t done = 0;
  while (done < bytes.size()) {
    LockOwnedFds();  // the descriptor never moves under the call (owned_fds.h)
    ssize_t n = write(FdOf(fd_slot_), bytes.data() + done, bytes.size() - done);
    int error = errno;
    UnlockOwnedFds();
    if (n < 0 && error == EINTR) continue;
    if (n <= 0) return Fail(n < 0 ? strerror(error) : "no space");
    done += static_cast<size_t>(n);
  }
}

}  // namespace

bool StartWriter(int fd_slot, const std::string& path, const format::ProcessRecord& process,
                 bool write_file_header) {
  // Opened here, before the program runs: opened later, it could get a number the program has
  // just closed and is about to reuse.
  int statm = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  int statm_slot = statm >= 0 ? OwnFd(statm) : -1;
  delete g_writer;  // the last span's, finished (agent.cc starts no writer while one runs)
  g_stop_requested.store(false, std::memory_order_relaxed);
  g_paused.store(false, std::memory_order_relaxed);
  g_writer = new Writer(fd_slot, path, statm_slot, process, write_file_header);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);  // the thread inherits a mask that blocks everything
  g_writer_running.store(true, std::memory_order_release);
  // The default stack (8 MiB of address space, RLIMIT_STACK) is far more than the writer's
  // loops need; an idle program's virtual size counted it all (docs/agent.md, "Limits").
  constexpr size_t kWriterStackBytes = 1 << 20;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kWriterStackBytes);
  int rc = pthread_create(&g_writer_thread, &attr, [](void* arg) -> void* {
    WriterMain(arg);
    g_writer_running.store(false, std::memory_order_release);
    return nullptr;
  }, g_writer);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc != 0) {
    g_writer_running.store(false, std::memory_order_release);
    DisownFd(statm_slot, true);
    return false;
  }
  pthread_detach(g_writer_thread);
  // Only a limit on address space or data lets a program fill memory (else it is killed by the
  // OOM killer first): without one, the program does not wait for the writer to be scheduled
  // (a fraction of a millisecond on a busy machine, on every recorded process's start).
  rlimit as{}, data{};
  const bool limited = (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) ||
                       (getrlimit(RLIMIT_DATA, &data) == 0 && data.rlim_cur != RLIM_INFINITY);
  for (int waited_us = 0; limited && !g_writer_has_arena.load(std::memory_order_acquire) &&
                          waited_us < 1000000;
       waited_us += 20) {
    timespec pause{0, 20000};
    nanosleep(&pause, nullptr);
  }
  return true;
}

void RequestWriterStop(format::EndReason reason, int64_t detail) {
  g_stop_reason = reason;
  g_stop_detail = detail;
  g_stop_requested.store(true, std::memory_order_release);
  WakeWriter();
}

// Polls every 100 us: the writer's last round usually takes well under a millisecond, and
// every process that exits waits here (a 1 ms poll added most of a millisecond to each).
void WaitForWriter(int timeout_ms) {
  constexpr int kPollUs = 100;
  uint64_t rounds = g_writer_rounds.load(std::memory_order_acquire);
  int64_t idle_us = 0;
  while (g_writer_running.load(std::memory_order_acquire) && idle_us < int64_t{timeout_ms} * 1000) {
    timespec pause{0, kPollUs * 1000};
    nanosleep(&pause, nullptr);
    uint64_t now = g_writer_rounds.load(std::memory_order_acquire);
    idle_us = now == rounds ? idle_us + kPollUs : 0;
    rounds = now;
  }
}

bool IsWriterThread() {
  return g_writer_running.load(std::memory_order_acquire) &&
         pthread_equal(pthread_self(), g_writer_thread);
}

void NoteModulesChangedForWriter() { g_modules_changed.store(true, std::memory_order_release); }

// Takes a ticket from `requested` and waits (at most timeout_ms) until the writer has marked
// a round that covers it in `done`.
void RequestAndWait(std::atomic<uint64_t>& requested, const std::atomic<uint64_t>& done,
                    int timeout_ms) {
  uint64_t ticket = requested.fetch_add(1, std::memory_order_acq_rel) + 1;
  for (int waited_us = 0; done.load(std::memory_order_acquire) < ticket &&
                          g_writer_running.load(std::memory_order_acquire) &&
                          waited_us < timeout_ms * 1000;
       waited_us += 100) {
    WakeWriter();
    timespec pause{0, 100000};
    nanosleep(&pause, nullptr);
  }
}

void PauseWriterForExec(int timeout_ms) {
  if (!g_writer_running.load(std::memory_order_acquire) || IsWriterThread()) return;
  g_paused.store(true, std::memory_order_release);
  RequestAndWait(g_pause_requested, g_pause_done, timeout_ms);
}

void ResumeWriter() {
  g_paused.store(false, std::memory_order_release);
  WakeWriter();
}

void DrainNow(int timeout_ms) {
  if (!g_writer_running.load(std::memory_order_acquire) || IsWriterThread()) return;
  RequestAndWait(g_drain_requested, g_drain_done, timeout_ms);
}

void FlushWriter(int timeout_ms) {
  if (!g_writer_running.load(std::memory_order_acquire) || IsWriterThread()) return;
  RequestAndWait(g_flush_requested, g_flush_done, timeout_ms);
}

void DiscardBufferedEvents() {
  for (ThreadBuffer* b = FirstThreadBuffer(); b; b = b->next) {
    if (b->state.load(std::memory_order_acquire) != ThreadBuffer::kFree) {
      b->Drain([](const RawEvent&) {});
    }
  }
}

}  // namespace memlens::agent

namespace memlens::agent {

void* WaitForAgentMemory(size_t size, size_t alignment) {
  constexpr int kAgentMemoryWaitMs = 2000;
  for (int waited_ms = 0; waited_ms < kAgentMemoryWaitMs; ++waited_ms) {
    timespec pause{0, 1000000};
    nanosleep(&pause, nullptr);
    void* p = alignment <= 16 ? real::malloc(size) : real::aligned_alloc(alignment, size);
    if (p) return p;
  }
  if (!IsWriterThread()) return nullptr;
  static const char kMessage[] =
      "memlens: out of memory for memlens's own work (the program has taken it all): recording "
      "stopped, the capture ends at its last chunk; the program continues\n";
  ssize_t ignored = ::write(2, kMessage, sizeof kMessage - 1);
  (void)ignored;
  g_state.store(kStopped, std::memory_order_release);
  g_writer_running.store(false, std::memory_order_release);  // nobody waits for us any more
  for (;;) {
    timespec pause{1, 0};
    nanosleep(&pause, nullptr);
  }
}

}  // namespace memlens::agent
