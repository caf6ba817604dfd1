// src/analyzer/views/call_tree.h
//
// The call tree of a profile weighted by one metric (bytes at peak, allocated, leaked, or
// allocation count): top-down from the program's entry to each allocation site, or bottom-up
// from each site to its callers. Allocator plumbing (operator new) is folded into its caller.
//
// Runs on: the analyzer's main thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "analyzer/views/sites.h"

namespace memlens::analyzer {

struct TreeNode {
  SourceFrame frame;  // empty function and module for the root
  uint64_t self = 0;   // metric of stacks that end here
  uint64_t total = 0;  // self plus every descendant
  uint64_t pruned_total = 0;  // part of total held by children removed by PruneTree
  // A sampled capture: the variances of self, total and pruned_total (stats.h, ErrorScale).
  uint64_t self_var = 0, total_var = 0, pruned_total_var = 0;
  size_t pruned_children = 0;
  std::vector<std::unique_ptr<TreeNode>> children;

  using Key = std::tuple<std::string, std::string, uint32_t, std::string, uint64_t>;
  std::map<Key, TreeNode*> index;  // children by frame, while building
};

std::unique_ptr<TreeNode> BuildCallTree(const Profile& profile, StackResolver* resolver,
                                        SortBy metric, bool bottom_up);
// Removes every node whose total is below min_total (their bytes stay counted in the parent's
// pruned_total), and sorts the remaining children by total, largest first.
void PruneTree(TreeNode* node, uint64_t min_total);

// The tree `memlens tree` shows: nodes under `min_percent` of the whole folded.
std::unique_ptr<TreeNode> BuildPrunedTree(const Profile& profile, StackResolver* resolver,
                                          SortBy metric, bool bottom_up, double min_percent);
// The report's flame trees: top-down, pruned at the smallest threshold (*threshold) whose tree
// fits in `budget` nodes, "(other)" folds included.
std::unique_ptr<TreeNode> BuildBudgetTree(const Profile& profile, StackResolver* resolver,
                                          SortBy metric, size_t budget, uint64_t* threshold);
// Nodes under `node`, one per "(other)" fold included, `node` itself not.
size_t CountNodes(const TreeNode& node);

}  // namespace memlens::analyzer
