// src/analyzer/model/call_tree.cc: see call_tree.h.
#include "analyzer/model/call_tree.h"

#include <algorithm>

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

}  // namespace

std::unique_ptr<TreeNode> BuildCallTree(const Profile& profile, StackResolver* resolver,
                                        SortBy metric, bool bottom_up) {
  auto root = std::make_unique<TreeNode>();
  for (const auto& [stack_id, stats] : profile.stacks) {
    uint64_t value = SortValue(stats, metric);
    if (value == 0) continue;
    Stack frames = resolver->Frames(stack_id);
    size_t site = resolver->SiteIndex(frames);
    TreeNode* node = root.get();
    node->total += value;
    if (bottom_up) {
      for (size_t i = site; i < frames.size(); ++i) {
        node = ChildFor(node, *frames[i]);
        node->total += value;
        // In a bottom-up tree the first level carries the bytes allocated right there.
        if (i == site) node->self += value;
      }
    } else {
      for (size_t i = frames.size(); i > site; --i) {
        node = ChildFor(node, *frames[i - 1]);
        node->total += value;
      }
      node->self += value;
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
      ++node->pruned_children;
      child.reset();
    }
  }
  kids.erase(std::remove(kids.begin(), kids.end(), nullptr), kids.end());
  std::sort(kids.begin(), kids.end(), [](const auto& a, const auto& b) { return a->total > b->total; });
  for (auto& child : kids) PruneTree(child.get(), min_total);
}

}  // namespace memlens::analyzer
