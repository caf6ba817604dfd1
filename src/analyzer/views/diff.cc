// src/analyzer/views/diff.cc: see diff.h.
#include "analyzer/views/diff.h"

#include <algorithm>
#include <map>
#include <string>

namespace memlens::analyzer {
namespace {

// A key that means the same site in two captures: names and lines, never ids or addresses.
std::string SiteKey(const SiteRow& row, GroupBy by) {
  return by == GroupBy::kStack ? StackKey(row.stack) : FrameKey(row.site);
}

}  // namespace

DiffView BuildDiff(const Profile& before, StackResolver* before_resolver, const Profile& after,
                   StackResolver* after_resolver, GroupBy by, size_t limit) {
  std::map<std::string, DiffRow> rows;
  for (auto& r : GroupSites(before, before_resolver, by)) {
    DiffRow& d = rows[SiteKey(r, by)];
    d.site = r.site;
    d.before = r.stats;
    d.in_before = true;
  }
  for (auto& r : GroupSites(after, after_resolver, by)) {
    DiffRow& d = rows[SiteKey(r, by)];
    d.site = r.site;
    d.stack = r.stack;
    d.after = r.stats;
    d.in_after = true;
  }
  DiffView view;
  for (auto& [key, row] : rows) {
    if (row.Delta() != 0 || row.after.in_use_blocks != row.before.in_use_blocks) {
      view.rows.push_back(row);
    }
  }
  std::stable_sort(view.rows.begin(), view.rows.end(),
                   [](const DiffRow& a, const DiffRow& b) { return a.Delta() > b.Delta(); });
  view.changed = view.rows.size();
  if (view.rows.size() > limit) view.rows.resize(limit);
  view.delta_bytes = static_cast<int64_t>(after.totals.in_use_bytes) -
                     static_cast<int64_t>(before.totals.in_use_bytes);
  return view;
}

}  // namespace memlens::analyzer
