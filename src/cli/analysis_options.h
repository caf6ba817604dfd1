// src/cli/analysis_options.h
//
// What every analysis command shares: the capture argument, --json, loading the capture with
// one clear line on failure, the filters (--include, --exclude, --thread), the capture/process
// header of the JSON output, and warnings.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

#include "analyzer/export/json_writer.h"
#include "analyzer/export/report_data.h"
#include "analyzer/model/capture.h"
#include "analyzer/model/replay.h"
#include "analyzer/model/sites.h"
#include "analyzer/model/stack_filter.h"

namespace memlens::cli {

inline constexpr int kExitBadInput = 2;

// Which allocations a view looks at (analyzer/model/stack_filter.h): stacks with a frame
// matching an --include (when any) and none matching an --exclude, made by --thread.
struct FilterOptions {
  std::vector<std::string> include, exclude;
  uint64_t thread = 0;  // OS thread id; 0: every thread
  std::string heap;     // a custom heap's name; "": the system heap (ReplayOptions::heap)
  // How the stacks read (analyzer::StackOptions): --interpreter-frames.
  bool interpreter_frames = false;
};

struct AnalysisOptions {
  std::string capture;
  bool json = false;
  FilterOptions filters;
};

// Adds the capture argument, --json, --heap and, for the views that apply them, the other
// filter options.
void AddAnalysisOptions(CLI::App* command, AnalysisOptions* options, bool filters = false);
void AddFilterOptions(CLI::App* command, FilterOptions* filters);  // includes --heap
void AddHeapOption(CLI::App* command, FilterOptions* filters);
// --interpreter-frames (AddFilterOptions adds it), and the resolver options it gives.
void AddInterpreterFramesOption(CLI::App* command, bool* interpreter_frames);
analyzer::StackOptions StackOptionsOf(const FilterOptions& filters);
// Loads the capture with the filters' thread in *replay (other replay options as given) after
// checking the patterns. Then, once the view has its resolver, ApplyFilters drops the stacks
// the patterns leave out (FilterProfile) and sets apart the blocks the C/C++ runtime keeps
// for itself (SetRuntimeApart): every view calls both, in that order.
bool LoadOrComplain(const std::string& argument, const FilterOptions& filters,
                    analyzer::ReplayOptions replay, analyzer::Profile* profile);
// The same in two steps, for a command that loads one capture more than once (leaks --growth):
// the argument parsed and the patterns checked, then each load through the one handle.
bool ParseOrComplain(const std::string& argument, const FilterOptions& filters, std::string* path,
                     analyzer::SnapshotSpec* snapshot);
bool LoadOrComplain(analyzer::Capture* capture, const analyzer::SnapshotSpec& snapshot,
                    const FilterOptions& filters, analyzer::ReplayOptions replay,
                    analyzer::Profile* profile);
void ApplyFilters(const FilterOptions& filters, analyzer::StackResolver* resolver,
                  analyzer::Profile* profile);
// Prints "memlens: <why>" to stderr and returns false when the capture cannot be read.
// argument: FILE or FILE@SNAPSHOT.
bool LoadOrComplain(const AnalysisOptions& options, analyzer::Profile* profile);
bool LoadOrComplain(const std::string& argument, analyzer::Profile* profile);
// A sampled capture (docs/sampling.md): one line on stdout, before a text view's figures, saying
// they are estimates. Nothing for a capture that recorded every allocation.
void PrintEstimateNote(const analyzer::Profile& profile);
std::string EstimateNote(const analyzer::Profile& profile);  // the line, without a newline
// A Python capture whose in-use figures are at the end of the program's own code, the default
// "exit" (docs/python.md): one line on stdout saying so ("Note: exit is " + ProgramEndNote),
// and how to see the process's end. Nothing for any other snapshot.
void PrintProgramEndNote(const analyzer::Profile& profile);
std::string ProgramEndNote(const analyzer::Profile& profile);  // the line, without a newline
// "75.00 KiB in 2 blocks kept by the C/C++ runtime for the life of the process (not leaks)":
// the blocks SetRuntimeApart took out of the in-use figures.
std::string RuntimeNote(const analyzer::Profile& profile);
// Prints warnings (damage, drops, symbolization problems) to stderr, one per line.
void PrintWarnings(const analyzer::Profile& profile, const analyzer::StackResolver& resolver);
// The "capture" and "process" members every JSON output starts with.
void WriteCaptureJson(analyzer::JsonWriter* json, const analyzer::Profile& profile,
                      const analyzer::StackResolver& resolver);
int Complain(const std::string& message);  // prints "memlens: message", returns kExitBadInput
// A view of one process's own (its address space, its blocks, growth over its clock) given a
// run's directory (`argument`): says so, naming the run, and returns true; false for anything
// else.
bool RefusedRun(const std::string& argument, const std::string& view);
// A moment of one process's (@t=, @marker:, @snapshot:, @program-end) asked of a run: says so
// and returns true. Exit, @end and @peak are each process's own.
bool RunSnapshotRefused(const std::string& run, const analyzer::SnapshotSpec& snapshot);
// The directory of a memlens run --follow-children: its processes, each loaded at `snapshot`
// (its replay options adjusted by `tailor`, when given), merged into one profile
// (merge_profiles.h); a capture that cannot be read is left out, with a warning. `rows`, when
// given, gets the report's process tree. Returns false, said, when nothing can be read.
using RunTailor = std::function<void(const std::string& capture, analyzer::ReplayOptions*)>;
bool LoadRunOrComplain(const std::string& run, const analyzer::SnapshotSpec& snapshot,
                       const analyzer::ReplayOptions& replay, analyzer::Profile* profile,
                       std::vector<analyzer::ReportProcess>* rows = nullptr,
                       const RunTailor& tailor = nullptr);

}  // namespace memlens::cli
