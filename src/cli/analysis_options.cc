// src/cli/analysis_options.cc: see analysis_options.h.
#include "cli/analysis_options.h"

#include <iostream>

#include <algorithm>

#include "analyzer/export/format_units.h"
#include "analyzer/model/capture.h"
#include "analyzer/model/merge_profiles.h"
#include "analyzer/model/process_set.h"
#include "analyzer/model/runtime_allocations.h"

namespace memlens::cli {

using analyzer::JsonWriter;
using analyzer::Profile;

void AddAnalysisOptions(CLI::App* command, AnalysisOptions* options, bool filters) {
  command->add_option("capture", options->capture,
                      "capture file written by `memlens run`, optionally with the moment to\n"
                      "look at (default: exit, which for a Python program is\n"
                      "FILE@program-end, the end of its own code, before atexit handlers;\n"
                      "else FILE@end): FILE@end (the end of the process), FILE@peak,\n"
                      "FILE@t=2.5s, FILE@marker:NAME (just before the program's first marker\n"
                      "NAME), FILE@marker:NAME#K (its K-th, from 1), FILE@snapshot:NAME[#K]")
      ->required();
  command->add_flag("--json", options->json, "print JSON (shape: docs/json-output.md)");
  if (filters) {
    AddFilterOptions(command, &options->filters);
  } else {
    AddHeapOption(command, &options->filters);
  }
}

void AddHeapOption(CLI::App* command, FilterOptions* filters) {
  command->add_option("--heap", filters->heap,
                      "the figures of this custom heap (the program's own pool or arena, named\n"
                      "through memlens.h or memlens.Heap) instead of the system heap (malloc,\n"
                      "mmap, Python's allocator), which holds the pools' backing memory");
}

void AddFilterOptions(CLI::App* command, FilterOptions* filters) {
  command->add_option("--include", filters->include,
                      "only stacks with a frame matching GLOB (function:, file:, module: narrow\n"
                      "it to one field); repeatable");
  command->add_option("--exclude", filters->exclude,
                      "leave out stacks with a frame matching GLOB (as --include); repeatable;\n"
                      "wins over --include");
  command->add_option("--thread", filters->thread,
                      "only allocations made by this OS thread id (tid)");
  AddHeapOption(command, filters);
  AddInterpreterFramesOption(command, &filters->interpreter_frames);
}

void AddInterpreterFramesOption(CLI::App* command, bool* interpreter_frames) {
  command->add_flag("--interpreter-frames", *interpreter_frames,
                    "in a Python program's stacks, also show the interpreter's own C frames\n"
                    "(its start-up, eval loop and call machinery: _start, Py_BytesMain,\n"
                    "PyEval_EvalCode, _PyObject_Call...), which are folded by default\n"
                    "(docs/python.md); extensions' and libraries' frames always show");
}

analyzer::StackOptions StackOptionsOf(const FilterOptions& filters) {
  analyzer::StackOptions options;
  options.interpreter_frames = filters.interpreter_frames;
  return options;
}

namespace {

bool ParsePatterns(const std::vector<std::string>& texts, std::vector<analyzer::FramePattern>* out,
                   std::string* error) {
  for (const auto& text : texts) {
    analyzer::FramePattern pattern;
    if (!analyzer::FramePattern::Parse(text, &pattern, error)) return false;
    out->push_back(std::move(pattern));
  }
  return true;
}

bool ParseFilter(const FilterOptions& filters, analyzer::StackFilter* out, std::string* error) {
  return ParsePatterns(filters.include, &out->include, error) &&
         ParsePatterns(filters.exclude, &out->exclude, error);
}

}  // namespace

bool ParseOrComplain(const std::string& argument, const FilterOptions& filters,
                     std::string* path, analyzer::SnapshotSpec* snapshot) {
  std::string error;
  analyzer::StackFilter filter;
  if (!ParseFilter(filters, &filter, &error) ||
      !analyzer::ParseCaptureArgument(argument, path, snapshot, &error)) {
    Complain(error);
    return false;
  }
  return true;
}

bool RunSnapshotRefused(const std::string& run, const analyzer::SnapshotSpec& snapshot) {
  using Spec = analyzer::SnapshotSpec;
  if (snapshot.kind == Spec::kEnd || snapshot.kind == Spec::kPeak || snapshot.text.empty()) {
    return false;
  }
  Complain("@" + snapshot.text + " names a moment of one process (its clock, its markers): '" +
           run + "' holds a run of several; take it at exit, @end or @peak (each process's " +
           "own), or name one of its captures (memlens summary " + run + " lists them)");
  return true;
}

bool LoadRunOrComplain(const std::string& run, const analyzer::SnapshotSpec& snapshot,
                       const analyzer::ReplayOptions& replay, Profile* profile,
                       std::vector<analyzer::ReportProcess>* rows, const RunTailor& tailor) {
  if (RunSnapshotRefused(run, snapshot)) return false;
  std::vector<analyzer::RunProcess> processes;
  std::vector<analyzer::ProcessNode> nodes;
  const std::vector<size_t> order =
      analyzer::LoadRun(run, snapshot, replay, &processes, &nodes, tailor);
  uint64_t run_start = UINT64_MAX;  // as MergeProfiles takes it: the first start of the loaded
  for (const analyzer::RunProcess& process : processes) {
    if (process.error.empty()) {
      run_start = std::min(run_start, process.profile.process.start_monotonic_ns);
    }
  }
  std::vector<Profile> profiles;
  std::vector<std::string> left_out;
  std::vector<int64_t> row_of(processes.size(), -1);
  for (size_t i : order) {
    analyzer::RunProcess& process = processes[i];
    if (!process.error.empty()) {
      left_out.push_back(process.capture + ": " + process.error);
      continue;
    }
    const Profile& p = process.profile;
    if (rows) {  // the report's process tree
      analyzer::ReportProcess row;
      row.pid = process.Started().pid;
      const size_t parent = nodes[i].parent;
      row.parent = parent == analyzer::ProcessNode::kNoParent ? -1 : row_of[parent];
      row.depth = nodes[i].depth;
      row.forked = process.Started().Forked();
      for (const std::string& arg : p.process.argv) {
        row.command += (row.command.empty() ? "" : " ") + arg;
      }
      row.capture = process.capture;
      row.peak_bytes = p.totals.peak_bytes;
      row.in_use_bytes = p.totals.in_use_bytes;
      row.start_s = static_cast<double>(p.process.start_monotonic_ns - run_start) / 1e9;
      row.end_s = row.start_s + p.DurationSeconds();
      for (const analyzer::TimelinePoint& t : p.timeline) {
        row.timeline.push_back({row.start_s + t.seconds, t.heap_bytes});
      }
      row_of[i] = static_cast<int64_t>(rows->size());
      rows->push_back(std::move(row));
    }
    profiles.push_back(std::move(process.profile));
  }
  std::string error;
  if (profiles.empty()) {
    return Complain("'" + run + "': none of its captures can be read (" + left_out.front() + ")"),
           false;
  }
  if (!analyzer::MergeProfiles(std::move(profiles), run, profile, &error)) {
    return Complain(error), false;
  }
  for (const std::string& why : left_out) profile->warnings.push_back("left out: " + why);
  return true;
}

bool LoadOrComplain(analyzer::Capture* capture, const analyzer::SnapshotSpec& snapshot,
                    const FilterOptions& filters, analyzer::ReplayOptions replay,
                    Profile* profile) {
  replay.thread = filters.thread;
  replay.heap = filters.heap;
  std::string error;
  if (analyzer::LoadProfile(capture, snapshot, replay, profile, &error)) return true;
  if (!analyzer::CapturesIn(capture->path()).empty()) {  // --follow-children's directory
    return LoadRunOrComplain(capture->path(), snapshot, replay, profile);
  }
  Complain(error);
  return false;
}

bool LoadOrComplain(const std::string& argument, const FilterOptions& filters,
                    analyzer::ReplayOptions replay, Profile* profile) {
  std::string path;
  analyzer::SnapshotSpec snapshot;
  if (!ParseOrComplain(argument, filters, &path, &snapshot)) return false;
  analyzer::Capture capture(path);  // opened once for the whole load (capture.h)
  return LoadOrComplain(&capture, snapshot, filters, replay, profile);
}

void ApplyFilters(const FilterOptions& filters, analyzer::StackResolver* resolver,
                  Profile* profile) {
  analyzer::StackFilter filter;
  std::string error;
  if (ParseFilter(filters, &filter, &error)) analyzer::FilterProfile(filter, resolver, profile);
  analyzer::SetRuntimeApart(resolver, profile);
}

bool RefusedRun(const std::string& argument, const std::string& view) {
  std::string path, error;
  analyzer::SnapshotSpec snapshot;
  if (!analyzer::ParseCaptureArgument(argument, &path, &snapshot, &error) ||
      analyzer::CapturesIn(path).empty()) {
    return false;
  }
  Complain("'" + path + "' holds a run of several processes; " + view +
           " reads one process's capture: name one of them (memlens summary " + path +
           " lists them)");
  return true;
}

int Complain(const std::string& message) {
  std::cerr << "memlens: " << message << "\n";
  return kExitBadInput;
}

bool LoadOrComplain(const std::string& argument, Profile* profile) {
  return LoadOrComplain(argument, FilterOptions{}, analyzer::ReplayOptions{}, profile);
}

bool LoadOrComplain(const AnalysisOptions& options, Profile* profile) {
  return LoadOrComplain(options.capture, options.filters, analyzer::ReplayOptions{}, profile);
}

std::string EstimateNote(const Profile& p) {
  if (p.sample_rate == 0) return "";
  return "Estimates: heap allocations were sampled (one byte in " +
         analyzer::FormatBytes(p.sample_rate) +
         " on average); every byte and block figure is scaled up from the samples, "
         "\u00b1 one standard error (95% interval: \u00b11.96 of it)";
}

std::string RuntimeNote(const Profile& p) {
  const analyzer::Totals& t = p.totals;
  const analyzer::ErrorScale errors{p.sample_rate};
  return analyzer::FormatBytesEstimate(t.runtime_bytes, t.runtime_bytes_var, errors) + " in " +
         analyzer::FormatCountedEstimate(t.runtime_blocks, t.runtime_blocks_var, errors,
                                         "block") +
         " kept by the C/C++ runtime for the life of the process (not leaks)";
}

std::string ProgramEndNote(const Profile& p) {
  if (!p.AtProgramEndByDefault()) return "";
  return "the end of the program's own Python code (" +
         analyzer::FormatSeconds(p.snapshot_seconds) +
         "), before atexit handlers and the interpreter's shutdown; " + p.path +
         "@end: the end of the process";
}

void PrintProgramEndNote(const Profile& p) {
  if (p.merged_processes) {
    std::cout << "The run in " << p.path << ": its " << p.merged_processes
              << (p.merged_processes == 1 ? " process" : " processes merged")
              << ", each at its own moment (memlens summary " << p.path << " lists them)\n";
  }
  if (p.AtProgramEndByDefault()) std::cout << "Note: exit is " << ProgramEndNote(p) << "\n";
}

void PrintEstimateNote(const Profile& p) {
  if (p.sample_rate) std::cout << EstimateNote(p) << "\n";
}

void PrintWarnings(const Profile& profile, const analyzer::StackResolver& resolver) {
  for (const auto& w : profile.warnings) std::cerr << "memlens: warning: " << w << "\n";
  for (const auto& w : resolver.warnings()) std::cerr << "memlens: warning: " << w << "\n";
}

void WriteCaptureJson(JsonWriter* json, const Profile& p, const analyzer::StackResolver& resolver) {
  analyzer::WriteCaptureJson(json, p, resolver.warnings());
}

}  // namespace memlens::cli
