// src/analyzer/views/timeline.h
//
// The timeline view (`memlens timeline`): heap in use and the resident memory the agent sampled
// over time, binned into the columns of a chart, the peak's column, where the program's markers
// and snapshot requests fall, and the markers by name. The JSON lists the profile's own series.
//
// Runs on: the analyzer's main thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/model/replay.h"

namespace memlens::analyzer {

struct TimelineChart {
  double duration = 0;             // seconds the columns span (never 0)
  std::vector<uint64_t> heap;      // by column: the most in use there (or the column before's)
  std::vector<uint64_t> resident;  // by column: the largest sample there, 0 for none
  uint64_t top = 1;                // the largest of both, at least 1
  int peak_column = 0;
  double peak_seconds = 0;
  // By column: ' ', '|' for a marker, 'S' for a snapshot request (which wins); empty without
  // markers.
  std::string markers;
};

TimelineChart BuildTimelineChart(const Profile& profile, int width);

// The markers by name (with its category): each name's count and first and last moments, in
// order of first appearance.
struct MarkerName {
  std::string label;
  size_t count = 0;
  double first = 0, last = 0;
  bool snapshot = false;
};

std::vector<MarkerName> MarkersByName(const Profile& profile);

}  // namespace memlens::analyzer
