// src/analyzer/views/summary.cc: see summary.h.
#include "analyzer/views/summary.h"

#include <algorithm>

namespace memlens::analyzer {

SummaryView BuildSummary(const Profile& p, StackResolver* resolver, size_t limit) {
  SummaryView view;
  auto rows = GroupSites(p, resolver, GroupBy::kLine);
  view.top_peak = TopRows(rows, SortBy::kPeak, limit);
  view.top_in_use = TopRows(std::move(rows), SortBy::kLeaked, limit);
  view.peak_seconds = p.SecondsAt(p.totals.peak_seq);
  view.snapshot_requests = std::count_if(p.markers.begin(), p.markers.end(),
                                         [](const Marker& m) { return m.snapshot; });
  view.markers = p.markers.size() - view.snapshot_requests;
  for (uint64_t c : p.anomaly_counts) view.anomalies += c;
  return view;
}

}  // namespace memlens::analyzer
