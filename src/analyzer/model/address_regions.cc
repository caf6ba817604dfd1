// src/analyzer/model/address_regions.cc: see address_regions.h.
#include "analyzer/model/address_regions.h"

#include <algorithm>
#include <unordered_map>

namespace memlens::analyzer {
namespace {

// Where cell c of n starts in a region of `span` bytes: exact, without overflow.
uint64_t CellStart(uint64_t span, size_t c, size_t n) {
  return static_cast<uint64_t>(static_cast<unsigned __int128>(span) * c / n);
}

// The strip of the region r, whose blocks are [first, last): what share of each cell's bytes
// live blocks cover.
void FillCells(const MapBlock* first, const MapBlock* last, size_t cells, AddressRegion* r) {
  const uint64_t span = r->end - r->begin;
  const size_t n = static_cast<size_t>(std::min<uint64_t>(cells, span));
  if (n == 0) return;
  std::vector<uint64_t> covered(n, 0);
  for (const MapBlock* b = first; b != last; ++b) {
    const uint64_t from = b->begin - r->begin;
    const uint64_t to = std::min(span, from + b->size);
    size_t c = static_cast<size_t>(static_cast<unsigned __int128>(from) * n / span);
    for (; c < n && CellStart(span, c, n) < to; ++c) {
      const uint64_t lo = std::max(from, CellStart(span, c, n));
      const uint64_t hi = std::min(to, CellStart(span, c + 1, n));
      if (hi > lo) covered[c] += hi - lo;
    }
  }
  r->cells.resize(n);
  for (size_t c = 0; c < n; ++c) {
    const uint64_t width = CellStart(span, c + 1, n) - CellStart(span, c, n);  // >= 1: n <= span
    const uint64_t share = std::min<uint64_t>(covered[c], width);
    uint64_t value = (share * 255 + width / 2) / width;
    if (share && value == 0) value = 1;  // a live byte shows
    r->cells[c] = static_cast<uint8_t>(value);
  }
}

}  // namespace

// Sorts blocks by address. A frame of the playback sorts the whole live set, millions of blocks,
// dozens of times: an LSD radix sort of (address, index) keys over the address bits that differ
// (a heap's blocks share their top bits and 16-byte alignment: 4 passes of 11 bits), then one
// gather of the 64-byte blocks, is faster than std::sort moving them. With the buffers kept, a
// frame of a million blocks takes about 45 ms instead of 110 (docs/report.md, "Big captures").
void RegionClusterer::SortByAddress(std::vector<MapBlock>* blocks) {
  const size_t n = blocks->size();
  const auto by_address = [](const MapBlock& a, const MapBlock& b) { return a.begin < b.begin; };
  if (n < 4096) return std::sort(blocks->begin(), blocks->end(), by_address);
  std::vector<Key>& keys = keys_;
  keys.resize(n);
  other_.resize(n);
  uint64_t differ = 0;
  for (size_t i = 0; i < n; ++i) {
    keys[i] = {(*blocks)[i].begin, i};
    differ |= keys[i].address ^ keys[0].address;
  }
  if (differ == 0) return;
  constexpr int kBits = 11;
  constexpr uint64_t kMask = (uint64_t{1} << kBits) - 1;
  std::vector<size_t> start(kMask + 2);
  for (int shift = __builtin_ctzll(differ); shift < 64 - __builtin_clzll(differ); shift += kBits) {
    std::fill(start.begin(), start.end(), 0);
    for (const Key& k : keys) ++start[((k.address >> shift) & kMask) + 1];
    for (size_t d = 1; d < start.size(); ++d) start[d] += start[d - 1];
    for (const Key& k : keys) other_[start[(k.address >> shift) & kMask]++] = k;
    keys.swap(other_);
  }
  sorted_.clear();
  for (const Key& k : keys) sorted_.push_back((*blocks)[k.index]);
  blocks->swap(sorted_);  // both buffers stay for the next call
}

std::vector<AddressRegion> RegionClusterer::Cluster(std::vector<MapBlock>* blocks, size_t cells) {
  using Kind = AddressRegion::Kind;
  SortByAddress(blocks);
  std::vector<AddressRegion> regions;
  std::unordered_map<uint64_t, uint64_t> bytes_by_stack;  // of the region being built
  const MapBlock* region_first = blocks->data();
  auto close_region = [&](const MapBlock* end) {
    if (regions.empty()) return;
    AddressRegion& r = regions.back();
    uint64_t best = 0;
    for (const auto& [stack, bytes] : bytes_by_stack) {
      // Ties go to the lower stack id, so that the choice does not hang on the hash order.
      if (bytes > best || (bytes == best && bytes && stack < r.top_stack)) {
        best = bytes;
        r.top_stack = stack;
      }
    }
    bytes_by_stack.clear();
    r.blocks = WholeBlocks(r.blocks);
    if (cells) FillCells(region_first, end, cells, &r);
  };
  for (const MapBlock& b : *blocks) {
    bool fresh = regions.empty() || b.begin > regions.back().end + kRegionGap ||
                 regions.back().kind != b.kind;
    if (fresh) {
      close_region(&b);
      region_first = &b;
      AddressRegion r;
      r.begin = r.end = b.begin;
      r.kind = b.kind;
      regions.push_back(std::move(r));
    }
    AddressRegion& r = regions.back();
    if (b.begin > r.end) r.largest_gap = std::max(r.largest_gap, b.begin - r.end);
    r.end = std::max(r.end, b.begin + b.size);
    r.in_use_bytes += b.w.bytes;
    r.blocks += b.w.count;
    r.in_use_bytes_var += b.w.bytes_var;
    r.blocks_var += b.w.count_var;
    bytes_by_stack[b.stack] += b.kind == Kind::kReserved ? b.size : b.w.bytes;
  }
  close_region(blocks->data() + blocks->size());
  return regions;
}

}  // namespace memlens::analyzer
