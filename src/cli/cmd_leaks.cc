// src/cli/cmd_leaks.cc
//
// `memlens leaks FILE [--limit N] [--min-bytes B]`: blocks still allocated at exit, grouped by
// call stack, with the full stacks.
#include <iostream>
#include <memory>

#include "analyzer/export/format_units.h"
#include "cli/analysis_options.h"
#include "cli/commands.h"

namespace memlens::cli {
namespace {

using namespace analyzer;

struct LeaksOptions {
  AnalysisOptions common;
  size_t limit = 20;
  uint64_t min_bytes = 0;
};

int Leaks(const LeaksOptions& o) {
  Profile p;
  if (!LoadOrComplain(o.common, &p)) return kExitBadInput;
  StackResolver resolver(p);
  auto rows = GroupSites(p, &resolver, GroupBy::kStack);
  SortRows(&rows, SortBy::kLeaked);
  std::vector<SiteRow> leaks;
  size_t stacks = 0;
  for (auto& r : rows) {
    if (r.stats.leaked_blocks == 0 || r.stats.leaked_bytes < o.min_bytes) continue;
    ++stacks;
    if (leaks.size() < o.limit) leaks.push_back(std::move(r));
  }
  const Totals& t = p.totals;
  if (o.common.json) {
    JsonWriter json(std::cout);
    json.BeginObject();
    WriteCaptureJson(&json, p, resolver);
    json.Field("leaked_bytes", t.leaked_bytes);
    json.Field("leaked_blocks", t.leaked_blocks);
    json.Field("stack_count", static_cast<uint64_t>(stacks));
    json.Key("leaks");
    json.BeginArray();
    for (const auto& r : leaks) {
      json.BeginObject();
      json.Field("bytes", r.stats.leaked_bytes);
      json.Field("blocks", r.stats.leaked_blocks);
      json.Field("allocations", r.stats.allocations);
      json.Key("site");
      WriteFrame(&json, r.site);
      WriteStack(&json, "stack", r.stack);
      json.EndObject();
    }
    json.EndArray();
    json.EndObject();
  } else {
    std::cout << "In use at " << p.SnapshotLabel() << ": " << FormatBytes(t.leaked_bytes) << " in "
              << FormatCount(t.leaked_blocks) << " blocks, from " << stacks << " call stacks\n";
    for (size_t i = 0; i < leaks.size(); ++i) {
      const auto& r = leaks[i];
      std::cout << "\n#" << i + 1 << "  " << FormatBytes(r.stats.leaked_bytes) << " in "
                << FormatCount(r.stats.leaked_blocks) << " blocks (" << FormatCount(r.stats.allocations)
                << " allocated here in all)\n";
      size_t site = StackResolver::SiteIndex(r.stack);
      for (size_t f = 0; f < r.stack.size(); ++f) {
        const SourceFrame& frame = *r.stack[f];
        std::string location = SourceLocation(frame);
        std::cout << (f == site ? "    at " : "       ") << FunctionName(frame)
                  << (location.empty() ? "" : "  " + location) << "  (" << ModuleName(frame)
                  << (frame.inlined ? ", inlined" : "") << ")\n";
      }
    }
    if (stacks > leaks.size()) {
      std::cout << "\n(" << stacks - leaks.size() << " more call stacks; use --limit)\n";
    }
  }
  PrintWarnings(p, resolver);
  return 0;
}

}  // namespace

Command AddLeaksCommand(CLI::App* app) {
  auto o = std::make_shared<LeaksOptions>();
  CLI::App* cmd = app->add_subcommand("leaks", "Blocks still allocated at exit, by call stack");
  AddAnalysisOptions(cmd, &o->common);
  cmd->add_option("--limit", o->limit, "call stacks to show")->capture_default_str();
  cmd->add_option("--min-bytes", o->min_bytes, "hide stacks holding fewer bytes")->capture_default_str();
  return {cmd, [o] { return Leaks(*o); }};
}

}  // namespace memlens::cli
