// src/agent/recorder/thread_buffer.cc: see thread_buffer.h.
#include "agent/recorder/thread_buffer.h"

#include <sys/syscall.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <new>

#include "agent/recorder/unwinder.h"
#include "agent/writer/hosted.h"
#include "base/raw_mapping.h"

namespace memlens::agent {
namespace {

std::atomic<ThreadBuffer*> g_registry{nullptr};
std::atomic<uint32_t> g_next_thread_index{1};
// The buffer last taken by a thread: where a program that starts a thread after the last one
// ended (a thread per request) finds its exited predecessor's buffer first.
std::atomic<ThreadBuffer*> g_last_taken{nullptr};
// Threads whose buffers a new thread looks at, at most, for one it may take over: a system call
// each, which a new thread pays once, when no buffer is free.
constexpr int kTakeOverTries = 8;

bool ThreadGone(uint64_t tid) {
  return syscall(SYS_tgkill, getpid(), static_cast<pid_t>(tid), 0) != 0 && errno == ESRCH;
}

// The buffer of a thread that has exited, drained: the writer has read everything it recorded,
// and it can record nothing more. The claim keeps the writer from retiring it meanwhile.
// Another new thread may take it over first, between the check and the claim (the state is
// kActive again once it holds it): the thread_index read before the check tells.
bool TakeOver(ThreadBuffer* b) {
  if (b->state.load(std::memory_order_acquire) != ThreadBuffer::kActive || !b->Drained()) {
    return false;
  }
  const uint32_t index = b->thread_index;
  if (!ThreadGone(b->tid)) return false;
  int expected = ThreadBuffer::kActive;
  if (!b->state.compare_exchange_strong(expected, ThreadBuffer::kClaimed)) return false;
  if (b->thread_index != index || !b->Drained()) {  // the other thread's now: give it back
    b->state.store(ThreadBuffer::kActive, std::memory_order_release);
    return false;
  }
  return true;
}

ThreadBuffer* TakeOverExitedThread() {
  ThreadBuffer* last = g_last_taken.load(std::memory_order_relaxed);
  if (last && TakeOver(last)) return last;
  int tries = 0;
  for (ThreadBuffer* b = FirstThreadBuffer(); b && tries < kTakeOverTries; b = b->next) {
    if (b == last || b->state.load(std::memory_order_relaxed) != ThreadBuffer::kActive ||
        !b->Drained()) {
      continue;
    }
    ++tries;
    if (TakeOver(b)) return b;
  }
  return nullptr;
}

}  // namespace

bool ThreadBuffer::Grow() {
  const size_t capacity = capacity_.load(std::memory_order_relaxed);
  if (capacity >= max_capacity) return false;
  const uint64_t tail = tail_.load(std::memory_order_relaxed);
  if (head_.load(std::memory_order_acquire) != tail) return false;
  // Empty: the consumer reads no record until the next Commit's release store of tail_,
  // which also publishes this.
  capacity_.store(capacity * 2, std::memory_order_relaxed);
  cached_head_ = tail;
  return true;
}

ThreadBuffer* FirstThreadBuffer() { return g_registry.load(std::memory_order_acquire); }

void ForgetThreadBuffersAfterFork(const ThreadBuffer* current) {
  constexpr size_t kPrivateBytes = kSlotHeaderBytes + ThreadBuffer::kMaxCapacity;
  g_last_taken.store(nullptr, std::memory_order_relaxed);  // perhaps unmapped below
  ThreadBuffer* b = g_registry.exchange(nullptr, std::memory_order_acq_rel);
  while (b) {
    ThreadBuffer* next = b->next;
    if (!g_exchange && b != current) Unmap(b, kPrivateBytes);
    b = next;
  }
}

ThreadBuffer* AcquireThreadBuffer(bool* made) {
  ThreadBuffer* buffer = nullptr;
  // Claimed until its fields are the new thread's: the writer neither retires it (by the last
  // thread's tid) nor drains it meanwhile.
  for (ThreadBuffer* b = FirstThreadBuffer(); b; b = b->next) {
    int expected = ThreadBuffer::kFree;
    if (b->state.compare_exchange_strong(expected, ThreadBuffer::kClaimed)) {
      buffer = b;
      break;
    }
  }
  if (!buffer) buffer = TakeOverExitedThread();
  if (!buffer) {
    // One mapping holds the header page, the Python frames' page and the ring. The raw syscall
    // keeps this out of our own mmap hook and away from any allocator.
    constexpr size_t kFramesBytes = kMaxPythonFrames * sizeof(uint64_t);
    static_assert(sizeof(ThreadBuffer) <= 4096 && kFramesBytes % 4096 == 0);
    size_t header = 4096 + kFramesBytes;
    static_assert(4096 + kFramesBytes == kSlotHeaderBytes);
    // Under memlens run the ring is a slot of the exchange, drained from there (hosted.h).
    void* mem = g_exchange ? TakeExchangeSlot() : MapZeroed(header + ThreadBuffer::kMaxCapacity);
    if (!mem) return nullptr;
    UnwindState* unwind = NewUnwindState();
    if (!unwind) {
      if (!g_exchange) Unmap(mem, header + ThreadBuffer::kMaxCapacity);  // a slot stays taken
      return nullptr;
    }
    buffer = new (mem) ThreadBuffer();
    if (g_exchange) buffer->max_capacity = ThreadBuffer::kMaxHostedCapacity;
    buffer->data = static_cast<uint8_t*>(mem) + header;
    buffer->unwind = unwind;
    buffer->python_frames = reinterpret_cast<uint64_t*>(static_cast<uint8_t*>(mem) + 4096);
    buffer->state.store(ThreadBuffer::kClaimed, std::memory_order_relaxed);
    *made = true;
    ThreadBuffer* head = g_registry.load(std::memory_order_relaxed);
    do {
      buffer->next = head;
    } while (!g_registry.compare_exchange_weak(head, buffer, std::memory_order_release,
                                               std::memory_order_relaxed));
  }
  buffer->thread_index = g_next_thread_index.fetch_add(1, std::memory_order_relaxed);
  buffer->tid = static_cast<uint64_t>(syscall(SYS_gettid));
  buffer->wake_requested = false;
  buffer->gave_up_at_round = ~uint64_t{0};
  ResetUnwindState(buffer->unwind);  // the writer forgets its copy at the new thread_index
  g_last_taken.store(buffer, std::memory_order_relaxed);
  buffer->state.store(ThreadBuffer::kActive, std::memory_order_release);
  return buffer;
}

}  // namespace memlens::agent
