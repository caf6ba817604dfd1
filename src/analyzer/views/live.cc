// src/analyzer/views/live.cc
#include "analyzer/views/live.h"

#include <algorithm>

namespace memlens::analyzer {
namespace {

bool Matches(const SiteRow& row, const std::string& filter) {
  if (filter.empty()) return true;
  for (const std::string* field : {&row.site.function, &row.site.file, &row.site.module}) {
    if (field->find(filter) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

LiveFrame BuildLiveFrame(const Profile& profile, StackResolver* resolver,
                         const LiveOptions& options) {
  LiveFrame frame;
  for (const auto& word : profile.process.argv) {
    frame.command += (frame.command.empty() ? "" : " ") + word;
  }
  frame.pid = profile.process.pid;
  frame.seconds = profile.DurationSeconds();
  frame.ended = profile.end.has_value();
  if (profile.end) frame.end_reason = format::EndReasonName(profile.end->reason);
  const Totals& t = profile.totals;
  frame.in_use_bytes = t.in_use_bytes;
  frame.in_use_blocks = t.in_use_blocks;
  frame.peak_bytes = t.peak_bytes;
  frame.peak_seconds = profile.SecondsAt(t.peak_seq);
  frame.allocated_bytes = t.allocated_bytes;
  frame.allocations = t.allocations;
  frame.dropped_events = t.dropped_events;
  frame.threads = profile.thread_count;
  if (!profile.resident.empty()) frame.resident_bytes = profile.resident.back().bytes;
  frame.chart = BuildTimelineChart(profile, options.chart_width);
  const LiveSortOrder& order = kLiveSortOrders[std::min(options.sort, std::size(kLiveSortOrders) - 1)];
  std::vector<SiteRow> rows = GroupSites(profile, resolver, GroupBy::kLine);
  rows.erase(std::remove_if(rows.begin(), rows.end(),
                            [&](const SiteRow& r) { return !Matches(r, options.filter); }),
             rows.end());
  frame.sites_matching = rows.size();
  frame.sites = TopRows(std::move(rows), order.by, options.rows);
  frame.markers = profile.markers;
  return frame;
}

}  // namespace memlens::analyzer
