// src/analyzer/model/stack_filter.cc: see stack_filter.h.
#include "analyzer/model/stack_filter.h"

#include <fnmatch.h>

#include <algorithm>
#include <fstream>

#include "analyzer/model/stats.h"

namespace memlens::analyzer {
namespace {

bool GlobMatches(const std::string& glob, const std::string& text) {
  return fnmatch(glob.c_str(), text.c_str(), 0) == 0;
}

// A path matches by its full text or by its base name.
bool PathMatches(const std::string& glob, const std::string& path) {
  if (path.empty()) return false;
  if (GlobMatches(glob, path)) return true;
  size_t slash = path.rfind('/');
  return slash != std::string::npos && GlobMatches(glob, path.substr(slash + 1));
}

}  // namespace

bool FramePattern::Parse(const std::string& text, FramePattern* out, std::string* error) {
  static const std::pair<const char*, Field> kPrefixes[] = {
      {"function:", kFunction}, {"file:", kFile}, {"module:", kModule}};
  *out = FramePattern{};
  out->glob = text;
  for (const auto& [prefix, field] : kPrefixes) {
    std::string p = prefix;
    if (text.rfind(p, 0) == 0) {
      out->field = field;
      out->glob = text.substr(p.size());
      break;
    }
  }
  if (out->glob.empty()) {
    *error = "empty pattern '" + text + "' (use GLOB, function:GLOB, file:GLOB or module:GLOB)";
    return false;
  }
  return true;
}

bool FramePattern::Matches(const SourceFrame& f) const {
  switch (field) {
    case kFunction: return !f.function.empty() && GlobMatches(glob, f.function);
    case kFile: return PathMatches(glob, f.file);
    case kModule: return PathMatches(glob, f.module);
    case kAny:
      return (!f.function.empty() && GlobMatches(glob, f.function)) || PathMatches(glob, f.file) ||
             PathMatches(glob, f.module);
  }
  return false;
}

bool FramePattern::MatchesAnyFrame(const Stack& frames) const {
  for (const SourceFrame* f : frames) {
    if (Matches(*f)) return true;
  }
  return false;
}

bool StackFilter::Keeps(const Stack& frames) const {
  for (const auto& p : exclude) {
    if (p.MatchesAnyFrame(frames)) return false;
  }
  if (include.empty()) return true;
  for (const auto& p : include) {
    if (p.MatchesAnyFrame(frames)) return true;
  }
  return false;
}

void FilterProfile(const StackFilter& filter, StackResolver* resolver, Profile* p) {
  if (filter.empty()) return;
  bool per_stack_sizes = !p->stack_size_histograms.empty();  // ReplayOptions asked for them
  for (auto it = p->stacks.begin(); it != p->stacks.end();) {
    if (filter.Keeps(resolver->Frames(it->first))) {
      ++it;
      continue;
    }
    p->stack_size_histograms.erase(it->first);
    for (Checkpoint& c : p->checkpoints) c.live.erase(it->first);
    it = p->stacks.erase(it);
  }
  Totals& t = p->totals;
  StackStats sum;
  for (const auto& [id, stats] : p->stacks) sum.Add(stats);
  for (const TotalsField& f : kTotalsFields) {
    if (f.per_stack) t.*f.member = sum.*f.per_stack;
  }
  // Each one's own peak is not per stack: its part of the kept stacks' peak, as peak_bytes is.
  t.mapping_peak_bytes = sum.mapping_peak_bytes;
  t.heap_peak_bytes = sum.peak_bytes - sum.mapping_peak_bytes;
  t.heap_peak_bytes_var = sum.peak_bytes_var;  // the mappings' share is exact
  if (per_stack_sizes) p->size_histogram.assign(kSizeBuckets, SizeBucket{});
  for (const auto& [id, h] : p->stack_size_histograms) {
    for (size_t b = 0; b < h.size() && b < p->size_histogram.size(); ++b) {
      p->size_histogram[b].count += h[b].count;
      p->size_histogram[b].bytes += h[b].bytes;
      p->size_histogram[b].count_var += h[b].count_var;
      p->size_histogram[b].bytes_var += h[b].bytes_var;
    }
  }
  for (Checkpoint& c : p->checkpoints) {
    c.heap_bytes = c.heap_bytes_var = 0;
    for (const auto& [id, live] : c.live) {
      c.heap_bytes += live.bytes;
      c.heap_bytes_var += live.bytes_var;
    }
  }
}

bool ReadPatternFile(const std::string& path, std::vector<FramePattern>* out, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = "cannot read '" + path + "'";
    return false;
  }
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    size_t last = line.find_last_not_of(" \t\r");
    FramePattern pattern;
    std::string why;
    if (!FramePattern::Parse(line.substr(first, last - first + 1), &pattern, &why)) {
      *error = path + ":" + std::to_string(number) + ": " + why;
      return false;
    }
    out->push_back(std::move(pattern));
  }
  return true;
}

}  // namespace memlens::analyzer
