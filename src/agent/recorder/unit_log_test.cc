// src/agent/recorder/unit_log_test.cc: UnitLog against the C library's log.
#include "agent/recorder/unit_log.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

namespace memlens::agent {
namespace {

// Within 1e-13 of log(u), relatively: far under the sampler's resolution (whole bytes of a
// distance whose mean is the rate).
void ExpectClose(double u) {
  const double expected = std::log(u);
  EXPECT_NEAR(UnitLog(u), expected, 1e-13 * std::fabs(expected)) << "u = " << u;
}

TEST(UnitLog, MatchesLogOnTheSamplersDraws) {
  std::mt19937_64 rng(1);
  for (int i = 0; i < 1000000; ++i) {
    // The sampler's construction (sampler.cc): (x >> 11) + 1 over 2^53, in (0, 1].
    ExpectClose(static_cast<double>((rng() >> 11) + 1) * 0x1.0p-53);
  }
}

TEST(UnitLog, MatchesLogAtTheEdges) {
  EXPECT_EQ(UnitLog(1.0), 0.0);
  ExpectClose(0x1.0p-53);  // the smallest draw
  ExpectClose(0.5);
  ExpectClose(std::nextafter(1.0, 0.0));
  ExpectClose(1.0 - 1e-9);
  // Either side of sqrt(1/2) and sqrt(2)/4, where the mantissa is halved or not.
  for (double edge : {std::sqrt(0.5), std::sqrt(2.0) / 4}) {
    ExpectClose(edge);
    ExpectClose(std::nextafter(edge, 0.0));
    ExpectClose(std::nextafter(edge, 1.0));
  }
}

}  // namespace
}  // namespace memlens::agent
