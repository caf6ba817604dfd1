// src/analyzer/views/leaks.cc: see leaks.h.
#include "analyzer/views/leaks.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>


namespace memlens::analyzer {

LeaksView BuildLeaks(const Profile& profile, StackResolver* resolver, const LeaksQuery& query) {
  auto rows = GroupSites(profile, resolver, GroupBy::kStack);
  SortRows(&rows, SortBy::kLeaked);
  LeaksView view;
  for (auto& r : rows) {
    if (r.stats.in_use_blocks == 0) continue;
    bool hidden = false;
    for (const auto& pattern : query.suppressions) {
      hidden = hidden || pattern.MatchesAnyFrame(r.stack);
    }
    if (hidden) {
      view.suppressed.stacks += 1;
      view.suppressed.bytes += r.stats.in_use_bytes;
      view.suppressed.blocks += r.stats.in_use_blocks;
      view.suppressed.bytes_var += r.stats.in_use_bytes_var;
      view.suppressed.blocks_var += r.stats.in_use_blocks_var;
      continue;
    }
    if (r.stats.in_use_bytes < query.min_bytes) continue;
    ++view.stack_count;
    if (view.leaks.size() < query.limit) view.leaks.push_back(std::move(r));
  }
  return view;
}

std::string MostRepeatedMarker(const std::vector<Marker>& markers, size_t min_count) {
  std::unordered_map<std::string, size_t> counts;
  std::string best;
  size_t best_count = 0;
  for (const Marker& m : markers) {
    if (m.snapshot) continue;
    size_t c = ++counts[m.name];
    if (c > best_count) {
      best_count = c;
      best = m.name;
    }
  }
  return best_count >= min_count ? best : "";
}

bool PlanGrowthCheckpoints(const Profile& first, size_t windows, const std::string& marker,
                           GrowthCheckpoints* out, std::string* error) {
  // A marker repeated at least 3 times: its occurrences (up to `windows` of them, evenly picked,
  // first and last included) are the checkpoints, each exactly before the marker.
  out->marker = marker.empty() ? MostRepeatedMarker(first.markers, 3) : marker;
  std::vector<uint64_t> occurrences;
  for (const Marker& m : first.markers) {
    if (!m.snapshot && m.name == out->marker) occurrences.push_back(m.seq);
  }
  if (!marker.empty() && occurrences.size() < 2) {
    *error = "--marker " + marker + ": the capture has " + std::to_string(occurrences.size()) +
             " markers of that name; --growth needs 2 or more";
    return false;
  }
  if (occurrences.size() >= 2) {
    size_t n = std::min(windows, occurrences.size());
    for (size_t k = 0; k < n; ++k) {
      out->seqs.push_back(occurrences[k * (occurrences.size() - 1) / (n - 1)]);
    }
  } else {
    out->marker.clear();
    for (size_t k = 1; k <= windows; ++k) {
      out->seconds.push_back(first.snapshot_seconds * static_cast<double>(k) /
                             static_cast<double>(windows + 1));
    }
  }
  return true;
}

bool Grows(const std::vector<uint64_t>& v) {
  if (v.size() < 2 || v.back() <= v.front()) return false;
  size_t rises = 0;
  for (size_t i = 1; i < v.size(); ++i) {
    if (v[i] < v[i - 1]) return false;
    if (v[i] > v[i - 1]) ++rises;
  }
  return rises * 2 >= v.size() - 1;
}

namespace {

std::vector<GrowingSite> GrowingSites(const Profile& p, StackResolver* resolver) {
  using Key = std::tuple<std::string, std::string, uint32_t, std::string, uint64_t>;
  std::map<Key, GrowingSite> sites;
  size_t n = p.checkpoints.size();
  auto site_of = [&](uint64_t stack_id) -> GrowingSite& {
    SourceFrame site = resolver->Site(stack_id);
    GrowingSite& g = sites[{site.function, site.file, site.line, site.module,
                            site.function.empty() ? site.module_offset : 0}];
    if (g.bytes.empty()) {
      g.site = site;
      g.bytes.assign(n, 0);
      g.bytes_var.assign(n, 0);
    }
    return g;
  };
  for (size_t i = 0; i < n; ++i) {
    for (const auto& [stack_id, live] : p.checkpoints[i].live) {
      GrowingSite& g = site_of(stack_id);
      g.bytes[i] += live.bytes;
      g.bytes_var[i] += live.bytes_var;
      if (i + 1 == n && live.bytes > g.stack_bytes) {
        g.stack_bytes = live.bytes;
        g.stack_id = stack_id;
      }
    }
  }
  std::vector<GrowingSite> out;
  for (auto& [key, g] : sites) {
    if (Grows(g.bytes)) out.push_back(std::move(g));
  }
  for (auto& g : out) {  // in use at the snapshot, for contrast with the growth
    for (const auto& [stack_id, stats] : p.stacks) {
      SourceFrame site = resolver->Site(stack_id);
      if (site.function == g.site.function && site.file == g.site.file &&
          site.line == g.site.line && site.module == g.site.module &&
          site.module_offset == g.site.module_offset) {
        g.in_use_at_end += stats.in_use_bytes;
        g.in_use_at_end_var += stats.in_use_bytes_var;
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const GrowingSite& a, const GrowingSite& b) {
    return a.Growth() > b.Growth();
  });
  return out;
}

}  // namespace

GrowthView BuildGrowth(const Profile& profile, StackResolver* resolver,
                       const GrowthCheckpoints& plan, size_t windows, size_t limit) {
  GrowthView view;
  view.growing = GrowingSites(profile, resolver);
  view.site_count = view.growing.size();
  if (view.growing.size() > limit) view.growing.resize(limit);
  if (profile.checkpoints.size() < plan.Wanted()) {
    view.warning = "only " + std::to_string(profile.checkpoints.size()) + " of " +
                   std::to_string(windows) +
                   " checkpoints could be taken (the capture has too few time marks)";
  }
  return view;
}

}  // namespace memlens::analyzer
