// src/analyzer/export/format_units.cc: see format_units.h.
#include "analyzer/export/format_units.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>

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

std::string FormatBytesEstimate(uint64_t bytes, uint64_t variance, ErrorScale errors) {
  if (!errors.sampled()) return FormatBytes(bytes);
  return FormatBytes(bytes) + " \u00b1" + FormatBytes(std::llround(errors.Bytes(variance)));
}

std::string FormatCountEstimate(uint64_t count, uint64_t variance, ErrorScale errors) {
  if (!errors.sampled()) return FormatCount(count);
  return FormatCount(count) + " \u00b1" + FormatCount(std::llround(errors.Blocks(variance)));
}

std::string FormatCountedEstimate(uint64_t count, uint64_t variance, ErrorScale errors,
                                  const std::string& noun) {
  if (!errors.sampled()) return FormatCounted(count, noun);
  return FormatCountEstimate(count, variance, errors) + " " + noun + (count == 1 ? "" : "s");
}

std::string FormatPercent(uint64_t part, uint64_t whole) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.1f%%", whole ? 100.0 * part / whole : 0.0);
  return buf;
}

std::string ShellQuote(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& word : argv) {
    if (!out.empty()) out += ' ';
    bool plain = !word.empty(), control = false;
    for (unsigned char c : word) {
      plain = plain && (std::isalnum(c) || std::strchr("_@%+=:,./-", c)) && c < 0x80;
      control = control || c < 0x20 || c == 0x7f;
    }
    if (plain) {
      out += word;
    } else if (!control) {  // '...' keeps everything but ' itself
      out += '\'';
      for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
      out += '\'';
    } else {  // $'...' (bash, zsh, ksh; POSIX 2024) spells newlines and escapes as \xHH
      out += "$'";
      for (unsigned char c : word) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "\\x%02x", c);
        out += c < 0x20 || c == 0x7f ? std::string(hex)
               : c == '\'' || c == '\\' ? "\\" + std::string(1, static_cast<char>(c))
                                          : std::string(1, static_cast<char>(c));
      }
      out += '\'';
    }
  }
  return out;
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
