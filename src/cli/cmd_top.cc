// src/cli/cmd_top.cc
//
// `memlens top FILE [--by function|line|module|stack|heap|type]
// [--sort peak|allocated|count|leaked] [--limit N]`: the TopX table of allocation sites; by
// heap, each heap's own figures (the system heap and the program's custom heaps, side by side,
// never added up: the custom heaps' blocks lie inside the system heap's memory).
#include <iostream>
#include <memory>

#include "analyzer/export/format_units.h"
#include "analyzer/export/text_table.h"
#include "analyzer/views/top.h"
#include "cli/analysis_options.h"
#include "cli/commands.h"

namespace memlens::cli {
namespace {

using namespace analyzer;

struct TopOptions {
  AnalysisOptions common;
  std::string by = "line";
  std::string sort = "peak";
  size_t limit = 20;
};

int Top(const TopOptions& o) {
  GroupBy group;
  SortBy sort;
  if (!ParseGroupBy(o.by, &group)) {
    return Complain("top: --by must be function, line, module, stack, heap or type");
  }
  if (!ParseSortBy(o.sort, &sort)) return Complain("top: --sort must be peak, allocated, count or leaked");
  Profile p;
  if (!LoadOrComplain(o.common, &p)) return kExitBadInput;
  StackResolver resolver(p, StackOptionsOf(o.common.filters));
  ApplyFilters(o.common.filters, &resolver, &p);
  bool named = group == GroupBy::kHeap || group == GroupBy::kType;  // rows are names
  auto rows = BuildTop(p, &resolver, group, sort, o.limit, o.common.filters.heap.empty());
  if (o.common.json) {
    JsonWriter json(std::cout);
    json.BeginObject();
    WriteCaptureJson(&json, p, resolver);
    json.Field("group_by", o.by);
    json.Field("sort", o.sort);
    json.Key("rows");
    json.BeginArray();
    for (const auto& r : rows) {
      json.BeginObject();
      if (named) {
        json.Field(group == GroupBy::kHeap ? "heap" : "type", r.site.function);
      } else {
        json.Key("site");
        WriteFrame(&json, r.site);
      }
      WriteStats(&json, r.stats, ErrorScale{p.sample_rate});
      if (group == GroupBy::kStack) WriteStack(&json, "stack", r.stack);
      json.EndObject();
    }
    json.EndArray();
    json.EndObject();
  } else {
    PrintEstimateNote(p);
    PrintProgramEndNote(p);
    TextTable table;
    for (const char* title : {"AT PEAK", "ALLOCATED", "ALLOCS", "IN USE"}) {
      table.AddColumn(title, TextTable::kRight);
    }
    // The share of the allocated bytes that came through Python's allocator, when any did.
    bool python = p.totals.python_allocated_bytes > 0;
    if (python) table.AddColumn("PY%", TextTable::kRight);
    // The same for the program's own anonymous mappings (the rest is heap).
    bool mappings = p.totals.mapping_allocated_bytes > 0;
    if (mappings) table.AddColumn("MAP%", TextTable::kRight);
    if (named) {
      table.AddColumn(group == GroupBy::kHeap ? "HEAP" : "TYPE", TextTable::kLeft);
    } else {
      table.AddColumn("MODULE", TextTable::kLeft);
      if (group != GroupBy::kModule) table.AddColumn("LOCATION", TextTable::kLeft);
      if (group != GroupBy::kModule) table.AddColumn("FUNCTION", TextTable::kLeft);
    }
    const ErrorScale errors{p.sample_rate};
    for (const auto& r : rows) {
      const StackStats& st = r.stats;
      std::vector<std::string> cells = {
          FormatBytesEstimate(st.peak_bytes, st.peak_bytes_var, errors),
          FormatBytesEstimate(st.allocated_bytes, st.allocated_bytes_var, errors),
          FormatCountEstimate(st.allocations, st.allocations_var, errors),
          FormatBytesEstimate(st.in_use_bytes, st.in_use_bytes_var, errors)};
      if (python) {
        cells.push_back(FormatPercent(r.stats.python_allocated_bytes, r.stats.allocated_bytes));
      }
      if (mappings) {
        cells.push_back(FormatPercent(r.stats.mapping_allocated_bytes, r.stats.allocated_bytes));
      }
      if (named) {
        cells.push_back(r.site.function);
      } else {
        cells.push_back(ModuleName(r.site));
      }
      if (!named && group != GroupBy::kModule) {
        cells.push_back(SourceLocation(r.site));
        cells.push_back(FunctionName(r.site));
      }
      table.AddRow(cells);
    }
    std::cout << "Top " << rows.size() << " by " << o.by << ", sorted by " << o.sort
              << "; in use at " << p.SnapshotLabel();
    if (group == GroupBy::kHeap && o.common.filters.heap.empty()) {
      std::cout << "\n(each heap's own figures, its own peak; not a sum: the custom heaps' blocks "
                   "lie inside memory the system heap counts)";
    } else if (!o.common.filters.heap.empty() || !p.heaps.empty()) {
      std::cout << "; heap " << p.HeapDisplayName();
    }
    std::cout << "\n";
    table.Print(std::cout);
    if (group == GroupBy::kStack) {
      for (size_t i = 0; i < rows.size(); ++i) {
        uint64_t value = SortValue(rows[i].stats, sort);
        uint64_t var = SortVariance(rows[i].stats, sort);
        std::cout << "\nstack #" << i + 1 << " ("
                  << (sort == SortBy::kCount
                          ? FormatCountedEstimate(value, var, errors, "allocation")
                          : FormatBytesEstimate(value, var, errors))
                  << "):\n";
        for (const SourceFrame* f : rows[i].stack) {
          std::cout << "    " << FunctionName(*f) << "  " << SourceLocation(*f) << "  ("
                    << ModuleName(*f) << (f->inlined ? ", inlined" : "") << ")\n";
        }
      }
    }
  }
  PrintWarnings(p, resolver);
  return 0;
}

}  // namespace

CommandRunner AddTopCommand(CLI::App* cmd) {
  auto o = std::make_shared<TopOptions>();
  AddAnalysisOptions(cmd, &o->common, /*filters=*/true);
  cmd->add_option("--by", o->by,
                  "group by function, line, module, stack, heap (each heap's own figures) or\n"
                  "type (the type names of custom heaps' blocks)")
      ->capture_default_str();
  cmd->add_option("--sort", o->sort, "sort by peak, allocated, count or leaked")->capture_default_str();
  cmd->add_option("--limit", o->limit, "rows to show")->capture_default_str();
  return [o] { return Top(*o); };
}

}  // namespace memlens::cli
