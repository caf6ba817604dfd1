// src/analyzer/model/replay_mappings.cc: the program's anonymous mappings in the live set
// (Replayer, replayer.h): mmap, munmap, mremap and mprotect cut and join tracked regions.
#include "analyzer/model/replayer.h"

namespace memlens::analyzer {

// A mapping (or a piece of one) whose memory counts is an allocation of the mappings' domain;
// a reserved one is only address space. Mappings are recorded in full even in a sampled
// capture: whole weights.
void Replayer::AddRegion(uint64_t start, uint64_t size, uint64_t stack, uint64_t seq,
                         bool counted) {
  if (size == 0) return;
  std::vector<std::pair<uint64_t, Region>> replaced;
  RemoveRange(start, size, &replaced);  // MAP_FIXED over an existing mapping replaces it
  mappings_[start] = {start + size, stack, counted};
  if (!counted) {
    reserved_bytes_ += size;
    return;
  }
  Allocate(stack, {size, kCountUnit}, seq, Domain::kMapping);
}

// What is left of a region after a cut: the same block, not a new allocation.
void Replayer::KeepPiece(uint64_t start, uint64_t end, const Region& r) {
  mappings_[start] = {end, r.stack, r.counted};
  if (!r.counted) {
    reserved_bytes_ += end - start;
    return;
  }
  uint64_t size = end - start;
  Allocate(r.stack, {size, kCountUnit}, 0, Domain::kMapping);
  StackStats& s = State(r.stack).stats;
  s.allocations -= kCountUnit;
  s.allocated_bytes -= size;
  s.mapping_allocated_bytes -= size;
  p_->totals.allocations -= kCountUnit;
  p_->totals.allocated_bytes -= size;
  p_->totals.mapping_allocated_bytes -= size;
}

// Cuts [start, start+size) out of the tracked mappings; what was cut goes to *taken.
void Replayer::RemoveRange(uint64_t start, uint64_t size,
                           std::vector<std::pair<uint64_t, Region>>* taken) {
  uint64_t end = start + size;
  auto it = mappings_.upper_bound(start);
  if (it != mappings_.begin()) --it;
  while (it != mappings_.end() && it->first < end) {
    uint64_t r_start = it->first;
    Region r = it->second;
    if (r.end <= start) {
      ++it;
      continue;
    }
    it = mappings_.erase(it);
    uint64_t cut_start = std::max(r_start, start), cut_end = std::min(r.end, end);
    // The whole old region leaves the accounting; the parts outside the cut come back.
    if (r.counted) {
      Release(r.stack, {r.end - r_start, kCountUnit}, Domain::kMapping);
      p_->totals.frees += kCountUnit;
    } else {
      reserved_bytes_ -= r.end - r_start;
    }
    if (r_start < cut_start) KeepPiece(r_start, cut_start, r);
    if (cut_end < r.end) KeepPiece(cut_end, r.end, r);
    taken->push_back({cut_start, {cut_end, r.stack, r.counted}});
    it = mappings_.lower_bound(cut_end);
  }
}

// mprotect: the pieces of tracked mappings in [start, start+size) that change between counted
// and reserved are cut out and put back. A piece committed counts from now, as an allocation
// at the mprotect's stack; a piece made PROT_NONE is released and stays reserved. Addresses in
// no tracked mapping are not the program's anonymous memory: ignored.
void Replayer::Protect(uint64_t start, uint64_t size, uint64_t stack, uint64_t seq, bool counted) {
  uint64_t end = start + size;
  std::vector<std::pair<uint64_t, uint64_t>> changing;
  auto it = mappings_.upper_bound(start);
  if (it != mappings_.begin()) --it;
  for (; it != mappings_.end() && it->first < end; ++it) {
    if (it->second.end > start && it->second.counted != counted) {
      changing.push_back({std::max(it->first, start), std::min(it->second.end, end)});
    }
  }
  for (const auto& [from, to] : changing) {
    std::vector<std::pair<uint64_t, Region>> taken;
    RemoveRange(from, to - from, &taken);
    for (const auto& [piece, r] : taken) {
      AddRegion(piece, r.end - piece, counted ? stack : r.stack, seq, counted);
      if (counted) sizes_.Count(stack, r.end - piece, {r.end - piece, kCountUnit}, p_);
    }
  }
}

}  // namespace memlens::analyzer
