// src/windows/agent/api.cc
//
// The instrumentation API of include/memlens/memlens.h, exported by memlens_agent.dll: a
// program's own heaps (their blocks and types), markers and snapshot requests, recorded as on
// Linux (src/agent/api/api.cc): the same events, the same string table. The header finds these
// functions with GetProcAddress on memlens_agent.dll; without the agent every call does nothing.
// Spans (memlens_start, memlens_stop) are Linux-only for now: they answer -1 and say why.
//
// Runs on: application threads. Hot-path rules apply (recording.h).
#define MEMLENS_AGENT_BUILD
#include <algorithm>
#include <cstring>

#include "agent/api/string_table.h"
#include "memlens/memlens.h"
#include "windows/agent/agent.h"
#include "windows/agent/recording.h"

namespace {

using memlens::format::EventKind;
using namespace memlens::windows;

constexpr char kNoSpans[] = "spans (memlens_start, memlens_stop) are not available on Windows yet";
constexpr DWORD kFlushWaitMs = 1000;

uint32_t HeapId(memlens_heap* heap) {
  return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(heap));
}
uint64_t Address(const void* p) { return reinterpret_cast<uint64_t>(p); }

void SayNoSpans(char* error, size_t error_size) {
  if (error && error_size) {
    const size_t n = std::min(sizeof kNoSpans - 1, error_size - 1);
    std::memcpy(error, kNoSpans, n);
    error[n] = '\0';
    return;
  }
  DWORD wrote = 0;
  const char line[] = "memlens: ";
  HANDLE err = GetStdHandle(STD_ERROR_HANDLE);
  WriteFile(err, line, sizeof line - 1, &wrote, nullptr);
  WriteFile(err, kNoSpans, sizeof kNoSpans - 1, &wrote, nullptr);
  WriteFile(err, "\n", 1, &wrote, nullptr);
}

__attribute__((always_inline)) inline void Block(EventKind kind, memlens_heap* heap,
                                                 const void* ptr, size_t size, const char* type) {
  if (!heap || !ptr) return;
  if (ThreadState* state = Entering()) {
    Guard guard(state);
    const uint32_t type_id = type ? memlens::agent::InternString(type) : 0;
    Record(state, kind, Address(ptr), size, CustomHeapExtra(HeapId(heap), type_id), true);
  }
}

}  // namespace

extern "C" {

memlens_heap* memlens_heap_create(const char* name) {
  ThreadState* state = Entering();
  if (state == nullptr) return nullptr;
  const uint32_t id = NewHeapId();
  uint32_t name_id;
  {
    Guard guard(state);
    name_id = memlens::agent::InternString(name);
  }
  Record(state, EventKind::kHeapCreate, id, name_id, 0, true);
  return reinterpret_cast<memlens_heap*>(static_cast<uintptr_t>(id));
}

void memlens_heap_alloc(memlens_heap* heap, const void* ptr, size_t size) {
  Block(EventKind::kHeapAlloc, heap, ptr, size, nullptr);
}

void memlens_heap_alloc_typed(memlens_heap* heap, const void* ptr, size_t size,
                              const char* type_name) {
  Block(EventKind::kHeapAlloc, heap, ptr, size, type_name);
}

void memlens_heap_free(memlens_heap* heap, const void* ptr) {
  if (!heap || !ptr) return;
  if (ThreadState* state = Entering()) {
    Record(state, EventKind::kHeapFree, Address(ptr), 0, CustomHeapExtra(HeapId(heap), 0), false);
  }
}

void memlens_heap_realloc(memlens_heap* heap, const void* old_ptr, const void* new_ptr,
                          size_t new_size) {
  if (!heap || !new_ptr) return;
  if (old_ptr) memlens_heap_free(heap, old_ptr);
  Block(EventKind::kHeapRealloc, heap, new_ptr, new_size, nullptr);
}

void memlens_heap_reset(memlens_heap* heap) {
  if (!heap) return;
  if (ThreadState* state = Entering())
    Record(state, EventKind::kHeapReset, HeapId(heap), 0, 0, false);
}

void memlens_heap_destroy(memlens_heap* heap) {
  if (!heap) return;
  if (ThreadState* state = Entering()) {
    Record(state, EventKind::kHeapDestroy, HeapId(heap), 0, 0, false);
  }
}

void memlens_add_marker(const char* name, const char* category) {
  ThreadState* state = Entering();
  if (state == nullptr) return;
  uint32_t name_id, category_id;
  {
    Guard guard(state);
    name_id = memlens::agent::InternString(name);
    category_id = category ? memlens::agent::InternString(category) : 0;
  }
  Record(state, EventKind::kMarker, name_id, category_id, 0, false);
}

void memlens_take_snapshot(const char* name) {
  ThreadState* state = Entering();
  if (state == nullptr) return;
  uint32_t name_id;
  {
    Guard guard(state);
    name_id = memlens::agent::InternString(name);
  }
  Record(state, EventKind::kSnapshot, name_id, 0, 0, false);
}

int memlens_is_recording(void) { return Recording() ? 1 : 0; }

int memlens_start(const char*) {
  SayNoSpans(nullptr, 0);
  return -1;
}

int memlens_start_with(const char*, const char*, char* error, size_t error_size) {
  SayNoSpans(error, error_size);
  return -1;
}

int memlens_stop(void) {
  SayNoSpans(nullptr, 0);
  return -1;
}

int memlens_stop_with(char* error, size_t error_size) {
  SayNoSpans(error, error_size);
  return -1;
}

void memlens_flush(void) {
  if (ThreadState* state = Entering()) {
    Guard guard(state);
    FlushCapture(kFlushWaitMs);
  }
}

}  // extern "C"
