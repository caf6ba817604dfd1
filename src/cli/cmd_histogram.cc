// src/cli/cmd_histogram.cc
//
// `memlens histogram FILE[@SNAPSHOT] [--sites N]`: allocation sizes in log2 buckets (count and
// bytes), for every allocation up to the snapshot and for the top N sites (source lines) by
// allocated bytes.
#include <algorithm>
#include <iostream>
#include <memory>

#include "analyzer/export/format_units.h"
#include "analyzer/export/text_table.h"
#include "analyzer/views/histogram.h"
#include "cli/analysis_options.h"
#include "cli/commands.h"

namespace memlens::cli {
namespace {

using namespace analyzer;

struct HistogramOptions {
  AnalysisOptions common;
  size_t sites = 5;
};

void WriteBucketsJson(JsonWriter* json, const SizeHistogram& h, ErrorScale errors) {
  json->Key("buckets");
  json->BeginArray();
  for (int b = 0; b < static_cast<int>(h.size()); ++b) {
    if (h[b].count == 0) continue;
    json->BeginObject();
    json->Field("bucket", b);
    json->Field("min_size", BucketMin(b));
    json->Field("max_size", BucketMax(b));
    json->Field("count", h[b].count);
    WriteError(json, "count", h[b].count_var, true, errors);
    json->Field("bytes", h[b].bytes);
    WriteError(json, "bytes", h[b].bytes_var, false, errors);
    json->EndObject();
  }
  json->EndArray();
}

void PrintBuckets(const SizeHistogram& h, ErrorScale errors) {
  int first = -1, last = -1;
  uint64_t most = 0;
  for (int b = 0; b < static_cast<int>(h.size()); ++b) {
    if (h[b].count == 0) continue;
    if (first < 0) first = b;
    last = b;
    most = std::max(most, h[b].count);
  }
  if (first < 0) {
    std::cout << "  (no allocations)\n";
    return;
  }
  TextTable table;
  table.AddColumn("SIZE", TextTable::kRight);
  table.AddColumn("COUNT", TextTable::kRight);
  table.AddColumn("BYTES", TextTable::kRight);
  table.AddColumn("", TextTable::kLeft);
  constexpr uint64_t kBarWidth = 40;
  for (int b = first; b <= last; ++b) {  // empty buckets inside the range stay, as gaps
    uint64_t bar = h[b].count == 0 ? 0 : std::max<uint64_t>(1, h[b].count * kBarWidth / most);
    table.AddRow({FormatBytes(BucketMin(b)) + " - " + FormatBytes(BucketMax(b)),
                  FormatCountEstimate(h[b].count, h[b].count_var, errors),
                  FormatBytesEstimate(h[b].bytes, h[b].bytes_var, errors), std::string(bar, '#')});
  }
  table.Print(std::cout);
}

int Histogram(const HistogramOptions& o) {
  Profile p;
  ReplayOptions replay;
  replay.stack_size_histograms = true;
  if (!LoadOrComplain(o.common.capture, o.common.filters, replay, &p)) return kExitBadInput;
  StackResolver resolver(p, StackOptionsOf(o.common.filters));
  ApplyFilters(o.common.filters, &resolver, &p);
  auto sites = BuildSiteHistograms(p, &resolver, o.sites);
  if (o.common.json) {
    JsonWriter json(std::cout);
    json.BeginObject();
    WriteCaptureJson(&json, p, resolver);
    const ErrorScale errors{p.sample_rate};
    json.Field("allocations", p.totals.allocations);
    WriteError(&json, "allocations", p.totals.allocations_var, true, errors);
    json.Field("allocated_bytes", p.totals.allocated_bytes);
    WriteError(&json, "allocated_bytes", p.totals.allocated_bytes_var, false, errors);
    WriteBucketsJson(&json, p.size_histogram, errors);
    json.Key("sites");
    json.BeginArray();
    for (const auto& s : sites) {
      json.BeginObject();
      json.Key("site");
      WriteFrame(&json, s.site);
      json.Field("allocations", s.stats.allocations);
      WriteError(&json, "allocations", s.stats.allocations_var, true, errors);
      json.Field("allocated_bytes", s.stats.allocated_bytes);
      WriteError(&json, "allocated_bytes", s.stats.allocated_bytes_var, false, errors);
      WriteBucketsJson(&json, s.buckets, errors);
      json.EndObject();
    }
    json.EndArray();
    json.EndObject();
  } else {
    PrintEstimateNote(p);
    PrintProgramEndNote(p);
    const ErrorScale errors{p.sample_rate};
    const Totals& t = p.totals;
    std::cout << "Allocation sizes up to " << p.SnapshotLabel() << ": "
              << FormatCountedEstimate(t.allocations, t.allocations_var, errors, "allocation")
              << ", " << FormatBytesEstimate(t.allocated_bytes, t.allocated_bytes_var, errors)
              << "\n";
    PrintBuckets(p.size_histogram, errors);
    for (size_t i = 0; i < sites.size(); ++i) {
      const auto& s = sites[i];
      std::string location = SourceLocation(s.site);
      std::cout << "\n#" << i + 1 << "  " << FunctionName(s.site)
                << (location.empty() ? "" : "  " + location) << "  (" << ModuleName(s.site)
                << "): "
                << FormatCountedEstimate(s.stats.allocations, s.stats.allocations_var, errors,
                                         "allocation")
                << ", "
                << FormatBytesEstimate(s.stats.allocated_bytes, s.stats.allocated_bytes_var,
                                       errors)
                << "\n";
      PrintBuckets(s.buckets, errors);
    }
  }
  PrintWarnings(p, resolver);
  return 0;
}

}  // namespace

CommandRunner AddHistogramCommand(CLI::App* cmd) {
  auto o = std::make_shared<HistogramOptions>();
  AddAnalysisOptions(cmd, &o->common, /*filters=*/true);
  cmd->add_option("--sites", o->sites, "sites (source lines, by allocated bytes) to show")
      ->capture_default_str();
  return [o] { return Histogram(*o); };
}

}  // namespace memlens::cli
