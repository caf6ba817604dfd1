// src/agent/api/api.cc
//
// The agent's side of the instrumentation API (include/memlens/memlens.h): the exported
// memlens_* functions that programs reach through the header (dlsym) and Python through ctypes.
// Each one records an event (a custom heap's create, block alloc/free/realloc, reset, destroy;
// a marker; a snapshot request) when this process is being recorded, and returns at once when
// it is not. Misuse is not checked here (the analyzer pairs frees with allocations and reports
// anomalies): the agent keeps no per-block table.
//
// Runs on: application threads. Hot-path rules apply (recorder.h): no heap, no locks, no stdio;
// except in the span calls (memlens_start, _stop, _flush: agent.h), which are rare and may
// allocate, lock and wait.
#define MEMLENS_AGENT_BUILD
#include "memlens/memlens.h"

#include <atomic>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <string>

#include "agent/agent.h"

#include "agent/api/string_table.h"
#include "agent/recorder/recorder.h"
#include "agent/writer/writer.h"
#include "base/raw_mapping.h"

using memlens::agent::HookGuard;
using memlens::agent::InternString;
using memlens::format::EventKind;

namespace {

std::atomic<uint32_t> g_next_heap{1};
// How long a marker waits, at most, for the mappings' reading before it (writer.h).
constexpr int kMarkerReadingWaitMs = 250;

// True when the call should be recorded; decides, at the process's first call into the agent,
// whether it records at all (as the interposers do).
inline bool ShouldRecordApiCall(const void* caller) {
  if (__builtin_expect(memlens::agent::g_state.load(std::memory_order_relaxed) ==
                           memlens::agent::kUninitialized, 0)) {
    memlens::agent::InitializeOnce();
  }
  return memlens::agent::ShouldRecord(caller);
}
#define Enter() ShouldRecordApiCall(__builtin_return_address(0))

uint32_t HeapId(memlens_heap* heap) {
  return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(heap));
}

void SayOnStderr(const char* call, const std::string& why) {
  memlens::agent::SayToUser(std::string(call) + ": " + why);
}

const void* AsAddress(uint64_t value) { return reinterpret_cast<const void*>(value); }

void RecordBlock(EventKind kind, memlens_heap* heap, const void* ptr, size_t size,
                 const char* type_name) {
  uint32_t type = type_name ? InternString(type_name) : 0;
  memlens::agent::RecordAnnotated(kind, ptr, size, (uint64_t{HeapId(heap)} << 32) | type);
}

// The reason, one line, into error[0..error_size): truncated, always terminated.
void CopyReason(const std::string& why, char* error, size_t error_size) {
  if (!error || !error_size) return;
  size_t n = std::min(why.size(), error_size - 1);
  std::memcpy(error, why.data(), n);
  error[n] = '\0';
}

}  // namespace

extern "C" {

memlens_heap* memlens_heap_create(const char* name) {
  if (!Enter()) return nullptr;
  HookGuard guard;
  uint32_t id = g_next_heap.fetch_add(1, std::memory_order_relaxed);
  memlens::agent::RecordAlloc(EventKind::kHeapCreate, AsAddress(id), InternString(name));
  return reinterpret_cast<memlens_heap*>(static_cast<uintptr_t>(id));
}

void memlens_heap_alloc(memlens_heap* heap, const void* ptr, size_t size) {
  if (!heap || !ptr || !Enter()) return;
  HookGuard guard;
  RecordBlock(EventKind::kHeapAlloc, heap, ptr, size, nullptr);
}

void memlens_heap_alloc_typed(memlens_heap* heap, const void* ptr, size_t size,
                              const char* type_name) {
  if (!heap || !ptr || !Enter()) return;
  HookGuard guard;
  RecordBlock(EventKind::kHeapAlloc, heap, ptr, size, type_name);
}

void memlens_heap_free(memlens_heap* heap, const void* ptr) {
  if (!heap || !ptr || !Enter()) return;
  HookGuard guard;
  RecordBlock(EventKind::kHeapFree, heap, ptr, 0, nullptr);
}

// The old block's release first, as for realloc (docs/capture-format.md, section 7).
void memlens_heap_realloc(memlens_heap* heap, const void* old_ptr, const void* new_ptr,
                          size_t new_size) {
  if (!heap || !Enter()) return;
  HookGuard guard;
  if (old_ptr) RecordBlock(EventKind::kHeapFree, heap, old_ptr, 0, nullptr);
  if (new_ptr) RecordBlock(EventKind::kHeapRealloc, heap, new_ptr, new_size, nullptr);
}

void memlens_heap_reset(memlens_heap* heap) {
  if (!heap || !Enter()) return;
  HookGuard guard;
  memlens::agent::RecordRelease(EventKind::kHeapReset, AsAddress(HeapId(heap)), 0);
}

void memlens_heap_destroy(memlens_heap* heap) {
  if (!heap || !Enter()) return;
  HookGuard guard;
  memlens::agent::RecordRelease(EventKind::kHeapDestroy, AsAddress(HeapId(heap)), 0);
}

void memlens_add_marker(const char* name, const char* category) {
  if (!Enter()) return;
  HookGuard guard;
  memlens::agent::ReadMappingsBeforeMarker(kMarkerReadingWaitMs);
  memlens::agent::RecordRelease(EventKind::kMarker, AsAddress(InternString(name)),
                                category ? InternString(category) : 0);
}

void memlens_take_snapshot(const char* name) {
  if (!Enter()) return;
  HookGuard guard;
  memlens::agent::ReadMappingsBeforeMarker(kMarkerReadingWaitMs);
  memlens::agent::RecordRelease(EventKind::kSnapshot, AsAddress(InternString(name)), 0);
}

// Not in memlens.h's list: Python's memlens.monitor asks it through ctypes (a metric with each
// snapshot). What the agent has mapped for itself: thread buffers, unwinder and sampling tables,
// the stack interner's caches (virtual size; pages are touched as used). Not the writer thread's
// heap (its stack table, encode buffers), which comes from the C library's malloc.
__attribute__((visibility("default"))) size_t memlens_get_agent_memory(void) {
  return memlens::RawMappedBytes();
}

int memlens_is_recording(void) {
  return memlens::agent::g_state.load(std::memory_order_relaxed) == memlens::agent::kRecording;
}

int memlens_start(const char* path) {
  std::string why;
  if (memlens::agent::StartSpan(path, nullptr, &why)) return 0;
  SayOnStderr("memlens_start", why + "; not recording");
  return -1;
}

int memlens_start_with(const char* path, const char* options, char* error, size_t error_size) {
  std::string why;
  if (memlens::agent::StartSpan(path, options, &why)) {
    CopyReason(memlens::agent::QuietNote(), error, error_size);  // quiet=1: what it did not say
    return 0;
  }
  CopyReason(why, error, error_size);
  return -1;
}

int memlens_stop(void) {
  std::string why;
  if (memlens::agent::StopSpan(&why)) return 0;
  SayOnStderr("memlens_stop", why);
  return -1;
}

int memlens_stop_with(char* error, size_t error_size) {
  std::string why;
  if (memlens::agent::StopSpan(&why)) return 0;
  CopyReason(why, error, error_size);
  return -1;
}

void memlens_flush(void) { memlens::agent::FlushSpan(); }

}  // extern "C"
