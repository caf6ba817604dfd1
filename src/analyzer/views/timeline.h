// src/analyzer/views/timeline.h
//
// The timeline view (`memlens timeline`): heap in use and the resident memory the agent sampled
// over time, binned into the columns of a chart, the peak's column, where the program's markers
// and snapshot requests fall, and the markers by name; with --parts, resident memory split
// into its parts (resident_parts.h) at the writer's mapping samples, stacked. The JSON lists the
// profile's own series.
//
// Runs on: the analyzer's main thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/model/replay.h"

namespace memlens::analyzer {

struct TimelineChart {
  double duration = 0;             // seconds the columns span (never 0)
  std::vector<uint64_t> heap;      // by column: the most in use there (or the column before's)
  std::vector<uint64_t> resident;  // by column: the largest sample there (or the column before's)
  uint64_t top = 1;                // the largest of both, at least 1
  int peak_column = 0;
  double peak_seconds = 0;
  // By column: ' ', '|' for a marker, 'S' for a snapshot request (which wins); empty without
  // markers.
  std::string markers;
};

TimelineChart BuildTimelineChart(const Profile& profile, int width);

// Resident memory by part over the capture (Profile::resident_samples, which a replay with
// ReplayOptions::resident_parts fills): each column holds its last sample, or the column
// before's; the columns before the first sample, and after the snapshot, hold nothing.
struct PartsChart {
  double duration = 0;  // as TimelineChart's
  std::vector<std::array<uint64_t, kResidentParts>> columns;
  uint64_t top = 1;  // the largest column's total, at least 1
};

PartsChart BuildPartsChart(const Profile& profile, int width);
// The part drawn at a height of `level` bytes in a column: the one whose share, stacked in
// the parts' order from the bottom, holds it; nullopt above them all.
std::optional<ResidentPart> PartAtLevel(const std::array<uint64_t, kResidentParts>& column,
                                        uint64_t level);

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
