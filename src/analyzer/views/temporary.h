// src/analyzer/views/temporary.h
//
// The temporary-allocations view (`memlens temporary`): the sites (source lines) of blocks freed
// by the thread that allocated them before that thread allocated anything else
// (StackStats::temporary), most temporaries first: buffers worth reusing or hoisting.
//
// Runs on: the analyzer's main thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "analyzer/model/replay.h"
#include "analyzer/model/sites.h"
#include "analyzer/views/sites.h"

namespace memlens::analyzer {

struct TemporaryView {
  std::vector<SiteRow> sites;    // GroupBy::kLine rows with temporaries, up to the limit
  size_t site_count = 0;         // every site with temporaries
  uint64_t temporary_bytes = 0;  // of every site
};

TemporaryView BuildTemporary(const Profile& profile, StackResolver* resolver, size_t limit);

}  // namespace memlens::analyzer
