// The tree of a run's processes (process_set.h): each after its parent, brothers by start; a
// pid used again belongs to whoever started last before the child; a parent that exec'd (its
// capture's start is its first image's, given here) still comes first; loops end.
#include "analyzer/model/process_set.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace memlens::analyzer {
namespace {

TEST(ProcessSet, TreeOrderParentsAndDepths) {
  std::vector<ProcessNode> nodes = {
      {20, 10, 300},  // 0: child of 1 (pid 10 started at 100, before it)
      {10, 1, 100},   // 1: root (pid 1 is not in the set)
      {30, 10, 200},  // 2: child of 1, started before 0
      {40, 30, 250},  // 3: child of 2
      {10, 1, 400},   // 4: pid 10 again, a root
      {50, 10, 500},  // 5: child of 4: the pid 10 that started last before it
  };
  std::vector<size_t> order = ProcessTree(&nodes);
  EXPECT_EQ(order, (std::vector<size_t>{1, 2, 3, 0, 4, 5}));
  EXPECT_EQ(nodes[0].parent, 1u);
  EXPECT_EQ(nodes[3].parent, 2u);
  EXPECT_EQ(nodes[5].parent, 4u);
  EXPECT_EQ(nodes[1].parent, ProcessNode::kNoParent);
  EXPECT_EQ((std::vector<int>{nodes[1].depth, nodes[2].depth, nodes[3].depth, nodes[0].depth}),
            (std::vector<int>{0, 1, 2, 1}));
}

TEST(ProcessSet, APidLoopStillListsEveryProcess) {
  std::vector<ProcessNode> nodes = {{1, 2, 100}, {2, 1, 100}};  // each the other's parent
  std::vector<size_t> order = ProcessTree(&nodes);
  ASSERT_EQ(order.size(), 2u);
  EXPECT_NE(order[0], order[1]);
}

TEST(ProcessSet, CapturesAreTheDirectorysMlensFilesByName) {
  char dir[] = "/tmp/memlens-process-set-XXXXXX";
  ASSERT_TRUE(mkdtemp(dir));
  const std::string base = dir;
  for (const char* name : {"b-2.mlens", "a-1.mlens", "a-1.mlens.index", "notes.txt"}) {
    std::ofstream(base + "/" + name) << "x";
  }
  EXPECT_EQ(CapturesIn(base), (std::vector<std::string>{base + "/a-1.mlens", base + "/b-2.mlens"}));
  EXPECT_TRUE(CapturesIn(base + "/missing").empty());
  for (const char* name : {"b-2.mlens", "a-1.mlens", "a-1.mlens.index", "notes.txt"}) {
    std::remove((base + "/" + name).c_str());
  }
  rmdir(dir);
}

}  // namespace
}  // namespace memlens::analyzer
