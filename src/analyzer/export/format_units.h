// src/analyzer/export/format_units.h
//
// Human-readable numbers for the terminal views: bytes in binary units, counts with thousands
// separators, seconds, and one-line descriptions of source frames.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/model/stats.h"
#include "analyzer/symbolize/symbolizer.h"

namespace memlens::analyzer {

std::string FormatBytes(uint64_t bytes);    // "1.50 MiB", "512 B"
std::string FormatCount(uint64_t count);    // "1,234,567"
// "1 block", "1,234 blocks": the count and the noun, plural unless the count is 1.
std::string FormatCounted(uint64_t count, const std::string& noun);
std::string FormatSeconds(double seconds);  // "12.345 s"
std::string FormatPercent(uint64_t part, uint64_t whole);  // "12.3%"
// A sampled figure and its standard error (stats.h ErrorScale; variance in its units):
// "12.3 MiB ±0.8 MiB", "1,234 ±56"; the figure alone when the capture is not sampled.
std::string FormatBytesEstimate(uint64_t bytes, uint64_t variance, ErrorScale errors);
std::string FormatCountEstimate(uint64_t count, uint64_t variance, ErrorScale errors);
// "1,234 ±56 blocks", as FormatCounted.
std::string FormatCountedEstimate(uint64_t count, uint64_t variance, ErrorScale errors,
                                  const std::string& noun);
std::string FunctionName(const SourceFrame& frame);  // the name, or module+0xoffset
std::string SourceLocation(const SourceFrame& frame);  // "file.cc:12", or "" when unknown
std::string ModuleName(const SourceFrame& frame);      // basename of the module path
// A command line as a shell reads it back, to be copied and pasted: echo 'a b' $'\n' (bash).
std::string ShellQuote(const std::vector<std::string>& argv);

}  // namespace memlens::analyzer
