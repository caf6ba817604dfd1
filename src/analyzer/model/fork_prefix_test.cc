// A forked process's capture (format 9.2) is replayed after its parent's, up to the fork: on
// hand-built captures, the child's figures hold what it inherited, at the parent's stacks, and
// its own, at its own stacks, whose ids it numbered from 1 as the parent did.
#include "analyzer/model/fork_prefix.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "analyzer/model/capture_argument.h"
#include "analyzer/model/replay.h"
#include "analyzer/model/replay_test_capture.h"
#include "analyzer/model/snapshot_index.h"

namespace memlens::analyzer {
namespace {

using format::EventKind;
using testing::CaptureBuilder;

constexpr uint64_t kParentStart = 5000;

format::ProcessRecord Process(uint64_t pid, uint64_t ppid, uint64_t start_ns) {
  return {pid, ppid, 0, start_ns, "/bin/prog", {"prog"}, "0"};
}

// pid 100: A (100 bytes, stack 1) and B (200, stack 2); the fork at seq 2; then A freed and C
// (300, stack 3), neither the child's business.
std::string ParentCapture() {
  CaptureBuilder b(Process(100, 1, kParentStart));
  b.Add(EventKind::kMalloc, 0xa0, 100, 1);
  b.Add(EventKind::kMalloc, 0xb0, 200, 2);
  b.Add(EventKind::kFree, 0xa0);
  b.Add(EventKind::kMalloc, 0xc0, 300, 3);
  return b.File(true);
}

// pid 101, forked at the parent's seq 2: frees B, makes D (400 bytes, its own stack 1).
std::string ChildCapture() {
  format::ProcessRecord child = Process(101, 100, 6000);
  child.fork_parent_image_ns = kParentStart;
  child.fork_seq = 2;
  CaptureBuilder b(child, 0, /*first_ip=*/0x2000);
  b.Add(EventKind::kFree, 0xb0);
  b.Add(EventKind::kMalloc, 0xd0, 400, 1);
  return b.File(true);
}

class ForkPrefixTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("fork-prefix-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& bytes) {
    std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  uint64_t IpOfStackWith(const Profile& p, uint64_t in_use_bytes) {
    for (const auto& [stack, stats] : p.stacks) {
      if (stats.in_use_bytes == in_use_bytes) return p.nodes.at(stack).ip;
    }
    ADD_FAILURE() << "no stack holds " << in_use_bytes << " bytes";
    return 0;
  }
  std::filesystem::path dir_;
};

TEST_F(ForkPrefixTest, TheChildStartsFromWhatItsParentHeldAtTheFork) {
  // Another process that had pid 100 before (another start): not the parent.
  Write("a-100.mlens", CaptureBuilder(Process(100, 1, 1234)).File(true));
  Write("prog-100.mlens", ParentCapture());
  const std::string child = Write("prog-101.mlens", ChildCapture());
  for (const char* snapshot : {"", "@peak"}) {  // the peak is at the end
    Profile p;
    std::string error, path;
    SnapshotSpec spec;
    ASSERT_TRUE(ParseCaptureArgument(child + snapshot, &path, &spec, &error)) << error;
    ASSERT_TRUE(LoadProfile(path, spec, &p, &error)) << error;
    EXPECT_TRUE(p.warnings.empty()) << p.warnings.front();
    EXPECT_EQ(p.process.pid, 101u);
    EXPECT_TRUE(p.first_image->Forked());
    EXPECT_EQ(p.totals.in_use_bytes, 100u + 400u);  // A, inherited and kept; D
    EXPECT_EQ(p.totals.in_use_blocks, 2u);
    EXPECT_EQ(p.totals.allocations, 1u);  // its own
    EXPECT_EQ(p.totals.allocated_bytes, 400u);
    EXPECT_EQ(p.totals.frees, 1u);  // B, which it inherited
    EXPECT_EQ(p.totals.unmatched_frees, 0u);
    EXPECT_EQ(p.totals.peak_bytes, 500u);
    EXPECT_EQ(IpOfStackWith(p, 100), 0x1000u);  // the parent's stack 1
    EXPECT_EQ(IpOfStackWith(p, 400), 0x2000u);  // its own stack 1
  }
  // Its figures depend on its parent's capture, which may change: no snapshot index.
  SnapshotIndex index;
  std::string error;
  EXPECT_FALSE(BuildSnapshotIndex(child, &index, &error));
  EXPECT_NE(error.find("forked process's capture"), std::string::npos) << error;
}

TEST_F(ForkPrefixTest, APeakAtTheForkIsWhatItInherited) {
  Write("prog-100.mlens", ParentCapture());
  format::ProcessRecord forked = Process(101, 100, 6000);
  forked.fork_parent_image_ns = kParentStart;
  forked.fork_seq = 2;
  CaptureBuilder b(forked);
  b.Add(EventKind::kFree, 0xa0);  // frees only
  Profile p;
  std::string error;
  ASSERT_TRUE(LoadProfile(Write("prog-101.mlens", b.File(true)), &p, &error)) << error;
  EXPECT_EQ(p.totals.peak_bytes, 300u);
  EXPECT_EQ(p.totals.in_use_bytes, 200u);
  uint64_t peak_of_a = 0;
  for (const auto& [stack, stats] : p.stacks) {
    if (p.nodes.at(stack).ip == 0x1000) peak_of_a = stats.peak_bytes;
  }
  EXPECT_EQ(peak_of_a, 100u);  // freed since, held at the peak
  EXPECT_TRUE(p.peak_at_fork);
  // At the peak: before its first event, A and B both in use.
  Profile at_peak;
  SnapshotSpec peak;
  std::string path;
  ASSERT_TRUE(ParseCaptureArgument((dir_ / "prog-101.mlens@peak").string(), &path, &peak, &error))
      << error;
  ASSERT_TRUE(LoadProfile(path, peak, &at_peak, &error)) << error;
  EXPECT_EQ(at_peak.totals.in_use_bytes, 300u);
  EXPECT_EQ(at_peak.totals.peak_bytes, 300u);
}

// A forked child that execs: its capture's next image is a program of its own, numbered as
// any image is, from 1.
TEST_F(ForkPrefixTest, AnExecAfterTheForkStartsAfresh) {
  Write("prog-100.mlens", ParentCapture());
  format::ProcessRecord forked = Process(101, 100, 6000);
  forked.fork_parent_image_ns = kParentStart;
  forked.fork_seq = 2;
  CaptureBuilder b(forked, 0, 0x2000);
  b.Add(EventKind::kMalloc, 0xd0, 400, 1);
  b.encoder().End({format::EndReason::kExec, 10, 1, 0, 0});
  b.NextChunk();
  b.encoder().Process(Process(101, 100, 7000));
  b.encoder().StackNode({0, 0x3000});
  b.encoder().BeginEvents(1);
  b.encoder().AddEvent({0, EventKind::kMalloc, 0xe0, 600, 1, 1});
  b.encoder().EndEvents();
  Profile p;
  std::string error;
  ASSERT_TRUE(LoadProfile(Write("prog-101.mlens", b.File(true)), &p, &error)) << error;
  EXPECT_EQ(p.totals.in_use_bytes, 600u);
  EXPECT_EQ(IpOfStackWith(p, 600), 0x3000u);
  EXPECT_TRUE(p.first_image->Forked());
  EXPECT_FALSE(p.process.Forked());
}

TEST_F(ForkPrefixTest, WithoutItsParentsCaptureItSaysSo) {
  Profile p;
  std::string error;
  ASSERT_TRUE(LoadProfile(Write("prog-101.mlens", ChildCapture()), &p, &error)) << error;
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("forked by process 100, whose capture is not in"),
            std::string::npos)
      << p.warnings[0];
  EXPECT_EQ(p.totals.in_use_bytes, 400u);
  EXPECT_EQ(p.totals.unmatched_frees, 1u);
}

TEST_F(ForkPrefixTest, AParentCaptureCutBeforeTheForkIsSaid) {
  CaptureBuilder parent(Process(100, 1, kParentStart));
  parent.Add(EventKind::kMalloc, 0xa0, 100, 1);  // seq 0 only: seq 1 never reached the file
  Write("prog-100.mlens", parent.File(false));
  Profile p;
  std::string error;
  ASSERT_TRUE(LoadProfile(Write("prog-101.mlens", ChildCapture()), &p, &error)) << error;
  ASSERT_FALSE(p.warnings.empty());
  EXPECT_NE(p.warnings[0].find("ends before the fork"), std::string::npos) << p.warnings[0];
  EXPECT_EQ(p.totals.in_use_bytes, 500u);  // A and D; B's free matches nothing
}

}  // namespace
}  // namespace memlens::analyzer
