// src/analyzer/views/timeline.cc: see timeline.h.
#include "analyzer/views/timeline.h"

#include <algorithm>

namespace memlens::analyzer {

TimelineChart BuildTimelineChart(const Profile& p, int width) {
  TimelineChart chart;
  chart.duration = std::max(p.DurationSeconds(), 1e-9);
  chart.heap.assign(width, 0);
  chart.resident.assign(width, 0);
  auto column = [&](double seconds) {
    return std::min(width - 1, static_cast<int>(seconds / chart.duration * width));
  };
  for (const auto& point : p.timeline) {
    int c = column(point.seconds);
    chart.heap[c] = std::max(chart.heap[c], point.heap_bytes);
  }
  for (const auto& sample : p.resident) {
    int c = column(sample.monotonic_ns / 1e9);
    chart.resident[c] = std::max(chart.resident[c], sample.bytes);
  }
  for (int c = 1; c < width; ++c) {  // a column without a mark holds the value before it
    if (!chart.heap[c]) chart.heap[c] = chart.heap[c - 1];
    // So does one without a sample: a column narrower than the 10 ms between samples is not
    // a drop to nothing (the chart was striped on a short run).
    if (!chart.resident[c]) chart.resident[c] = chart.resident[c - 1];
  }
  chart.top = std::max(*std::max_element(chart.heap.begin(), chart.heap.end()),
                       *std::max_element(chart.resident.begin(), chart.resident.end()));
  chart.top = std::max<uint64_t>(chart.top, 1);
  chart.peak_seconds = p.SecondsAt(p.totals.peak_seq);
  chart.peak_column = column(chart.peak_seconds);
  if (!p.markers.empty()) {
    chart.markers.assign(width, ' ');
    for (const Marker& m : p.markers) {
      char& c = chart.markers[column(p.SecondsAt(m.seq))];
      c = m.snapshot ? 'S' : (c == 'S' ? 'S' : '|');
    }
  }
  return chart;
}

PartsChart BuildPartsChart(const Profile& p, int width) {
  PartsChart chart;
  chart.duration = std::max(p.DurationSeconds(), 1e-9);
  chart.columns.assign(width, {});
  std::vector<bool> sampled(width, false);
  for (const ResidentSample& s : p.resident_samples) {
    int c = std::min(width - 1, static_cast<int>(s.seconds / chart.duration * width));
    chart.columns[c] = s.resident;  // samples come in time order: the column's last wins
    sampled[c] = true;
  }
  // Up to the moment the replay stopped at (FILE@moment): nothing is known after it.
  const int last = std::min(width - 1, static_cast<int>(p.snapshot_seconds / chart.duration * width));
  for (int c = 1; c <= last; ++c) {
    if (!sampled[c] && sampled[c - 1]) {
      chart.columns[c] = chart.columns[c - 1];
      sampled[c] = true;
    }
  }
  for (const auto& column : chart.columns) {
    uint64_t total = 0;
    for (uint64_t bytes : column) total += bytes;
    chart.top = std::max(chart.top, total);
  }
  return chart;
}

std::optional<ResidentPart> PartAtLevel(const std::array<uint64_t, kResidentParts>& column,
                                        uint64_t level) {
  uint64_t below = 0;
  for (size_t i = 0; i < kResidentParts; ++i) {
    below += column[i];
    if (column[i] && level < below) return PartAt(i);
  }
  return std::nullopt;
}

std::vector<MarkerName> MarkersByName(const Profile& p) {
  std::vector<MarkerName> names;
  for (const Marker& m : p.markers) {
    std::string label = m.name + (m.category.empty() ? "" : " (" + m.category + ")");
    auto it = std::find_if(names.begin(), names.end(),
                           [&](const MarkerName& n) { return n.label == label; });
    double t = p.SecondsAt(m.seq);
    if (it == names.end()) {
      names.push_back({label, 0, t, t, m.snapshot});
      it = names.end() - 1;
    }
    it->count += 1;
    it->last = t;
  }
  return names;
}

}  // namespace memlens::analyzer
