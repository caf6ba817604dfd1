// src/analyzer/views/sites.h
//
// Rows of StackStats grouped by function, source line, module, stack, heap or type, and their
// sort orders: what `top`, `summary`, `leaks`, `diff`, `temporary` and the report's TopX read.
//
// Runs on: the analyzer's main thread.
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "analyzer/model/replay.h"
#include "analyzer/model/sites.h"

namespace memlens::analyzer {

// kHeap and kType group by the annotation frames of custom heaps' blocks (a row "system" or
// "(untyped)" for the rest).
enum class GroupBy { kFunction, kLine, kModule, kStack, kHeap, kType };
enum class SortBy { kPeak, kAllocated, kCount, kLeaked };

struct SiteRow {
  SourceFrame site;                 // the grouping frame (function / line / module fields)
  Stack stack;                      // full stack, innermost first (GroupBy::kStack only)
  uint64_t stack_id = 0;            // GroupBy::kStack only: the first of the stacks it groups
  StackStats stats;
};

// GroupBy::kStack groups the stacks whose frames, as Frames() gives them, are the same return
// addresses: those that differ only in frames the resolver folds or hides.
std::vector<SiteRow> GroupSites(const Profile& profile, StackResolver* resolver, GroupBy by);
void SortRows(std::vector<SiteRow>* rows, SortBy by);
// The first `limit` rows by `by` (SortRows' order), none whose value is 0.
std::vector<SiteRow> TopRows(std::vector<SiteRow> rows, SortBy by, size_t limit);
uint64_t SortValue(const StackStats& s, SortBy by);
uint64_t SortVariance(const StackStats& s, SortBy by);  // its variance (stats.h)
// Sites by source line (GroupBy::kLine's key), numbered in the order first met, each stack's
// site remembered: the report's TopX rows, checkpoints and address map refer to sites by number.
struct LineSite {
  SourceFrame frame;
  StackStats stats;
};
class LineSites {
 public:
  // Every stack of the profile, its stats added to its site's.
  LineSites(const Profile& profile, StackResolver* resolver);
  // The number of a stack's site (a stack not in the profile gets one too).
  size_t Of(uint64_t stack_id);
  const std::vector<LineSite>& sites() const { return sites_; }

 private:
  using Key = std::tuple<std::string, std::string, uint32_t, std::string, uint64_t>;
  StackResolver* resolver_;
  std::map<Key, size_t> by_key_;
  std::unordered_map<uint64_t, size_t> by_stack_;
  std::vector<LineSite> sites_;
};

bool ParseGroupBy(const std::string& text, GroupBy* out);
bool ParseSortBy(const std::string& text, SortBy* out);

}  // namespace memlens::analyzer
