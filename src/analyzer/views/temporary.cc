// src/analyzer/views/temporary.cc: see temporary.h.
#include "analyzer/views/temporary.h"

#include <algorithm>

namespace memlens::analyzer {

TemporaryView BuildTemporary(const Profile& profile, StackResolver* resolver, size_t limit) {
  TemporaryView view;
  for (auto& r : GroupSites(profile, resolver, GroupBy::kLine)) {
    view.temporary_bytes += r.stats.temporary_bytes;
    if (r.stats.temporary) view.sites.push_back(std::move(r));
  }
  std::stable_sort(view.sites.begin(), view.sites.end(), [](const SiteRow& a, const SiteRow& b) {
    if (a.stats.temporary != b.stats.temporary) return a.stats.temporary > b.stats.temporary;
    return a.stats.temporary_bytes > b.stats.temporary_bytes;
  });
  view.site_count = view.sites.size();
  if (view.sites.size() > limit) view.sites.resize(limit);
  return view;
}

}  // namespace memlens::analyzer
