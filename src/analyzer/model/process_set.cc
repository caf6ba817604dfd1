// src/analyzer/model/process_set.cc: see process_set.h.
#include "analyzer/model/process_set.h"

#include <dirent.h>

#include <algorithm>
#include <functional>
#include <unordered_map>
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
  std::vector<size_t> by_start;
  for (size_t i = 0; i < n.size(); ++i) {
    n[i].parent = ProcessNode::kNoParent;
    n[i].depth = 0;
    if (n[i].known) by_start.push_back(i);
  }
  std::stable_sort(by_start.begin(), by_start.end(),
                   [&](size_t a, size_t b) { return n[a].start_ns < n[b].start_ns; });
  std::unordered_map<uint64_t, std::vector<size_t>> by_pid;  // each in order of start
  for (size_t i : by_start) by_pid[n[i].pid].push_back(i);
  std::vector<std::vector<size_t>> children(n.size());
  for (size_t i : by_start) {
    for (uint64_t pid : {n[i].ppid, n[i].recorded_ancestor}) {
      auto same_pid = by_pid.find(pid);
      if (n[i].parent != ProcessNode::kNoParent || pid == 0 || same_pid == by_pid.end()) continue;
      for (size_t j : same_pid->second) {  // the last of them to start before it
        if (n[j].start_ns > n[i].start_ns) break;
        if (j != i) n[i].parent = j;
      }
    }
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
  for (size_t i : by_start) {  // one started at the same moment as its parent's parent: a loop
    if (!seen[i]) {
      n[i].parent = ProcessNode::kNoParent;
      visit(i, 0);
    }
  }
  for (size_t i = 0; i < n.size(); ++i) {
    if (!n[i].known) order.push_back(i);
  }
  return order;
}

}  // namespace memlens::analyzer
