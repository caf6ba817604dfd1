// src/format/sampling_model.h
//
// The sampling model: how likely a heap block of a sampled image was to be recorded, which the
// agent's sampler follows and the analyzer's estimates assume (docs/sampling.md). One place, so
// the two sides and every figure's error are computed from the same formula.
//
// Runs on: the analyzer's replay (once per heap event of a sampled capture); pure arithmetic.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace memlens::format {

inline constexpr uint64_t kNoExactThreshold = std::numeric_limits<uint64_t>::max();

struct SamplingModel {
  uint64_t rate = 0;                       // mean bytes between sample points; 0: every block
  uint64_t exact_from = kNoExactThreshold;  // blocks of this size and more are always recorded

  bool sampled() const { return rate != 0; }

  // Poisson sampling by bytes: a block of s bytes holds at least one sample point with
  // probability 1 - exp(-s/rate); a block of exact_from bytes or more is recorded whole.
  double RecordProbability(uint64_t size) const {
    if (rate == 0 || size >= exact_from) return 1.0;
    return -std::expm1(-static_cast<double>(size) / static_cast<double>(rate));
  }
};

}  // namespace memlens::format
