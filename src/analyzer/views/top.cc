// src/analyzer/views/top.cc: see top.h.
#include "analyzer/views/top.h"

#include <algorithm>

namespace memlens::analyzer {

std::vector<SiteRow> HeapRows(const Profile& p) {
  std::vector<SiteRow> rows(1);
  rows[0].site.function = "system";
  const Totals& t = p.totals;
  rows[0].stats.allocations = t.allocations;
  rows[0].stats.allocated_bytes = t.allocated_bytes;
  rows[0].stats.peak_bytes = t.peak_bytes;
  rows[0].stats.peak_blocks = t.peak_blocks;
  rows[0].stats.in_use_bytes = t.in_use_bytes;
  rows[0].stats.in_use_blocks = t.in_use_blocks;
  rows[0].stats.python_allocated_bytes = t.python_allocated_bytes;
  rows[0].stats.mapping_allocated_bytes = t.mapping_allocated_bytes;
  rows[0].stats.mapping_peak_bytes = t.mapping_at_peak_bytes;
  rows[0].stats.mapping_in_use_bytes = t.mapping_in_use_bytes;
  for (const HeapFigures& h : p.heaps) {
    auto it = std::find_if(rows.begin() + 1, rows.end(),
                           [&](const SiteRow& r) { return r.site.function == h.name; });
    if (it == rows.end()) {
      rows.emplace_back();
      rows.back().site.function = h.name;
      it = rows.end() - 1;
    }
    it->stats.allocations += h.allocations;
    it->stats.allocated_bytes += h.allocated_bytes;
    it->stats.peak_bytes += h.peak_bytes;
    it->stats.peak_blocks += h.peak_blocks;
    it->stats.in_use_bytes += h.in_use_bytes;
    it->stats.in_use_blocks += h.in_use_blocks;
  }
  return rows;
}

std::vector<SiteRow> BuildTop(const Profile& profile, StackResolver* resolver, GroupBy by,
                              SortBy sort, size_t limit, bool each_heap) {
  auto rows = by == GroupBy::kHeap && each_heap ? HeapRows(profile)
                                                : GroupSites(profile, resolver, by);
  SortRows(&rows, sort);
  if (rows.size() > limit) rows.resize(limit);
  return rows;
}

}  // namespace memlens::analyzer
