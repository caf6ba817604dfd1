// src/agent/recorder/sampler.cc: see sampler.h. Allocation hot path (the sampled part of it).
#include "agent/recorder/sampler.h"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

#include "agent/recorder/recorder.h"
#include "agent/recorder/sampled_pointers.h"
#include "agent/recorder/unit_log.h"

namespace memlens::agent {

uint64_t g_sample_rate = 0;
uint64_t g_sample_exact_from = 0;
bool g_direct_short_path = false;
bool g_guarded_short_path = false;
constinit thread_local uint64_t t_bytes_to_sample = 0;
constinit SampledPointers g_sampled;

namespace {
uint64_t g_seed = 0;
std::atomic<uint64_t> g_thread_ordinal{0};
thread_local uint64_t t_rng = 0;  // splitmix64 state; 0: this thread has not drawn yet
// The part of the distance to the next sample point beyond the clamp of t_bytes_to_sample.
thread_local uint64_t t_bytes_beyond = 0;
// The block a realloc on this thread is replacing, when it was sampled: if the realloc fails,
// the block lives on and goes back into the set.
thread_local uint64_t t_realloc_address = 0;
thread_local uint64_t t_realloc_size = 0;

uint64_t SplitMix(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Bytes to the next sampled byte: exponential with mean g_sample_rate, at least 1. With u
// uniform in (0, 1], floor(-rate * ln u) + 1 <= s exactly when -rate * ln u < s, so a block of
// s bytes is sampled with probability 1 - exp(-s/rate).
uint64_t DrawDistance() {
  double u = static_cast<double>((SplitMix(&t_rng) >> 11) + 1) * 0x1.0p-53;
  double d = -static_cast<double>(g_sample_rate) * UnitLog(u);
  return d >= 0x1.0p62 ? (uint64_t{1} << 62) : static_cast<uint64_t>(d) + 1;
}

// Sets the distance to the next sample point: the short path counts down at most
// g_sample_exact_from of it, so that any block that large fails its compare.
void SetDistance(uint64_t distance) {
  t_bytes_to_sample = distance < g_sample_exact_from ? distance : g_sample_exact_from;
  t_bytes_beyond = distance - t_bytes_to_sample;
}

}  // namespace

bool ConfigureSampling(uint64_t rate, uint64_t exact_from, uint64_t seed) {
  if (!g_sampled.Init()) return false;
  if (seed == 0) {  // no seed asked for: a different sequence in every run
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t mix = static_cast<uint64_t>(ts.tv_nsec) ^ (static_cast<uint64_t>(ts.tv_sec) << 32) ^
                   (static_cast<uint64_t>(getpid()) << 16) ^ reinterpret_cast<uintptr_t>(&mix);
    seed = SplitMix(&mix);
  }
  g_seed = seed;
  g_sample_rate = rate;
  g_sample_exact_from = exact_from ? exact_from : rate;
  return true;
}

bool SampleSlow(uint64_t size) {
  if (t_rng == 0) {
    // Each thread its own stream: the seed, then the thread's place in the order threads first
    // allocated (a single-threaded program draws the same samples for the same seed).
    uint64_t ordinal = g_thread_ordinal.fetch_add(1, std::memory_order_relaxed);
    t_rng = g_seed ^ (ordinal * 0xD6E8FEB86659FD93ULL);
    if (t_rng == 0) t_rng = 1;
    SetDistance(DrawDistance());
  }
  // A large block is recorded whole and its bytes are not counted down. The sample points fall
  // on the stream of the smaller blocks' bytes alone, and that stream is still a Poisson process
  // of rate 1/rate: the distance left is exponential whatever came before (the process has no
  // memory), so leaving bytes out of the stream changes no small block's chance, which stays
  // 1 - exp(-s/rate), independent of the others. The estimator (weight 1/p per block) is unbiased
  // for both kinds: p = 1 for the large ones.
  if (size >= g_sample_exact_from) return true;
  uint64_t left = t_bytes_to_sample + t_bytes_beyond;
  if (size < left) {  // only the clamp ran out: no sample point in this block
    SetDistance(left - size);
    return false;
  }
  // A sampled byte falls inside this block. However many more do, the distance from its end to
  // the next one is again exponential (the process has no memory), so draw afresh.
  SetDistance(DrawDistance());
  return true;
}

bool AdmitReleaseSlow(format::EventKind kind, const void* address) {
  using format::EventKind;
  uint64_t a = reinterpret_cast<uintptr_t>(address);
  uint64_t size = 0;
  switch (kind) {
    case EventKind::kFree:
      // Take asks the filter first, which stops most frees there. kBusy: unknown, so record
      // it; the analyzer ignores a free of a block it never saw.
      return g_sampled.Take(a, &size) != SampledPointers::Lookup::kAbsent;
    case EventKind::kReallocOld: {
      SampledPointers::Lookup found = g_sampled.Take(a, &size);
      t_realloc_address = found == SampledPointers::Lookup::kTaken ? a : 0;
      t_realloc_size = size;
      return found != SampledPointers::Lookup::kAbsent;
    }
    case EventKind::kReallocFailed:
      if (a == 0 || a != t_realloc_address) return false;
      t_realloc_address = 0;
      if (!g_sampled.Insert(a, t_realloc_size)) CountDroppedEvent();
      return true;
    default:  // mappings and pymalloc arenas are recorded in full
      return true;
  }
}

}  // namespace memlens::agent
