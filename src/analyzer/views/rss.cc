// src/analyzer/views/rss.cc: see rss.h.
#include "analyzer/views/rss.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <unordered_map>

namespace memlens::analyzer {
namespace {

bool IsHeapBlock(const LiveBlockRow& b) {
  return b.domain == LiveBlockRow::kNative || b.domain == LiveBlockRow::kPython;
}

std::vector<RssSite> TopSites(const std::unordered_map<uint64_t, RssSite>& by_stack,
                              StackResolver* resolver, size_t count) {
  if (count == 0) return {};
  std::vector<std::pair<uint64_t, RssSite>> rows(by_stack.begin(), by_stack.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a.second.bytes != b.second.bytes ? a.second.bytes > b.second.bytes : a.first < b.first;
  });
  // Stacks of one site add up (two call paths to the same line).
  std::vector<RssSite> out;
  for (auto& [stack, row] : rows) {
    SourceFrame site = resolver->Site(stack);
    auto same = std::find_if(out.begin(), out.end(), [&](const RssSite& s) {
      return s.site.function == site.function && s.site.file == site.file &&
             s.site.line == site.line;
    });
    if (same != out.end()) {
      same->bytes += row.bytes;
      same->blocks += row.blocks;
      continue;
    }
    row.site = site;
    out.push_back(row);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const RssSite& a, const RssSite& b) { return a.bytes > b.bytes; });
  if (out.size() > count) out.resize(count);
  return out;
}

}  // namespace

void AddArenaRow(const RssArena& row, RssArena* total) {
  const bool first = total->mappings == 0;
  total->start = first ? row.start : std::min(total->start, row.start);
  total->end = first ? row.end : std::max(total->end, row.end);
  total->mappings += row.mappings;
  for (uint64_t RssArena::*f : {&RssArena::virtual_bytes, &RssArena::resident_bytes,
                                &RssArena::in_use_bytes, &RssArena::blocks,
                                &RssArena::overhead_bytes, &RssArena::free_bytes,
                                &RssArena::free_resident_bytes}) {
    total->*f += row.*f;
  }
}

