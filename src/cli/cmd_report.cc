// src/cli/cmd_report.cc
//
// `memlens report FILE[@SNAPSHOT] [-o report.html]`: one self-contained HTML page that opens
// offline: summary, flame graphs (peak, in use at the snapshot, all allocations), the timeline
// with diffs between moments, the TopX table, the size histogram and the address map with its
// playback over the recording. The data is built by analyzer/export/report_data.h, the page by
// report_html.h; docs/report.md.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>
#include <unordered_map>

#include "analyzer/export/format_units.h"
#include "analyzer/export/report_data.h"
#include "analyzer/export/report_html.h"
#include "analyzer/model/capture.h"
#include "analyzer/model/merge_profiles.h"
#include "analyzer/model/process_set.h"
#include "cli/analysis_options.h"
#include "cli/commands.h"

namespace memlens::cli {
namespace {

using namespace analyzer;

struct ReportOptions {
  std::string capture;
  std::string heap;
  std::string output;
  size_t checkpoints = 40;
  size_t map_frames = 40;
  size_t max_nodes = 20000;
  bool interpreter_frames = false;  // StackOptions
};

// A run's directory (memlens run --follow-children): its processes merged, each with
// checkpoints at the same moments of the run, asked on its own clock, and the process tree.
// Where each process lies on the run's clock comes from the captures' outlines (no replay).
bool LoadRunForReport(const std::string& run, const SnapshotSpec& snapshot, size_t checkpoints,
                      const ReplayOptions& replay, Profile* merged,
                      std::vector<ReportProcess>* rows) {
  std::unordered_map<std::string, std::pair<uint64_t, double>> spans;  // start ns, duration
  uint64_t run_start = UINT64_MAX, run_end = 0;
  for (const std::string& path : CapturesIn(run)) {
    Profile outline;
    std::string error;
    if (!Capture(path).Outline(&outline, &error, /*markers=*/false)) continue;  // LoadRun says
    const uint64_t start = outline.process.start_monotonic_ns;
    spans[path] = {start, outline.DurationSeconds()};
    run_start = std::min(run_start, start);
    run_end = std::max(run_end, start + static_cast<uint64_t>(outline.DurationSeconds() * 1e9));
  }
  const std::vector<double> moments = spans.empty() ? std::vector<double>{}
      : ReportCheckpointTimes(static_cast<double>(run_end - run_start) / 1e9, checkpoints);
  auto on_its_clock = [&](const std::string& capture, ReplayOptions* options) {
    auto span = spans.find(capture);
    if (span == spans.end()) return;
    const double offset = static_cast<double>(span->second.first - run_start) / 1e9;
    for (double t : moments) {
      if (t >= offset && t - offset <= span->second.second) {
        options->checkpoint_seconds.push_back(t - offset);
      }
    }
  };
  return LoadRunOrComplain(run, snapshot, replay, merged, rows, on_its_clock);
}

std::string DefaultOutput(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();  // a directory, tab-completed
  std::string base = path.substr(path.find_last_of('/') + 1);
  if (base.size() > 6 && base.compare(base.size() - 6, 6, ".mlens") == 0) {
    base.resize(base.size() - 6);
  }
  return (base.empty() ? std::string("memlens") : base) + ".html";
}

int Report(const ReportOptions& o) {
  if (o.checkpoints < 2 || o.checkpoints > 1000) return Complain("report: --checkpoints must be 2..1000");
  if (o.max_nodes < 100 || o.max_nodes > 1000000) return Complain("report: --max-nodes must be 100..1000000");
  if (o.map_frames > 1000) return Complain("report: --map-frames must be 0..1000");
  std::string path, error;
  SnapshotSpec snapshot;
  if (!ParseCaptureArgument(o.capture, &path, &snapshot, &error)) return Complain(error);
  ReplayOptions replay;
  replay.heap = o.heap;
  StackOptions stacks;
  stacks.interpreter_frames = o.interpreter_frames;
  ReportLimits limits;
  limits.tree_nodes = o.max_nodes;
  limits.map_frames = o.map_frames;
  CaptureReport report;
  Profile& p = report.profile;
  if (!CapturesIn(path).empty()) {  // a run's directory
    std::vector<ReportProcess> processes;
    if (!LoadRunForReport(path, snapshot, o.checkpoints, replay, &p, &processes)) {
      return kExitBadInput;
    }
    BuildCaptureReport(stacks, limits, processes, &report);
  } else if (!LoadCaptureReport(path, snapshot, replay, o.checkpoints, stacks, limits, &report,
                                &error)) {
    return Complain(error);
  }
  StackResolver& resolver = *report.resolver;
  const std::string& data = report.data;
  std::string title = "memlens: " + (p.process.argv.empty() ? p.process.executable : p.process.argv[0]);
  std::string html = BuildReportHtml(data, title, MakeReportNonce());
  std::string output = o.output.empty() ? DefaultOutput(path) : o.output;
  {
    std::ofstream out(output, std::ios::binary | std::ios::trunc);
    out << html;
    out.close();
    if (!out) return Complain("report: cannot write '" + output + "'");
  }
  PrintWarnings(p, resolver);
  std::cerr << "memlens: wrote " << output << " (" << FormatBytes(html.size()) << ")\n";
  return 0;
}

}  // namespace

CommandRunner AddReportCommand(CLI::App* cmd) {
  auto o = std::make_shared<ReportOptions>();
  cmd->add_option("capture", o->capture,
                  "capture file written by `memlens run`, optionally with the moment the\n"
                  "in-use figures describe (default: exit, which for a Python program is\n"
                  "FILE@program-end, the end of its own code; else FILE@end): FILE@end (the\n"
                  "end of the process), FILE@peak, FILE@t=2.5s, FILE@marker:NAME[#K],\n"
                  "FILE@snapshot:NAME[#K]")
      ->required();
  cmd->add_option("--heap", o->heap,
                  "the figures of this custom heap instead of the system heap");
  cmd->add_option("-o,--output", o->output, "the HTML file to write (default: CAPTURE.html here)");
  cmd->add_option("--checkpoints", o->checkpoints,
                  "moments spread over the capture the page can diff")->capture_default_str();
  cmd->add_option("--map-frames", o->map_frames,
                  "moments spread over the capture the memory map's playback shows (0: none)")
      ->capture_default_str();
  cmd->add_option("--max-nodes", o->max_nodes,
                  "nodes per flame graph; smaller ones fold into (other)")->capture_default_str();
  AddInterpreterFramesOption(cmd, &o->interpreter_frames);
  return [o] { return Report(*o); };
}

}  // namespace memlens::cli
