// src/analyzer/views/diff.h
//
// The diff view (`memlens diff`): what changed in memory in use between two snapshots, of one
// capture or of two. Rows are grouped like `top`, matched across the two by names and lines
// (never ids or addresses), sorted by growth; sites only in AFTER are "new", only in BEFORE
// "gone".
//
// Runs on: the analyzer's main thread.
#pragma once

#include <cstdint>
#include <vector>

#include "analyzer/model/replay.h"
#include "analyzer/model/sites.h"
#include "analyzer/views/sites.h"

namespace memlens::analyzer {

struct DiffRow {
  SourceFrame site;
  Stack stack;  // of the AFTER side when it has one (GroupBy::kStack)
  StackStats before, after;
  bool in_before = false, in_after = false;
  int64_t Delta() const {
    return static_cast<int64_t>(after.in_use_bytes) - static_cast<int64_t>(before.in_use_bytes);
  }
  int64_t DeltaBlocks() const {
    return static_cast<int64_t>(after.in_use_blocks) - static_cast<int64_t>(before.in_use_blocks);
  }
  const char* Status() const {
    if (in_after && after.in_use_blocks && !(in_before && before.in_use_blocks)) return "new";
    if (in_before && before.in_use_blocks && !(in_after && after.in_use_blocks)) return "gone";
    return "";
  }
};

struct DiffView {
  std::vector<DiffRow> rows;  // the changed rows, most growth first, up to the limit
  size_t changed = 0;         // every changed row
  int64_t delta_bytes = 0;    // the whole change in memory in use
};

DiffView BuildDiff(const Profile& before, StackResolver* before_resolver, const Profile& after,
                   StackResolver* after_resolver, GroupBy by, size_t limit);

}  // namespace memlens::analyzer
