// src/agent/recorder/unit_log.h
//
// UnitLog: the natural logarithm of a number in (0, 1], for the sampler's exponential draw
// (sampler.cc), on every sampled allocation. The C library's log costs a call, about 45
// instructions and two cache lines of its table, which the program's own work has evicted by
// the next sample (bench/instruction_cost.py); this is straight-line arithmetic with no table.
//
// u = m * 2^e with m in [sqrt(1/2), sqrt(2)), and ln m = 2 atanh(t) with t = (m - 1) / (m + 1),
// |t| <= 0.172, summed to t^17: the first term left out is below 1e-15, far under the draw's
// own resolution (the distance is rounded to whole bytes). unit_log_test.cc checks it against
// the C library's log.
#pragma once

#include <bit>
#include <cstdint>

namespace memlens::agent {

// u must be a normal double in (0, 1].
inline double UnitLog(double u) {
  constexpr uint64_t kMantissa = (uint64_t{1} << 52) - 1;
  constexpr uint64_t kSqrt2Mantissa = 0x6a09e667f3bcdull;  // sqrt(2)'s 52 fraction bits
  const uint64_t bits = std::bit_cast<uint64_t>(u);
  int64_t exponent = static_cast<int64_t>(bits >> 52) - 1023;
  uint64_t fraction = bits & kMantissa;
  // m in [1, 2) from the fraction; past sqrt(2), halve it and count one more in the exponent.
  const bool upper = fraction >= kSqrt2Mantissa;
  exponent += upper;
  const double m =
      std::bit_cast<double>(fraction | (static_cast<uint64_t>(1023 - upper) << 52));
  const double t = (m - 1.0) / (m + 1.0);
  const double t2 = t * t;
  // 1 + t2/3 + t2^2/5 + ... + t2^8/17, by Horner's rule.
  double series = 1.0 / 17;
  series = 1.0 / 15 + t2 * series;
  series = 1.0 / 13 + t2 * series;
  series = 1.0 / 11 + t2 * series;
  series = 1.0 / 9 + t2 * series;
  series = 1.0 / 7 + t2 * series;
  series = 1.0 / 5 + t2 * series;
  series = 1.0 / 3 + t2 * series;
  series = 1.0 + t2 * series;
  constexpr double kLn2 = 0.6931471805599453;
  return static_cast<double>(exponent) * kLn2 + 2.0 * t * series;
}

}  // namespace memlens::agent
