// Custom heaps replayed: figures, reset and destroy, each kind of misuse; and the snapshot
// specifiers that name markers.
#include "analyzer/model/custom_heaps.h"

#include <gtest/gtest.h>

#include "analyzer/model/replay.h"

namespace memlens::analyzer {
namespace {

TEST(CustomHeaps, FiguresThroughAllocFreeResetDestroy) {
  CustomHeaps heaps;
  heaps.Create(1, "pool", 7, 0);
  LiveBlock replaced, freed;
  EXPECT_FALSE(heaps.Alloc(1, 0x1000, 64, 9, 1, &replaced));
  EXPECT_FALSE(heaps.Alloc(1, 0x1040, 32, 9, 2, &replaced));
  EXPECT_TRUE(heaps.Free(1, 0x1000, 11, 3, &freed));
  EXPECT_EQ(freed.size, 64u);
  EXPECT_EQ(freed.stack, 9u);
  std::vector<LiveBlock> released;
  heaps.Release(1, /*destroy=*/false, &released);
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].size, 32u);
  EXPECT_FALSE(heaps.Alloc(1, 0x1000, 16, 9, 4, &replaced));
  auto figures = heaps.Figures();
  ASSERT_EQ(figures.size(), 1u);
  const HeapFigures& f = figures[0];
  EXPECT_EQ(f.name, "pool");
  EXPECT_EQ(f.create_stack, 7u);
  EXPECT_EQ(f.allocations, 3u);
  EXPECT_EQ(f.allocated_bytes, 112u);
  EXPECT_EQ(f.frees, 1u);
  EXPECT_EQ(f.resets, 1u);
  EXPECT_EQ(f.reset_blocks, 1u);
  EXPECT_EQ(f.in_use_bytes, 16u);
  EXPECT_EQ(f.in_use_blocks, 1u);
  EXPECT_EQ(f.peak_bytes, 96u);
  EXPECT_EQ(f.peak_blocks, 2u);
  EXPECT_EQ(f.peak_seq, 2u);
  released.clear();
  heaps.Release(1, /*destroy=*/true, &released);
  EXPECT_EQ(released.size(), 1u);
  EXPECT_TRUE(heaps.Figures()[0].destroyed);
  EXPECT_EQ(heaps.Figures()[0].resets, 1u);  // a destroy is not a reset
  EXPECT_EQ(heaps.anomalies().size(), 0u);
}

TEST(CustomHeaps, EachKindOfMisuseIsAnAnomalyWithItsStack) {
  CustomHeaps heaps;
  LiveBlock block;
  heaps.Create(1, "a", 1, 0);
  heaps.Alloc(1, 0x100, 8, 2, 1, &block);
  EXPECT_TRUE(heaps.Free(1, 0x100, 3, 2, &block));
  EXPECT_FALSE(heaps.Free(1, 0x100, 4, 3, &block));  // double free
  EXPECT_FALSE(heaps.Free(1, 0x999, 5, 4, &block));  // never handed out
  heaps.Alloc(1, 0x200, 8, 2, 5, &block);
  std::vector<LiveBlock> released;
  heaps.Release(1, false, &released);
  EXPECT_FALSE(heaps.Free(1, 0x200, 6, 6, &block));  // after reset
  heaps.Alloc(1, 0x200, 8, 2, 7, &block);             // handed out again: fine to free
  EXPECT_TRUE(heaps.Free(1, 0x200, 6, 8, &block));
  heaps.Create(2, "a", 7, 9);                          // the name of a live heap
  heaps.Release(2, true, &released);
  EXPECT_FALSE(heaps.Free(2, 0x300, 8, 10, &block));  // after destroy
  heaps.Create(3, "a", 9, 11);  // heap 1 is still alive: reused again
  heaps.Release(1, true, &released);
  heaps.Release(3, true, &released);
  heaps.Create(4, "a", 10, 12);  // every "a" is gone: a new one is no misuse
  const uint64_t* counts = heaps.anomaly_counts();
  EXPECT_EQ(counts[Anomaly::kDoubleFree], 1u);
  EXPECT_EQ(counts[Anomaly::kUnknownFree], 1u);
  EXPECT_EQ(counts[Anomaly::kFreeAfterReset], 1u);
  EXPECT_EQ(counts[Anomaly::kFreeAfterDestroy], 1u);
  EXPECT_EQ(counts[Anomaly::kNameReused], 2u);
  std::vector<std::pair<Anomaly::Kind, uint64_t>> seen;
  for (const Anomaly& a : heaps.anomalies()) seen.push_back({a.kind, a.stack});
  EXPECT_EQ(seen, (std::vector<std::pair<Anomaly::Kind, uint64_t>>{
                      {Anomaly::kDoubleFree, 4},
                      {Anomaly::kUnknownFree, 5},
                      {Anomaly::kFreeAfterReset, 6},
                      {Anomaly::kNameReused, 7},
                      {Anomaly::kFreeAfterDestroy, 8},
                      {Anomaly::kNameReused, 9}}));
}

TEST(CustomHeaps, AnUnknownHeapGetsANamelessEntry) {
  CustomHeaps heaps;
  LiveBlock block;
  heaps.Alloc(5, 0x10, 4, 1, 0, &block);
  ASSERT_EQ(heaps.Figures().size(), 1u);
  EXPECT_EQ(heaps.Figures()[0].name, "heap#5");
}

TEST(SnapshotSpecifiers, MarkersAndSnapshots) {
  std::string path, error;
  SnapshotSpec spec;
  ASSERT_TRUE(ParseCaptureArgument("a.mlens@marker:frame#12", &path, &spec, &error)) << error;
  EXPECT_EQ(path, "a.mlens");
  EXPECT_EQ(spec.kind, SnapshotSpec::kMarker);
  EXPECT_EQ(spec.name, "frame");
  EXPECT_EQ(spec.occurrence, 12u);
  ASSERT_TRUE(ParseCaptureArgument("dir@x/a.mlens@snapshot:main menu", &path, &spec, &error));
  EXPECT_EQ(path, "dir@x/a.mlens");
  EXPECT_EQ(spec.kind, SnapshotSpec::kSnapshot);
  EXPECT_EQ(spec.name, "main menu");
  EXPECT_EQ(spec.occurrence, 1u);
  // '#' without digits after it, and '@', belong to the name.
  ASSERT_TRUE(ParseCaptureArgument("a.mlens@marker:level#a@b", &path, &spec, &error));
  EXPECT_EQ(spec.name, "level#a@b");
  EXPECT_FALSE(ParseCaptureArgument("a.mlens@marker:frame#0", &path, &spec, &error));
  EXPECT_NE(error.find("counts from 1"), std::string::npos);
  EXPECT_FALSE(ParseCaptureArgument("a.mlens@marker:#3", &path, &spec, &error));
  EXPECT_FALSE(ParseCaptureArgument("a.mlens@snapshot:", &path, &spec, &error));
}

}  // namespace
}  // namespace memlens::analyzer
