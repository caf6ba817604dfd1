// src/analyzer/views/live.h
//
// The live view (`memlens live`, `memlens run --live`): what a capture still being written says
// now — heap in use and resident memory over time, the peak so far, threads, drops, and the
// top sites by what they hold now (or allocated, or held at the peak), filtered by a text. One
// frame per load of the capture at its end; the terminal renders it (src/cli/live_terminal.h).
//
// Runs on: the thread that loads the capture (the analyzer's main thread, or memlens run's
// live-view thread).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/model/replay.h"
#include "analyzer/model/sites.h"
#include "analyzer/views/sites.h"
#include "analyzer/views/timeline.h"

namespace memlens::analyzer {

struct LiveSortOrder {
  SortBy by;
  const char* name;  // as the view shows it: "in use", "allocated", "at peak"
};
// The orders the live view cycles through, first the default: the one list of them.
inline constexpr LiveSortOrder kLiveSortOrders[] = {
    {SortBy::kLeaked, "in use"}, {SortBy::kAllocated, "allocated"}, {SortBy::kPeak, "at peak"}};

struct LiveOptions {
  size_t sort = 0;         // index into kLiveSortOrders
  std::string filter;      // sites whose function, file or module contains it; "" for all
  size_t rows = 10;        // at most this many sites
  int chart_width = 60;    // columns of the heap and resident series
};

struct LiveFrame {
  std::string command;      // the program's command line
  uint64_t pid = 0;
  double seconds = 0;       // recorded so far
  bool ended = false;       // the capture has its END record
  std::string end_reason;   // "exit", "signal", "exec", "stopped"... when ended
  uint64_t in_use_bytes = 0, in_use_blocks = 0;
  uint64_t peak_bytes = 0;
  double peak_seconds = 0;
  uint64_t resident_bytes = 0;  // the last sample, 0 for none
  uint64_t allocated_bytes = 0, allocations = 0;
  uint64_t threads = 0;
  uint64_t dropped_events = 0;
  TimelineChart chart;      // heap in use and resident memory over time
  std::vector<SiteRow> sites;  // the top ones, sorted and filtered as asked
  size_t sites_matching = 0;   // how many sites pass the filter, shown or not
  std::vector<Marker> markers;  // every marker and snapshot request so far
};

LiveFrame BuildLiveFrame(const Profile& profile, StackResolver* resolver,
                         const LiveOptions& options);

}  // namespace memlens::analyzer
