// src/analyzer/model/fork_prefix.h
//
// A process forked while its parent recorded (memlens run --follow-children, format 9.2) holds,
// from its first moment, every block its parent held at the fork. Its capture starts at the
// fork; those blocks are in the parent's capture. PlayForkPrefix finds that capture beside the
// child's (in the run's directory, named NAME-PPID.mlens, or NAME-PPID-N.mlens for a pid used
// again) and plays the parent image's records up to the fork into the child's replay
// (Replayer::PlayForkPrefixWith), so that the child's in-use figures are true.
//
// Runs on: the analyzer's main thread, inside the replay of the child's capture.
#pragma once

#include <string>
#include <vector>

#include "analyzer/model/replayer.h"
#include "format/records.h"

namespace memlens::analyzer {

// directory: the child's capture's. A parent capture that is missing, or ends before the fork,
// is said in *warnings (the child's figures then lack what it inherited).
void PlayForkPrefix(const std::string& directory, const format::ProcessRecord& child,
                    Replayer* replayer, std::vector<std::string>* warnings);

}  // namespace memlens::analyzer
