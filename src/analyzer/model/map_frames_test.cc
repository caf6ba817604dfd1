// The address map's playback (ReplayOptions::map_frame_seconds): frames at time marks with the
// same regions as the snapshot's map, exact occupancy cells, none past the snapshot, and the
// budget that leaves frames out when the live set is big (MapFrames).
#include <gtest/gtest.h>

#include <cstdio>

#include "analyzer/model/replay.h"
#include "analyzer/model/replay_figures.h"
#include "analyzer/model/replay_test_capture.h"

namespace memlens::analyzer {
namespace {

using format::EventKind;
using testing::CaptureBuilder;
using testing::Save;

// Until 1 s: three blocks in one region [0x100000, 0x107000) and one far away; then the middle
// block of the three is freed; marks at 1 s and 2 s. Without its end record, the capture lasts
// until its last mark (the hand-built end says 1 us), for snapshots at times.
std::string HoledCapture(bool with_end = true) {
  CaptureBuilder b;
  format::RecordEncoder& enc = b.encoder();
  b.Add(EventKind::kMalloc, 0x100000, 0x1000, 1);
  b.Add(EventKind::kMalloc, 0x101000, 0x1000, 1);
  b.Add(EventKind::kMalloc, 0x104000, 0x3000, 2);  // a 0x2000 gap before it
  b.Add(EventKind::kMalloc, 0x900000, 0x100, 3);   // over 1 MiB away: a region of its own
  enc.Time({1'000'000'000, 4});
  b.Add(EventKind::kFree, 0x101000);               // the gap grows to 0x3000
  enc.Time({2'000'000'000, 5});
  return b.File(with_end);
}

Profile LoadFrames(const std::string& bytes, size_t cells, const SnapshotSpec& snapshot = {}) {
  std::string path = Save(bytes);
  Profile p;
  std::string error;
  ReplayOptions options;
  options.address_map = true;
  options.map_frame_seconds = {0.5, 1.5};
  options.map_frame_cells = cells;
  EXPECT_TRUE(LoadProfile(path, snapshot, options, &p, &error)) << error;
  std::remove(path.c_str());
  return p;
}

std::vector<uint8_t> Cells(std::initializer_list<int> values) {
  return std::vector<uint8_t>(values.begin(), values.end());
}

TEST(MapFrames, RegionsAndCellsAtEachMoment) {
  Profile p = LoadFrames(HoledCapture(), 7);  // cells of 0x1000 bytes
  ASSERT_EQ(p.map_frames.size(), 2u);
  EXPECT_EQ(p.map_frames_left_out, 0u);

  const MapFrame& before = p.map_frames[0];
  EXPECT_EQ(before.seconds, 0.5);
  EXPECT_EQ(before.at_seconds, 1.0);  // the first mark past 0.5 s
  ASSERT_EQ(before.regions.size(), 2u);
  const AddressRegion& r = before.regions[0];
  EXPECT_EQ(r.begin, 0x100000u);
  EXPECT_EQ(r.end, 0x107000u);
  EXPECT_EQ(r.in_use_bytes, 0x5000u);
  EXPECT_EQ(r.blocks, 3u);
  EXPECT_EQ(r.largest_gap, 0x2000u);
  EXPECT_EQ(r.top_stack, 2u);  // 0x3000 bytes against stack 1's 0x2000
  EXPECT_EQ(r.cells, Cells({255, 255, 0, 0, 255, 255, 255}));
  EXPECT_EQ(before.regions[1].begin, 0x900000u);
  EXPECT_EQ(before.regions[1].cells.size(), 7u);  // 0x100 bytes: 7 cells, all full
  EXPECT_EQ(before.regions[1].cells, Cells({255, 255, 255, 255, 255, 255, 255}));

  const MapFrame& after = p.map_frames[1];
  EXPECT_EQ(after.at_seconds, 2.0);
  ASSERT_EQ(after.regions.size(), 2u);
  EXPECT_EQ(after.regions[0].in_use_bytes, 0x4000u);
  EXPECT_EQ(after.regions[0].blocks, 2u);
  EXPECT_EQ(after.regions[0].largest_gap, 0x3000u);
  EXPECT_EQ(after.regions[0].cells, Cells({255, 0, 0, 0, 255, 255, 255}));

  // One implementation: the snapshot's map (at the end) is the last frame's, without cells.
  ASSERT_EQ(p.address_map.size(), after.regions.size());
  for (size_t i = 0; i < p.address_map.size(); ++i) {
    const AddressRegion& a = p.address_map[i];
    const AddressRegion& f = after.regions[i];
    EXPECT_EQ(a.begin, f.begin);
    EXPECT_EQ(a.end, f.end);
    EXPECT_EQ(a.in_use_bytes, f.in_use_bytes);
    EXPECT_EQ(a.blocks, f.blocks);
    EXPECT_EQ(a.largest_gap, f.largest_gap);
    EXPECT_EQ(a.top_stack, f.top_stack);
    EXPECT_TRUE(a.cells.empty());
  }
}

TEST(MapFrames, CellsThatAreCoveredInPartRoundToTheirShare) {
  // Four cells of 0x1c00 bytes over [0x100000, 0x107000) after the free: the first holds 0x1000
  // live bytes (255 * 4096 / 7168 = 145.7), the second none, the third 0x1400 (182.1), the last
  // is full.
  Profile p = LoadFrames(HoledCapture(), 4);
  ASSERT_EQ(p.map_frames.size(), 2u);
  EXPECT_EQ(p.map_frames[1].regions[0].cells, Cells({146, 0, 182, 255}));
}

TEST(MapFrames, NoneAfterTheSnapshot) {
  SnapshotSpec at_one;  // the first mark past 1.2 s is the 2 s one: the replay stops there
  at_one.kind = SnapshotSpec::kTime;
  at_one.seconds = 1.2;
  at_one.text = "t=1.2s";
  Profile p = LoadFrames(HoledCapture(false), 7, at_one);
  ASSERT_EQ(p.map_frames.size(), 2u);  // the 2 s mark is where it stops: its live set is right
  EXPECT_EQ(p.map_frames[1].regions[0].in_use_bytes, 0x4000u);

  SnapshotSpec at_half = at_one;  // stops at the 1 s mark: the 2 s frame is past it
  at_half.seconds = 0.5;
  at_half.text = "t=0.5s";
  Profile q = LoadFrames(HoledCapture(false), 7, at_half);
  ASSERT_EQ(q.map_frames.size(), 1u);
  EXPECT_EQ(q.map_frames[0].regions[0].in_use_bytes, 0x5000u);
}

TEST(MapFrames, ABigLiveSetGetsFewerFramesSpreadEvenly) {
  ReplayOptions options;
  options.map_frame_seconds = {0.5, 1.5, 2.5, 3.5};
  MapFrames frames(options, /*block_budget=*/10);  // 2.5 blocks earned per frame
  Profile p;
  int maps = 0;
  auto map = [&maps] {
    ++maps;
    return std::vector<AddressRegion>(1);
  };
  for (uint64_t k = 0; k < 4; ++k) {
    frames.OnTimeMark({(k + 1) * 1'000'000'000, 10 * (k + 1)});
    ASSERT_TRUE(frames.Due());
    frames.Take(10 * (k + 1), UINT64_MAX, /*live_blocks=*/5, map, &p);
  }
  // Frame k is taken when the blocks visited, its 5 included, are within 10 * (k + 1) / 4.
  ASSERT_EQ(p.map_frames.size(), 2u);
  EXPECT_EQ(p.map_frames[0].seconds, 1.5);
  EXPECT_EQ(p.map_frames[1].seconds, 3.5);
  EXPECT_EQ(p.map_frames_left_out, 2u);
  EXPECT_EQ(maps, 2);
}

}  // namespace
}  // namespace memlens::analyzer
