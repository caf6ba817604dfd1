// src/cli/cmd_blocks.cc
//
// `memlens blocks FILE[@SNAPSHOT] [--python-frames] [--totals] [--containing ADDRESS]
// [--peak-since-marker NAME | --peak-since-seq N] [--leave-out-python-file PYFILE]`:
// every block in use at the snapshot, by address, with its size, domain (python, native,
// mapping, custom_heap) and call stack; the totals by domain; the peak (and the peak since the
// last marker NAME, for the tracemalloc API's reset_peak). What is shown is computed in
// analyzer/views/blocks.h; this file only renders it.
#include <cstdio>
#include <iostream>
#include <memory>

#include "analyzer/export/format_units.h"
#include "analyzer/export/text_table.h"
#include "analyzer/views/blocks.h"
#include "cli/analysis_options.h"
#include "cli/commands.h"

namespace memlens::cli {
namespace {

using namespace analyzer;

struct BlocksOptions {
  AnalysisOptions common;
  bool python_frames = false;
  bool totals = false;
  std::string peak_since_marker;
  uint64_t peak_since_seq = 0;
  std::string leave_out_python_file;
  uint64_t containing = 0;
};

std::string Hex(uint64_t v) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(v));
  return text;
}

void WriteTotals(JsonWriter* json, const BlockTotals& t) {
  json->BeginObject();
  json->Field("bytes", t.bytes);
  json->Field("blocks", t.blocks);
  json->EndObject();
}

