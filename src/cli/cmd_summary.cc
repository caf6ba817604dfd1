// src/cli/cmd_summary.cc
//
// `memlens summary FILE`: the first answers about a capture: command, duration, totals, the
// peak (how much, when), what was still allocated at exit (the C/C++ runtime's own blocks
// apart), and the top sites by peak and by bytes in use at exit.
#include <algorithm>
#include <iostream>
#include <memory>

#include "analyzer/export/api_json.h"
#include "analyzer/export/format_units.h"
#include "analyzer/export/text_table.h"
#include "analyzer/views/summary.h"
#include "cli/analysis_options.h"
#include "cli/commands.h"
#include "cli/summary_of_run.h"

namespace memlens::cli {
namespace {

using namespace analyzer;

struct SummaryOptions {
  AnalysisOptions common;
  size_t limit = 5;
};

void PrintSites(const char* title, const std::vector<SiteRow>& rows, bool leaked, uint64_t whole,
                ErrorScale errors) {
  std::cout << "\n" << title << "\n";
  if (rows.empty()) {
    std::cout << "  (none)\n";
    return;
  }
  TextTable table;
  table.AddColumn(leaked ? "IN USE" : "AT PEAK", TextTable::kRight);
  table.AddColumn("%", TextTable::kRight);
  table.AddColumn("BLOCKS", TextTable::kRight);
  table.AddColumn("MODULE", TextTable::kLeft);
  table.AddColumn("LOCATION", TextTable::kLeft);
  table.AddColumn("FUNCTION", TextTable::kLeft);
  for (const auto& r : rows) {
    uint64_t bytes = leaked ? r.stats.in_use_bytes : r.stats.peak_bytes;
    uint64_t blocks = leaked ? r.stats.in_use_blocks : r.stats.peak_blocks;
    uint64_t bytes_var = leaked ? r.stats.in_use_bytes_var : r.stats.peak_bytes_var;
    uint64_t blocks_var = leaked ? r.stats.in_use_blocks_var : r.stats.peak_blocks_var;
    table.AddRow({FormatBytesEstimate(bytes, bytes_var, errors), FormatPercent(bytes, whole),
                  FormatCountEstimate(blocks, blocks_var, errors),
                  ModuleName(r.site), SourceLocation(r.site), FunctionName(r.site)});
  }
  table.Print(std::cout);
}

void WriteRows(JsonWriter* json, const char* key, const std::vector<SiteRow>& rows,
               ErrorScale errors) {
  json->Key(key);
  json->BeginArray();
  for (const auto& r : rows) {
    json->BeginObject();
    json->Key("site");
    WriteFrame(json, r.site);
    WriteStats(json, r.stats, errors);
    json->EndObject();
  }
  json->EndArray();
}

// The program's own heaps, beside the system heap that holds their backing memory, and misuse.
void PrintCustomHeaps(const Profile& p, uint64_t anomalies, StackResolver* resolver) {
  if (!p.heaps.empty()) {
    std::cout << "\nCustom heaps (their blocks lie inside memory the system heap counts; "
                 "BACKING: the system heap's blocks holding them at "
              << p.SnapshotLabel() << "):\n";
    TextTable table;
    for (const char* title : {"IN USE", "BLOCKS", "PEAK", "ALLOCS", "ALLOCATED", "BACKING"}) {
      table.AddColumn(title, TextTable::kRight);
    }
    table.AddColumn("HEAP", TextTable::kLeft);
    const ErrorScale errors{p.sample_rate};  // the backing memory's: the rest is exact
    for (const HeapFigures& h : p.heaps) {
      table.AddRow({FormatBytes(h.in_use_bytes), FormatCount(h.in_use_blocks),
                    FormatBytes(h.peak_bytes), FormatCount(h.allocations),
                    FormatBytes(h.allocated_bytes),
                    h.backing_blocks
                        ? FormatBytesEstimate(h.backing_bytes, h.backing_bytes_var, errors) +
                              " in " +
                              FormatCountEstimate(h.backing_blocks, h.backing_blocks_var, errors)
                        : std::string("-"),
                    h.name + (h.destroyed ? " (destroyed)" : "")});
    }
    table.Print(std::cout);
  }
  if (anomalies == 0) return;
  std::cout << "\nAnomalies (misuse of custom heaps): " << anomalies << "\n";
  for (int k = 0; k < Anomaly::kKinds; ++k) {
    if (p.anomaly_counts[k]) {
      std::cout << "  " << FormatCount(p.anomaly_counts[k]) << "  "
                << AnomalyName(static_cast<Anomaly::Kind>(k)) << "\n";
    }
  }
  constexpr size_t kShown = 10;
  for (size_t i = 0; i < p.anomalies.size() && i < kShown; ++i) {
    const Anomaly& a = p.anomalies[i];
    Stack stack = resolver->Frames(a.stack);
    std::cout << "  #" << i + 1 << " " << AnomalyName(a.kind) << ", heap " << a.heap;
    if (a.address) std::cout << ", block 0x" << std::hex << a.address << std::dec;
    std::cout << ", at " << FormatSeconds(p.SecondsAt(a.seq)) << ":\n";
    size_t site = resolver->SiteIndex(stack);
    for (size_t f = site; f < stack.size() && f < site + 4; ++f) {
      std::string location = SourceLocation(*stack[f]);
      std::cout << "      " << FunctionName(*stack[f]) << (location.empty() ? "" : "  " + location)
                << "\n";
    }
  }
  if (p.anomalies.size() > kShown) {
    std::cout << "  (" << p.anomalies.size() - kShown << " more: summary --json lists them)\n";
  }
}

// "2 child processes were not recorded (...)", and why that may be where the memory went.
std::string UnrecordedChildrenNote(const Profile& p, uint64_t children) {
  std::string note = FormatCount(children) +
                     (children == 1 ? " child process was" : " child processes were") +
                     " not recorded (memlens run --follow-children records those that run a program)";
  const std::string& exe = p.process.executable;
  std::string name = exe.substr(exe.rfind('/') + 1);
  if (name == "bash" || name == "sh" || name == "dash" || name == "zsh") {
    // pyenv's pip wrapper, for one, runs the interpreter as a child of its bash script.
    note += "; the recorded program is a shell script, and the programs it ran are among them: "
            "record the program itself";
  }
  return note;
}

int Summary(const SummaryOptions& o) {
  if (IsRunDirectory(o.common.capture)) return SummaryOfRun(o.common);
  Profile p;
  if (!LoadOrComplain(o.common, &p)) return kExitBadInput;
  StackResolver resolver(p, StackOptionsOf(o.common.filters));
  ApplyFilters(o.common.filters, &resolver, &p);
  SummaryView view = BuildSummary(p, &resolver, o.limit);
  const std::vector<SiteRow>& by_peak = view.top_peak;
  const std::vector<SiteRow>& by_leak = view.top_in_use;
  const Totals& t = p.totals;
  double peak_at = view.peak_seconds;
  if (o.common.json) {
    JsonWriter json(std::cout);
    json.BeginObject();
    WriteCaptureJson(&json, p, resolver);
    WriteTotalsJson(&json, p);
    WriteRuntimeJson(&json, p);
    WriteRows(&json, "top_peak", by_peak, ErrorScale{p.sample_rate});
    WriteRows(&json, "top_in_use_at_exit", by_leak, ErrorScale{p.sample_rate});
    WriteCustomHeapsJson(&json, p, &resolver);
    WriteMarkersJson(&json, p);
    json.EndObject();
  } else {
    std::string command = ShellQuote(p.process.argv);
    std::cout << "memlens summary of " << p.path << "\n";
    TextTable facts;
    facts.AddColumn("", TextTable::kLeft);
    facts.AddColumn("", TextTable::kLeft);
    facts.AddRow({"command", command + "   (pid " + std::to_string(p.process.pid) + ")"});
    if (!p.earlier_images.empty()) {  // wrappers and shims that exec'd into the program
      std::string first = ShellQuote(p.earlier_images.front());
      size_t more = p.earlier_images.size() - 1;
      facts.AddRow({"exec'd from", first + (more ? " (then " + std::to_string(more) +
                                                       " more exec'd images)" : "")});
    }
    if (p.sample_rate) facts.AddRow({"sampled", EstimateNote(p)});
    if (format::PythonStacksOnly(p.process)) {
      facts.AddRow({"stacks", "Python lines only (recorded with --python-stacks: no native "
                              "frames; a thread outside Python code shows the allocator's "
                              "caller)"});
    }
    const bool span = p.end && p.end->reason == format::EndReason::kStopped;
    facts.AddRow({"duration", FormatSeconds(p.DurationSeconds()) +
                                  (span                ? "   (a span, stopped by memlens_stop)"
                                   : p.end             ? ""
                                   : p.still_recording ? "   (still recording)"
                                                       : "   (recording incomplete)")});
    const ErrorScale errors{p.sample_rate};
    facts.AddRow(
        {"allocated",
         FormatBytesEstimate(t.allocated_bytes, t.allocated_bytes_var, errors) + " in " +
             FormatCountedEstimate(t.allocations, t.allocations_var, errors, "allocation") +
             " (" + FormatCountedEstimate(t.frees, t.frees_var, errors, "free") + ")"});
    facts.AddRow({"peak", FormatBytesEstimate(t.peak_bytes, t.peak_bytes_var, errors) + " in " +
                              FormatCountedEstimate(t.peak_blocks, t.peak_blocks_var, errors,
                                                    "block") +
                              ", at " + FormatSeconds(peak_at)});
    const bool at_exit = p.snapshot.kind == SnapshotSpec::kEnd || p.AtProgramEndByDefault();
    facts.AddRow({at_exit ? "at exit" : "in use",
                  FormatBytesEstimate(t.in_use_bytes, t.in_use_bytes_var, errors) + " in " +
                      FormatCountedEstimate(t.in_use_blocks, t.in_use_blocks_var, errors, "block") +
                      " still allocated at " + p.SnapshotLabel()});
    if (p.AtProgramEndByDefault()) facts.AddRow({"exit", ProgramEndNote(p)});
    if (t.runtime_blocks) facts.AddRow({"runtime", RuntimeNote(p)});
    if (t.mapping_allocated_bytes || t.reserved_bytes) {  // the heap and the mappings apart
      std::string at = " in use at " + p.SnapshotLabel();
      // The mappings are recorded in full: the heap's part of a figure has the figure's error.
      facts.AddRow(
          {"heap",
           FormatBytesEstimate(t.heap_peak_bytes, t.heap_peak_bytes_var, errors) +
               " at its own peak, " +
               FormatBytesEstimate(t.peak_bytes - t.mapping_at_peak_bytes, t.peak_bytes_var,
                                   errors) +
               " of the peak above, " +
               FormatBytesEstimate(t.in_use_bytes - t.mapping_in_use_bytes, t.in_use_bytes_var,
                                   errors) +
               at + " (malloc family, Python's allocator)"});
      facts.AddRow({"mappings", FormatBytes(t.mapping_peak_bytes) + " at their own peak, " +
                                    FormatBytes(t.mapping_at_peak_bytes) + " of the peak above, " +
                                    FormatBytes(t.mapping_in_use_bytes) + at +
                                    " (the program's anonymous mmap" +
                                    (errors.sampled() ? ", recorded in full: exact)" : ")")});
      if (t.reserved_bytes) {
        facts.AddRow({"reserved", FormatBytes(t.reserved_bytes) + " of address space at " +
                                      p.SnapshotLabel() +
                                      " (PROT_NONE mappings: not memory, in no figure above)"});
      }
    }
    if (t.python_allocated_bytes || t.arena_peak_bytes || t.mimalloc_peak_bytes) {
      // A free-threaded build's mimalloc has no pymalloc arenas (its interpreter's arena
      // allocator maps only frame-stack chunks): its own mappings are named instead.
      std::string own = t.mimalloc_peak_bytes
                            ? "mimalloc mapped " + FormatBytes(t.mimalloc_peak_bytes) +
                                  " of address space at most, " +
                                  FormatBytes(t.mimalloc_in_use_bytes) + " at exit"
                            : "pymalloc arenas " + FormatBytes(t.arena_peak_bytes) + " at most, " +
                                  FormatBytes(t.arena_in_use_bytes) + " at exit";
      facts.AddRow({"python", FormatBytesEstimate(t.python_allocated_bytes,
                                                  t.python_allocated_bytes_var, errors) +
                                  " of the allocated bytes through Python's allocator; " + own});
    }
    if (!p.heaps.empty() || !p.heap.empty()) {
      facts.AddRow({"heap", p.heap.empty()
                                ? "the figures above are the system heap's (malloc, mmap, "
                                  "Python); it holds the custom heaps' backing memory"
                                : "the figures above are custom heap " + p.heap + "'s"});
    }
    if (!p.markers.empty()) {
      facts.AddRow({"markers", FormatCount(view.markers) + " markers, " +
                                   FormatCount(view.snapshot_requests) +
                                   " snapshot requests (memlens timeline)"});
    }
    facts.AddRow({"threads", std::to_string(p.thread_count)});
    if (uint64_t children = p.UnrecordedChildren()) {
      facts.AddRow({"children", UnrecordedChildrenNote(p, children)});
    }
    facts.AddRow({"dropped", FormatCounted(t.dropped_events, "event")});
    facts.Print(std::cout);
    PrintSites("Top sites by memory at peak:", by_peak, false, t.peak_bytes, errors);
    PrintSites(("Top sites by memory in use at " + p.SnapshotLabel() + ":").c_str(), by_leak, true,
               t.in_use_bytes, errors);
    PrintCustomHeaps(p, view.anomalies, &resolver);
  }
  PrintWarnings(p, resolver);
  return 0;
}

}  // namespace

CommandRunner AddSummaryCommand(CLI::App* cmd) {
  auto o = std::make_shared<SummaryOptions>();
  AddAnalysisOptions(cmd, &o->common, /*filters=*/true);
  cmd->add_option("--limit", o->limit, "sites listed per table")->capture_default_str();
  cmd->footer(
      "The capture may also be the directory of a `memlens run --follow-children` run: the\n"
      "summary then lists its processes as a tree (pid, parent, peak, in use at exit,\n"
      "allocated, duration, command) with their totals; every other view takes the run, its\n"
      "processes merged by site, or one of its captures.");
  return [o] { return Summary(*o); };
}

}  // namespace memlens::cli
