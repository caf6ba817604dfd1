// src/analyzer/model/profile.cc: Profile's own questions (replay.h): times of events, names,
// the moment its in-use figures describe.
#include <algorithm>
#include <cstdio>

#include "analyzer/model/replay.h"

namespace memlens::analyzer {

double Profile::SecondsAt(uint64_t seq) const {
  // The first time mark with a larger seq bounds the event from above.
  auto it = std::upper_bound(times.begin(), times.end(), seq,
                             [](uint64_t s, const format::TimeRecord& t) { return s < t.seq; });
  if (it == times.end()) return DurationSeconds();
  return static_cast<double>(it->monotonic_ns) / 1e9;
}

const std::string& Profile::StringOf(uint64_t id) const {
  static const std::string kUnknown = "(unknown name)";
  auto it = strings.find(id);
  return it == strings.end() ? kUnknown : it->second;
}

double Profile::DurationSeconds() const {
  if (end) return static_cast<double>(end->monotonic_ns) / 1e9;
  return times.empty() ? 0.0 : static_cast<double>(times.back().monotonic_ns) / 1e9;
}

std::string Profile::SnapshotLabel() const {
  if (snapshot.kind == SnapshotSpec::kEnd) {
    // @end named in a capture whose default "exit" is the program's end: not that exit.
    if (!snapshot.text.empty() && program_end_seq) return "the end of the process";
    if (!end) return "the end of the capture";
    return end->reason == format::EndReason::kStopped ? "stop" : "exit";  // a span: its stop
  }
  if (AtProgramEndByDefault()) return "exit";  // ProgramEndNote says which exit
  char when[48];
  std::snprintf(when, sizeof when, " (%.3f s)", snapshot_seconds);
  return snapshot.text + when;
}

}  // namespace memlens::analyzer
