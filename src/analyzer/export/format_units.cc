// src/analyzer/export/format_units.cc: see format_units.h.
#include "analyzer/export/format_units.h"

#include <cstdio>

namespace memlens::analyzer {

std::string FormatBytes(uint64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %s", value, kUnits[unit]);
  return buf;
}

std::string FormatCount(uint64_t count) {
  std::string digits = std::to_string(count), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string FormatCounted(uint64_t count, const std::string& noun) {
  return FormatCount(count) + " " + noun + (count == 1 ? "" : "s");
}

std::string FormatSeconds(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f s", seconds);
  return buf;
}

std::string FormatPercent(uint64_t part, uint64_t whole) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.1f%%", whole ? 100.0 * part / whole : 0.0);
  return buf;
}

std::string ModuleName(const SourceFrame& f) {
  size_t slash = f.module.rfind('/');
  return slash == std::string::npos ? f.module : f.module.substr(slash + 1);
}

std::string FunctionName(const SourceFrame& f) {
  if (!f.function.empty()) return f.function;
  if (f.module.empty()) return "[all]";
  char buf[32];
  std::snprintf(buf, sizeof buf, "+0x%llx", static_cast<unsigned long long>(f.module_offset));
  return ModuleName(f) + buf;
}

std::string SourceLocation(const SourceFrame& f) {
  if (f.file.empty()) return "";
  return f.file + (f.line ? ":" + std::to_string(f.line) : "");
}

}  // namespace memlens::analyzer
