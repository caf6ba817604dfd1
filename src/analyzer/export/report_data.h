// src/analyzer/export/report_data.h
//
// The data of the HTML report (`memlens report`), as one compact JSON object: the summary,
// three call trees for flame graphs (peak, in use at the snapshot, all allocations), each pruned
// to a node budget with what was cut folded into "(other)" nodes, the timeline (heap, resident,
// peak), TopX rows by source line, the size histogram, the address map (at the snapshot, and
// frames of it over the recording for its playback) and per-site live bytes at checkpoints
// spread over the capture (so the page can diff any two moments). The shape is documented in
// docs/report.md.
//
// Strings are escaped for embedding in an HTML <script> element: besides JSON's own escapes,
// <, >, & and U+2028/U+2029 are written as \u escapes (\u003c for <), and bytes that are not
// UTF-8 become U+FFFD.
// Runs on: the analyzer's main thread.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "analyzer/model/replay.h"
#include "analyzer/model/sites.h"

namespace memlens::analyzer {

struct ReportLimits {
  size_t tree_nodes = 20000;         // per flame tree, "(other)" nodes included
  size_t top_rows = 300;             // TopX rows: the union of the top N by each sort key
  size_t checkpoint_sites = 4000;    // sites listed per checkpoint; the rest fold into one entry
  size_t timeline_points = 3000;     // heap and resident series are reduced to this many
  size_t timeline_markers = 1000;    // markers shown on the timeline (every k-th beyond)
  size_t address_regions = 2000;     // largest regions of the address map
  // The map's playback: frames evenly over the capture (0: none; ReplayOptions::
  // map_frame_seconds), each listing its largest regions, of 64 cells each (about 150 bytes a
  // region: 40 frames of 24 regions stay under 150 kB).
  size_t map_frames = 40;
  size_t map_frame_regions = 24;
};

// The checkpoint times (seconds since the start) to ask the replay for, evenly spread over a
// capture of `duration` seconds.
std::vector<double> ReportCheckpointTimes(double duration, size_t count);

// One process of a run (memlens run --follow-children) in the report's process tree, its heap
// in use over time on the run's clock.
struct ReportProcess {
  uint64_t pid = 0;
  int64_t parent = -1;  // its parent's index in the list, -1 for none
  int depth = 0;
  bool forked = false;  // forked without an exec: it started with its parent's blocks
  std::string command;
  std::string capture;
  uint64_t peak_bytes = 0;
  uint64_t in_use_bytes = 0;
  double start_s = 0, end_s = 0;
  std::vector<std::pair<double, uint64_t>> timeline;  // (seconds, heap bytes in use)
};

// The report's JSON. `profile` was loaded with checkpoints (and the address map) asked for;
// `warnings` are the profile's and the symbolizer's lines. `processes`: a run's, in tree order
// (the profile is then their merge: merge_profiles.h).
std::string BuildReportData(const Profile& profile, StackResolver* resolver,
                            const ReportLimits& limits,
                            const std::vector<ReportProcess>& processes = {});

// One capture's report, loaded and built: `memlens report FILE` and the live page's every
// refresh (`memlens live --web`). Checkpoints evenly over the capture, the address map and
// limits.map_frames frames of it, the runtime's blocks set apart.
struct CaptureReport {
  Profile profile;
  std::unique_ptr<StackResolver> resolver;
  std::string data;  // BuildReportData's JSON
};
bool LoadCaptureReport(const std::string& path, const SnapshotSpec& snapshot,
                       const ReplayOptions& replay, size_t checkpoints, StackOptions stacks,
                       const ReportLimits& limits, CaptureReport* report, std::string* error);
// The rest of the report of a profile already loaded into report->profile (with checkpoints
// and the address map): its resolver, the runtime's blocks set apart, the data. `processes`:
// a run's, as BuildReportData takes them.
void BuildCaptureReport(StackOptions stacks, const ReportLimits& limits,
                        const std::vector<ReportProcess>& processes, CaptureReport* report);

}  // namespace memlens::analyzer
