// src/agent/recorder/thread_buffer.cc: see thread_buffer.h.
#include "agent/recorder/thread_buffer.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <new>

#include "agent/recorder/unwinder.h"
#include "agent/writer/hosted.h"
#include "base/raw_mapping.h"

namespace memlens::agent {
namespace {

std::atomic<ThreadBuffer*> g_registry{nullptr};
std::atomic<uint32_t> g_next_thread_index{1};

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
  ThreadBuffer* b = g_registry.exchange(nullptr, std::memory_order_acq_rel);
  while (b) {
    ThreadBuffer* next = b->next;
    if (!g_exchange && b != current) Unmap(b, kPrivateBytes);
    b = next;
  }
}

ThreadBuffer* AcquireThreadBuffer() {
  ThreadBuffer* buffer = nullptr;
  for (ThreadBuffer* b = FirstThreadBuffer(); b; b = b->next) {
    int expected = ThreadBuffer::kFree;
    if (b->state.compare_exchange_strong(expected, ThreadBuffer::kActive)) {
      buffer = b;
      break;
    }
  }
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
    buffer->state.store(ThreadBuffer::kActive, std::memory_order_relaxed);
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
  ResetUnwindState(buffer->unwind);  // the writer forgets its copy when it frees the buffer
  // announced is the writer's: it resets it when it recycles the buffer (see writer.cc).
  return buffer;
}

}  // namespace memlens::agent
