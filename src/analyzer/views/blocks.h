// src/analyzer/views/blocks.h
//
// The blocks view (`memlens blocks`): every block in use at the snapshot, one by one, with its
// address, size, domain (Python's allocator, the malloc family, the program's anonymous
// mappings, a custom heap) and call stack; the totals by domain; the peak, and the peak since
// a marker. It is what memlens.tracemalloc reads for its traces, and a way for scripts to ask
// "what exactly is live here". The blocks are the profile's (ReplayOptions::blocks); this keeps
// the ones the filters keep and resolves each stack once.
//
// Runs on: the analyzer's main thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "analyzer/model/replay.h"
#include "analyzer/model/sites.h"

namespace memlens::analyzer {

struct BlocksQuery {
  // Only the Python frames of each stack, read from the capture's code records: no native
  // frame is symbolized (the tracemalloc API needs no more, and it is most of the cost).
  bool python_frames_only = false;
  bool list_blocks = true;  // false: the totals only
  // Only the block holding this address (0: every block): what an object's address is
  // inside, for memlens.tracemalloc.get_object_traceback. The totals stay those of all.
  uint64_t containing = 0;
};

struct BlockTotals {
  uint64_t bytes = 0, blocks = 0;
};

struct BlocksView {
  std::vector<LiveBlockRow> blocks;  // by address; empty unless BlocksQuery::list_blocks
  BlockTotals total;                 // of every block the filters keep
  BlockTotals by_domain[LiveBlockRow::kCustomHeap + 1];  // by LiveBlockRow::Domain
  std::vector<uint64_t> stack_ids;  // of the listed blocks, each once, in the order first met
  std::unordered_map<uint64_t, Stack> stacks;  // their frames, innermost first
};

// `profile` was replayed with ReplayOptions::blocks and filtered (FilterProfile): a block whose
// stack the filters dropped is left out.
BlocksView BuildBlocks(const Profile& profile, StackResolver* resolver, const BlocksQuery& query);

}  // namespace memlens::analyzer
