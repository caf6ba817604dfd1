// src/analyzer/model/stack_filter.h
//
// Which call stacks a view looks at. A FramePattern matches one frame ("function:GLOB",
// "file:GLOB", "module:GLOB", or a bare GLOB for any of the three); a StackFilter keeps a stack
// when some frame matches an include pattern (or there is none) and no frame matches an
// exclude pattern: tracemalloc's Filter semantics, excludes win. `leaks --suppressions` uses
// the same patterns. FilterProfile applies a filter to a whole profile once, after loading, so
// every view (summary, top, tree, leaks, histogram, temporary, diff) reads filtered figures.
//
// Runs on: the analyzer's main thread.
#pragma once

#include <string>
#include <vector>

#include "analyzer/model/replay.h"
#include "analyzer/model/sites.h"

namespace memlens::analyzer {

// GLOB has fnmatch(3) semantics with no flags ('*' also crosses '/'). A file or a module
// matches by its full path or by its base name, so "file:leak.c" and "module:libfoo.so*" work.
struct FramePattern {
  enum Field { kAny, kFunction, kFile, kModule };
  Field field = kAny;
  std::string glob;

  // Returns false with one line in *error for an empty pattern.
  static bool Parse(const std::string& text, FramePattern* out, std::string* error);
  bool Matches(const SourceFrame& frame) const;
  bool MatchesAnyFrame(const Stack& frames) const;
};

struct StackFilter {
  std::vector<FramePattern> include, exclude;

  bool empty() const { return include.empty() && exclude.empty(); }
  bool Keeps(const Stack& frames) const;
};

// Drops from the profile every stack the filter does not keep: its StackStats, its size
// histogram, its share of every checkpoint. Then recomputes, from the stacks left, the totals
// a stack knows (allocations, allocated, python allocated, temporary, peak = the kept stacks'
// bytes at the moment of the global peak, in use, the mappings' parts of them) and the overall
// size histogram (when the replay kept per-stack histograms,
// ReplayOptions::stack_size_histograms). The heap's and the mappings' own peaks become their
// parts of that peak. frees and reserved_bytes are not per stack: they keep their unfiltered
// values. No-op for an empty filter.
void FilterProfile(const StackFilter& filter, StackResolver* resolver, Profile* profile);

// Reads a suppressions file: one FramePattern per line; blank lines and lines starting with
// '#' are skipped, surrounding spaces trimmed. Returns false with "FILE:LINE: why" in *error.
bool ReadPatternFile(const std::string& path, std::vector<FramePattern>* out, std::string* error);

}  // namespace memlens::analyzer
