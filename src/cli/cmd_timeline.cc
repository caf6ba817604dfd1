// src/cli/cmd_timeline.cc
//
// `memlens timeline FILE [--width N] [--height N]`: heap in use over time, with the resident
// memory the agent sampled beside it (the gap is what the allocator keeps from the system),
// and the peak, and the program's markers and snapshot requests; drawn in the terminal, or
// every point with --json.
#include <algorithm>
#include <iostream>
#include <memory>

#include "analyzer/export/api_json.h"
#include "analyzer/export/format_units.h"
#include "cli/analysis_options.h"
#include "cli/commands.h"

namespace memlens::cli {
namespace {

using namespace analyzer;

struct TimelineOptions {
  AnalysisOptions common;
  int width = 72;
  int height = 12;
};

void Draw(const Profile& p, int width, int height) {
  double duration = std::max(p.DurationSeconds(), 1e-9);
  std::vector<uint64_t> heap(width, 0), rss(width, 0);
  auto column = [&](double seconds) {
    return std::min(width - 1, static_cast<int>(seconds / duration * width));
  };
  for (const auto& point : p.timeline) {
    int c = column(point.seconds);
    heap[c] = std::max(heap[c], point.heap_bytes);
  }
  for (const auto& sample : p.resident) {
    int c = column(sample.monotonic_ns / 1e9);
    rss[c] = std::max(rss[c], sample.bytes);
  }
  for (int c = 1; c < width; ++c) {  // a column without a mark holds the value before it
    if (!heap[c]) heap[c] = heap[c - 1];
  }
  uint64_t top = std::max(*std::max_element(heap.begin(), heap.end()),
                          *std::max_element(rss.begin(), rss.end()));
  top = std::max<uint64_t>(top, 1);
  int peak_column = column(p.SecondsAt(p.totals.peak_seq));
  std::cout << "Heap in use (#) and resident memory (.) over " << FormatSeconds(duration)
            << "; peak " << FormatBytes(p.totals.peak_bytes) << " at "
            << FormatSeconds(p.SecondsAt(p.totals.peak_seq)) << " (^)\n";
  for (int row = height; row >= 1; --row) {
    uint64_t level = top * row / height;
    std::string line;
    for (int c = 0; c < width; ++c) {
      line += heap[c] >= level ? '#' : (rss[c] >= level ? '.' : ' ');
    }
    std::string label = row == height || row == height / 2 || row == 1 ? FormatBytes(level) : "";
    std::cout << std::string(11 - std::min<size_t>(11, label.size()), ' ') << label << " |" << line << "\n";
  }
  std::cout << std::string(11, ' ') << " +" << std::string(width, '-') << "\n";
  if (!p.markers.empty()) {  // markers (|) and snapshot requests (S) under their moments
    std::string line(width, ' ');
    for (const Marker& m : p.markers) {
      char& c = line[column(p.SecondsAt(m.seq))];
      c = m.snapshot ? 'S' : (c == 'S' ? 'S' : '|');
    }
    std::cout << "    markers  " << line << "\n";
  }
  std::cout << std::string(13 + peak_column, ' ') << "^\n"
            << std::string(13, ' ') << "0 s" << std::string(std::max(0, width - 3 - 9), ' ')
            << FormatSeconds(duration) << "\n";
}

// The markers by name: each name's count and first and last moments; one line each.
void ListMarkers(const Profile& p) {
  if (p.markers.empty()) return;
  struct Seen {
    size_t count = 0;
    double first = 0, last = 0;
    bool snapshot = false;
  };
  std::vector<std::pair<std::string, Seen>> names;  // in order of first appearance
  for (const Marker& m : p.markers) {
    std::string label = m.name + (m.category.empty() ? "" : " (" + m.category + ")");
    auto it = std::find_if(names.begin(), names.end(), [&](const auto& n) { return n.first == label; });
    double t = p.SecondsAt(m.seq);
    if (it == names.end()) {
      names.push_back({label, Seen{0, t, t, m.snapshot}});
      it = names.end() - 1;
    }
    it->second.count += 1;
    it->second.last = t;
  }
  std::cout << "\nMarkers (|) and snapshot requests (S):\n";
  for (const auto& [label, seen] : names) {
    std::cout << "  " << (seen.snapshot ? "snapshot " : "marker ") << label << ": ";
    if (seen.count == 1) {
      std::cout << "at " << FormatSeconds(seen.first) << "\n";
    } else {
      std::cout << seen.count << " times, " << FormatSeconds(seen.first) << " to "
                << FormatSeconds(seen.last) << "\n";
    }
  }
}

int Timeline(const TimelineOptions& o) {
  if (o.width < 10 || o.width > 1000 || o.height < 2 || o.height > 200) {
    return Complain("timeline: --width must be 10..1000 and --height 2..200");
  }
  Profile p;
  if (!LoadOrComplain(o.common, &p)) return kExitBadInput;
  StackResolver resolver(p);
  if (o.common.json) {
    JsonWriter json(std::cout);
    json.BeginObject();
    WriteCaptureJson(&json, p, resolver);
    json.Key("peak");
    json.BeginObject();
    json.Field("time_s", p.SecondsAt(p.totals.peak_seq));
    json.Field("bytes", p.totals.peak_bytes);
    json.EndObject();
    json.Key("heap");  // heap in use at each of the writer's time marks
    json.BeginArray();
    for (const auto& point : p.timeline) {
      json.BeginObject();
      json.Field("time_s", point.seconds);
      json.Field("bytes", point.heap_bytes);
      json.EndObject();
    }
    json.EndArray();
    json.Key("resident");
    json.BeginArray();
    for (const auto& sample : p.resident) {
      json.BeginObject();
      json.Field("time_s", sample.monotonic_ns / 1e9);
      json.Field("bytes", sample.bytes);
      json.EndObject();
    }
    json.EndArray();
    WriteMarkersJson(&json, p);
    json.EndObject();
  } else {
    PrintEstimateNote(p);
    PrintProgramEndNote(p);
    Draw(p, o.width, o.height);
    ListMarkers(p);
  }
  PrintWarnings(p, resolver);
  return 0;
}

}  // namespace

CommandRunner AddTimelineCommand(CLI::App* cmd) {
  auto o = std::make_shared<TimelineOptions>();
  AddAnalysisOptions(cmd, &o->common);
  cmd->add_option("--width", o->width, "columns of the chart")->capture_default_str();
  cmd->add_option("--height", o->height, "rows of the chart")->capture_default_str();
  return [o] { return Timeline(*o); };
}

}  // namespace memlens::cli
