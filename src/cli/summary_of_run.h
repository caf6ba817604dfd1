// src/cli/summary_of_run.h: `memlens summary DIR` for a run of several processes.
#pragma once

#include <string>

#include "cli/analysis_options.h"

namespace memlens::cli {

// Whether the capture argument is a directory (a run of memlens run --follow-children).
bool IsRunDirectory(const std::string& argument);
// Lists the run's processes and its total (summary_of_run.cc).
int SummaryOfRun(const AnalysisOptions& options);

}  // namespace memlens::cli
