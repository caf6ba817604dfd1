// src/cli/cmd_leaks.cc
//
// `memlens leaks FILE [--limit N] [--min-bytes B] [--suppressions FILE]`: blocks still
// allocated at exit, grouped by call stack, with the full stacks; the blocks the C/C++ runtime
// keeps for itself (runtime_allocations.h) are counted apart, as the runtime's.
// `memlens leaks FILE --growth [--windows N] [--marker NAME]`: logical leaks, sites whose memory
// in use grows all along the capture even when everything is freed at exit (the rule:
// GrowingSites). The checkpoints are the occurrences of a repeated marker when the capture has
// one (a marker per frame, per request: the program's own rhythm), else evenly spaced times.
#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <tuple>

#include "analyzer/export/format_units.h"
#include "analyzer/export/text_table.h"
#include "analyzer/model/markers.h"
#include "analyzer/model/runtime_allocations.h"
#include "analyzer/views/sites.h"
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

struct Suppressed {
  uint64_t stacks = 0, bytes = 0, blocks = 0;
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
  auto rows = GroupSites(p, &resolver, GroupBy::kStack);
  SortRows(&rows, SortBy::kLeaked);
  std::vector<SiteRow> leaks;
  size_t stacks = 0;
  Suppressed suppressed;
  for (auto& r : rows) {
    if (r.stats.in_use_blocks == 0) continue;
    bool hidden = false;
    for (const auto& pattern : suppressions) hidden = hidden || pattern.MatchesAnyFrame(r.stack);
    if (hidden) {
      suppressed.stacks += 1;
      suppressed.bytes += r.stats.in_use_bytes;
      suppressed.blocks += r.stats.in_use_blocks;
      continue;
    }
    if (r.stats.in_use_bytes < o.min_bytes) continue;
    ++stacks;
    if (leaks.size() < o.limit) leaks.push_back(std::move(r));
  }
  const Totals& t = p.totals;
  if (o.common.json) {
    JsonWriter json(std::cout);
    json.BeginObject();
    WriteCaptureJson(&json, p, resolver);
    json.Field("leaked_bytes", t.in_use_bytes);
    json.Field("leaked_blocks", t.in_use_blocks);
    json.Field("stack_count", static_cast<uint64_t>(stacks));
    json.Key("suppressed");
    json.BeginObject();
    json.Field("stacks", suppressed.stacks);
    json.Field("bytes", suppressed.bytes);
    json.Field("blocks", suppressed.blocks);
    json.EndObject();
    WriteRuntimeJson(&json, p);
    json.Key("leaks");
    json.BeginArray();
    for (const auto& r : leaks) {
      json.BeginObject();
      json.Field("bytes", r.stats.in_use_bytes);
      json.Field("blocks", r.stats.in_use_blocks);
      json.Field("allocations", r.stats.allocations);
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
    std::cout << "In use at " << p.SnapshotLabel() << ": " << FormatBytes(t.in_use_bytes) << " in "
              << FormatCounted(t.in_use_blocks, "block") << ", from "
              << FormatCounted(stacks, "call stack") << "\n";
    if (t.runtime_blocks) {
      std::cout << "Runtime: " << RuntimeNote(p) << "\n";
      TextTable table;
      for (auto align : {TextTable::kRight, TextTable::kRight, TextTable::kLeft}) {
        table.AddColumn("", align);
      }
      for (const RuntimeShare& share : p.runtime) {
        table.AddRow({FormatBytes(share.bytes), FormatCounted(share.blocks, "block"),
                      share.rule->what});
      }
      table.Print(std::cout);
    }
    if (suppressed.stacks) {
      std::cout << "(suppressed: " << FormatBytes(suppressed.bytes) << " in "
                << FormatCounted(suppressed.blocks, "block") << " from "
                << FormatCounted(suppressed.stacks, "call stack") << ")\n";
    }
    for (size_t i = 0; i < leaks.size(); ++i) {
      const auto& r = leaks[i];
      std::cout << "\n#" << i + 1 << "  " << FormatBytes(r.stats.in_use_bytes) << " in "
                << FormatCounted(r.stats.in_use_blocks, "block") << " (" << FormatCount(r.stats.allocations)
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

// One site's memory in use at each checkpoint, and the stack holding most of it at the last.
struct GrowingSite {
  SourceFrame site;
  std::vector<uint64_t> bytes;  // by checkpoint
  uint64_t in_use_at_end = 0;   // at the snapshot (the end of the capture by default)
  uint64_t stack_id = 0;
  uint64_t stack_bytes = 0;  // the stack's bytes at the last checkpoint
  uint64_t Growth() const { return bytes.back() - bytes.front(); }
};

// The rule of a logical leak: over the N checkpoints, the site's bytes in use never decrease,
// the last exceeds the first, and they rise in at least half of the N-1 steps (rounded up), so
// one burst caught by one checkpoint is not growth.
bool Grows(const std::vector<uint64_t>& v) {
  if (v.size() < 2 || v.back() <= v.front()) return false;
  size_t rises = 0;
  for (size_t i = 1; i < v.size(); ++i) {
    if (v[i] < v[i - 1]) return false;
    if (v[i] > v[i - 1]) ++rises;
  }
  return rises * 2 >= v.size() - 1;
}

std::vector<GrowingSite> GrowingSites(const Profile& p, StackResolver* resolver) {
  using Key = std::tuple<std::string, std::string, uint32_t, std::string, uint64_t>;
  std::map<Key, GrowingSite> sites;
  size_t n = p.checkpoints.size();
  auto site_of = [&](uint64_t stack_id) -> GrowingSite& {
    SourceFrame site = resolver->Site(stack_id);
    GrowingSite& g = sites[{site.function, site.file, site.line, site.module,
                            site.function.empty() ? site.module_offset : 0}];
    if (g.bytes.empty()) {
      g.site = site;
      g.bytes.assign(n, 0);
    }
    return g;
  };
  for (size_t i = 0; i < n; ++i) {
    for (const auto& [stack_id, live] : p.checkpoints[i].live) {
      GrowingSite& g = site_of(stack_id);
      g.bytes[i] += live.first;
      if (i + 1 == n && live.first > g.stack_bytes) {
        g.stack_bytes = live.first;
        g.stack_id = stack_id;
      }
    }
  }
  std::vector<GrowingSite> out;
  for (auto& [key, g] : sites) {
    if (Grows(g.bytes)) out.push_back(std::move(g));
  }
  for (auto& g : out) {  // in use at the snapshot, for contrast with the growth
    for (const auto& [stack_id, stats] : p.stacks) {
      SourceFrame site = resolver->Site(stack_id);
      if (site.function == g.site.function && site.file == g.site.file &&
          site.line == g.site.line && site.module == g.site.module &&
          site.module_offset == g.site.module_offset) {
        g.in_use_at_end += stats.in_use_bytes;
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const GrowingSite& a, const GrowingSite& b) {
    return a.Growth() > b.Growth();
  });
  return out;
}

int Growth(const LeaksOptions& o) {
  if (o.windows < 2) return Complain("leaks: --windows must be 2 or more");
  Profile first;  // for the duration
  if (!LoadOrComplain(o.common.capture, o.common.filters, {}, &first)) return kExitBadInput;
  double duration = first.snapshot_seconds;
  ReplayOptions replay;
  // A marker repeated at least 3 times: its occurrences (up to --windows of them, evenly picked,
  // first and last included) are the checkpoints, each exactly before the marker.
  std::string marker = o.marker.empty() ? MostRepeatedMarker(first.markers, 3) : o.marker;
  std::vector<uint64_t> occurrences;
  for (const Marker& m : first.markers) {
    if (!m.snapshot && m.name == marker) occurrences.push_back(m.seq);
  }
  if (!o.marker.empty() && occurrences.size() < 2) {
    return Complain("leaks: --marker " + o.marker + ": the capture has " +
                    std::to_string(occurrences.size()) +
                    " markers of that name; --growth needs 2 or more");
  }
  if (occurrences.size() >= 2) {
    size_t n = std::min(o.windows, occurrences.size());
    for (size_t k = 0; k < n; ++k) {
      replay.checkpoint_seqs.push_back(occurrences[k * (occurrences.size() - 1) / (n - 1)]);
    }
  } else {
    marker.clear();
    for (size_t k = 1; k <= o.windows; ++k) {
      replay.checkpoint_seconds.push_back(duration * static_cast<double>(k) /
                                          static_cast<double>(o.windows + 1));
    }
  }
  Profile p;
  if (!LoadOrComplain(o.common.capture, o.common.filters, replay, &p)) return kExitBadInput;
  StackResolver resolver(p, StackOptionsOf(o.common.filters));
  ApplyFilters(o.common.filters, &resolver, &p);
  auto sites = GrowingSites(p, &resolver);
  size_t site_count = sites.size();
  if (sites.size() > o.limit) sites.resize(o.limit);
  size_t wanted = marker.empty() ? o.windows : replay.checkpoint_seqs.size();
  if (p.checkpoints.size() < wanted) {
    p.warnings.push_back("only " + std::to_string(p.checkpoints.size()) + " of " +
                         std::to_string(o.windows) +
                         " checkpoints could be taken (the capture has too few time marks)");
  }
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
      json.Key("bytes");
      json.BeginArray();
      for (uint64_t b : g.bytes) json.Uint(b);
      json.EndArray();
      json.Field("in_use_at_end", g.in_use_at_end);
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
      std::cout << "\n#" << i + 1 << "  +" << FormatBytes(g.Growth()) << " (";
      for (size_t c = 0; c < g.bytes.size(); ++c) {
        std::cout << (c ? " -> " : "") << FormatBytes(g.bytes[c]);
      }
      std::cout << "), " << FormatBytes(g.in_use_at_end) << " in use at " << p.SnapshotLabel()
                << "\n";
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

Command AddLeaksCommand(CLI::App* app) {
  auto o = std::make_shared<LeaksOptions>();
  CLI::App* cmd = app->add_subcommand(
      "leaks", "Blocks still allocated at exit, by call stack; --growth: memory that keeps growing");
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
  return {cmd, [o] { return Leaks(*o); }};
}

}  // namespace memlens::cli
