// src/base/monotonic_clock.h
//
// Nanoseconds of CLOCK_MONOTONIC: the agent's clock for bounded waits and time marks (through
// the vDSO: no system call, no lock, safe on the allocation hot path's slow parts).
#pragma once

#include <time.h>

#include <cstdint>

namespace memlens {

inline uint64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace memlens
