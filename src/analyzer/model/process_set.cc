// src/analyzer/model/process_set.cc: see process_set.h.
#include "analyzer/model/process_set.h"

#include <dirent.h>

#include <algorithm>
#include <functional>
#include <string_view>

namespace memlens::analyzer {

std::vector<std::string> CapturesIn(const std::string& directory) {
  std::vector<std::string> captures;
  DIR* dir = opendir(directory.c_str());
  if (!dir) return captures;
  while (const dirent* entry = readdir(dir)) {
    std::string name = entry->d_name;
    constexpr std::string_view kSuffix = ".mlens";
    if (name.size() > kSuffix.size() &&
        name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0) {
      captures.push_back(directory + "/" + name);
    }
  }
  closedir(dir);
  std::sort(captures.begin(), captures.end());
  return captures;
}

std::vector<size_t> ProcessTree(std::vector<ProcessNode>* nodes) {
  std::vector<ProcessNode>& n = *nodes;
  std::vector<size_t> by_start(n.size());
  for (size_t i = 0; i < n.size(); ++i) by_start[i] = i;
  std::stable_sort(by_start.begin(), by_start.end(),
                   [&](size_t a, size_t b) { return n[a].start_ns < n[b].start_ns; });
  // The parent is the process of that pid that started last before the child, else (clocks
  // stepped back) the first of that pid.
  for (size_t i = 0; i < n.size(); ++i) {
    n[i].parent = ProcessNode::kNoParent;
    size_t first = ProcessNode::kNoParent;
    for (size_t j : by_start) {
      if (j == i || n[j].pid != n[i].ppid) continue;
      if (first == ProcessNode::kNoParent) first = j;
      if (n[j].start_ns <= n[i].start_ns) n[i].parent = j;
    }
    if (n[i].parent == ProcessNode::kNoParent) n[i].parent = first;
  }
  std::vector<std::vector<size_t>> children(n.size());
  for (size_t i : by_start) {
    if (n[i].parent != ProcessNode::kNoParent) children[n[i].parent].push_back(i);
  }
  std::vector<size_t> order;
  std::vector<bool> seen(n.size(), false);
  std::function<void(size_t, int)> visit = [&](size_t i, int depth) {
    seen[i] = true;
    n[i].depth = depth;
    order.push_back(i);
    for (size_t c : children[i]) {
      if (!seen[c]) visit(c, depth + 1);
    }
  };
  for (size_t i : by_start) {
    if (n[i].parent == ProcessNode::kNoParent) visit(i, 0);
  }
  for (size_t i : by_start) {  // pids used again can make a loop: its first process is a root
    if (!seen[i]) {
      n[i].parent = ProcessNode::kNoParent;
      visit(i, 0);
    }
  }
  return order;
}

}  // namespace memlens::analyzer
