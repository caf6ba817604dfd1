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
  // Of the known processes of this pid, the one that started last before process i.
  auto last_before = [&](uint64_t pid, size_t i) {
    size_t found = ProcessNode::kNoParent;
    auto same_pid = by_pid.find(pid);
    if (pid == 0 || same_pid == by_pid.end()) return found;
    for (size_t j : same_pid->second) {
      if (n[j].start_ns > n[i].start_ns) break;
      if (j != i) found = j;
    }
    return found;
  };
  for (size_t i : by_start) {
    size_t parent = last_before(n[i].ppid, i);
    size_t ancestor = last_before(n[i].recorded_ancestor, i);
    // Its parent, unless that pid's process started before the ancestor it names: then its
    // parent was not recorded, and the pid is an earlier process's, used again.
    if (parent == ProcessNode::kNoParent ||
        (ancestor != ProcessNode::kNoParent && n[parent].start_ns < n[ancestor].start_ns)) {
      parent = ancestor;
    }
    n[i].parent = parent;
    if (parent != ProcessNode::kNoParent) children[parent].push_back(i);
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

std::vector<size_t> LoadRun(
    const std::string& directory, const SnapshotSpec& snapshot, const ReplayOptions& replay,
    std::vector<RunProcess>* processes, std::vector<ProcessNode>* nodes,
    const std::function<void(const std::string& capture, ReplayOptions*)>& tailor) {
  const std::vector<std::string> captures = CapturesIn(directory);
  processes->assign(captures.size(), RunProcess{});
  nodes->assign(captures.size(), ProcessNode{});
  for (size_t i = 0; i < captures.size(); ++i) {
    RunProcess& process = (*processes)[i];
    process.capture = captures[i];
    ReplayOptions options = replay;
    if (tailor) tailor(process.capture, &options);
    if (!LoadProfile(process.capture, snapshot, options, &process.profile, &process.error)) {
      continue;
    }
    // A process whose parent was not recorded names its nearest recorded ancestor.
    const format::ProcessRecord& p = process.Started();
    (*nodes)[i] = {p.pid, p.ppid, p.start_monotonic_ns, true};
    (*nodes)[i].recorded_ancestor = p.recorded_parent;
  }
  return ProcessTree(nodes);
}

}  // namespace memlens::analyzer
