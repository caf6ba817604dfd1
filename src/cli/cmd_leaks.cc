// src/cli/cmd_leaks.cc
//
// `memlens leaks FILE [--limit N] [--min-bytes B] [--suppressions FILE]`: blocks still
// allocated at exit, grouped by call stack, with the full stacks; the blocks the C/C++ runtime
// keeps for itself (runtime_allocations.h) are counted apart, as the runtime's.
// `memlens leaks FILE --growth [--windows N] [--marker NAME]`: logical leaks, sites whose memory
// in use grows all along the capture even when everything is freed at exit. What is shown is
// computed in analyzer/views/leaks.h (the rule, the checkpoints, the suppression accounting);
// this file only renders it.
#include <algorithm>
#include <iostream>
#include <memory>

#include "analyzer/export/format_units.h"
#include "analyzer/export/text_table.h"
#include "analyzer/model/runtime_allocations.h"
#include "analyzer/views/leaks.h"
#include "cli/analysis_options.h"
#include "cli/commands.h"

namespace memlens::cli {
namespace {

using namespace analyzer;

struct LeaksOptions {
  AnalysisOptions common;
  size_t limit = 20;
  uint64_t min_bytes = 0;
  std::string suppressions;
  bool growth = false;
  size_t windows = 8;
  std::string marker;  // --growth: checkpoints at this marker's occurrences
};

// The stack from its site outwards; the allocator's frames inside the site (operator new, the
// standard library's templates: SiteIndex) are one line, as they say how, not where.
void PrintStack(const StackResolver& resolver, const Stack& stack) {
  size_t site = resolver.SiteIndex(stack);
  if (site > 0) {
    std::cout << "       (" << FormatCounted(site, "frame")
              << " of the allocator and standard library templates; --json lists them)\n";
  }
  for (size_t f = site; f < stack.size(); ++f) {
    const SourceFrame& frame = *stack[f];
    std::string location = SourceLocation(frame);
    std::cout << (f == site ? "    at " : "       ") << FunctionName(frame)
              << (location.empty() ? "" : "  " + location) << "  (" << ModuleName(frame)
              << (frame.inlined ? ", inlined" : "") << ")\n";
  }
}

int Growth(const LeaksOptions& o);

int Leaks(const LeaksOptions& o) {
  if (o.growth && RefusedRun(o.common.capture, "leaks --growth (one clock's checkpoints)")) {
    return kExitBadInput;
  }
  if (o.growth) return Growth(o);
  std::vector<FramePattern> suppressions;
  std::string error;
  if (!o.suppressions.empty() && !ReadPatternFile(o.suppressions, &suppressions, &error)) {
    return Complain("leaks: --suppressions: " + error);
  }
  Profile p;
  if (!LoadOrComplain(o.common, &p)) return kExitBadInput;
  StackResolver resolver(p, StackOptionsOf(o.common.filters));
  ApplyFilters(o.common.filters, &resolver, &p);
  LeaksView view = BuildLeaks(p, &resolver, {o.limit, o.min_bytes, std::move(suppressions)});
  const std::vector<SiteRow>& leaks = view.leaks;
  size_t stacks = view.stack_count;
  const SuppressedLeaks& suppressed = view.suppressed;
  const Totals& t = p.totals;
  if (o.common.json) {
    JsonWriter json(std::cout);
    json.BeginObject();
    WriteCaptureJson(&json, p, resolver);
    ErrorScale errors{p.sample_rate};
    json.Field("leaked_bytes", t.in_use_bytes);
    WriteError(&json, "leaked_bytes", t.in_use_bytes_var, false, errors);
    json.Field("leaked_blocks", t.in_use_blocks);
    WriteError(&json, "leaked_blocks", t.in_use_blocks_var, true, errors);
    json.Field("stack_count", static_cast<uint64_t>(stacks));
    json.Key("suppressed");
    json.BeginObject();
    json.Field("stacks", suppressed.stacks);
    json.Field("bytes", suppressed.bytes);
    WriteError(&json, "bytes", suppressed.bytes_var, false, errors);
    json.Field("blocks", suppressed.blocks);
    WriteError(&json, "blocks", suppressed.blocks_var, true, errors);
    json.EndObject();
    WriteRuntimeJson(&json, p);
    json.Key("leaks");
    json.BeginArray();
    for (const auto& r : leaks) {
      json.BeginObject();
      json.Field("bytes", r.stats.in_use_bytes);
      WriteError(&json, "bytes", r.stats.in_use_bytes_var, false, errors);
      json.Field("blocks", r.stats.in_use_blocks);
      WriteError(&json, "blocks", r.stats.in_use_blocks_var, true, errors);
      json.Field("allocations", r.stats.allocations);
      WriteError(&json, "allocations", r.stats.allocations_var, true, errors);
      json.Key("site");
      WriteFrame(&json, r.site);
      WriteStack(&json, "stack", r.stack);
      json.EndObject();
    }
    json.EndArray();
    json.EndObject();
  } else {
    PrintEstimateNote(p);
    PrintProgramEndNote(p);
    const ErrorScale errors{p.sample_rate};
    std::cout << "In use at " << p.SnapshotLabel() << ": "
              << FormatBytesEstimate(t.in_use_bytes, t.in_use_bytes_var, errors) << " in "
              << FormatCountedEstimate(t.in_use_blocks, t.in_use_blocks_var, errors, "block")
              << ", from "
              << FormatCounted(stacks, "call stack") << "\n";
    if (t.runtime_blocks) {
      std::cout << "Runtime: " << RuntimeNote(p) << "\n";
      TextTable table;
      for (auto align : {TextTable::kRight, TextTable::kRight, TextTable::kLeft}) {
        table.AddColumn("", align);
      }
      for (const RuntimeShare& share : p.runtime) {
        table.AddRow({FormatBytesEstimate(share.bytes, share.bytes_var, errors),
                      FormatCountedEstimate(share.blocks, share.blocks_var, errors, "block"),
                      share.rule->what});
      }
      table.Print(std::cout);
    }
    if (suppressed.stacks) {
      std::cout << "(suppressed: "
                << FormatBytesEstimate(suppressed.bytes, suppressed.bytes_var, errors) << " in "
                << FormatCountedEstimate(suppressed.blocks, suppressed.blocks_var, errors, "block")
                << " from "
                << FormatCounted(suppressed.stacks, "call stack") << ")\n";
    }
    for (size_t i = 0; i < leaks.size(); ++i) {
      const auto& r = leaks[i];
      std::cout << "\n#" << i + 1 << "  "
                << FormatBytesEstimate(r.stats.in_use_bytes, r.stats.in_use_bytes_var, errors)
                << " in "
                << FormatCountedEstimate(r.stats.in_use_blocks, r.stats.in_use_blocks_var, errors,
                                         "block")
                << " ("
                << FormatCountEstimate(r.stats.allocations, r.stats.allocations_var, errors)
                << " allocated here in all)\n";
      PrintStack(resolver, r.stack);
    }
    if (stacks > leaks.size()) {
      std::cout << "\n(" << FormatCounted(stacks - leaks.size(), "more call stack")
                << "; use --limit)\n";
    }
  }
  PrintWarnings(p, resolver);
  return 0;
}

int Growth(const LeaksOptions& o) {
  if (o.windows < 2) return Complain("leaks: --windows must be 2 or more");
  std::string path, error;
  SnapshotSpec snapshot;
  if (!ParseOrComplain(o.common.capture, o.common.filters, &path, &snapshot)) return kExitBadInput;
  Capture capture(path);  // opened once for both steps
  // The checkpoints are placed from the markers and the moment of the snapshot: for the end of
  // the capture (the default) its outline has them, no event replayed; any other moment, or a
  // custom heap (whose name the load checks first), is loaded for them.
  Profile first;
  if (snapshot.kind == SnapshotSpec::kEnd && o.common.filters.heap.empty() &&
      capture.Outline(&first, &error) && first.has_process) {
    first.snapshot_seconds = snapshot.text.empty() && first.program_end_seq
                                 ? first.SecondsAt(first.program_end_seq)  // exit: docs/python.md
                                 : first.DurationSeconds();
  } else if (!LoadOrComplain(&capture, snapshot, o.common.filters, {}, &first)) {
    return kExitBadInput;
  }
  GrowthCheckpoints plan;
  if (!PlanGrowthCheckpoints(first, o.windows, o.marker, &plan, &error)) {
    return Complain("leaks: " + error);
  }
  const std::string& marker = plan.marker;
  ReplayOptions replay;
  replay.checkpoint_seqs = plan.seqs;
  replay.checkpoint_seconds = plan.seconds;
  Profile p;
  if (!LoadOrComplain(&capture, snapshot, o.common.filters, replay, &p)) return kExitBadInput;
  StackResolver resolver(p, StackOptionsOf(o.common.filters));
  ApplyFilters(o.common.filters, &resolver, &p);
  GrowthView view = BuildGrowth(p, &resolver, plan, o.windows, o.limit);
  if (!view.warning.empty()) p.warnings.push_back(view.warning);
  const std::vector<GrowingSite>& sites = view.growing;
  size_t site_count = view.site_count;
  const ErrorScale errors{p.sample_rate};
  if (o.common.json) {
    JsonWriter json(std::cout);
    json.BeginObject();
    WriteCaptureJson(&json, p, resolver);
    json.Field("windows", static_cast<uint64_t>(o.windows));
    json.Field("marker", marker);  // "" when the checkpoints are evenly spaced times
    json.Key("checkpoints");
    json.BeginArray();
    for (const auto& c : p.checkpoints) {
      json.BeginObject();
      json.Field("time_s", c.at_seconds);
      if (c.before_seq) json.Field("seq", c.before_seq);
      json.Field("heap_bytes", c.heap_bytes);
      WriteError(&json, "heap_bytes", c.heap_bytes_var, false, errors);
      json.EndObject();
    }
    json.EndArray();
    json.Field("site_count", static_cast<uint64_t>(site_count));
    json.Key("growing");
    json.BeginArray();
    for (const auto& g : sites) {
      json.BeginObject();
      json.Key("site");
      WriteFrame(&json, g.site);
      json.Field("growth_bytes", g.Growth());
      WriteError(&json, "growth_bytes", g.GrowthVariance(), false, errors);
      json.Key("bytes");
      json.BeginArray();
      for (uint64_t b : g.bytes) json.Uint(b);
      json.EndArray();
      if (errors.sampled()) {
        json.Key("bytes_error");
        json.BeginArray();
        for (uint64_t v : g.bytes_var) json.Double(errors.Bytes(v));
        json.EndArray();
      }
      json.Field("in_use_at_end", g.in_use_at_end);
      WriteError(&json, "in_use_at_end", g.in_use_at_end_var, false, errors);
      WriteStack(&json, "stack", resolver.Frames(g.stack_id));
      json.EndObject();
    }
    json.EndArray();
    json.EndObject();
  } else {
    PrintEstimateNote(p);
    PrintProgramEndNote(p);
    std::cout << "Sites whose memory in use grew at " << p.checkpoints.size()
              << (marker.empty() ? " checkpoints" : " checkpoints (markers '" + marker + "')")
              << " up to " << p.SnapshotLabel() << ": " << site_count << "\n";
    for (size_t i = 0; i < sites.size(); ++i) {
      const auto& g = sites[i];
      std::cout << "\n#" << i + 1 << "  +"
                << FormatBytesEstimate(g.Growth(), g.GrowthVariance(), errors) << " (";
      for (size_t c = 0; c < g.bytes.size(); ++c) {
        std::cout << (c ? " -> " : "") << FormatBytesEstimate(g.bytes[c], g.bytes_var[c], errors);
      }
      std::cout << "), " << FormatBytesEstimate(g.in_use_at_end, g.in_use_at_end_var, errors)
                << " in use at " << p.SnapshotLabel() << "\n";
      PrintStack(resolver, resolver.Frames(g.stack_id));
    }
    if (site_count > sites.size()) {
      std::cout << "\n(" << FormatCounted(site_count - sites.size(), "more site")
                << "; use --limit)\n";
    }
  }
  PrintWarnings(p, resolver);
  return 0;
}

}  // namespace

CommandRunner AddLeaksCommand(CLI::App* cmd) {
  auto o = std::make_shared<LeaksOptions>();
  AddAnalysisOptions(cmd, &o->common, /*filters=*/true);
  cmd->add_option("--limit", o->limit, "call stacks to show")->capture_default_str();
  cmd->add_option("--min-bytes", o->min_bytes, "hide stacks holding fewer bytes")->capture_default_str();
  cmd->add_option("--suppressions", o->suppressions,
                  "hide leaks whose stack has a frame matching a pattern of this file (one per\n"
                  "line: function:GLOB, file:GLOB, module:GLOB; # comments); counted apart");
  cmd->add_flag("--growth", o->growth,
                "logical leaks: sites whose memory in use grows at every checkpoint, even\n"
                "when freed at exit");
  cmd->add_option("--windows", o->windows, "--growth: checkpoints through the capture")
      ->capture_default_str();
  cmd->add_option("--marker", o->marker,
                  "--growth: checkpoints just before this marker's occurrences (default: the\n"
                  "marker repeated most, at least 3 times, if any; else evenly spaced times)");
  return [o] { return Leaks(*o); };
}

}  // namespace memlens::cli
