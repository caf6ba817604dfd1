// src/analyzer/model/capture_argument.cc: see capture_argument.h.
#include "analyzer/model/capture_argument.h"

#include <algorithm>
#include <cstdlib>

namespace memlens::analyzer {

bool ParseCaptureArgument(const std::string& argument, std::string* path, SnapshotSpec* spec,
                          std::string* error) {
  *spec = SnapshotSpec{};
  // A marker's name may hold '@': the first "@marker:" or "@snapshot:" starts the specifier.
  size_t at = std::min(argument.find("@marker:"), argument.find("@snapshot:"));
  if (at == std::string::npos) at = argument.rfind('@');
  std::string text = at == std::string::npos ? "" : argument.substr(at + 1);
  bool known = text == "end" || text == "peak" || text == "program-end" ||
               text.rfind("t=", 0) == 0 ||
               text.rfind("marker:", 0) == 0 || text.rfind("snapshot:", 0) == 0;
  if (at == std::string::npos || !known) {
    *path = argument;  // no snapshot; a path may contain '@'
    return true;
  }
  *path = argument.substr(0, at);
  spec->text = text;
  if (text == "end") return true;
  if (text == "peak") {
    spec->kind = SnapshotSpec::kPeak;
    return true;
  }
  if (text == "program-end") {
    spec->kind = SnapshotSpec::kProgramEnd;
    return true;
  }
  if (text.rfind("t=", 0) == 0) {
    std::string number = text.substr(2);
    if (!number.empty() && number.back() == 's') number.pop_back();
    char* rest = nullptr;
    double seconds = std::strtod(number.c_str(), &rest);
    if (number.empty() || *rest != '\0' || !(seconds >= 0) || seconds > 1e9) {
      *error = "@" + text + ": the time must be a number of seconds, 0 or more (as in @t=2.5s)";
      return false;
    }
    spec->kind = SnapshotSpec::kTime;
    spec->seconds = seconds;
    return true;
  }
  // marker:NAME[#K] or snapshot:NAME[#K]
  bool marker = text.rfind("marker:", 0) == 0;
  std::string name = text.substr(marker ? 7 : 9);
  size_t hash = name.rfind('#');
  if (hash != std::string::npos && hash + 1 < name.size() &&
      name.find_first_not_of("0123456789", hash + 1) == std::string::npos) {
    std::string digits = name.substr(hash + 1);
    uint64_t k = digits.size() > 9 ? 0 : std::strtoull(digits.c_str(), nullptr, 10);
    if (k == 0) {
      *error = "@" + text + ": the occurrence after '#' counts from 1 (as in @marker:" +
               name.substr(0, hash) + "#2)";
      return false;
    }
    spec->occurrence = k;
    name.resize(hash);
  }
  if (name.empty()) {
    *error = "@" + text + ": a name is needed (as in @marker:frame, @marker:frame#3, @snapshot:menu)";
    return false;
  }
  spec->kind = marker ? SnapshotSpec::kMarker : SnapshotSpec::kSnapshot;
  spec->name = name;
  return true;
}

}  // namespace memlens::analyzer
