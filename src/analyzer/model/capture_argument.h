// src/analyzer/model/capture_argument.h
//
// The FILE@SPEC grammar of every analysis command's capture argument: which moment of a
// capture the in-use figures describe. Apart from the replay, which only follows a SnapshotSpec.
// Runs on: the analyzer's main thread.
#pragma once

#include <cstdint>
#include <string>

namespace memlens::analyzer {

// Which moment of a capture a profile describes: the "in use" figures (in_use_*) are what was
// live then. Written after the capture's path: FILE@end (the end of the process), FILE@peak,
// FILE@t=2.5s, FILE@marker:NAME[#K] (just before the K-th marker NAME, from 1),
// FILE@snapshot:NAME[#K] (just before the K-th snapshot the program asked for under NAME),
// FILE@program-end (just before a Python program's own code ended: format::kProgramEnd). With
// no specifier, "exit": the program's end when the capture has one, else the process's end
// (LoadProfile decides; the spec's text stays empty).
struct SnapshotSpec {
  enum Kind { kEnd, kPeak, kTime, kMarker, kSnapshot, kProgramEnd };
  Kind kind = kEnd;
  double seconds = 0;       // kTime: since the start of recording
  std::string name;         // kMarker, kSnapshot
  uint64_t occurrence = 1;  // kMarker, kSnapshot: the K-th of that name
  std::string text;         // as the user wrote it ("peak", "t=2.5s"), empty for the end
};

// Splits "FILE@SPEC" into the path and the snapshot. A path with no known @SPEC suffix is
// all path. Returns false with one line in *error for a malformed specifier.
bool ParseCaptureArgument(const std::string& argument, std::string* path, SnapshotSpec* spec,
                          std::string* error);

}  // namespace memlens::analyzer