RssView BuildRss(const Profile& p, StackResolver* resolver, size_t sites) {
  RssView view;
  if (!p.mappings_sample) return view;
  const format::MappingsRecord& sample = *p.mappings_sample;
  view.sample = &sample;
  const uint64_t page = sample.page_size;

  // What the replay knows owns memory: Python's arenas, the program's mappings, and malloc's
  // blocks large enough to have been mapped on their own.
  ClaimSet claims;
  claims.claims = p.python_arenas;
  auto in_python_arena = [&](uint64_t address) {
    auto it = std::upper_bound(p.python_arenas.begin(), p.python_arenas.end(), address,
                               [](uint64_t a, const Claim& c) { return a < c.start; });
    return it != p.python_arenas.begin() && address < std::prev(it)->end;
  };
  for (const LiveBlockRow& b : p.blocks) {
    if (b.domain == LiveBlockRow::kMapping) {
      claims.claims.push_back({b.address, b.address + b.size, Owner::kProgramMapping});
    } else if (IsHeapBlock(b) && b.size >= kMallocMappedFrom && !in_python_arena(b.address)) {
      claims.large_blocks.push_back({b.address, b.size});
    }
  }
  view.pieces = ClassifyMappings(sample, claims);

  // The heap blocks over the pieces (both by address), page by page.
  std::vector<std::optional<ResidentPages>> pages(sample.mappings.size());
  auto pages_of = [&](uint32_t mapping) -> const ResidentPages& {
    if (!pages[mapping]) pages[mapping].emplace(sample.mappings[mapping], page);
    return *pages[mapping];
  };
  std::vector<RssArena> rows(view.pieces.size());
  HeapShare heap;
  std::unordered_map<uint64_t, RssSite> heap_by_stack, mappings_by_stack;
  // A sampled capture's heap block stands for 1/p blocks like it (docs/sampling.md): its
  // figures are scaled, as every view's are; where it lies is known only for itself.
  const format::SamplingModel sampling{p.sample_rate, p.sample_exact_from};
  auto weight = [&](const LiveBlockRow& b) {
    return p.sample_rate && IsHeapBlock(b) ? 1.0 / sampling.RecordProbability(b.size) : 1.0;
  };
  auto scaled = [](uint64_t v, double w) {
    return static_cast<uint64_t>(std::llround(static_cast<double>(v) * w));
  };
  size_t k = 0;
  for (const LiveBlockRow& b : p.blocks) {
    const double w = weight(b);
    RssSite& site = (IsHeapBlock(b) ? heap_by_stack : mappings_by_stack)[b.stack];
    site.bytes += scaled(b.size, w);
    site.blocks += scaled(1, w);
    if (!IsHeapBlock(b)) continue;
    while (k < view.pieces.size() && view.pieces[k].end <= b.address) ++k;
    if (k == view.pieces.size() || view.pieces[k].start > b.address) continue;  // in no mapping
    const MappingPiece& piece = view.pieces[k];
    const ResidentPages& resident = pages_of(piece.mapping);
    const uint64_t in_use_resident = scaled(resident.In(b.address, b.address + b.size), w);
    const uint64_t size = scaled(b.size, w);
    RssArena& row = rows[k];
    row.in_use_bytes += size;
    row.blocks += scaled(1, w);
    if (IsMalloc(piece.owner)) {
      // The chunk's footprint: its size field before the block, its rounding after.
      const bool mapped = piece.owner == Owner::kMallocMapped;
      const uint64_t chunk = mapped ? piece.end - piece.start : MallocChunkBytes(b.size);
      const uint64_t from = mapped ? piece.start : b.address - 8;
      const uint64_t chunk_resident = scaled(resident.In(from, from + chunk), w);
      const uint64_t overhead_resident = chunk_resident - std::min(in_use_resident, chunk_resident);
      const uint64_t overhead = scaled(chunk - b.size, w);
      row.overhead_bytes += overhead;
      heap.malloc_in_use += size;
      heap.malloc_overhead += overhead;
      heap.malloc_in_use_resident += in_use_resident;
      heap.malloc_overhead_resident += overhead_resident;
      row.free_resident_bytes += in_use_resident + overhead_resident;  // taken back below
    } else if (IsPythonAllocator(piece.owner)) {
      heap.python_in_use += size;
      heap.python_in_use_resident += in_use_resident;
      row.free_resident_bytes += in_use_resident;
    }
  }
  view.parts = SplitParts(sample, view.pieces, heap);

  // Rows: each arena's pieces; the blocks malloc mapped on their own, together.
  RssArena mapped;
  mapped.owner = Owner::kMallocMapped;
  mapped.mappings = 0;
  for (size_t i = 0; i < view.pieces.size(); ++i) {
    const MappingPiece& piece = view.pieces[i];
    if (!IsMalloc(piece.owner) && !IsPythonAllocator(piece.owner)) continue;
    RssArena row = rows[i];
    row.owner = piece.owner;
    row.start = piece.start;
    row.end = piece.end;
    row.virtual_bytes = piece.end - piece.start;
    row.resident_bytes = piece.resident;
    const uint64_t used = std::min(row.virtual_bytes, row.in_use_bytes + row.overhead_bytes);
    row.free_bytes = row.virtual_bytes - used;
    row.free_resident_bytes = piece.resident - std::min(piece.resident, row.free_resident_bytes);
    if (piece.owner != Owner::kMallocMapped) {
      view.arenas.push_back(row);
      continue;
    }
    AddArenaRow(row, &mapped);
  }
  if (mapped.mappings) view.arenas.push_back(mapped);
  view.heap_sites = TopSites(heap_by_stack, resolver, sites);
  view.mapping_sites = TopSites(mappings_by_stack, resolver, sites);
  return view;
}

}  // namespace memlens::analyzer
