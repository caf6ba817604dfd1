// src/analyzer/views/call_tree.cc: see call_tree.h.
#include "analyzer/views/call_tree.h"

#include <algorithm>
#include <functional>

namespace memlens::analyzer {
namespace {

TreeNode* ChildFor(TreeNode* parent, const SourceFrame& f) {
  TreeNode::Key key{f.function, f.file, f.line, f.module, f.function.empty() ? f.module_offset : 0};
  auto it = parent->index.find(key);
  if (it != parent->index.end()) return it->second;
  parent->children.push_back(std::make_unique<TreeNode>());
  TreeNode* child = parent->children.back().get();
  child->frame = f;
  parent->index.emplace(key, child);
  return child;
}

void CollectTotals(const TreeNode& n, std::vector<uint64_t>* totals) {
  for (const auto& c : n.children) {
    totals->push_back(c->total);
    CollectTotals(*c, totals);
  }
}

// Nodes a prune at `threshold` would leave, "(other)" nodes included (the root not counted).
size_t CountKept(const TreeNode& n, uint64_t threshold) {
  size_t count = 0;
  bool folds = false;
  for (const auto& c : n.children) {
    if (c->total >= threshold) {
      count += 1 + CountKept(*c, threshold);
    } else {
      folds = true;
    }
  }
  return count + (folds ? 1 : 0);
}

// The smallest threshold whose pruned tree fits in `budget` nodes. A child's total never
// exceeds its parent's, so the nodes at or above a threshold form one connected tree.
uint64_t ChooseThreshold(const TreeNode& root, size_t budget) {
  if (CountKept(root, 0) <= budget) return 0;
  std::vector<uint64_t> totals;
  CollectTotals(root, &totals);
  std::sort(totals.begin(), totals.end(), std::greater<>());
  size_t keep = std::min(budget, totals.size() - 1);
  for (;;) {
    uint64_t threshold = totals[keep] + 1;  // keeps at most `keep` nodes
    if (keep == 0 || CountKept(root, threshold) <= budget) return threshold;
    keep = keep * 3 / 4;
  }
}

}  // namespace

std::unique_ptr<TreeNode> BuildCallTree(const Profile& profile, StackResolver* resolver,
                                        SortBy metric, bool bottom_up) {
  auto root = std::make_unique<TreeNode>();
  for (const auto& [stack_id, stats] : profile.stacks) {
    uint64_t value = SortValue(stats, metric);
    if (value == 0) continue;
    uint64_t var = SortVariance(stats, metric);
    Stack frames = resolver->Frames(stack_id);
    size_t site = resolver->SiteIndex(frames);
    TreeNode* node = root.get();
    node->total += value;
    node->total_var += var;
    if (bottom_up) {
      for (size_t i = site; i < frames.size(); ++i) {
        node = ChildFor(node, *frames[i]);
        node->total += value;
        node->total_var += var;
        // In a bottom-up tree the first level carries the bytes allocated right there.
        if (i == site) {
          node->self += value;
          node->self_var += var;
        }
      }
    } else {
      for (size_t i = frames.size(); i > site; --i) {
        node = ChildFor(node, *frames[i - 1]);
        node->total += value;
        node->total_var += var;
      }
      node->self += value;
      node->self_var += var;
    }
  }
  return root;
}

void PruneTree(TreeNode* node, uint64_t min_total) {
  node->index.clear();
  auto& kids = node->children;
  for (auto& child : kids) {
    if (child->total < min_total) {
      node->pruned_total += child->total;
      node->pruned_total_var += child->total_var;
      ++node->pruned_children;
      child.reset();
    }
  }
  kids.erase(std::remove(kids.begin(), kids.end(), nullptr), kids.end());
  std::sort(kids.begin(), kids.end(), [](const auto& a, const auto& b) { return a->total > b->total; });
  for (auto& child : kids) PruneTree(child.get(), min_total);
}

size_t CountNodes(const TreeNode& n) {
  size_t count = n.pruned_children ? 1 : 0;
  for (const auto& c : n.children) count += 1 + CountNodes(*c);
  return count;
}

std::unique_ptr<TreeNode> BuildPrunedTree(const Profile& profile, StackResolver* resolver,
                                          SortBy metric, bool bottom_up, double min_percent) {
  auto root = BuildCallTree(profile, resolver, metric, bottom_up);
  PruneTree(root.get(), static_cast<uint64_t>(root->total * min_percent / 100.0));
  return root;
}

std::unique_ptr<TreeNode> BuildBudgetTree(const Profile& profile, StackResolver* resolver,
                                          SortBy metric, size_t budget, uint64_t* threshold) {
  auto root = BuildCallTree(profile, resolver, metric, false);
  *threshold = ChooseThreshold(*root, budget);
  PruneTree(root.get(), *threshold);
  return root;
}

}  // namespace memlens::analyzer
