// src/analyzer/export/chrome_trace.h
//
// Chrome's trace event format (JSON object form), which ui.perfetto.dev and chrome://tracing
// open: one process (the recorded program's pid) with counter tracks "heap in use" (bytes, at
// each of the writer's time marks up to the capture's moment) and "resident" (RSS samples), and
// instant events for the program's markers and snapshot requests (category: the marker's own,
// or "marker"/"snapshot") and for the peak. The capture keeps its timeline per process, not per
// thread: with --thread TID the heap counter is that thread's allocations, on a track named
// after it (docs/exports.md).
//
// Runs on: the analyzer's main thread.
#pragma once

#include <string>

#include "analyzer/export/export_formats.h"

namespace memlens::analyzer {

bool WriteChromeTrace(const Profile& profile, StackResolver* resolver, const ExportOptions& options,
                      std::string* out, std::string* error);

}  // namespace memlens::analyzer
