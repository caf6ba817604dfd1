// src/cli/cmd_diff.cc
//
// `memlens diff BEFORE AFTER [--by line|function|module|stack] [--limit N]`: what changed in
// memory in use between two snapshots, of one capture (FILE@t=1s FILE@t=5s) or of two
// (before and after a code change). Rows are grouped like `top`, sorted by growth; sites only
// in AFTER are "new", sites only in BEFORE "gone".
#include <cmath>
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

// The standard error of a difference of two independent estimates: sqrt(se1^2 + se2^2), each
// side with its own capture's rate (docs/sampling.md). Two moments of one capture share their
// blocks, so there it overstates the error: an upper bound.
double DifferenceError(double a, double b) { return std::sqrt(a * a + b * b); }

struct DiffErrors {
  ErrorScale before, after;
  bool sampled() const { return before.sampled() || after.sampled(); }
  double Bytes(const StackStats& b, const StackStats& a) const {
    return DifferenceError(before.Bytes(b.in_use_bytes_var), after.Bytes(a.in_use_bytes_var));
  }
  double Blocks(const StackStats& b, const StackStats& a) const {
    return DifferenceError(before.Blocks(b.in_use_blocks_var), after.Blocks(a.in_use_blocks_var));
  }
};

std::string PlusMinus(const std::string& figure, double error, bool sampled, bool bytes) {
  if (!sampled) return figure;
  uint64_t e = static_cast<uint64_t>(std::llround(error));
  return figure + " \u00b1" + (bytes ? FormatBytes(e) : FormatCount(e));
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
  const DiffErrors errors{{before.sample_rate}, {after.sample_rate}};
  const double total_error = DifferenceError(errors.before.Bytes(before.totals.in_use_bytes_var),
                                             errors.after.Bytes(after.totals.in_use_bytes_var));
  if (o.json) {
    JsonWriter json(std::cout);
    json.BeginObject();
    json.Key("before");
    json.BeginObject();
    WriteCaptureJson(&json, before, before_resolver);
    json.Field("in_use_bytes", before.totals.in_use_bytes);
    WriteError(&json, "in_use_bytes", before.totals.in_use_bytes_var, false, errors.before);
    json.EndObject();
    json.Key("after");
    json.BeginObject();
    WriteCaptureJson(&json, after, after_resolver);
    json.Field("in_use_bytes", after.totals.in_use_bytes);
    WriteError(&json, "in_use_bytes", after.totals.in_use_bytes_var, false, errors.after);
    json.EndObject();
    json.Field("group_by", o.by);
    json.Field("delta_bytes", static_cast<int64_t>(total));
    if (errors.sampled()) json.Field("delta_bytes_error", total_error);
    json.Key("rows");
    json.BeginArray();
    for (size_t i = 0; i < shown; ++i) {
      const DiffRow& r = view.rows[i];
      json.BeginObject();
      json.Key("site");
      WriteFrame(&json, r.site);
      json.Field("status", r.Status());
      json.Field("delta_bytes", static_cast<int64_t>(r.Delta()));
      if (errors.sampled()) json.Field("delta_bytes_error", errors.Bytes(r.before, r.after));
      json.Field("delta_blocks", r.DeltaBlocks());
      if (errors.sampled()) json.Field("delta_blocks_error", errors.Blocks(r.before, r.after));
      json.Field("before_bytes", r.before.in_use_bytes);
      WriteError(&json, "before_bytes", r.before.in_use_bytes_var, false, errors.before);
      json.Field("after_bytes", r.after.in_use_bytes);
      WriteError(&json, "after_bytes", r.after.in_use_bytes_var, false, errors.after);
      json.Field("before_blocks", r.before.in_use_blocks);
      WriteError(&json, "before_blocks", r.before.in_use_blocks_var, true, errors.before);
      json.Field("after_blocks", r.after.in_use_blocks);
      WriteError(&json, "after_blocks", r.after.in_use_blocks_var, true, errors.after);
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
                   "samples, \u00b1 one standard error (95% interval: \u00b11.96 of it; a change's "
                   "is sqrt(before^2 + after^2))\n";
    }
    std::cout << "In use: "
              << FormatBytesEstimate(before.totals.in_use_bytes, before.totals.in_use_bytes_var,
                                     errors.before)
              << " at " << before.SnapshotLabel() << " -> "
              << FormatBytesEstimate(after.totals.in_use_bytes, after.totals.in_use_bytes_var,
                                     errors.after)
              << " at " << after.SnapshotLabel() << " ("
              << PlusMinus(SignedBytes(total), total_error, errors.sampled(), true) << ")\n";
    TextTable table;
    for (const char* title : {"CHANGE", "BEFORE", "AFTER", "BLOCKS"}) table.AddColumn(title, TextTable::kRight);
    table.AddColumn("", TextTable::kLeft);
    table.AddColumn("LOCATION", TextTable::kLeft);
    table.AddColumn("FUNCTION", TextTable::kLeft);
    for (size_t i = 0; i < shown; ++i) {
      const DiffRow& r = view.rows[i];
      int64_t blocks = r.DeltaBlocks();
      table.AddRow({PlusMinus(SignedBytes(r.Delta()), errors.Bytes(r.before, r.after),
                              errors.sampled(), true),
                    FormatBytesEstimate(r.before.in_use_bytes, r.before.in_use_bytes_var,
                                        errors.before),
                    FormatBytesEstimate(r.after.in_use_bytes, r.after.in_use_bytes_var,
                                        errors.after),
                    PlusMinus((blocks > 0 ? "+" : "") + std::to_string(blocks),
                              errors.Blocks(r.before, r.after), errors.sampled(), false),
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
