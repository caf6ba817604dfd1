// src/analyzer/views/leaks.h
//
// The leaks view (`memlens leaks`, the report has none): the stacks still holding memory at the
// snapshot, largest first, with the ones a suppressions file names counted apart; and the
// logical leaks (`leaks --growth`): sites whose memory in use grows all along the capture even
// when everything is freed at exit, with the checkpoints that rule reads.
//
// Runs on: the analyzer's main thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/model/replay.h"
#include "analyzer/model/sites.h"
#include "analyzer/model/stack_filter.h"
#include "analyzer/views/sites.h"

namespace memlens::analyzer {

struct LeaksQuery {
  size_t limit = 20;                       // rows kept in LeaksView::leaks
  uint64_t min_bytes = 0;                  // stacks holding fewer bytes are left out
  std::vector<FramePattern> suppressions;  // a stack with a matching frame is counted apart
};

struct SuppressedLeaks {
  uint64_t stacks = 0, bytes = 0, blocks = 0;
  uint64_t bytes_var = 0, blocks_var = 0;  // a sampled capture (stats.h, ErrorScale)
};

struct LeaksView {
  std::vector<SiteRow> leaks;  // GroupBy::kStack rows, most bytes in use first, up to the limit
  size_t stack_count = 0;      // every stack shown or over the limit (not suppressed, not small)
  SuppressedLeaks suppressed;
};

LeaksView BuildLeaks(const Profile& profile, StackResolver* resolver, const LeaksQuery& query);

// Where `leaks --growth` takes its checkpoints: just before the occurrences of a repeated marker
// when the capture has one (a marker per frame, per request: the program's own rhythm), else
// at evenly spaced times.
struct GrowthCheckpoints {
  std::string marker;                 // "" for evenly spaced times
  std::vector<uint64_t> seqs;         // ReplayOptions::checkpoint_seqs, when marker is set
  std::vector<double> seconds;        // ReplayOptions::checkpoint_seconds otherwise
  size_t Wanted() const { return marker.empty() ? seconds.size() : seqs.size(); }
};

// The name that repeats most among the markers (at least `min_count` times; the first such
// name on a tie), or "" when none does: the natural windows of a program with a loop
// (a marker per frame, per request).
std::string MostRepeatedMarker(const std::vector<Marker>& markers, size_t min_count);

// From the capture's markers and snapshot moment (`first`: Capture::Outline's, or a first
// load's): up to `windows` checkpoints at the occurrences of `marker` (or of the marker repeated
// most, at least 3 times, when ""), evenly picked with the first and last included. Returns
// false with one line in *error when a marker was named and occurs fewer than 2 times.
bool PlanGrowthCheckpoints(const Profile& first, size_t windows, const std::string& marker,
                           GrowthCheckpoints* out, std::string* error);

// One site's memory in use at each checkpoint, and the stack holding most of it at the last.
// A sampled capture: each figure's variance beside it (stats.h, ErrorScale).
struct GrowingSite {
  SourceFrame site;
  std::vector<uint64_t> bytes;  // by checkpoint
  std::vector<uint64_t> bytes_var;
  uint64_t in_use_at_end = 0;   // at the snapshot (the end of the capture by default)
  uint64_t in_use_at_end_var = 0;
  uint64_t stack_id = 0;
  uint64_t stack_bytes = 0;  // the stack's bytes at the last checkpoint
  uint64_t Growth() const { return bytes.back() - bytes.front(); }
  // The growth's: the sum of the first and last checkpoints' variances, an upper bound (the
  // blocks live at both add to each side and cancel out of the difference, exactly; which
  // they are, the checkpoints do not keep).
  uint64_t GrowthVariance() const { return bytes_var.front() + bytes_var.back(); }
};

// The rule of a logical leak: over the N checkpoints, the site's bytes in use never decrease,
// the last exceeds the first, and they rise in at least half of the N-1 steps (rounded up), so
// one burst caught by one checkpoint is not growth.
bool Grows(const std::vector<uint64_t>& bytes);

struct GrowthView {
  std::vector<GrowingSite> growing;  // most growth first, up to the limit
  size_t site_count = 0;             // every growing site
  // A line for the profile's warnings when fewer checkpoints than planned could be taken.
  std::string warning;
};

// `profile` was replayed with `plan`'s checkpoints; `windows` is what was asked for.
GrowthView BuildGrowth(const Profile& profile, StackResolver* resolver,
                       const GrowthCheckpoints& plan, size_t windows, size_t limit);

}  // namespace memlens::analyzer
