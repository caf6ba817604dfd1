// src/agent/recorder/recorder.cc: see recorder.h. This file is the allocation hot path.
#include "agent/recorder/recorder.h"

#include <elf.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

#include "agent/python_support.h"
#include "agent/recorder/sampler.h"
#include "agent/recorder/thread_buffer.h"
#include "agent/recorder/unwinder.h"
#include "agent/writer/exchange.h"
#include "agent/writer/hosted.h"
#include "agent/writer/writer.h"
#include "base/monotonic_clock.h"

extern "C" const Elf64_Ehdr __ehdr_start __attribute__((visibility("hidden")));

namespace memlens::agent {

std::atomic<int> g_state{kUninitialized};
constinit thread_local bool t_in_hook = false;
std::atomic<uint64_t> g_seq{0};
std::atomic<bool> g_writer_running{false};
std::atomic<uint32_t> g_span_epoch{0};

namespace {

thread_local ThreadBuffer* t_buffer = nullptr;
std::atomic<uint64_t> g_dropped{0};
std::atomic<uint64_t> g_unrecorded_children{0};
std::atomic<uint64_t> g_dropped_reported{0};

// A thread takes a buffer at its first event and keeps it for life; the writer gives it back
// once the thread is gone (writer.cc). No thread-exit hook: other libraries' thread-exit code
// (libunwind's cache cleanup, say) runs after any hook of ours and still allocates.
ThreadBuffer* ThisThreadBuffer() {
  // A child made without the fork handlers would write into its parent's shared rings.
  if (__builtin_expect(!*g_exchange_attached, 0)) {
    if (g_exchange) LeaveExchangeInChild();
    t_buffer = nullptr;
    return nullptr;
  }
  if (!t_buffer) {
    bool made = false;
    t_buffer = AcquireThreadBuffer(&made);
    // None was free: the writer frees exited threads' rings now, so that a program starting
    // threads one after another reuses a few rings instead of mapping one per thread. A
    // forked child's writer, not started yet (DeferWriterStart), is not started for this: it
    // has freed no ring, and finds the request when it starts.
    if (made) {
      g_control->ring_wanted.store(1, std::memory_order_release);
      WakeRunningWriter();
    }
  }
  return t_buffer;
}

// The ring is full: the writer is behind. Wait while it makes progress; give up after a second
// without any (a stuck disk, a stopped writer), so the program never hangs because of us. Once
// given up, drop at once until the writer moves again: one wait, not one per event.
RawEvent* ReserveSlow(ThreadBuffer* buffer, uint32_t size) {
  constexpr uint64_t kPatienceNs = 1000000000;
  uint64_t rounds = g_control->rounds.load(std::memory_order_acquire);
  if (rounds == buffer->gave_up_at_round) return nullptr;
  uint64_t since = MonotonicNs();
  for (;;) {
    if (g_state.load(std::memory_order_relaxed) != kRecording ||
        !g_writer_running.load(std::memory_order_acquire) || HostedWriterGone()) {
      return nullptr;
    }
    WakeWriter();
    timespec pause{0, 50000};
    nanosleep(&pause, nullptr);
    buffer->Grow();  // once the writer has emptied it: this thread needs a larger ring
    if (RawEvent* event = buffer->Reserve(size)) return event;
    uint64_t now_rounds = g_control->rounds.load(std::memory_order_acquire);
    uint64_t now = MonotonicNs();
    if (now_rounds != rounds) {
      rounds = now_rounds;
      since = now;
    } else if (now - since > kPatienceNs) {
      buffer->gave_up_at_round = now_rounds;
      return nullptr;
    }
  }
}

RawEvent* Reserve(ThreadBuffer* buffer, uint32_t size) {
  RawEvent* event = buffer->Reserve(size);
  if (__builtin_expect(event == nullptr, 0)) event = ReserveSlow(buffer, size);
  return event;
}

void Publish(ThreadBuffer* buffer, RawEvent* event) {
  buffer->Commit(event->record_size);
  // Past half full, nudge the writer once rather than wait for its next timed round.
  if (!buffer->wake_requested && buffer->UsedBytes() > buffer->capacity() / 2) {
    buffer->wake_requested = true;
    WakeWriter();
  } else if (buffer->wake_requested && buffer->UsedBytes() < buffer->capacity() / 4) {
    buffer->wake_requested = false;
  }
}

// Changed frames that do not fit beside the allocation go ahead of it in stack pieces, so a
// stack of any depth streams through the ring. Returns false when the ring has no room.
bool PublishPieces(ThreadBuffer* buffer, const uint64_t** frames, uint32_t* count,
                   uint32_t keep_for_event) {
  for (bool first = true; *count > keep_for_event; first = false) {
    uint32_t n = *count - keep_for_event;
    if (n > static_cast<uint32_t>(kMaxFrames)) n = kMaxFrames;
    uint32_t size = static_cast<uint32_t>(sizeof(RawEvent) + n * sizeof(uint64_t));
    RawEvent* piece = Reserve(buffer, size);
    if (!piece) return false;
    piece->kind = kStackPieceKind;
    piece->flags = first ? kFirstPiece : 0;
    piece->frame_count = static_cast<uint16_t>(n);
    piece->record_size = size;
    std::memcpy(piece + 1, *frames, n * sizeof(uint64_t));
    Publish(buffer, piece);
    *frames += n;
    *count -= n;
  }
  return true;
}

}  // namespace

// Reads our executable segment from our own ELF header, mapped at __ehdr_start: no lock, no
// syscall, safe at the very first malloc.
void FindSelfRange() {
  const Elf64_Ehdr* ehdr = &__ehdr_start;
  uintptr_t base = reinterpret_cast<uintptr_t>(ehdr);
  const auto* phdr = reinterpret_cast<const Elf64_Phdr*>(base + ehdr->e_phoff);
  uintptr_t first_vaddr = UINTPTR_MAX;
  for (int i = 0; i < ehdr->e_phnum; ++i) {
    if (phdr[i].p_type == PT_LOAD && phdr[i].p_vaddr < first_vaddr) first_vaddr = phdr[i].p_vaddr;
  }
  uintptr_t bias = base - (first_vaddr & ~uintptr_t{4095});
  for (int i = 0; i < ehdr->e_phnum; ++i) {
    if (phdr[i].p_type == PT_LOAD && (phdr[i].p_flags & PF_X)) {
      g_self_begin[0] = bias + phdr[i].p_vaddr;
      g_self_end[0] = g_self_begin[0] + phdr[i].p_memsz;
    }
  }
}

void InitializeRecorder() {
  FindSelfRange();
  InitializeUnwinder();
}

namespace {

// An event with the caller's stack; `annotation`, when given, goes first (raw_event.h).
void RecordWithStack(format::EventKind kind, const void* address, size_t size,
                     const uint64_t* annotation) {
  ThreadBuffer* buffer = ThisThreadBuffer();
  if (!buffer) {
    CountDroppedEvent();  // also in the exchange, for the hosted writer's END record
    return;
  }
  // A new span's capture knows none of the stacks before it: the first one is sent whole.
  const uint32_t epoch = g_span_epoch.load(std::memory_order_relaxed);
  if (__builtin_expect(buffer->span_epoch != epoch, 0)) {
    ResetUnwindState(buffer->unwind);
    buffer->span_epoch = epoch;
  }
  // Python frames before the ring holds an open reservation: reading them may allocate (a new
  // code object's name), and a pymalloc arena taken then is recorded at once.
  int python = ReadPythonFrames(buffer->python_frames, kMaxPythonFrames,
                                &buffer->python_frame_cache, buffer->thread_index);
  CapturedStack stack;
  if (!g_python_stacks) {
    CaptureStack(buffer->unwind, &stack);
  } else if (python == 0) {  // Python-lines-only mode, a thread outside Python code
    CaptureCaller(buffer->unwind, &stack);
  }  // else: the Python frames alone, no native frame
  const uint64_t* fresh = stack.fresh;
  uint32_t native = stack.fresh_count;
  const uint32_t extra = annotation ? 2 : 1;  // `kept`, and the annotation word if any
  const uint32_t room = kMaxFrames - extra - python;  // beside them and the Python frames
  const bool pieces = native > room;
  RawEvent* event = nullptr;
  uint32_t record_size = 0;
  if (!pieces || PublishPieces(buffer, &fresh, &native, room)) {
    record_size =
        static_cast<uint32_t>(sizeof(RawEvent) + (extra + native + python) * sizeof(uint64_t));
    event = Reserve(buffer, record_size);
  }
  if (!event) {  // not committed: the next stack stays relative to the last recorded one
    CountDroppedEvent();  // also in the exchange, for the hosted writer's END record
    return;
  }
  event->seq = g_seq.fetch_add(1, std::memory_order_relaxed);
  event->address = reinterpret_cast<uintptr_t>(address);
  event->size = size;
  event->kind = static_cast<uint8_t>(kind);
  event->flags = kHasStack | (stack.truncated ? kTruncated : 0) | (pieces ? kAfterPieces : 0);
  event->frame_count = static_cast<uint16_t>(native);
  event->record_size = record_size;
  auto* words = reinterpret_cast<uint64_t*>(event + 1);
  if (annotation) *words++ = *annotation;
  words[0] = stack.kept;
  if (native) std::memcpy(words + 1, fresh, native * sizeof(uint64_t));
  // The thread's Python frames follow the native ones; the writer merges the two.
  if (python) std::memcpy(words + 1 + native, buffer->python_frames, python * sizeof(uint64_t));
  Publish(buffer, event);
  if (!g_python_stacks) CommitStack(buffer->unwind, stack);
}

}  // namespace

void RecordAlloc(format::EventKind kind, const void* address, size_t size) {
  if (!AdmitAlloc(kind, address, size)) return;  // sampling mode: not this one (sampler.h)
  RecordWithStack(kind, address, size, nullptr);
}

void RecordAnnotated(format::EventKind kind, const void* address, size_t size,
                     uint64_t annotation) {
  RecordWithStack(kind, address, size, &annotation);
}

void RecordRelease(format::EventKind kind, const void* address, size_t size) {
  if (!AdmitRelease(kind, address)) return;  // sampling mode: its block was not recorded
  ThreadBuffer* buffer = ThisThreadBuffer();
  RawEvent* event = buffer ? Reserve(buffer, sizeof(RawEvent)) : nullptr;
  if (!event) {
    CountDroppedEvent();  // also in the exchange, for the hosted writer's END record
    return;
  }
  event->seq = g_seq.fetch_add(1, std::memory_order_relaxed);
  event->address = reinterpret_cast<uintptr_t>(address);
  event->size = size;
  event->kind = static_cast<uint8_t>(kind);
  event->flags = 0;
  event->frame_count = 0;
  event->record_size = sizeof(RawEvent);
  Publish(buffer, event);
}

void CountUnrecordedChild() {
  g_unrecorded_children.fetch_add(1, std::memory_order_relaxed);
  NoteHostedCount(&ExchangeHeader::unrecorded_children);
}
uint64_t UnrecordedChildren() { return g_unrecorded_children.load(std::memory_order_relaxed); }
void CountDroppedEvent() {
  g_dropped.fetch_add(1, std::memory_order_relaxed);
  NoteHostedCount(&ExchangeHeader::dropped);  // the hosted writer's END record counts it
}
uint64_t EventsRecorded() { return g_seq.load(std::memory_order_relaxed); }
uint64_t DroppedEventsTotal() { return g_dropped.load(std::memory_order_relaxed); }
uint64_t TakeDroppedEvents() {
  uint64_t total = g_dropped.load(std::memory_order_relaxed);
  return total - g_dropped_reported.exchange(total, std::memory_order_relaxed);
}

void ForgetBuffersAfterFork() {
  ForgetThreadBuffersAfterFork(t_buffer);
  t_buffer = nullptr;
}

void ResetRecorderCounters() {
  g_seq.store(0, std::memory_order_relaxed);
  g_dropped.store(0, std::memory_order_relaxed);
  g_dropped_reported.store(0, std::memory_order_relaxed);
  g_unrecorded_children.store(0, std::memory_order_relaxed);
}

namespace {
std::atomic<void (*)()> g_deferred_writer_start{nullptr};
}  // namespace

void DeferWriterStart(void (*start)()) { g_deferred_writer_start.store(start); }
void StartDeferredWriter() {
  if (void (*start)() = g_deferred_writer_start.exchange(nullptr)) start();
}
bool CancelDeferredWriter() { return g_deferred_writer_start.exchange(nullptr) != nullptr; }

void WakeWriter() {
  if (g_deferred_writer_start.load(std::memory_order_relaxed)) [[unlikely]] StartDeferredWriter();
  WakeRunningWriter();
}

void WakeRunningWriter() {
  g_control->wake.fetch_add(1, std::memory_order_release);
  syscall(SYS_futex, &g_control->wake, g_control_shared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE, 1,
          nullptr, nullptr, 0);
}

}  // namespace memlens::agent
