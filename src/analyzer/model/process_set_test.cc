// The tree of a run's processes (process_set.h): each after its parent, brothers by start; a
// pid used again belongs to whoever started last before the child, and never to one that
// started after it; unreadable captures come last; loops end.
#include "analyzer/model/process_set.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace memlens::analyzer {
namespace {

TEST(ProcessSet, TreeOrderParentsAndDepths) {
  std::vector<ProcessNode> nodes = {
      {20, 10, 300, true},  // 0: child of 1 (pid 10 started at 100, before it)
      {10, 1, 100, true},   // 1: root (pid 1 is not in the set)
      {30, 10, 200, true},  // 2: child of 1, started before 0
      {40, 30, 250, true},  // 3: child of 2
      {10, 1, 400, true},   // 4: pid 10 again, a root
      {50, 10, 500, true},  // 5: child of 4: the pid 10 that started last before it
      {60, 70, 50, true},   // 6: its parent's pid is used only later (by 7): a root
      {70, 1, 600, true},   // 7: a root
      {0, 0, 0, false},     // 8: an unreadable capture: last, linked to nothing
      {80, 0, 700, true},   // 9: ppid 0 (as 8's pid): still a root
  };
  std::vector<size_t> order = ProcessTree(&nodes);
  EXPECT_EQ(order, (std::vector<size_t>{6, 1, 2, 3, 0, 4, 5, 7, 9, 8}));
  EXPECT_EQ(nodes[6].parent, ProcessNode::kNoParent);
  EXPECT_EQ(nodes[8].parent, ProcessNode::kNoParent);
  EXPECT_EQ(nodes[9].parent, ProcessNode::kNoParent);
  EXPECT_EQ(nodes[0].parent, 1u);
  EXPECT_EQ(nodes[3].parent, 2u);
  EXPECT_EQ(nodes[5].parent, 4u);
  EXPECT_EQ(nodes[1].parent, ProcessNode::kNoParent);
  EXPECT_EQ((std::vector<int>{nodes[1].depth, nodes[2].depth, nodes[3].depth, nodes[0].depth}),
            (std::vector<int>{0, 1, 2, 1}));
}

// A process whose parent was not recorded (a vfork'd child of a shell's subshell, with the
// shell's pid in its environment) is linked to its recorded ancestor; one whose parent was
// recorded, to its parent, whatever ancestor its environment named.
TEST(ProcessSet, TheParentFirstThenTheRecordedAncestor) {
  std::vector<ProcessNode> nodes = {
      {10, 1, 100, true},   // 0: the program
      {20, 10, 200, true},  // 1: a subshell it forked (recorded)
      {30, 20, 300, true},  // 2: the subshell's child, whose environment named 10
      {40, 25, 400, true},  // 3: a child of an unrecorded 25, which named 10
      {25, 10, 50, true},   // 4: an earlier process of pid 25, started before 10: not 3's parent
      {60, 30, 600, true},  // 5: a child of 30, which its environment did not name
  };
  nodes[2].recorded_ancestor = 10;
  nodes[3].recorded_ancestor = 10;
  nodes[5].recorded_ancestor = 20;
  EXPECT_EQ(ProcessTree(&nodes), (std::vector<size_t>{4, 0, 1, 2, 5, 3}));
  EXPECT_EQ(nodes[2].parent, 1u);
  EXPECT_EQ(nodes[3].parent, 0u);
  EXPECT_EQ(nodes[5].parent, 2u);
  EXPECT_EQ(nodes[5].depth, 3);
}

TEST(ProcessSet, APidLoopStillListsEveryProcess) {
  std::vector<ProcessNode> nodes = {{1, 2, 100, true}, {2, 1, 100, true}};  // each the other's
  std::vector<size_t> order = ProcessTree(&nodes);
  ASSERT_EQ(order.size(), 2u);
  EXPECT_NE(order[0], order[1]);
}

TEST(ProcessSet, CapturesAreTheDirectorysMlensFilesByName) {
  const std::string base = testing::TempDir() + "memlens-process-set-" + std::to_string(getpid());
  ASSERT_EQ(mkdir(base.c_str(), 0700), 0);
  for (const char* name : {"b-2.mlens", "a-1.mlens", "a-1.mlens.index", "notes.txt"}) {
    std::ofstream(base + "/" + name) << "x";
  }
  EXPECT_EQ(CapturesIn(base), (std::vector<std::string>{base + "/a-1.mlens", base + "/b-2.mlens"}));
  EXPECT_TRUE(CapturesIn(base + "/missing").empty());
  for (const char* name : {"b-2.mlens", "a-1.mlens", "a-1.mlens.index", "notes.txt"}) {
    std::remove((base + "/" + name).c_str());
  }
  rmdir(base.c_str());
}

}  // namespace
}  // namespace memlens::analyzer
