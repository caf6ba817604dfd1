// src/cli/cmd_diff.cc
//
// `memlens diff BEFORE AFTER [--by line|function|module|stack] [--limit N]`: what changed in
// memory in use between two snapshots, of one capture (FILE@t=1s FILE@t=5s) or of two
// (before and after a code change). Rows are grouped like `top`, sorted by growth; sites only
// in AFTER are "new", sites only in BEFORE "gone".
#include <iostream>
#include <memory>
#include <optional>

#include "analyzer/export/format_units.h"
#include "analyzer/export/text_table.h"
#include "analyzer/views/diff.h"
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

std::string SignedBytes(int64_t v) {
  return (v > 0 ? "+" : v < 0 ? "-" : "") + FormatBytes(static_cast<uint64_t>(v < 0 ? -v : v));
}

int Diff(const DiffOptions& o) {
  GroupBy group;
  if (!ParseGroupBy(o.by, &group)) return Complain("diff: --by must be function, line, module or stack");
  Profile before, after;
  std::string before_path, after_path;
  SnapshotSpec before_moment, after_moment;
  if (!ParseOrComplain(o.before, o.filters, &before_path, &before_moment)) return kExitBadInput;
  Capture capture(before_path);
  if (!LoadOrComplain(&capture, before_moment, o.filters, {}, &before) ||
      !ParseOrComplain(o.after, o.filters, &after_path, &after_moment)) {
    return kExitBadInput;
  }
  // Two moments of one capture: the same handle (its index read once).
  std::optional<Capture> other;
  if (after_path != before_path) other.emplace(after_path);
  if (!LoadOrComplain(other ? &*other : &capture, after_moment, o.filters, {}, &after)) {
    return kExitBadInput;
  }
  StackResolver before_resolver(before, StackOptionsOf(o.filters));
  StackResolver after_resolver(after, StackOptionsOf(o.filters));
  ApplyFilters(o.filters, &before_resolver, &before);
  ApplyFilters(o.filters, &after_resolver, &after);
  DiffView view = BuildDiff(before, &before_resolver, after, &after_resolver, group, o.limit);
  int64_t total = view.delta_bytes;
  size_t shown = view.rows.size();
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
      const DiffRow& r = view.rows[i];
      json.BeginObject();
      json.Key("site");
      WriteFrame(&json, r.site);
      json.Field("status", r.Status());
      json.Field("delta_bytes", static_cast<int64_t>(r.Delta()));
      json.Field("delta_blocks", r.DeltaBlocks());
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
      const DiffRow& r = view.rows[i];
      int64_t blocks = r.DeltaBlocks();
      table.AddRow({SignedBytes(r.Delta()), FormatBytes(r.before.in_use_bytes),
                    FormatBytes(r.after.in_use_bytes), (blocks > 0 ? "+" : "") + std::to_string(blocks),
                    r.Status(), SourceLocation(r.site), FunctionName(r.site)});
    }
    table.Print(std::cout);
    if (view.changed > shown) {
      std::cout << "(" << view.changed - shown << " more changed sites; use --limit)\n";
    }
  }
  PrintWarnings(before, before_resolver);
  PrintWarnings(after, after_resolver);
  return 0;
}

}  // namespace

CommandRunner AddDiffCommand(CLI::App* cmd) {
  auto o = std::make_shared<DiffOptions>();
  cmd->add_option("before", o->before,
                  "FILE[@SNAPSHOT]: exit (default: @program-end for a Python program, else\n"
                  "@end), @end, @program-end, @peak, @t=2.5s")
      ->required();
  cmd->add_option("after", o->after, "FILE[@SNAPSHOT]")->required();
  cmd->add_option("--by", o->by, "group by function, line, module or stack")->capture_default_str();
  cmd->add_option("--limit", o->limit, "rows to show")->capture_default_str();
  cmd->add_flag("--json", o->json, "print JSON (shape: docs/json-output.md)");
  AddFilterOptions(cmd, &o->filters);
  return [o] { return Diff(*o); };
}

}  // namespace memlens::cli
