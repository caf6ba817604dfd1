// src/cli/analysis_options.h
//
// What every analysis command shares: the capture argument, --json, loading the capture with
// one clear line on failure, the capture/process header of the JSON output, and warnings.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "analyzer/export/json_writer.h"
#include "analyzer/model/replay.h"
#include "analyzer/model/sites.h"

namespace memlens::cli {

inline constexpr int kExitBadInput = 2;

struct AnalysisOptions {
  std::string capture;
  bool json = false;
};

void AddAnalysisOptions(CLI::App* command, AnalysisOptions* options);
// Prints "memlens: <why>" to stderr and returns false when the capture cannot be read.
// argument: FILE or FILE@SNAPSHOT.
bool LoadOrComplain(const AnalysisOptions& options, analyzer::Profile* profile);
bool LoadOrComplain(const std::string& argument, analyzer::Profile* profile);
// Prints warnings (damage, drops, symbolization problems) to stderr, one per line.
void PrintWarnings(const analyzer::Profile& profile, const analyzer::StackResolver& resolver);
// The "capture" and "process" members every JSON output starts with.
void WriteCaptureJson(analyzer::JsonWriter* json, const analyzer::Profile& profile,
                      const analyzer::StackResolver& resolver);
int Complain(const std::string& message);  // prints "memlens: message", returns kExitBadInput

}  // namespace memlens::cli
