// src/analyzer/views/histogram.h
//
// The size-histogram view (`memlens histogram`): allocation sizes in log2 buckets (count and
// bytes), for every allocation up to the snapshot (Profile::size_histogram) and per allocation
// site (source line), the sites with the most allocated bytes first. The profile must have been
// replayed with ReplayOptions::stack_size_histograms.
//
// Runs on: the analyzer's main thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "analyzer/model/replay.h"
#include "analyzer/model/sites.h"

namespace memlens::analyzer {

// The sizes bucket b holds: [BucketMin(b), BucketMax(b)] (bucket 0 holds 0 and 1).
inline uint64_t BucketMin(int b) { return b == 0 ? 0 : uint64_t{1} << b; }
inline uint64_t BucketMax(int b) { return (uint64_t{2} << b) - 1; }

struct SiteHistogram {
  SourceFrame site;
  StackStats stats;
  SizeHistogram buckets = SizeHistogram(kSizeBuckets);
};

// The stacks' histograms summed per site (as GroupSites(kLine)), by allocated bytes, the first
// `limit`.
std::vector<SiteHistogram> BuildSiteHistograms(const Profile& profile, StackResolver* resolver,
                                               size_t limit);

}  // namespace memlens::analyzer
