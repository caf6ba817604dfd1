// src/analyzer/export/export_formats.cc: see export_formats.h.
#include "analyzer/export/export_formats.h"

#include <algorithm>

#include "analyzer/export/chrome_trace.h"
#include "analyzer/export/csv.h"
#include "analyzer/export/folded.h"
#include "analyzer/export/pprof.h"
#include "analyzer/export/speedscope.h"

namespace memlens::analyzer {
namespace {

constexpr const char* kMetricNames[] = {"in-use", "allocated", "peak"};

// pprof holds the in-use and the allocated figures both; --metric picks the one shown first.
bool ExportPprof(const Profile& profile, StackResolver* resolver, const ExportOptions& options,
                 std::string* out, std::string* error) {
  if (options.metric == Metric::kPeak) {
    *error =
        "pprof has no peak sample type: export CAPTURE@peak, whose in-use figures are the peak's";
    return false;
  }
  PprofOptions pprof = PprofTimesOf(profile);
  pprof.default_sample_type = options.metric == Metric::kInUse ? "inuse_space" : "alloc_space";
  return WritePprof(profile, resolver, pprof, out, error);
}

}  // namespace

bool ParseMetric(const std::string& text, Metric* out) {
  for (int i = 0; i < 3; ++i) {
    if (text == kMetricNames[i]) {
      *out = static_cast<Metric>(i);
      return true;
    }
  }
  return false;
}

const char* MetricName(Metric metric) { return kMetricNames[static_cast<int>(metric)]; }

uint64_t MetricBytes(const StackStats& stats, Metric metric) {
  switch (metric) {
    case Metric::kInUse:
      return stats.in_use_bytes;
    case Metric::kAllocated:
      return stats.allocated_bytes;
    case Metric::kPeak:
      return stats.peak_bytes;
  }
  return 0;
}

const std::vector<ExportFormat>& ExportFormats() {
  static const std::vector<ExportFormat> kFormats = {
      {"pprof", ".pb.gz",
       "gzipped profile.proto with Go's heap sample types: go tool pprof, Pyroscope, Parca",
       true, ExportPprof},
      {"speedscope", ".speedscope.json", "speedscope's JSON file format: speedscope.app",
       true, WriteSpeedscope},
      {"folded", ".folded",
       "folded stacks, one 'root;...;leaf BYTES' a line: flamegraph.pl, inferno", true,
       WriteFolded},
      {"chrome-trace", ".trace.json",
       "Chrome trace event JSON, heap in use over time, markers: ui.perfetto.dev",
       false, WriteChromeTrace},
      {"csv", ".csv", "the top rows (as `memlens top`), RFC 4180: spreadsheets, pandas", false,
       WriteCsv},
  };
  return kFormats;
}

const ExportFormat* FindExportFormat(const std::string& name) {
  for (const ExportFormat& f : ExportFormats()) {
    if (name == f.name) return &f;
  }
  return nullptr;
}

std::vector<WeightedStack> WeightedStacks(const Profile& profile, StackResolver* resolver,
                                          Metric metric) {
  std::vector<uint64_t> ids;
  for (const auto& [id, stats] : profile.stacks) {
    if (MetricBytes(stats, metric)) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());  // the same bytes for the same capture
  std::vector<WeightedStack> out;
  out.reserve(ids.size());
  for (uint64_t id : ids) {
    out.push_back({resolver->Frames(id), MetricBytes(profile.stacks.at(id), metric)});
    std::reverse(out.back().frames.begin(), out.back().frames.end());
  }
  return out;
}

}  // namespace memlens::analyzer
