// src/agent/recorder/sampler.h
//
// Sampling mode (docs/sampling.md): every byte a heap allocation asks for is sampled with
// probability 1/rate, so a block of s bytes is recorded with probability 1 - exp(-s/rate) (the
// Poisson byte sampling of tcmalloc, jemalloc and heapprofd), and a free is recorded only when
// its block was. The analyzer scales each recorded block back by the inverse of that
// probability, which makes every figure an unbiased estimate.
//
// The distance to the next sampled byte is exponential; each thread counts it down, so an
// allocation that is not sampled costs one subtraction and a compare, and never reaches the
// stack unwinder. A heap block of g_sample_exact_from bytes or more is recorded whole, always
// (weight 1: large figures are exact), and leaves the countdown alone (sampler.cc says why that
// biases nothing). Mappings (mmap, munmap, mremap) and pymalloc arenas are always recorded in
// full: each is a system call that costs more than recording it, and a munmap may cut any part
// of any mapping, which a set of sampled start addresses could not answer.
//
// Runs on: application threads, inside the allocation hooks (hot-path rules apply:
// docs/hot-path-rules.md). ConfigureSampling runs once, in InitializeOnce, before recording.
#pragma once

#include <cstddef>
#include <cstdint>

#include "agent/recorder/recorder.h"
#include "agent/recorder/sample_countdown.h"
#include "agent/recorder/sampled_pointers.h"
#include "format/records.h"

namespace memlens::agent {

// The mean bytes between samples; 0 in full tracing. Written once before recording starts.
extern uint64_t g_sample_rate;
// Heap blocks of this size or more are always recorded (format::SamplingModel::exact_from).
extern uint64_t g_sample_exact_from;
// Bytes up to and including this thread's next sampled byte, clamped to g_sample_exact_from so
// that the short path's one compare also sends every large block to SampleSlow (0: not yet
// drawn). The rest of the distance waits in sampler.cc.
extern thread_local constinit uint64_t t_bytes_to_sample;  // constinit: no TLS wrapper call

// The live sampled blocks (constant-initialized: usable at the first malloc).
extern SampledPointers g_sampled;

// Sets the rate, the size from which blocks are recorded whole (0: the rate) and the seed (0: a
// random one), and maps the table of sampled blocks. Returns false when the table cannot be
// mapped.
bool ConfigureSampling(uint64_t rate, uint64_t exact_from, uint64_t seed);

// The clamped countdown ran out (or the thread had none yet): a large block, a sample point, or
// only the clamp; decides, and draws the next distance when a sample point was used.
bool SampleSlow(uint64_t size);
// A sampled heap block is remembered so its free is recorded.
inline bool RememberSampled(const void* address, size_t size) {
  if (g_sampled.Insert(reinterpret_cast<uintptr_t>(address), size)) return true;
  CountDroppedEvent();  // the set stayed busy: leave the block out, and say figures are short
  return false;
}
bool AdmitReleaseSlow(format::EventKind kind, const void* address);

// True when an allocation of this size is to be recorded.
inline bool ShouldSample(uint64_t size) {
  return !CountsDownUnsampled(&t_bytes_to_sample, size) && SampleSlow(size);
}

// --- the short path (docs/hot-path-rules.md, "Sampling mode's short path") ---
// An allocation that holds no sample point and the release of a block that was not sampled need
// nothing recorded: no caller check, no call into the recorder. The interposers ask below first
// (PassesUnsampled, ReleasesUnsampled); the Python wrappers ask the same on the agent's
// thread-local state, through the bridge (python_bridge.h).

// True while this process records with sampling. The rate is read first: in full tracing it
// costs one load and a branch.
inline bool SamplingShortPath() {
  return g_sample_rate != 0 && g_state.load(std::memory_order_relaxed) == kRecording;
}

// --- the interposers' direct path ---
// Set once, before recording, when sampling and the real allocator is the C library's: its own
// work reaches none of our hooks (it maps memory with its internal mmap, not the exported one),
// so an unsampled malloc, calloc, realloc or free needs no guard either, and the interposer
// jumps straight to the real function after a few instructions, with no frame of its own. With
// another allocator behind us (one the program links, or preloads after us), whatever it calls
// could be recorded, so the interposers take the full path, which guards it.
extern bool g_direct_short_path;

// Set once, before recording, when sampling with another allocator behind us (jemalloc,
// tcmalloc, the program's own): an unsampled call skips the full path's caller check and its
// call into the recorder, but still runs the real function under the guard, since what that
// allocator does beneath (its own mmap, say) is not the program's. Checked first on the full
// path (interposers.cc).
extern bool g_guarded_short_path;

// On the direct path: true when an allocation of `size` bytes is not to be recorded, because it
// holds no sample point (its bytes counted down) or the thread is inside the agent.
inline bool PassesUnsampled(uint64_t size) {
  return t_in_hook || CountsDownUnsampled(&t_bytes_to_sample, size);
}

// On the direct path: true when the block at `address` certainly was not sampled.
inline bool ReleasesUnsampled(const void* address) {
  return !g_sampled.MaybeSampled(reinterpret_cast<uintptr_t>(address));
}

// An allocation that the full path does not record although the thread is not inside the
// agent (the agent's own code calling malloc without a guard): its bytes still count, as the
// short path would have counted them had they held no sample point; otherwise the sample point
// would slide onto the program's next block.
inline void PassOverUnrecorded(uint64_t size) {
  if (SamplingShortPath() && !t_in_hook) ShouldSample(size);
}

// Called first by RecordAlloc: false when this allocation is left out.
inline bool AdmitAlloc(format::EventKind kind, const void* address, size_t size) {
  if (g_sample_rate == 0 || !format::IsHeapAlloc(kind)) return true;
  return ShouldSample(size) && RememberSampled(address, size);
}

// Called first by RecordRelease: false when this release is left out (its block was not
// sampled).
inline bool AdmitRelease(format::EventKind kind, const void* address) {
  return g_sample_rate == 0 || AdmitReleaseSlow(kind, address);
}

}  // namespace memlens::agent
