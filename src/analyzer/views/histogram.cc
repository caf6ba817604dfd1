// src/analyzer/views/histogram.cc: see histogram.h.
#include "analyzer/views/histogram.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

namespace memlens::analyzer {

std::vector<SiteHistogram> BuildSiteHistograms(const Profile& p, StackResolver* resolver,
                                               size_t limit) {
  using Key = std::tuple<std::string, std::string, uint32_t, std::string, uint64_t>;
  std::map<Key, SiteHistogram> groups;
  for (const auto& [stack_id, stats] : p.stacks) {
    SourceFrame site = resolver->Site(stack_id);
    Key key{site.function, site.file, site.line, site.module,
            site.function.empty() ? site.module_offset : 0};
    SiteHistogram& g = groups[key];
    g.site = site;
    g.stats.Add(stats);
    auto h = p.stack_size_histograms.find(stack_id);
    if (h == p.stack_size_histograms.end()) continue;
    for (size_t b = 0; b < h->second.size() && b < g.buckets.size(); ++b) {
      g.buckets[b].count += h->second[b].count;
      g.buckets[b].bytes += h->second[b].bytes;
      g.buckets[b].count_var += h->second[b].count_var;
      g.buckets[b].bytes_var += h->second[b].bytes_var;
    }
  }
  std::vector<SiteHistogram> out;
  for (auto& [key, g] : groups) out.push_back(std::move(g));
  std::stable_sort(out.begin(), out.end(), [](const SiteHistogram& a, const SiteHistogram& b) {
    return a.stats.allocated_bytes > b.stats.allocated_bytes;
  });
  if (out.size() > limit) out.resize(limit);
  return out;
}

}  // namespace memlens::analyzer
