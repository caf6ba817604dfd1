// src/cli/summary_of_run.cc
//
// `memlens summary DIR`, for the directory of a `memlens run --follow-children`: one row per
// process (pid, parent, peak, in use at exit, allocated, duration, command), in tree order
// (analyzer/model/process_set.h), and the run's total. Each capture is loaded as `memlens summary
// CAPTURE` loads it, filters included; the other views read one capture of the run.
#include <sys/stat.h>

#include <iostream>
#include <string>
#include <vector>

#include "analyzer/export/format_units.h"
#include "analyzer/export/json_writer.h"
#include "analyzer/export/text_table.h"
#include "analyzer/model/process_set.h"
#include "cli/analysis_options.h"
#include "cli/summary_of_run.h"

namespace memlens::cli {
namespace {

using namespace analyzer;

using ProcessRow = RunProcess;  // an unreadable capture's row shows only its name

std::string EndNote(const Profile& p) {
  if (p.end) return "";
  return p.still_recording ? " (still recording)" : " (recording incomplete)";
}

}  // namespace

// The argument's path, without its @moment.
std::string PathOf(const std::string& argument, SnapshotSpec* snapshot) {
  std::string path, error;
  return ParseCaptureArgument(argument, &path, snapshot, &error) ? path : argument;
}

bool IsRunDirectory(const std::string& argument) {
  SnapshotSpec snapshot;
  struct stat st;
  return stat(PathOf(argument, &snapshot).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

int SummaryOfRun(const AnalysisOptions& o) {
  SnapshotSpec snapshot;
  const std::string run = PathOf(o.capture, &snapshot);
  const std::vector<std::string> captures = CapturesIn(run);
  if (captures.empty()) {
    return Complain("'" + run + "' is a directory without captures (*.mlens): give a "
                    "capture, or the directory of a memlens run --follow-children");
  }
  ReplayOptions replay;
  replay.thread = o.filters.thread;
  replay.heap = o.filters.heap;
  std::vector<ProcessRow> rows;
  std::vector<ProcessNode> nodes;
  if (RunSnapshotRefused(run, snapshot)) return kExitBadInput;
  const std::vector<size_t> order = LoadRun(run, snapshot, replay, &rows, &nodes);
  for (ProcessRow& row : rows) {
    if (!row.error.empty()) continue;
    StackResolver resolver(row.profile, StackOptionsOf(o.filters));
    ApplyFilters(o.filters, &resolver, &row.profile);
  }
  Totals total;
  for (const ProcessRow& row : rows) {
    const Totals& t = row.profile.totals;
    total.allocations += t.allocations;
    total.allocated_bytes += t.allocated_bytes;
    total.peak_bytes += t.peak_bytes;  // each process's own peak: they need not coincide
    total.in_use_bytes += t.in_use_bytes;
    total.in_use_blocks += t.in_use_blocks;
  }
  if (o.json) {
    JsonWriter json(std::cout);
    json.BeginObject();
    json.Field("run", run);
    json.Key("processes");
    json.BeginArray();
    for (size_t i : order) {
      const ProcessRow& row = rows[i];
      json.BeginObject();
      json.Field("capture", row.capture);
      if (!row.error.empty()) {
        json.Field("error", row.error);
        json.EndObject();
        continue;
      }
      const Profile& p = row.profile;
      json.Field("pid", row.Started().pid);
      json.Field("ppid", row.Started().ppid);
      // Its parent's pid, or its nearest recorded ancestor's when its parent was not recorded.
      json.Field("recorded_parent", nodes[i].parent != ProcessNode::kNoParent
                                        ? nodes[nodes[i].parent].pid
                                        : nodes[i].recorded_ancestor ? nodes[i].recorded_ancestor
                                                                     : nodes[i].ppid);
      // Forked without an exec (its first image): it started with its parent's blocks.
      json.Field("forked", row.Started().Forked());
      json.Key("parent_capture");  // null: its parent was not recorded (memlens run's child)
      if (nodes[i].parent == ProcessNode::kNoParent) {
        json.Null();
      } else {
        json.String(rows[nodes[i].parent].capture);
      }
      json.Field("depth", static_cast<uint64_t>(nodes[i].depth));
      json.Key("argv");
      json.BeginArray();
      for (const std::string& arg : p.process.argv) json.String(arg);
      json.EndArray();
      json.Field("executable", p.process.executable);
      json.Field("duration_s", p.DurationSeconds());
      json.Field("complete", p.end.has_value());
      json.Field("sample_rate", p.sample_rate);
      WriteTotalsJson(&json, p);
      json.EndObject();
    }
    json.EndArray();
    json.Key("total");  // sums over the processes; peak_bytes adds up each one's own peak
    json.BeginObject();
    json.Field("processes", static_cast<uint64_t>(rows.size()));
    json.Field("allocations", total.allocations);
    json.Field("allocated_bytes", total.allocated_bytes);
    json.Field("peak_bytes", total.peak_bytes);
    json.Field("in_use_bytes", total.in_use_bytes);
    json.Field("in_use_blocks", total.in_use_blocks);
    json.EndObject();
    json.EndObject();
    return 0;
  }
  std::cout << "memlens summary of the run in " << run << ": " << rows.size()
            << (rows.size() == 1 ? " process" : " processes") << "\n\n";
  TextTable table;
  for (const char* title : {"PID", "PARENT"}) table.AddColumn(title, TextTable::kRight);
  const std::string in_use = snapshot.text.empty() ? "AT EXIT" : "AT @" + snapshot.text;
  for (const std::string& title : {std::string("PEAK"), in_use, std::string("ALLOCATED"),
                                   std::string("ALLOCS"), std::string("DURATION")}) {
    table.AddColumn(title, TextTable::kRight);
  }
  table.AddColumn("COMMAND", TextTable::kLeft);
  for (size_t i : order) {
    const ProcessRow& row = rows[i];
    if (!row.error.empty()) {
      table.AddRow({"?", "?", "", "", "", "", "", row.capture + ": " + row.error});
      continue;
    }
    const Profile& p = row.profile;
    const Totals& t = p.totals;
    const ErrorScale errors{p.sample_rate};
    table.AddRow({std::to_string(row.Started().pid),
                  nodes[i].parent == ProcessNode::kNoParent ? "-" : std::to_string(nodes[nodes[i].parent].pid),
                  FormatBytesEstimate(t.peak_bytes, t.peak_bytes_var, errors),
                  FormatBytesEstimate(t.in_use_bytes, t.in_use_bytes_var, errors),
                  FormatBytesEstimate(t.allocated_bytes, t.allocated_bytes_var, errors),
                  FormatCountEstimate(t.allocations, t.allocations_var, errors),
                  FormatSeconds(p.DurationSeconds()),
                  std::string(2 * nodes[i].depth, ' ') +
                      (row.Started().Forked() ? "(forked) " : "") + ShellQuote(p.process.argv) +
                      EndNote(p)});
  }
  table.AddRow({"total", "", FormatBytes(total.peak_bytes), FormatBytes(total.in_use_bytes),
                FormatBytes(total.allocated_bytes), FormatCount(total.allocations), "",
                "(PEAK: the sum of each process's own peak)"});
  table.Print(std::cout);
  if (rows[order[0]].error.empty()) {
    std::cout << "\nEvery view takes the run, its processes merged by site (memlens top "
              << run << "), or one process's capture (memlens top "
              << rows[order[0]].capture << ")\n";
  }
  return 0;
}

}  // namespace memlens::cli
