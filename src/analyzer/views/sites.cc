// src/analyzer/views/sites.cc: see sites.h.
#include "analyzer/views/sites.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

namespace memlens::analyzer {

namespace {

// GroupBy::kStack. Each row is named by the smallest id of its stacks, and rows come in the
// order of those ids, whatever order the profile's map holds the stacks in.
std::vector<SiteRow> GroupStacks(const Profile& profile, StackResolver* resolver) {
  std::unordered_map<std::string, SiteRow> groups;  // by the identities of the frames shown
  for (const auto& [stack_id, stats] : profile.stacks) {
    Stack frames = resolver->Frames(stack_id);
    const char* bytes = reinterpret_cast<const char*>(frames.data());
    auto [it, fresh] = groups.try_emplace(std::string(bytes, frames.size() * sizeof(frames[0])));
    SiteRow& row = it->second;
    if (fresh || stack_id < row.stack_id) {
      row.site = resolver->Site(stack_id);
      row.stack = std::move(frames);
      row.stack_id = stack_id;
    }
    row.stats.Add(stats);
  }
  std::vector<SiteRow> rows;
  rows.reserve(groups.size());
  for (auto& [key, row] : groups) rows.push_back(std::move(row));
  std::sort(rows.begin(), rows.end(),
            [](const SiteRow& a, const SiteRow& b) { return a.stack_id < b.stack_id; });
  return rows;
}

}  // namespace

std::vector<SiteRow> GroupSites(const Profile& profile, StackResolver* resolver, GroupBy by) {
  if (by == GroupBy::kStack) return GroupStacks(profile, resolver);
  using Key = std::tuple<std::string, std::string, uint32_t, std::string, uint64_t>;
  std::map<Key, SiteRow> groups;
  for (const auto& [stack_id, stats] : profile.stacks) {
    SourceFrame site = resolver->Site(stack_id);
    // The whole stack only where the grouping reads it: its annotation frames.
    Stack frames;
    if (by == GroupBy::kHeap || by == GroupBy::kType) frames = resolver->Frames(stack_id);
    Key key;
    switch (by) {
      case GroupBy::kFunction:  // a Python function is its file and name; a native one its symbol
        if (!site.python) site.file.clear();
        site.line = 0;
        key = {site.function, site.file, 0, site.module, site.function.empty() ? site.module_offset : 0};
        break;
      case GroupBy::kLine:
        key = {site.function, site.file, site.line, site.module,
               site.function.empty() ? site.module_offset : 0};
        break;
      case GroupBy::kModule:
        site = SourceFrame{"", "", 0, site.module, 0, false, site.python};
        key = {"", "", 0, site.module, 0};
        break;
      case GroupBy::kStack:  // GroupStacks
        break;
      case GroupBy::kHeap:
      case GroupBy::kType: {
        std::string name = by == GroupBy::kHeap ? HeapOf(profile, frames) : TypeOf(frames);
        site = SourceFrame{};
        site.function = name;
        key = {name, "", 0, "", 0};
        break;
      }
    }
    SiteRow& row = groups[key];
    row.site = site;
    row.stats.Add(stats);
  }
  std::vector<SiteRow> rows;
  rows.reserve(groups.size());
  for (auto& [key, row] : groups) rows.push_back(std::move(row));
  return rows;
}

uint64_t SortValue(const StackStats& s, SortBy by) {
  switch (by) {
    case SortBy::kPeak: return s.peak_bytes;
    case SortBy::kAllocated: return s.allocated_bytes;
    case SortBy::kCount: return s.allocations;
    case SortBy::kLeaked: return s.in_use_bytes;
  }
  return 0;
}

uint64_t SortVariance(const StackStats& s, SortBy by) {
  switch (by) {
    case SortBy::kPeak: return s.peak_bytes_var;
    case SortBy::kAllocated: return s.allocated_bytes_var;
    case SortBy::kCount: return s.allocations_var;
    case SortBy::kLeaked: return s.in_use_bytes_var;
  }
  return 0;
}

void SortRows(std::vector<SiteRow>* rows, SortBy by) {
  std::stable_sort(rows->begin(), rows->end(), [by](const SiteRow& a, const SiteRow& b) {
    uint64_t va = SortValue(a.stats, by), vb = SortValue(b.stats, by);
    if (va != vb) return va > vb;
    return a.stats.allocated_bytes > b.stats.allocated_bytes;
  });
}

std::vector<SiteRow> TopRows(std::vector<SiteRow> rows, SortBy by, size_t limit) {
  SortRows(&rows, by);
  std::vector<SiteRow> top;
  for (auto& row : rows) {
    if (top.size() >= limit || SortValue(row.stats, by) == 0) break;
    top.push_back(std::move(row));
  }
  return top;
}

LineSites::LineSites(const Profile& profile, StackResolver* resolver) : resolver_(resolver) {
  for (const auto& [stack_id, stats] : profile.stacks) sites_[Of(stack_id)].stats.Add(stats);
}

size_t LineSites::Of(uint64_t stack_id) {
  auto found = by_stack_.find(stack_id);
  if (found != by_stack_.end()) return found->second;
  SourceFrame site = resolver_->Site(stack_id);
  Key key{site.function, site.file, site.line, site.module,
          site.function.empty() ? site.module_offset : 0};
  auto [it, fresh] = by_key_.emplace(key, sites_.size());
  if (fresh) sites_.push_back({site, {}});
  by_stack_.emplace(stack_id, it->second);
  return it->second;
}

bool ParseGroupBy(const std::string& text, GroupBy* out) {
  static const std::map<std::string, GroupBy> kNames = {{"function", GroupBy::kFunction},
                                                        {"line", GroupBy::kLine},
                                                        {"module", GroupBy::kModule},
                                                        {"stack", GroupBy::kStack},
                                                        {"heap", GroupBy::kHeap},
                                                        {"type", GroupBy::kType}};
  auto it = kNames.find(text);
  if (it == kNames.end()) return false;
  *out = it->second;
  return true;
}

bool ParseSortBy(const std::string& text, SortBy* out) {
  static const std::map<std::string, SortBy> kNames = {{"peak", SortBy::kPeak},
                                                       {"allocated", SortBy::kAllocated},
                                                       {"count", SortBy::kCount},
                                                       {"leaked", SortBy::kLeaked}};
  auto it = kNames.find(text);
  if (it == kNames.end()) return false;
  *out = it->second;
  return true;
}

}  // namespace memlens::analyzer
