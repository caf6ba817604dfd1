// src/analyzer/model/merge_profiles.h
//
// A run of several processes (memlens run --follow-children) seen as one: the processes'
// profiles merged into a profile whose stacks are all of theirs, renumbered, so that every view
// reads the run as it reads one process; the views that group by line, function or module then
// add up the processes' same sites. Figures add up: each stack's, and the totals, whose peak is
// the sum of each process's own peak (they need not coincide), as `memlens summary DIR` says.
// The timeline is the run's: at each moment, the sum of what each process then had in use (none
// once it has ended), on a clock that starts at the earliest start of a process's (last)
// image; the peak is dated when that sum was highest. Checkpoints taken at moments
// of the run (each process's on its own clock: the report's) are merged by moment. Each
// process's markers, address map and blocks stay its own: the merged profile has none.
//
// Runs on: the analyzer's main thread.
#pragma once

#include <string>
#include <vector>

#include "analyzer/model/replay.h"

namespace memlens::analyzer {

// `profiles`: the run's processes, the first the one the run started (its process record is the
// merged profile's). Returns false with one line in *error when they cannot be added up
// (captures sampled at different rates).
bool MergeProfiles(std::vector<Profile> profiles, const std::string& run, Profile* merged,
                   std::string* error);

}  // namespace memlens::analyzer
