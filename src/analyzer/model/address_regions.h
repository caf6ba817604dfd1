// src/analyzer/model/address_regions.h
//
// The live set clustered by address (AddressRegion, replay.h): stretches of blocks with no gap
// over kRegionGap, each with its figures, the stack holding most of its bytes and, for a frame
// of the map's playback (MapFrame), a coarse strip of how full each part of it is. One
// implementation for the snapshot's map (ReplayOptions::address_map) and the frames
// (ReplayOptions::map_frame_seconds), so that the two always agree. Internal to
// src/analyzer/model.
// Runs on: the analyzer's main thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "analyzer/model/replay.h"
#include "analyzer/model/replay_figures.h"

namespace memlens::analyzer {

// A gap wider than this between two live blocks starts a new region.
inline constexpr uint64_t kRegionGap = uint64_t{1} << 20;

// One block of the live set as the map sees it: a heap block, a mapping the program made, or a
// reserved (PROT_NONE) range, which holds no bytes in use.
struct MapBlock {
  uint64_t begin = 0;
  uint64_t size = 0;
  uint64_t stack = 0;
  AddressRegion::Kind kind = AddressRegion::kHeap;
  Weight w{0, 0};  // in a sampled capture, what the block stands for; nothing for a reservation
};

// Clusters blocks into regions. Keeps its buffers from one call to the next: a frame of the
// playback sorts the whole live set, millions of blocks, and fresh buffers each time would cost
// as much in page faults as the sort itself.
class RegionClusterer {
 public:
  // The regions of `blocks`, by address. Sorts `blocks` by address first. cells: the size of
  // each region's strip (AddressRegion::cells), 0 for none. Linear after the sort, the strips
  // included (a block touches the cells it covers, and only the first and last of them partly).
  std::vector<AddressRegion> Cluster(std::vector<MapBlock>* blocks, size_t cells);

 private:
  void SortByAddress(std::vector<MapBlock>* blocks);
  struct Key {
    uint64_t address, index;
  };
  std::vector<Key> keys_, other_;
  std::vector<MapBlock> sorted_;
};

}  // namespace memlens::analyzer
