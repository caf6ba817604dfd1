// src/analyzer/views/rss.h
//
// The resident-memory view (`memlens rss`, docs/rss.md): the process's resident and virtual
// memory at a mapping sample, split into parts that add up to what the kernel reported
// (resident_parts.h), with malloc's and Python's arenas one by one, every piece of every
// mapping with its owner, and the sites holding the heap blocks and the program's mappings.
// The profile is replayed to the sample (ReplayOptions::resident_parts, blocks); here the
// blocks in use are laid over the pieces, page by page where the writer read the pages.
//
// Runs on: the analyzer's main thread.
#pragma once

#include <cstdint>
#include <vector>

#include "analyzer/model/replay.h"
#include "analyzer/model/resident_parts.h"
#include "analyzer/model/sites.h"

namespace memlens::analyzer {

// One of malloc's arenas (its main one, a heap of another), the blocks it mapped on their own
// (together), or one of Python's arenas.
struct RssArena {
  Owner owner = Owner::kMallocMain;
  uint64_t start = 0, end = 0;  // the mapped blocks: the lowest and highest
  uint64_t mappings = 1;        // pieces counted in the row (the mapped blocks: one each)
  uint64_t virtual_bytes = 0;
  uint64_t resident_bytes = 0;
  uint64_t in_use_bytes = 0;
  uint64_t blocks = 0;
  uint64_t overhead_bytes = 0;
  uint64_t free_bytes = 0;           // virtual_bytes - in_use_bytes - overhead_bytes
  uint64_t free_resident_bytes = 0;  // of the free bytes, those on resident pages
};

struct RssSite {
  SourceFrame site;
  uint64_t bytes = 0;
  uint64_t blocks = 0;
};

struct RssView {
  const format::MappingsRecord* sample = nullptr;  // the profile's; null: the capture has none
  ResidentSample parts;                            // at the sample, split block by block
  std::vector<RssArena> arenas;                    // by address, the mapped blocks' row last
  std::vector<MappingPiece> pieces;                // by address
  std::vector<RssSite> heap_sites;                 // the heap blocks in use, by bytes
  std::vector<RssSite> mapping_sites;              // the program's mappings, by bytes
};

// Adds a row's figures to *total, whose range grows to cover it and whose pieces are counted
// (a total starts with mappings 0 and the owner its rows share).
void AddArenaRow(const RssArena& row, RssArena* total);

// p was loaded with ReplayOptions::resident_parts and blocks; `sites`: how many of each kind.
RssView BuildRss(const Profile& p, StackResolver* resolver, size_t sites = 10);

}  // namespace memlens::analyzer
