// src/cli/cmd_temporary.cc
//
// `memlens temporary FILE [--limit N]`: the sites (source lines) of temporary allocations,
// blocks freed by the thread that allocated them before that thread allocated anything else
// (StackStats::temporary), by number of temporaries: buffers worth reusing or hoisting.
#include <iostream>
#include <memory>

#include "analyzer/export/format_units.h"
#include "analyzer/export/text_table.h"
#include "analyzer/views/temporary.h"
#include "cli/analysis_options.h"
#include "cli/commands.h"

namespace memlens::cli {
namespace {

using namespace analyzer;

struct TemporaryOptions {
  AnalysisOptions common;
  size_t limit = 20;
};

int Temporary(const TemporaryOptions& o) {
  Profile p;
  if (!LoadOrComplain(o.common, &p)) return kExitBadInput;
  StackResolver resolver(p, StackOptionsOf(o.common.filters));
  ApplyFilters(o.common.filters, &resolver, &p);
  TemporaryView view = BuildTemporary(p, &resolver, o.limit);
  const std::vector<SiteRow>& rows = view.sites;
  size_t site_count = view.site_count;
  uint64_t temporary_bytes = view.temporary_bytes;
  const Totals& t = p.totals;
  auto share = [](uint64_t part, uint64_t whole) {
    return whole ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
  };
  // A sampled capture: the agent sees only the sampled allocations, so a sampled block freed
  // before its thread's next *sampled* allocation counts as temporary even if an unsampled one
  // came between: these estimates are upper bounds, their errors those of the estimates.
  const ErrorScale errors{p.sample_rate};
  uint64_t temporary_bytes_var = 0;
  for (const auto& [stack, s] : p.stacks) temporary_bytes_var += s.temporary_bytes_var;
  if (o.common.json) {
    JsonWriter json(std::cout);
    json.BeginObject();
    WriteCaptureJson(&json, p, resolver);
    json.Field("allocations", t.allocations);
    WriteError(&json, "allocations", t.allocations_var, true, errors);
    json.Field("temporary", t.temporary);
    WriteError(&json, "temporary", t.temporary_var, true, errors);
    json.Field("temporary_bytes", temporary_bytes);
    WriteError(&json, "temporary_bytes", temporary_bytes_var, false, errors);
    if (errors.sampled()) json.Field("upper_bound", true);
    json.Field("site_count", static_cast<uint64_t>(site_count));
    json.Key("sites");
    json.BeginArray();
    for (const auto& r : rows) {
      json.BeginObject();
      json.Key("site");
      WriteFrame(&json, r.site);
      json.Field("temporary", r.stats.temporary);
      WriteError(&json, "temporary", r.stats.temporary_var, true, errors);
      json.Field("allocations", r.stats.allocations);
      WriteError(&json, "allocations", r.stats.allocations_var, true, errors);
      json.Field("temporary_share", share(r.stats.temporary, r.stats.allocations));
      json.Field("temporary_bytes", r.stats.temporary_bytes);
      WriteError(&json, "temporary_bytes", r.stats.temporary_bytes_var, false, errors);
      json.EndObject();
    }
    json.EndArray();
    json.EndObject();
  } else {
    PrintEstimateNote(p);
    if (errors.sampled()) {
      std::cout << "Upper bounds: the sampled capture shows only the sampled allocations, so a "
                   "block freed before its thread's next sampled one may have had others in "
                   "between\n";
    }
    PrintProgramEndNote(p);
    std::cout << "Temporary allocations (freed by their thread before it allocated anything "
                 "else): "
              << FormatCountEstimate(t.temporary, t.temporary_var, errors) << " of "
              << FormatCountEstimate(t.allocations, t.allocations_var, errors) << " ("
              << FormatPercent(t.temporary, t.allocations) << "), "
              << FormatBytesEstimate(temporary_bytes, temporary_bytes_var, errors) << ", at "
              << site_count << " sites\n";
    TextTable table;
    for (const char* title : {"TEMPORARY", "OF ALLOCS", "SHARE", "BYTES"}) {
      table.AddColumn(title, TextTable::kRight);
    }
    table.AddColumn("MODULE", TextTable::kLeft);
    table.AddColumn("LOCATION", TextTable::kLeft);
    table.AddColumn("FUNCTION", TextTable::kLeft);
    for (const auto& r : rows) {
      table.AddRow({FormatCountEstimate(r.stats.temporary, r.stats.temporary_var, errors),
                    FormatCountEstimate(r.stats.allocations, r.stats.allocations_var, errors),
                    FormatPercent(r.stats.temporary, r.stats.allocations),
                    FormatBytesEstimate(r.stats.temporary_bytes, r.stats.temporary_bytes_var,
                                        errors),
                    ModuleName(r.site),
                    SourceLocation(r.site), FunctionName(r.site)});
    }
    if (!rows.empty()) table.Print(std::cout);
    if (site_count > rows.size()) {
      std::cout << "(" << site_count - rows.size() << " more sites; use --limit)\n";
    }
  }
  PrintWarnings(p, resolver);
  return 0;
}

}  // namespace

CommandRunner AddTemporaryCommand(CLI::App* cmd) {
  auto o = std::make_shared<TemporaryOptions>();
  AddAnalysisOptions(cmd, &o->common, /*filters=*/true);
  cmd->add_option("--limit", o->limit, "sites to show")->capture_default_str();
  return [o] { return Temporary(*o); };
}

}  // namespace memlens::cli
