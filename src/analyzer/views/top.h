// src/analyzer/views/top.h
//
// The TopX view (`memlens top`): allocation sites grouped and sorted, the first N; by heap,
// each heap's own figures (the system heap and the program's custom heaps side by side, never
// added up: the custom heaps' blocks lie inside the system heap's memory).
//
// Runs on: the analyzer's main thread.
#pragma once

#include <cstddef>
#include <vector>

#include "analyzer/model/replay.h"
#include "analyzer/model/sites.h"
#include "analyzer/views/sites.h"

namespace memlens::analyzer {

// One row per heap, from each heap's own figures: its peak is its own. Heaps of one name (a
// name reused) share a row. The system heap's row comes first.
std::vector<SiteRow> HeapRows(const Profile& profile);

// `each_heap`: GroupBy::kHeap rows are HeapRows (a profile of every heap, not one --heap).
std::vector<SiteRow> BuildTop(const Profile& profile, StackResolver* resolver, GroupBy by,
                              SortBy sort, size_t limit, bool each_heap);

}  // namespace memlens::analyzer
