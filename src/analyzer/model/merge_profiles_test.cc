// A run's processes merged into one profile (merge_profiles.h): every process's stacks under
// ids of their own, each frame as it was (return addresses, Python lines, custom heaps' names),
// the figures added up, and the run's timeline from its first start.
#include "analyzer/model/merge_profiles.h"

#include <gtest/gtest.h>

namespace memlens::analyzer {
namespace {

// A process started `start_s` seconds into the run, lasting 1 s: one native stack (ip) holding
// `bytes`, and one Python stack at file.py:7 holding as much again.
Profile Process(uint64_t pid, double start_s, uint64_t ip, const std::string& file,
                uint64_t bytes) {
  Profile p;
  p.path = "run/p-" + std::to_string(pid) + ".mlens";
  p.has_process = true;
  p.process.pid = pid;
  p.process.start_monotonic_ns = static_cast<uint64_t>((100 + start_s) * 1e9);
  p.end = format::EndRecord{format::EndReason::kExit, 1000000000, 2, 0, 0, 0};
  p.modules[1] = format::ModuleRecord{1, 0, "/bin/p" + std::to_string(pid), "", {{ip, 16}}};
  p.python_codes[1] = format::PythonCodeRecord{1, file, "<module>", 1};
  // Id 0 is a real one: a code object the agent's table had no room for, a string likewise.
  p.python_codes[0] = format::PythonCodeRecord{0, "<unknown Python code>", "", 0};
  p.strings[0] = "(no room)";
  p.strings[1] = "pool-" + std::to_string(pid);
  p.heap_names[1] = "pool-" + std::to_string(pid);
  p.nodes.push_back({0, ip, 1});                                // 1: native
  p.nodes.push_back({1, format::PythonFrameIp(1, 7), 0});       // 2: file.py:7 under it
  p.nodes.push_back({2, format::AnnotationFrameIp(format::Annotation::kHeap, 1), 0});  // 3
  p.nodes.push_back({3, format::AnnotationFrameIp(format::Annotation::kType, 1), 0});  // 4
  for (uint64_t stack : {1, 2}) {
    StackStats& s = p.stacks[stack];
    s.allocations = 1;
    s.allocated_bytes = s.in_use_bytes = s.peak_bytes = bytes;
    s.in_use_blocks = s.peak_blocks = 1;
  }
  p.totals.allocations = 2;
  p.totals.allocated_bytes = p.totals.in_use_bytes = p.totals.peak_bytes = 2 * bytes;
  p.timeline = {{0.5, 2 * bytes, 0}};
  return p;
}

TEST(MergeProfiles, EveryStackUnderItsOwnIdsTheFiguresAddedUp) {
  Profile merged;
  std::string error;
  ASSERT_TRUE(MergeProfiles({Process(10, 0, 0x1000, "a.py", 100),
                             Process(11, 0.25, 0x2000, "b.py", 1000)},
                            "run", &merged, &error))
      << error;
  EXPECT_EQ(merged.merged_processes, 2u);
  EXPECT_EQ(merged.path, "run");
  EXPECT_EQ(merged.process.pid, 10u);
  EXPECT_EQ(merged.totals.in_use_bytes, 2200u);
  EXPECT_EQ(merged.totals.peak_bytes, 2200u);  // each one's own peak, added
  EXPECT_EQ(merged.totals.allocations, 4u);
  ASSERT_EQ(merged.nodes.size(), 9u);  // the root and four nodes of each
  ASSERT_EQ(merged.stacks.size(), 4u);
  // The second process's stacks come after the first's, each frame where it was.
  EXPECT_EQ(merged.stacks.at(5).in_use_bytes, 1000u);
  EXPECT_EQ(merged.nodes[5].ip, 0x2000u);
  EXPECT_EQ(merged.modules.at(merged.nodes[5].module).path, "/bin/p11");
  EXPECT_EQ(merged.nodes[6].parent, 5u);
  const uint64_t b_line = merged.nodes[6].ip;
  ASSERT_TRUE(format::IsPythonFrameIp(b_line));
  EXPECT_EQ(format::PythonFrameLine(b_line), 7u);
  EXPECT_EQ(merged.python_codes.at(format::PythonFrameCode(b_line)).filename, "b.py");
  EXPECT_EQ(merged.python_codes.at(format::PythonFrameCode(merged.nodes[2].ip)).filename, "a.py");
  // Both processes' id 0 and id 1 stay apart; the annotation frames name each one's own.
  EXPECT_EQ(merged.python_codes.size(), 4u);
  EXPECT_EQ(merged.strings.size(), 4u);
  for (size_t n : {3, 7}) {
    const std::string pool = n == 3 ? "pool-10" : "pool-11";
    EXPECT_EQ(merged.heap_names.at(format::AnnotationValue(merged.nodes[n].ip)), pool);
    EXPECT_EQ(merged.strings.at(format::AnnotationValue(merged.nodes[n + 1].ip)), pool);
  }
  // On the run's clock: 10 at 0.5 s, 11 from 0.75 s, 10 gone at 1 s, 11 at 1.25 s.
  std::vector<std::pair<double, uint64_t>> timeline;
  for (const TimelinePoint& t : merged.timeline) timeline.push_back({t.seconds, t.heap_bytes});
  EXPECT_EQ(timeline, (std::vector<std::pair<double, uint64_t>>{
                          {0.5, 200}, {0.75, 2200}, {1.0, 2000}, {1.25, 0}}));
  EXPECT_DOUBLE_EQ(merged.DurationSeconds(), 1.25);
  EXPECT_DOUBLE_EQ(merged.SecondsAt(merged.totals.peak_seq), 0.75);  // when the sum was highest
  // A run whose first process has not finished still lasts until its last one ended.
  Profile unfinished = Process(10, 0, 0x1000, "a.py", 100);
  unfinished.end.reset();
  unfinished.times = {{500000000, 2}};
  ASSERT_TRUE(MergeProfiles({unfinished, Process(11, 0.25, 0x2000, "b.py", 1000)}, "run", &merged,
                            &error));
  EXPECT_DOUBLE_EQ(merged.DurationSeconds(), 1.25);
}

// The report's checkpoints: each process's taken on its own clock at moments of the run, merged
// by moment, its stacks renumbered.
TEST(MergeProfiles, CheckpointsAtTheSameMomentOfTheRunAreOne) {
  Profile a = Process(10, 0, 0x1000, "a.py", 100);
  Profile b = Process(11, 0.25, 0x2000, "b.py", 1000);
  a.checkpoints = {{0.5, 0, 0.5, 200, 0, {{1, {100, 1, 0, 0}}, {2, {100, 1, 0, 0}}}},
                   {0.75, 0, 0.75, 200, 0, {{2, {100, 1, 0, 0}}}}};
  b.checkpoints = {{0.5, 0, 0.5, 1000, 0, {{1, {1000, 1, 0, 0}}}}};  // the run's 0.75 s
  Profile merged;
  std::string error;
  ASSERT_TRUE(MergeProfiles({a, b}, "run", &merged, &error)) << error;
  ASSERT_EQ(merged.checkpoints.size(), 2u);
  EXPECT_DOUBLE_EQ(merged.checkpoints[0].seconds, 0.5);
  EXPECT_EQ(merged.checkpoints[0].heap_bytes, 200u);
  EXPECT_DOUBLE_EQ(merged.checkpoints[1].seconds, 0.75);
  EXPECT_EQ(merged.checkpoints[1].heap_bytes, 1200u);
  EXPECT_EQ(merged.checkpoints[1].live,
            (std::unordered_map<uint64_t, LiveFigures>{{2, {100, 1, 0, 0}}, {5, {1000, 1, 0, 0}}}));
}

TEST(MergeProfiles, DifferentSamplingRulesAreRefused) {
  Profile sampled = Process(11, 0, 0x2000, "b.py", 10);
  sampled.sample_rate = 4096;
  Profile merged;
  std::string error;
  EXPECT_FALSE(MergeProfiles({Process(10, 0, 0x1000, "a.py", 10), sampled}, "run", &merged,
                             &error));
  EXPECT_NE(error.find("different sampling rules"), std::string::npos) << error;
}

}  // namespace
}  // namespace memlens::analyzer
