// src/cli/cmd_timeline.cc
//
// `memlens timeline FILE [--width N] [--height N] [--parts]`: heap in use over time, with the
// resident memory the agent sampled beside it (the gap is what the allocator keeps from the
// system), and the peak, and the program's markers and snapshot requests; with --parts,
// resident memory split into its parts (docs/rss.md) at each mapping sample, stacked; drawn in
// the terminal, or every point with --json.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <memory>

#include "analyzer/export/api_json.h"
#include "analyzer/export/format_units.h"
#include "analyzer/views/timeline.h"
#include "cli/analysis_options.h"
#include "cli/commands.h"

namespace memlens::cli {
namespace {

using namespace analyzer;

struct TimelineOptions {
  AnalysisOptions common;
  int width = 72;
  int height = 12;
  bool parts = false;
};

// The chart's rows, top first, the top, middle and bottom ones labelled with their level, and
// the axis under them: glyph(column, row) draws a cell, rows counted from 1 at the bottom.
template <typename Glyph>
void DrawRows(uint64_t top, int width, int height, Glyph glyph) {
  for (int row = height; row >= 1; --row) {
    std::string line;
    for (int c = 0; c < width; ++c) line += glyph(c, row);
    std::string label =
        row == height || row == height / 2 || row == 1 ? FormatBytes(top * row / height) : "";
    std::cout << std::string(11 - std::min<size_t>(11, label.size()), ' ') << label << " |" << line
              << "\n";
  }
  std::cout << std::string(11, ' ') << " +" << std::string(width, '-') << "\n";
}

void DrawTimeAxis(int width, double duration) {
  std::cout << std::string(13, ' ') << "0 s" << std::string(std::max(0, width - 3 - 9), ' ')
            << FormatSeconds(duration) << "\n";
}

void Draw(const Profile& p, int width, int height) {
  TimelineChart chart = BuildTimelineChart(p, width);
  std::cout << "Heap in use (#) and resident memory (.) over " << FormatSeconds(chart.duration)
            << "; peak "
            << FormatBytesEstimate(p.totals.peak_bytes, p.totals.peak_bytes_var,
                                   ErrorScale{p.sample_rate})
            << " at "
            << FormatSeconds(chart.peak_seconds) << " (^)\n";
  DrawRows(chart.top, width, height, [&](int c, int row) {
    uint64_t level = chart.top * row / height;
    return chart.heap[c] >= level ? '#' : (chart.resident[c] >= level ? '.' : ' ');
  });
  if (!chart.markers.empty()) {  // markers (|) and snapshot requests (S) under their moments
    std::cout << "    markers  " << chart.markers << "\n";
  }
  std::cout << std::string(13 + chart.peak_column, ' ') << "^\n";
  DrawTimeAxis(width, chart.duration);
}

// Resident memory stacked by part, a glyph each (ResidentPartInfo::glyph), and the legend with
// each part's bytes at the last sample.
void DrawParts(const Profile& p, int width, int height) {
  PartsChart chart = BuildPartsChart(p, width);
  const size_t samples = p.resident_samples.size();
  std::cout << "\nResident memory by part at " << (samples == 1 ? "the one" : "the " + std::to_string(samples))
            << " mapping sample" << (samples == 1 ? "" : "s")
            << (p.snapshot.kind == SnapshotSpec::kEnd ? "" : " up to " + p.SnapshotLabel())
            << " (memlens rss explains each part)\n";
  DrawRows(chart.top, width, height, [&](int c, int row) {
    // Each row shows the part at its middle.
    std::optional<ResidentPart> part =
        PartAtLevel(chart.columns[c], chart.top * (2 * row - 1) / (2 * height));
    return part ? PartInfo(*part).glyph : ' ';
  });
  DrawTimeAxis(width, chart.duration);
  const ResidentSample& last = p.resident_samples.back();
  std::cout << "At the last sample (" << FormatSeconds(last.seconds) << "), "
            << FormatBytes(last.resident_bytes) << " resident:\n";
  for (size_t i = 0; i < kResidentParts; ++i) {
    const ResidentPartInfo& info = PartInfo(PartAt(i));
    if (PartAt(i) == ResidentPart::kReserved) continue;  // never resident
    std::cout << "  " << info.glyph << "  " << std::setw(11) << FormatBytes(last.resident[i])
              << "  " << info.title << "\n";
  }
}

void ListMarkers(const Profile& p) {
  if (p.markers.empty()) return;
  std::cout << "\nMarkers (|) and snapshot requests (S):\n";
  for (const MarkerName& seen : MarkersByName(p)) {
    std::cout << "  " << (seen.snapshot ? "snapshot " : "marker ") << seen.label << ": ";
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
  if (o.parts && !o.common.filters.heap.empty()) {
    return Complain("timeline: --parts describes the whole process's resident memory, not a "
                    "custom heap's: leave out --heap");
  }
  Profile p;
  ReplayOptions replay;
  replay.resident_parts = o.parts;  // a replay from the start, not the snapshot index
  if (!LoadOrComplain(o.common.capture, o.common.filters, replay, &p)) return kExitBadInput;
  if (o.parts && p.resident_samples.empty()) {
    return Complain("timeline --parts: '" + o.common.capture + "' has no mapping samples " +
                    "(captures before format 10.0 and Windows captures have none; " +
                    "memlens samples the mappings when recording starts, then every 100 ms or " +
                    "more)");
  }
  StackResolver resolver(p);
  if (o.common.json) {
    JsonWriter json(std::cout);
    json.BeginObject();
    WriteCaptureJson(&json, p, resolver);
    json.Key("peak");
    json.BeginObject();
    json.Field("time_s", p.SecondsAt(p.totals.peak_seq));
    json.Field("bytes", p.totals.peak_bytes);
    WriteError(&json, "bytes", p.totals.peak_bytes_var, false, ErrorScale{p.sample_rate});
    json.EndObject();
    json.Key("heap");  // heap in use at each of the writer's time marks
    json.BeginArray();
    for (const auto& point : p.timeline) {
      json.BeginObject();
      json.Field("time_s", point.seconds);
      json.Field("bytes", point.heap_bytes);
      WriteError(&json, "bytes", point.heap_bytes_var, false, ErrorScale{p.sample_rate});
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
    if (o.parts) WriteResidentSamples(&json, "resident_parts", p.resident_samples);
    json.EndObject();
  } else {
    PrintEstimateNote(p);
    PrintProgramEndNote(p);
    Draw(p, o.width, o.height);
    if (o.parts) DrawParts(p, o.width, o.height);
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
  cmd->add_flag("--parts", o->parts,
                "also resident memory split into its parts (heap in use, malloc's free memory, "
                "Python's, stacks, code, mapped files...: memlens rss) at each mapping sample, "
                "stacked; reads the whole capture");
  return [o] { return Timeline(*o); };
}

}  // namespace memlens::cli
