// src/analyzer/views/leaks_test.cc: the logical-leak rule and where its checkpoints fall.
#include "analyzer/views/leaks.h"

#include <gtest/gtest.h>

namespace memlens::analyzer {
namespace {

TEST(GrowsTest, NeverDecreasingRisingInHalfTheSteps) {
  EXPECT_TRUE(Grows({100, 200, 300, 400}));
  EXPECT_TRUE(Grows({100, 100, 200, 300}));   // 2 rises in 3 steps
  EXPECT_TRUE(Grows({100, 100, 200, 200, 300}));  // 2 of 4: half
  EXPECT_FALSE(Grows({100, 100, 100, 200}));  // one burst: 1 rise in 3 steps
  EXPECT_FALSE(Grows({100, 300, 200, 400}));  // a decrease
  EXPECT_FALSE(Grows({300, 300}));
  EXPECT_FALSE(Grows({300}));
}

Marker MarkerAt(const std::string& name, uint64_t seq) {
  Marker m;
  m.name = name;
  m.seq = seq;
  return m;
}

TEST(MostRepeatedMarkerTest, AtLeastMinCountFirstOnATieSnapshotsNotCounted) {
  std::vector<Marker> markers = {MarkerAt("a", 1), MarkerAt("b", 2), MarkerAt("b", 3),
                                 MarkerAt("a", 4), MarkerAt("s", 5), MarkerAt("s", 6),
                                 MarkerAt("s", 7)};
  for (size_t i = 4; i < 7; ++i) markers[i].snapshot = true;
  EXPECT_EQ(MostRepeatedMarker(markers, 2), "b");  // b reached 2 first
  EXPECT_EQ(MostRepeatedMarker(markers, 3), "");
}

TEST(PlanGrowthCheckpointsTest, RepeatedMarkerEvenlyPickedFirstAndLastIncluded) {
  Profile p;
  p.snapshot_seconds = 10;
  for (uint64_t k = 0; k < 7; ++k) p.markers.push_back(MarkerAt("frame", 100 + 10 * k));
  p.markers.push_back(MarkerAt("once", 5));
  GrowthCheckpoints plan;
  std::string error;
  ASSERT_TRUE(PlanGrowthCheckpoints(p, 4, "", &plan, &error));
  EXPECT_EQ(plan.marker, "frame");
  EXPECT_EQ(plan.seqs, (std::vector<uint64_t>{100, 120, 140, 160}));
  EXPECT_TRUE(plan.seconds.empty());
  EXPECT_EQ(plan.Wanted(), 4u);
}

TEST(PlanGrowthCheckpointsTest, EvenlySpacedTimesWithoutARepeatedMarker) {
  Profile p;
  p.snapshot_seconds = 10;
  p.markers.push_back(MarkerAt("once", 5));
  GrowthCheckpoints plan;
  std::string error;
  ASSERT_TRUE(PlanGrowthCheckpoints(p, 4, "", &plan, &error));
  EXPECT_EQ(plan.marker, "");
  EXPECT_EQ(plan.seconds, (std::vector<double>{2, 4, 6, 8}));
  EXPECT_FALSE(PlanGrowthCheckpoints(p, 4, "once", &plan, &error));
  EXPECT_EQ(error, "--marker once: the capture has 1 markers of that name; --growth needs 2 or more");
}

}  // namespace
}  // namespace memlens::analyzer
