// src/analyzer/views/summary.h
//
// The summary view (`memlens summary`): besides the profile's own totals, the top sites (by
// source line) by memory at the peak and by memory in use at the snapshot, and the counts the
// text names (markers apart from snapshot requests, anomalies of custom heaps).
//
// Runs on: the analyzer's main thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "analyzer/model/replay.h"
#include "analyzer/model/sites.h"
#include "analyzer/views/sites.h"

namespace memlens::analyzer {

struct SummaryView {
  std::vector<SiteRow> top_peak;    // at most `limit` rows by peak bytes, none with 0
  std::vector<SiteRow> top_in_use;  // the same by bytes in use at the snapshot
  double peak_seconds = 0;          // when the peak was reached
  size_t markers = 0;               // the program's markers, snapshot requests not included
  size_t snapshot_requests = 0;
  uint64_t anomalies = 0;           // misuses of custom heaps, every kind
};

SummaryView BuildSummary(const Profile& profile, StackResolver* resolver, size_t limit);

}  // namespace memlens::analyzer
