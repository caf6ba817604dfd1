// src/format/capture_path.h
//
// A capture's file name from its pattern: %p is the process's pid, %e its program's name (the
// last part of its executable's path). The agent expands MEMLENS_OUTPUT and a span's path with
// it; `memlens attach` expands the path it hands the agent the same way, so it can name the
// capture the process writes. Header-only; no allocation beyond the returned string.
#pragma once

#include <cstdint>
#include <string>

namespace memlens::format {

// The default when no pattern is given: memlens-PROGRAM-PID.mlens in the working directory.
inline constexpr char kDefaultCapturePattern[] = "memlens-%e-%p.mlens";

inline std::string ExpandCapturePattern(const std::string& pattern, uint64_t pid,
                                        const std::string& executable) {
  std::string name = executable.substr(executable.rfind('/') + 1);
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() &&
        (pattern[i + 1] == 'p' || pattern[i + 1] == 'e')) {
      out += pattern[i + 1] == 'p' ? std::to_string(pid) : name;
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

}  // namespace memlens::format
