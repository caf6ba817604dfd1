// src/analyzer/export/export_formats.h
//
// The formats `memlens export` writes for other tools (pprof, speedscope, folded stacks,
// Chrome trace, CSV): one list, ExportFormats(), that the command, its --help and
// docs/exports.md (checked by a test) read. Each format is one file beside this one.
//
// Runs on: the analyzer's main thread.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "analyzer/model/replay.h"
#include "analyzer/model/sites.h"
#include "analyzer/views/sites.h"

namespace memlens::analyzer {

// The figure a stack format weighs each stack by (`--metric`): the bytes in use at the
// capture's moment (FILE@moment, default exit), allocated up to it, or live at the peak.
enum class Metric { kInUse, kAllocated, kPeak };
bool ParseMetric(const std::string& text, Metric* out);  // "in-use", "allocated", "peak"
const char* MetricName(Metric metric);
uint64_t MetricBytes(const StackStats& stats, Metric metric);

struct ExportOptions {
  Metric metric = Metric::kInUse;
  GroupBy by = GroupBy::kLine;  // CSV's rows
  size_t limit = 0;             // CSV's rows; 0: all
  uint64_t thread = 0;          // the profile's thread (ReplayOptions::thread), 0: all
  std::string exporter;         // "memlens 1.2.3": the tool named in the file, where it has room
};

// Writes the whole file into *out. Returns false with one line in *error.
using ExportWriter = bool (*)(const Profile& profile, StackResolver* resolver,
                              const ExportOptions& options, std::string* out, std::string* error);

struct ExportFormat {
  const char* name;         // the FORMAT argument
  const char* extension;    // of the default output file, with its dot
  const char* description;  // one line, for --help
  bool by_metric;           // what it shows first is each stack's --metric
  ExportWriter write;
};

const std::vector<ExportFormat>& ExportFormats();
const ExportFormat* FindExportFormat(const std::string& name);  // nullptr when unknown

// The stacks with a nonzero figure, by stack id, each with its frames outermost first (root
// first, as flame graphs draw them) and that figure in bytes: what the stack formats share.
struct WeightedStack {
  Stack frames;  // root first
  uint64_t bytes = 0;
};
std::vector<WeightedStack> WeightedStacks(const Profile& profile, StackResolver* resolver,
                                          Metric metric);

}  // namespace memlens::analyzer
