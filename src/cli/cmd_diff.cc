// src/cli/cmd_diff.cc
//
// `memlens diff BEFORE AFTER [--by line|function|module|stack] [--limit N]`: what changed in
// memory in use between two snapshots, of one capture (FILE@t=1s FILE@t=5s) or of two
// (before and after a code change). Rows are grouped like `top`, sorted by growth; sites only
// in AFTER are "new", sites only in BEFORE "gone".
#include <algorithm>
#include <iostream>
#include <map>
#include <memory>

#include "analyzer/export/format_units.h"
#include "analyzer/export/text_table.h"
#include "analyzer/views/sites.h"
#include "cli/analysis_options.h"
#include "cli/commands.h"

namespace memlens::cli {
namespace {

using namespace analyzer;

struct DiffOptions {
  std::string before, after;
  std::string by = "line";
  size_t limit = 20;
  bool json = false;
  FilterOptions filters;
};

struct DiffRow {
  SourceFrame site;
  Stack stack;  // of the AFTER side when it has one (GroupBy::kStack)
  StackStats before, after;
  bool in_before = false, in_after = false;
  int64_t Delta() const {
    return static_cast<int64_t>(after.in_use_bytes) - static_cast<int64_t>(before.in_use_bytes);
  }
  const char* Status() const {
    if (in_after && after.in_use_blocks && !(in_before && before.in_use_blocks)) return "new";
    if (in_before && before.in_use_blocks && !(in_after && after.in_use_blocks)) return "gone";
    return "";
  }
};

// A key that means the same site in two captures: names and lines, never ids or addresses.
std::string SiteKey(const SiteRow& row, GroupBy by) {
  return by == GroupBy::kStack ? StackKey(row.stack) : FrameKey(row.site);
}

std::string SignedBytes(int64_t v) {
  return (v > 0 ? "+" : v < 0 ? "-" : "") + FormatBytes(static_cast<uint64_t>(v < 0 ? -v : v));
}

int Diff(const DiffOptions& o) {
  GroupBy group;
  if (!ParseGroupBy(o.by, &group)) return Complain("diff: --by must be function, line, module or stack");
  Profile before, after;
  if (!LoadOrComplain(o.before, o.filters, {}, &before) ||
      !LoadOrComplain(o.after, o.filters, {}, &after)) {
    return kExitBadInput;
  }
  StackResolver before_resolver(before, StackOptionsOf(o.filters));
  StackResolver after_resolver(after, StackOptionsOf(o.filters));
  ApplyFilters(o.filters, &before_resolver, &before);
  ApplyFilters(o.filters, &after_resolver, &after);
  std::map<std::string, DiffRow> rows;
  for (auto& r : GroupSites(before, &before_resolver, group)) {
    DiffRow& d = rows[SiteKey(r, group)];
    d.site = r.site;
    d.before = r.stats;
    d.in_before = true;
  }
  for (auto& r : GroupSites(after, &after_resolver, group)) {
    DiffRow& d = rows[SiteKey(r, group)];
    d.site = r.site;
    d.stack = r.stack;
    d.after = r.stats;
    d.in_after = true;
  }
  std::vector<DiffRow> sorted;
  for (auto& [key, row] : rows) {
    if (row.Delta() != 0 || row.after.in_use_blocks != row.before.in_use_blocks) sorted.push_back(row);
  }
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const DiffRow& a, const DiffRow& b) { return a.Delta() > b.Delta(); });
  int64_t total = static_cast<int64_t>(after.totals.in_use_bytes) -
                  static_cast<int64_t>(before.totals.in_use_bytes);
  size_t shown = std::min(sorted.size(), o.limit);
  if (o.json) {
    JsonWriter json(std::cout);
    json.BeginObject();
    json.Key("before");
    json.BeginObject();
    WriteCaptureJson(&json, before, before_resolver);
    json.Field("in_use_bytes", before.totals.in_use_bytes);
    json.EndObject();
    json.Key("after");
    json.BeginObject();
    WriteCaptureJson(&json, after, after_resolver);
    json.Field("in_use_bytes", after.totals.in_use_bytes);
    json.EndObject();
    json.Field("group_by", o.by);
    json.Field("delta_bytes", static_cast<int64_t>(total));
    json.Key("rows");
    json.BeginArray();
    for (size_t i = 0; i < shown; ++i) {
      const DiffRow& r = sorted[i];
      json.BeginObject();
      json.Key("site");
      WriteFrame(&json, r.site);
      json.Field("status", r.Status());
      json.Field("delta_bytes", static_cast<int64_t>(r.Delta()));
      json.Field("delta_blocks", static_cast<int64_t>(r.after.in_use_blocks) -
                                     static_cast<int64_t>(r.before.in_use_blocks));
      json.Field("before_bytes", r.before.in_use_bytes);
      json.Field("after_bytes", r.after.in_use_bytes);
      json.Field("before_blocks", r.before.in_use_blocks);
      json.Field("after_blocks", r.after.in_use_blocks);
      if (group == GroupBy::kStack) WriteStack(&json, "stack", r.stack);
      json.EndObject();
    }
    json.EndArray();
    json.EndObject();
  } else {
    if (before.sample_rate || after.sample_rate) {
      std::cout << "Estimates: " << (before.sample_rate ? "the first" : "")
                << (before.sample_rate && after.sample_rate ? " and " : "")
                << (after.sample_rate ? "the second" : "")
                << " capture sampled heap allocations; their figures are scaled up from the "
                   "samples\n";
    }
    std::cout << "In use: " << FormatBytes(before.totals.in_use_bytes) << " at "
              << before.SnapshotLabel() << " -> " << FormatBytes(after.totals.in_use_bytes) << " at "
              << after.SnapshotLabel() << " (" << SignedBytes(total) << ")\n";
    TextTable table;
    for (const char* title : {"CHANGE", "BEFORE", "AFTER", "BLOCKS"}) table.AddColumn(title, TextTable::kRight);
    table.AddColumn("", TextTable::kLeft);
    table.AddColumn("LOCATION", TextTable::kLeft);
    table.AddColumn("FUNCTION", TextTable::kLeft);
    for (size_t i = 0; i < shown; ++i) {
      const DiffRow& r = sorted[i];
      int64_t blocks = static_cast<int64_t>(r.after.in_use_blocks) -
                       static_cast<int64_t>(r.before.in_use_blocks);
      table.AddRow({SignedBytes(r.Delta()), FormatBytes(r.before.in_use_bytes),
                    FormatBytes(r.after.in_use_bytes), (blocks > 0 ? "+" : "") + std::to_string(blocks),
                    r.Status(), SourceLocation(r.site), FunctionName(r.site)});
    }
    table.Print(std::cout);
    if (sorted.size() > shown) std::cout << "(" << sorted.size() - shown << " more changed sites; use --limit)\n";
  }
  PrintWarnings(before, before_resolver);
  PrintWarnings(after, after_resolver);
  return 0;
}

}  // namespace

Command AddDiffCommand(CLI::App* app) {
  auto o = std::make_shared<DiffOptions>();
  CLI::App* cmd = app->add_subcommand(
      "diff", "What changed in memory in use between two snapshots (of one or two captures)");
  cmd->add_option("before", o->before,
                  "FILE[@SNAPSHOT]: exit (default: @program-end for a Python program, else\n"
                  "@end), @end, @program-end, @peak, @t=2.5s")
      ->required();
  cmd->add_option("after", o->after, "FILE[@SNAPSHOT]")->required();
  cmd->add_option("--by", o->by, "group by function, line, module or stack")->capture_default_str();
  cmd->add_option("--limit", o->limit, "rows to show")->capture_default_str();
  cmd->add_flag("--json", o->json, "print JSON (shape: docs/json-output.md)");
  AddFilterOptions(cmd, &o->filters);
  return {cmd, [o] { return Diff(*o); }};
}

}  // namespace memlens::cli
