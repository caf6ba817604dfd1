// src/windows/agent/thread_rings.cc
#include "windows/agent/thread_rings.h"

#include <cstring>
#include <new>

#include "base/raw_mapping.h"

namespace memlens::windows {
namespace {

DWORD g_tls = TLS_OUT_OF_INDEXES;
std::atomic<ThreadRing*> g_rings{nullptr};
std::atomic<uint64_t> g_seq{0};
std::atomic<uint32_t> g_next_index{1};
std::atomic<uint32_t> g_next_heap{1};
std::atomic<uint64_t> g_module_generation{0};
std::atomic<uint64_t> g_dropped{0};
HANDLE g_wake = nullptr;
constexpr uint64_t kMaxWaitMs = 100;
// The writer's cycles so far: a ring still full after kMaxWaitMs marks the round it saw, and
// drops at once while the writer has not come round again (it may wait on a lock the
// producer holds, such as the loader's), so a stuck writer costs one wait, not one per event.
std::atomic<uint64_t> g_writer_rounds{0};
// A retired thread's state (thread_rings.h): the guard always up, no ring.
ThreadState g_retired = [] {
  ThreadState retired;
  retired.guard = 1 << 20;
  return retired;
}();

// A ring's records are padded to 8 bytes and never wrap: a record that would cross the end is
// preceded by a filler whose kind is 0, covering the rest of the ring.
constexpr uint8_t kFiller = 0;

ThreadState* NewThreadState() {
  // One mapping for the state and its ring: 64 KiB granularity makes two a waste.
  constexpr size_t kStateBytes = (sizeof(ThreadState) + 63) & ~size_t{63};
  char* mem = static_cast<char*>(MapZeroed(kStateBytes + sizeof(ThreadRing)));
  if (mem == nullptr) return nullptr;
  ThreadState* state = new (mem) ThreadState;
  ThreadRing* ring = new (mem + kStateBytes) ThreadRing;
  ring->index = g_next_index.fetch_add(1, std::memory_order_relaxed);
  ring->tid = GetCurrentThreadId();
  state->ring = ring;
  ThreadRing* head = g_rings.load(std::memory_order_relaxed);
  do {
    ring->next = head;
  } while (!g_rings.compare_exchange_weak(head, ring, std::memory_order_release,
                                          std::memory_order_relaxed));
  return state;
}

}  // namespace

bool InitThreadRings() {
  g_tls = TlsAlloc();
  g_wake = CreateEventW(nullptr, FALSE, FALSE, nullptr);
  return g_tls != TLS_OUT_OF_INDEXES && g_wake != nullptr;
}

ThreadState* CurrentThreadState() {
  const DWORD error = GetLastError();  // TlsGetValue clears it
  auto* state = static_cast<ThreadState*>(TlsGetValue(g_tls));
  if (state == nullptr) {
    state = NewThreadState();
    if (state) TlsSetValue(g_tls, state);
  }
  SetLastError(error);
  return state;
}

void MarkAgentThread() {
  if (ThreadState* state = CurrentThreadState()) state->guard = 1 << 20;
}

void RetireCurrentThread() {
  const DWORD error = GetLastError();
  auto* state = static_cast<ThreadState*>(TlsGetValue(g_tls));
  if (state && state != &g_retired) {
    // What the thread's last moments allocate (other DLLs' detach notifications) passes
    // unrecorded: a ring made for them would never be retired, nor freed.
    TlsSetValue(g_tls, &g_retired);
    state->ring->exited.store(true, std::memory_order_release);
  }
  SetLastError(error);
}

void NoteWriterRound() { g_writer_rounds.fetch_add(1, std::memory_order_release); }

bool Append(ThreadState* state, format::EventKind kind, uint64_t address, uint64_t size,
            uint64_t extra, const uint64_t* frames, int frame_count) {
  ThreadRing* ring = state->ring;
  const uint64_t bytes = sizeof(RingEvent) + 8 * static_cast<uint64_t>(frame_count);
  const uint64_t head = ring->head.load(std::memory_order_relaxed);
  const uint64_t offset = head & (ThreadRing::kBytes - 1);
  const uint64_t filler = offset + bytes > ThreadRing::kBytes ? ThreadRing::kBytes - offset : 0;
  const uint64_t needed = filler + bytes;
  if (head + needed - ring->tail.load(std::memory_order_acquire) > ThreadRing::kBytes) {
    const uint64_t round = g_writer_rounds.load(std::memory_order_acquire);
    bool room = false;
    if (round != ring->stuck_round) {
      SetEvent(g_wake);
      const uint64_t start = GetTickCount64();
      while (!room && GetTickCount64() - start < kMaxWaitMs) {
        Sleep(1);
        room = head + needed - ring->tail.load(std::memory_order_acquire) <= ThreadRing::kBytes;
      }
      if (!room) ring->stuck_round = round;
    }
    if (!room) {
      g_dropped.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
  }
  char* base = reinterpret_cast<char*>(ring->data);
  if (filler >= sizeof(RingEvent)) {  // a shorter tail is skipped without one (ReadEvent)
    RingEvent fill{};
    fill.kind = kFiller;
    fill.size = filler;
    std::memcpy(base + offset, &fill, sizeof fill);
  }
  const uint64_t at = (head + filler) & (ThreadRing::kBytes - 1);
  RingEvent e{};
  e.seq = g_seq.fetch_add(1, std::memory_order_relaxed);
  e.address = address;
  e.size = size;
  e.extra = extra;
  e.kind = static_cast<uint8_t>(kind);
  e.frame_count = static_cast<uint8_t>(frame_count);
  std::memcpy(base + at, &e, sizeof e);
  std::memcpy(base + at + sizeof e, frames, 8 * static_cast<size_t>(frame_count));
  ring->head.store(head + needed, std::memory_order_release);
  return true;
}

ThreadRing* FirstRing() { return g_rings.load(std::memory_order_acquire); }

void FreeRing(ThreadRing* ring, ThreadRing* previous) {
  if (previous) {
    previous->next = ring->next;
  } else {
    ThreadRing* expected = ring;
    if (!g_rings.compare_exchange_strong(expected, ring->next, std::memory_order_acq_rel)) {
      // New rings were pushed in front of it: find its predecessor now.
      ThreadRing* p = g_rings.load(std::memory_order_acquire);
      while (p->next != ring) p = p->next;
      p->next = ring->next;
    }
  }
  constexpr size_t kStateBytes = (sizeof(ThreadState) + 63) & ~size_t{63};
  Unmap(reinterpret_cast<char*>(ring) - kStateBytes, kStateBytes + sizeof(ThreadRing));
}

uint64_t ModuleGeneration() { return g_module_generation.load(std::memory_order_acquire); }
void NoteModuleUnloaded() { g_module_generation.fetch_add(1, std::memory_order_acq_rel); }

uint32_t NewHeapId() { return g_next_heap.fetch_add(1, std::memory_order_relaxed); }

uint64_t NextSeq() { return g_seq.load(std::memory_order_acquire); }
uint64_t DroppedEvents() { return g_dropped.load(std::memory_order_relaxed); }
HANDLE WriterWakeEvent() { return g_wake; }

}  // namespace memlens::windows
