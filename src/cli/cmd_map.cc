// src/cli/cmd_map.cc
//
// `memlens map FILE[@SNAPSHOT]`: the address space of the live set at the snapshot, for
// fragmentation: regions of live blocks (heap blocks, anonymous mappings the program made, or
// the ranges of those it reserved with PROT_NONE) with no free gap over 1 MiB inside, each
// with its span, bytes in use, blocks, the largest free gap between two of its blocks, and the
// site holding most of its bytes.
#include <cstdio>
#include <iostream>
#include <memory>

#include "analyzer/export/format_units.h"
#include "analyzer/export/text_table.h"
#include "analyzer/views/map.h"
#include "cli/analysis_options.h"
#include "cli/commands.h"

namespace memlens::cli {
namespace {

using namespace analyzer;

std::string Hex(uint64_t v) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(v));
  return text;
}

int Map(const AnalysisOptions& o) {
  Profile p;
  ReplayOptions replay;
  replay.address_map = true;
  if (RefusedRun(o.capture, "map (an address space)")) return kExitBadInput;
  if (!LoadOrComplain(o.capture, o.filters, replay, &p)) return kExitBadInput;
  StackResolver resolver(p);
  MapView view = BuildMap(p, &resolver);
  uint64_t in_use = view.in_use_bytes, span = view.span_bytes;
  uint64_t largest_gap = view.largest_gap, reserved = view.reserved_bytes;
  const std::vector<SourceFrame>& sites = view.top_sites;
  if (o.json) {
    JsonWriter json(std::cout);
    json.BeginObject();
    WriteCaptureJson(&json, p, resolver);
    json.Field("in_use_bytes", in_use);
    WriteError(&json, "in_use_bytes", view.in_use_bytes_var, false, ErrorScale{p.sample_rate});
    json.Field("span_bytes", span);
    json.Field("used_share", UsedShare(in_use, span));
    json.Field("largest_gap", largest_gap);
    json.Field("reserved_bytes", reserved);
    json.Key("regions");
    json.BeginArray();
    for (size_t i = 0; i < p.address_map.size(); ++i) {
      const AddressRegion& r = p.address_map[i];
      json.BeginObject();
      json.Field("begin", r.begin);
      json.Field("end", r.end);
      json.Field("span_bytes", r.end - r.begin);
      json.Field("in_use_bytes", r.in_use_bytes);
      WriteError(&json, "in_use_bytes", r.in_use_bytes_var, false, ErrorScale{p.sample_rate});
      json.Field("blocks", r.blocks);
      WriteError(&json, "blocks", r.blocks_var, true, ErrorScale{p.sample_rate});
      json.Field("used_share", UsedShare(r.in_use_bytes, r.end - r.begin));
      json.Field("largest_gap", r.largest_gap);
      json.Field("kind", RegionKindName(r.kind));
      json.Key("top_site");
      WriteFrame(&json, sites[i]);
      json.EndObject();
    }
    json.EndArray();
    json.EndObject();
  } else {
    PrintEstimateNote(p);
    if (p.sample_rate) {
      std::cout << "Regions of the recorded blocks: in a sampled capture their BEGIN, END, SPAN "
                   "and gaps are those of the blocks that were sampled (unsampled ones may lie "
                   "between); IN USE and BLOCKS are estimates of everything in them\n";
    }
    PrintProgramEndNote(p);
    std::cout << "Address space in use at " << p.SnapshotLabel() << ": "
              << FormatBytesEstimate(in_use, view.in_use_bytes_var, ErrorScale{p.sample_rate})
              << " in " << p.address_map.size() << " regions spanning " << FormatBytes(span)
              << " (" << FormatPercent(in_use, span) << " used); largest free gap inside a region "
              << FormatBytes(largest_gap);
    if (reserved) {
      std::cout << "; " << FormatBytes(reserved)
                << " more reserved (PROT_NONE mappings, kind reserved: address space, not memory)";
    }
    std::cout << "\n";
    TextTable table;
    table.AddColumn("BEGIN", TextTable::kLeft);
    table.AddColumn("END", TextTable::kLeft);
    for (const char* title : {"SPAN", "IN USE", "BLOCKS", "USED", "LARGEST GAP"}) {
      table.AddColumn(title, TextTable::kRight);
    }
    table.AddColumn("KIND", TextTable::kLeft);
    table.AddColumn("TOP SITE", TextTable::kLeft);
    const ErrorScale errors{p.sample_rate};
    for (size_t i = 0; i < p.address_map.size(); ++i) {
      const AddressRegion& r = p.address_map[i];
      std::string location = SourceLocation(sites[i]);
      table.AddRow({Hex(r.begin), Hex(r.end), FormatBytes(r.end - r.begin),
                    FormatBytesEstimate(r.in_use_bytes, r.in_use_bytes_var, errors),
                    FormatCountEstimate(r.blocks, r.blocks_var, errors),
                    FormatPercent(r.in_use_bytes, r.end - r.begin), FormatBytes(r.largest_gap),
                    RegionKindName(r.kind),
                    FunctionName(sites[i]) + (location.empty() ? "" : "  " + location)});
    }
    if (!p.address_map.empty()) table.Print(std::cout);
  }
  PrintWarnings(p, resolver);
  return 0;
}

}  // namespace

CommandRunner AddMapCommand(CLI::App* cmd) {
  auto o = std::make_shared<AnalysisOptions>();
  AddAnalysisOptions(cmd, o.get());
  return [o] { return Map(*o); };
}

}  // namespace memlens::cli
