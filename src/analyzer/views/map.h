// src/analyzer/views/map.h
//
// The address-map view (`memlens map`, the report's memory map): the live set's address space at
// the snapshot, and at moments of the recording (the report's playback), for fragmentation. The
// regions are the profile's (ReplayOptions::address_map, map_frame_seconds); this adds the site
// holding most of each region's bytes and the figures over all regions, the reserved ones
// (PROT_NONE: address space, not memory) counted apart.
//
// Runs on: the analyzer's main thread.
#pragma once

#include <cstdint>
#include <vector>

#include "analyzer/model/replay.h"
#include "analyzer/model/sites.h"

namespace memlens::analyzer {

struct MapView {
  uint64_t in_use_bytes = 0;    // in the regions that are not reserved
  uint64_t in_use_bytes_var = 0;  // a sampled capture: its variance (stats.h, ErrorScale)
  uint64_t span_bytes = 0;      // their spans
  uint64_t largest_gap = 0;     // the largest free gap inside one of them
  uint64_t reserved_bytes = 0;  // the reserved regions' spans
  std::vector<SourceFrame> top_sites;  // by region, as Profile::address_map
};

MapView BuildMap(const Profile& profile, StackResolver* resolver);
// The figures over these regions alone (no top_sites): a frame of the map's playback
// (Profile::map_frames) as BuildMap sums the snapshot's.
MapView SumRegions(const std::vector<AddressRegion>& regions);

// used / span, 0 for an empty span.
inline double UsedShare(uint64_t used, uint64_t span) {
  return span ? static_cast<double>(used) / static_cast<double>(span) : 0.0;
}

}  // namespace memlens::analyzer
