// The load policy on hand-built captures: cut-short and empty files, a damaged snapshot
// index, and which moment "exit" is (the program's end or the process's).
#include "analyzer/model/replay.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "analyzer/model/capture.h"
#include "analyzer/model/replay_test_capture.h"
#include "analyzer/model/snapshot_index.h"

namespace memlens::analyzer {
namespace {

using format::EventKind;
using testing::CaptureBuilder;
using testing::Load;
using testing::Save;

TEST(Replay, TruncatedCaptureKeepsWhatWasRead) {
  CaptureBuilder b;
  b.Add(EventKind::kMalloc, 0xa0, 100, 1);
  std::string first = b.File(false);
  std::string file = first + first.substr(format::kFileHeaderSize, 30);  // half a second chunk
  Profile p = Load(file);
  EXPECT_EQ(p.totals.allocated_bytes, 100u);
  EXPECT_NE(p.read.damage.find("truncated"), std::string::npos) << p.read.damage;
}

TEST(Replay, CaptureWithoutRecordsIsAnError) {
  std::string path = Save(format::EncodeFileHeader());
  Profile p;
  std::string error;
  EXPECT_FALSE(LoadProfile(path, &p, &error));
  EXPECT_NE(error.find("holds no recording"), std::string::npos) << error;
  std::remove(path.c_str());
  EXPECT_FALSE(LoadProfile("/nonexistent/capture.mlens", &p, &error));
  EXPECT_NE(error.find("No such file"), std::string::npos) << error;
}


// A damaged snapshot index: sizes that wrap around, or that claim more than the compressed
// frame holds, are refused before anything is allocated for them.
TEST(SnapshotIndex, DamagedSizesAreRefusedNotAllocated) {
  CaptureBuilder b;
  for (uint64_t i = 0; i < 8; ++i) b.Add(EventKind::kMalloc, 0x100 * (i + 1), 10, 1);
  const std::string path = Save(b.File(true));
  setenv("MEMLENS_INDEX_SPACING", "2", 1);
  setenv("XDG_CACHE_HOME", "/nonexistent", 1);
  SnapshotIndex index;
  std::string error, state;
  ASSERT_TRUE(BuildSnapshotIndex(path, &index, &error)) << error;
  ASSERT_TRUE(LoadSnapshotIndex(path, &index));
  ASSERT_FALSE(index.checkpoints.empty());
  IndexCheckpoint claimed = index.checkpoints[0];
  claimed.raw_size = uint64_t{1} << 40;  // the frame says otherwise
  EXPECT_FALSE(ReadCheckpointState(index, claimed, &state));
  claimed = index.checkpoints[0];
  claimed.blob_size = ~uint64_t{0} - claimed.blob_offset + 1;  // offset + size wraps to 0
  EXPECT_FALSE(ReadCheckpointState(index, claimed, &state));
  EXPECT_TRUE(ReadCheckpointState(index, index.checkpoints[0], &state));

  // The trailer's table offset and size add up to the file's size only by wrapping around.
  std::FILE* f = std::fopen(index.path.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(fseeko(f, 0, SEEK_END), 0);
  const uint64_t file_size = ftello(f), stored_size = ~uint64_t{0} - 7,
                 table_offset = file_size - 32 - stored_size;  // modulo 2^64
  ASSERT_EQ(fseeko(f, file_size - 32, SEEK_SET), 0);
  ASSERT_EQ(std::fwrite(&table_offset, 8, 1, f), 1u);
  ASSERT_EQ(std::fwrite(&stored_size, 8, 1, f), 1u);
  std::fclose(f);
  SnapshotIndex damaged;
  EXPECT_FALSE(LoadSnapshotIndex(path, &damaged));
  unsetenv("MEMLENS_INDEX_SPACING");
  unsetenv("XDG_CACHE_HOME");
  std::remove(index.path.c_str());
  std::remove(path.c_str());
}


// A Python program's own end (kProgramEnd) is "exit" by default; @end is still the process's.
TEST(Replay, ExitIsTheProgramsEndWhenTheCaptureHasOne) {
  CaptureBuilder b;
  b.Add(EventKind::kMalloc, 0xa0, 100, 1);  // a module global
  b.Add(EventKind::kProgramEnd, 0);
  b.Add(EventKind::kMalloc, 0xb0, 30, 2);  // an atexit handler's, never freed
  b.Add(EventKind::kFree, 0xa0);           // the interpreter's shutdown
  std::string path = Save(b.File(true));
  std::string error;
  for (bool indexed : {false, true}) {  // the second time, from the index the first one built
    SnapshotSpec spec;
    Profile at_exit;
    ASSERT_TRUE(LoadProfile(path, spec, &at_exit, &error)) << error;
    EXPECT_TRUE(at_exit.AtProgramEndByDefault()) << indexed;
    EXPECT_EQ(at_exit.program_end_seq, 1u);
    EXPECT_EQ(at_exit.totals.in_use_bytes, 100u);
    EXPECT_EQ(at_exit.stacks[1].in_use_bytes, 100u);
    EXPECT_EQ(at_exit.stacks.count(2), 0u);
    EXPECT_EQ(at_exit.SnapshotLabel(), "exit");
    Profile process_end;
    std::string file;
    ASSERT_TRUE(ParseCaptureArgument(path + "@end", &file, &spec, &error));
    ASSERT_TRUE(LoadProfile(file, spec, &process_end, &error)) << error;
    EXPECT_EQ(process_end.totals.in_use_bytes, 30u);
    EXPECT_EQ(process_end.SnapshotLabel(), "the end of the process");
    Profile program_end;
    ASSERT_TRUE(ParseCaptureArgument(path + "@program-end", &file, &spec, &error));
    EXPECT_EQ(spec.kind, SnapshotSpec::kProgramEnd);
    ASSERT_TRUE(LoadProfile(file, spec, &program_end, &error)) << error;
    EXPECT_EQ(program_end.totals.in_use_bytes, 100u);
    EXPECT_FALSE(program_end.AtProgramEndByDefault());
  }
  std::remove(path.c_str());
  for (const std::string& index : IndexPathsFor(path)) std::remove(index.c_str());
}

TEST(Replay, WithoutTheProgramsEndExitIsTheProcesssEnd) {
  CaptureBuilder b;
  b.Add(EventKind::kMalloc, 0xa0, 100, 1);
  b.Add(EventKind::kFree, 0xa0);
  std::string path = Save(b.File(true));
  Profile p;
  std::string error, file;
  ASSERT_TRUE(LoadProfile(path, &p, &error)) << error;
  EXPECT_EQ(p.snapshot.kind, SnapshotSpec::kEnd);
  EXPECT_EQ(p.SnapshotLabel(), "exit");
  SnapshotSpec spec;
  ASSERT_TRUE(ParseCaptureArgument(path + "@program-end", &file, &spec, &error));
  Profile none;
  EXPECT_FALSE(LoadProfile(file, spec, &none, &error));
  EXPECT_NE(error.find("no end of a Python program's code"), std::string::npos) << error;
  std::remove(path.c_str());
  for (const std::string& index : IndexPathsFor(path)) std::remove(index.c_str());
}


// One Capture for every load of a capture (capture.h): the index a load builds serves the next
// without being read back, and the duration comes from the index's copy of the metadata, the
// same as from the capture itself.
TEST(Capture, OpenedOnceServesEveryLoadAndTheDuration) {
  unsetenv("MEMLENS_INDEX");
  CaptureBuilder b;
  b.Add(EventKind::kMalloc, 0xa0, 100, 1);
  b.Add(EventKind::kMalloc, 0xb0, 50, 2);
  b.Add(EventKind::kFree, 0xa0);
  const std::string bytes = b.File(true);  // ends at 1000 ns
  const std::string path = Save(bytes);
  std::string error, file;
  Capture capture(path);
  EXPECT_TRUE(capture.found());
  EXPECT_EQ(capture.stamp().size, bytes.size());
  EXPECT_EQ(capture.Index(), nullptr);
  double from_capture = -1;
  ASSERT_TRUE(capture.DurationSeconds(&from_capture, &error)) << error;
  EXPECT_DOUBLE_EQ(from_capture, 1000 / 1e9);
  SnapshotSpec peak;
  ASSERT_TRUE(ParseCaptureArgument(path + "@peak", &file, &peak, &error));
  Profile at_peak;
  ASSERT_TRUE(LoadProfile(&capture, peak, ReplayOptions{}, &at_peak, &error)) << error;
  EXPECT_EQ(at_peak.totals.in_use_bytes, 150u);
  EXPECT_EQ(at_peak.stacks[1].in_use_bytes, 100u);
  const SnapshotIndex* index = capture.Index();  // the one the load built
  ASSERT_NE(index, nullptr);
  EXPECT_EQ(index->peak_bytes, 150u);
  double from_index = -1;
  ASSERT_TRUE(capture.DurationSeconds(&from_index, &error)) << error;
  EXPECT_DOUBLE_EQ(from_index, from_capture);
  EXPECT_DOUBLE_EQ(from_index, at_peak.DurationSeconds());
  Profile at_end;
  ASSERT_TRUE(LoadProfile(&capture, SnapshotSpec{}, ReplayOptions{}, &at_end, &error)) << error;
  EXPECT_EQ(at_end.from_checkpoint_seq, 3u);  // from the index's end: no event replayed
  EXPECT_EQ(at_end.totals.in_use_bytes, 50u);
  std::remove(path.c_str());
  for (const std::string& i : IndexPathsFor(path)) std::remove(i.c_str());

  Capture missing(path);  // gone now: the load says why, as for a path
  EXPECT_FALSE(missing.found());
  Profile none;
  EXPECT_FALSE(LoadProfile(&missing, SnapshotSpec{}, ReplayOptions{}, &none, &error));
  EXPECT_NE(error.find("No such file"), std::string::npos) << error;
}

// Capture::Outline (what leaks --growth places its checkpoints from): the markers, the time
// marks, the end and where a Python program's code ended, as a load of the whole capture finds
// them, without replaying an event; the same from the capture and from its index.
TEST(Capture, OutlineHasWhatTheLoadFinds) {
  unsetenv("MEMLENS_INDEX");
  setenv("XDG_CACHE_HOME", "/nonexistent", 1);
  CaptureBuilder b;
  b.encoder().String({7, "frame"});
  for (uint64_t t = 1; t <= 3; ++t) {
    b.Add(EventKind::kMalloc, 0x100 * t, 10, 1);
    b.Add(EventKind::kMarker, 7);
    b.encoder().Time({t * 200, 2 * t});  // after the 2 t events so far
    b.NextChunk();
  }
  b.Add(EventKind::kProgramEnd, 0);
  b.encoder().Time({800, 7});
  const std::string path = Save(b.File(true));
  Profile loaded, outline;
  std::string error;
  SnapshotSpec end;
  std::string file;
  ASSERT_TRUE(ParseCaptureArgument(path + "@end", &file, &end, &error)) << error;
  ASSERT_TRUE(LoadProfile(path, end, &loaded, &error)) << error;
  ASSERT_EQ(loaded.markers.size(), 3u);
  for (bool indexed : {false, true}) {
    if (indexed) {
      SnapshotIndex index;
      ASSERT_TRUE(BuildSnapshotIndex(path, &index, &error)) << error;
    }
    Capture capture(path);
    EXPECT_EQ(capture.Index() != nullptr, indexed);
    ASSERT_TRUE(capture.Outline(&outline, &error)) << error;
    EXPECT_TRUE(outline.has_process);
    ASSERT_EQ(outline.markers.size(), loaded.markers.size()) << indexed;
    for (size_t m = 0; m < loaded.markers.size(); ++m) {
      EXPECT_EQ(outline.markers[m].name, "frame");
      EXPECT_EQ(outline.markers[m].seq, loaded.markers[m].seq);
    }
    EXPECT_EQ(outline.program_end_seq, loaded.program_end_seq);
    EXPECT_NE(outline.program_end_seq, 0u);
    EXPECT_DOUBLE_EQ(outline.SecondsAt(outline.program_end_seq), 800 / 1e9);
    EXPECT_DOUBLE_EQ(outline.DurationSeconds(), loaded.DurationSeconds());
    EXPECT_DOUBLE_EQ(outline.DurationSeconds(), 1000 / 1e9);
    EXPECT_TRUE(outline.stacks.empty());  // nothing replayed
  }
  std::remove(path.c_str());
  for (const std::string& i : IndexPathsFor(path)) std::remove(i.c_str());
}

}  // namespace
}  // namespace memlens::analyzer