int Blocks(const BlocksOptions& o) {
  Profile p;
  ReplayOptions replay;
  replay.blocks = true;
  replay.peak_since_marker = o.peak_since_marker;
  replay.peak_since_seq = o.peak_since_seq;
  replay.leave_out_python_file = o.leave_out_python_file;
  const bool peak_since =
      !o.peak_since_marker.empty() || o.peak_since_seq || !o.leave_out_python_file.empty();
  if (RefusedRun(o.common.capture, "blocks (addresses)")) return kExitBadInput;
  if (!LoadOrComplain(o.common.capture, o.common.filters, replay, &p)) return kExitBadInput;
  StackResolver resolver(p, StackOptionsOf(o.common.filters));
  ApplyFilters(o.common.filters, &resolver, &p);
  BlocksView view = BuildBlocks(p, &resolver, {o.python_frames, !o.totals, o.containing});
  constexpr LiveBlockRow::Domain kDomains[] = {LiveBlockRow::kPython, LiveBlockRow::kNative,
                                               LiveBlockRow::kMapping, LiveBlockRow::kCustomHeap};
  if (o.common.json) {
    JsonWriter json(std::cout);
    json.BeginObject();
    WriteCaptureJson(&json, p, resolver);
    json.Field("in_use_bytes", view.total.bytes);
    json.Field("in_use_blocks", view.total.blocks);
    json.Field("peak_bytes", p.totals.peak_bytes);
    WriteError(&json, "peak_bytes", p.totals.peak_bytes_var, false, ErrorScale{p.sample_rate});
    // A sampled capture lists the recorded blocks only, at their real sizes: in_use_* above
    // are their sums, not estimates (summary's in_use_at_exit_bytes is the estimate).
    if (p.sample_rate) json.Field("recorded_blocks_only", true);
    json.Field("next_seq", p.next_seq);
    if (peak_since) {
      json.Key("peak_since");
      json.BeginObject();
      json.Field("marker", o.peak_since_marker);
      json.Field("seq", o.peak_since_seq ? o.peak_since_seq : p.peak_since_marker_seq);
      json.Field("bytes", p.peak_since_bytes);
      json.EndObject();
    }
    json.Key("domains");
    json.BeginObject();
    for (LiveBlockRow::Domain d : kDomains) {
      json.Key(BlockDomainName(d));
      WriteTotals(&json, view.by_domain[d]);
    }
    json.EndObject();
    if (!o.totals) {
      json.Key("blocks");
      json.BeginArray();
      for (const LiveBlockRow& b : view.blocks) {
        json.BeginObject();
        json.Field("address", b.address);
        json.Field("size", b.size);
        json.Field("domain", BlockDomainName(b.domain));
        json.Field("stack", b.stack);
        json.EndObject();
      }
      json.EndArray();
      json.Key("stacks");
      json.BeginArray();
      for (uint64_t id : view.stack_ids) {
        json.BeginObject();
        json.Field("id", id);
        WriteStack(&json, "frames", view.stacks[id]);
        json.EndObject();
      }
      json.EndArray();
    }
    json.EndObject();
  } else {
    PrintEstimateNote(p);
    PrintProgramEndNote(p);
    if (p.sample_rate) {
      std::cout << "Recorded blocks only: the capture was sampled, so these are the sampled "
                   "blocks at their real sizes and the first figure below is their sum, not an "
                   "estimate (summary shows the estimate)\n";
    }
    std::cout << "In use at " << p.SnapshotLabel() << ": " << FormatBytes(view.total.bytes)
              << " in " << FormatCounted(view.total.blocks, "block");
    const char* sep = " (";
    for (LiveBlockRow::Domain d : kDomains) {
      if (!view.by_domain[d].blocks) continue;
      std::cout << sep << BlockDomainName(d) << " " << FormatBytes(view.by_domain[d].bytes);
      sep = ", ";
    }
    std::cout << (*sep == ',' ? ")" : "") << "; peak "
              << FormatBytesEstimate(p.totals.peak_bytes, p.totals.peak_bytes_var,
                                     ErrorScale{p.sample_rate});
    if (o.peak_since_seq) {
      std::cout << ", since event " << o.peak_since_seq << " " << FormatBytes(p.peak_since_bytes);
    } else if (!o.peak_since_marker.empty()) {
      std::cout << ", since marker '" << o.peak_since_marker << "' "
                << FormatBytes(p.peak_since_bytes)
                << (p.peak_since_marker_seq ? "" : " (no such marker: since the start)");
    }
    std::cout << "\n";
    if (!view.blocks.empty()) {
      TextTable table;
      table.AddColumn("ADDRESS", TextTable::kLeft);
      table.AddColumn("SIZE", TextTable::kRight);
      table.AddColumn("DOMAIN", TextTable::kLeft);
      table.AddColumn("SITE", TextTable::kLeft);
      for (const LiveBlockRow& b : view.blocks) {
        const Stack& stack = view.stacks[b.stack];
        std::string site;
        if (!stack.empty()) {
          const SourceFrame& f = *stack[o.python_frames ? 0 : resolver.SiteIndex(stack)];
          std::string location = SourceLocation(f);
          site = FunctionName(f) + (location.empty() ? "" : "  " + location);
        }
        table.AddRow({Hex(b.address), FormatBytes(b.size), BlockDomainName(b.domain), site});
      }
      table.Print(std::cout);
    }
  }
  PrintWarnings(p, resolver);
  return 0;
}

}  // namespace

CommandRunner AddBlocksCommand(CLI::App* cmd) {
  auto o = std::make_shared<BlocksOptions>();
  AddAnalysisOptions(cmd, &o->common, /*filters=*/true);
  cmd->add_flag("--python-frames", o->python_frames,
                "each stack's Python frames only (no native frame symbolized: much faster)");
  cmd->add_flag("--totals", o->totals, "the totals only, no block listed");
  cmd->add_option("--peak-since-marker", o->peak_since_marker,
                  "also the peak of the bytes in use since the last marker NAME before the\n"
                  "snapshot (since the start when there is none)");
  cmd->add_option("--peak-since-seq", o->peak_since_seq,
                  "also the peak of the bytes in use from just before the event of this sequence\n"
                  "number (a next_seq of an earlier answer: tracemalloc's reset_peak)")
      ->excludes("--peak-since-marker");
  cmd->add_option("--leave-out-python-file", o->leave_out_python_file,
                  "leave out of everything the blocks allocated with a frame of this Python file\n"
                  "in their stack (a tool's own memory); unlike --exclude, nothing is symbolized");
  cmd->add_option("--containing", o->containing,
                  "list only the block holding this address (decimal or 0x hex)");
  return [o] { return Blocks(*o); };
}

}  // namespace memlens::cli
