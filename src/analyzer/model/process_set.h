// src/analyzer/model/process_set.h
//
// A run of several processes (`memlens run --follow-children`): a directory holding one capture
// for each process, each capture's process record naming its parent's pid. CapturesIn lists
// them; ProcessTree puts them in the order `memlens summary DIR` shows: each process after its
// parent, brothers by start time.
//
// Runs on: the analyzer's main thread (and memlens run's, counting the captures at exit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "analyzer/model/replay.h"

namespace memlens::analyzer {

// The captures (*.mlens) in `directory`, sorted by name; empty when there are none or it cannot
// be read.
std::vector<std::string> CapturesIn(const std::string& directory);

struct ProcessNode {
  uint64_t pid = 0;
  uint64_t ppid = 0;
  uint64_t start_ns = 0;  // CLOCK_MONOTONIC when its recording started (its first image's)
  bool known = false;     // false: its capture could not be read; listed last, linked to none
  static constexpr size_t kNoParent = SIZE_MAX;
  size_t parent = kNoParent;  // filled by ProcessTree: index of its parent in the set
  int depth = 0;              // filled by ProcessTree: 0 for a process whose parent is not in it
  // The nearest recorded ancestor its agent knew of (ProcessRecord::recorded_parent), when
  // that was not its parent; 0 otherwise.
  uint64_t recorded_ancestor = 0;
};

// Links each known process to its parent (of the known processes of pid `ppid`, the one that
// started last before it, since a pid may be used again; when none, of pid
// `recorded_ancestor`), and returns the indices in tree order: each after its parent, brothers
// by start time; the unknown ones at the end.
std::vector<size_t> ProcessTree(std::vector<ProcessNode>* nodes);

// One process of a run, as LoadRun found it.
struct RunProcess {
  std::string capture;
  Profile profile;
  std::string error;  // the capture could not be read (then profile is empty)
  // The process as it started, before any exec: its pid, parent and start.
  const format::ProcessRecord& Started() const {
    return profile.first_image ? *profile.first_image : profile.process;
  }
};

// Loads each capture of the run's directory (CapturesIn) at `snapshot`, and links the processes
// (ProcessTree): (*processes)[i] and (*nodes)[i] are the i-th capture's. Returns the tree order.
// `tailor`, when given, adjusts each capture's replay options (its checkpoints, on its clock).
std::vector<size_t> LoadRun(
    const std::string& directory, const SnapshotSpec& snapshot, const ReplayOptions& replay,
    std::vector<RunProcess>* processes, std::vector<ProcessNode>* nodes,
    const std::function<void(const std::string& capture, ReplayOptions*)>& tailor = nullptr);

}  // namespace memlens::analyzer
