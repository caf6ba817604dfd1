// src/analyzer/model/replay_custom_heaps.cc: the program's own heaps in the replay (Replayer,
// replayer.h; the heaps themselves: custom_heaps.h), and what the live set looks like by
// address at the snapshot (ReplayOptions::address_map) and at moments of the recording
// (ReplayOptions::map_frame_seconds), and block by block (ReplayOptions::blocks), custom heaps'
// blocks included.
#include <algorithm>
#include <set>

#include "analyzer/model/address_regions.h"
#include "analyzer/model/replayer.h"

namespace memlens::analyzer {

using format::EventKind;

uint32_t Replayer::HeapOfStack(uint64_t stack) const {
  uint64_t ip = stack < p_->nodes.size() ? p_->nodes[stack].ip : 0;
  bool heap = format::IsAnnotationFrameIp(ip) && format::AnnotationKind(ip) == format::Annotation::kHeap;
  return heap ? format::AnnotationValue(ip) : 0;
}

// A custom heap's event: its own figures always; the profile's figures too when it is the heap
// the profile describes (ReplayOptions::heap).
void Replayer::OnApiEvent(const format::Event& e) {
  LiveBlock block;
  switch (e.kind) {
    case EventKind::kHeapCreate: {
      auto id = static_cast<uint32_t>(e.address);
      const std::string& name = p_->StringOf(e.size);
      custom_heaps_.Create(id, name, e.stack, e.seq);
      p_->heap_names[id] = name;
      if (!options_.heap.empty() && name == options_.heap) selected_heaps_.insert(id);
      break;
    }
    case EventKind::kHeapAlloc:
    case EventKind::kHeapRealloc: {
      uint32_t heap = HeapOfStack(e.stack);
      bool replaced = custom_heaps_.Alloc(heap, e.address, e.size, e.stack, e.seq, &block);
      if (!selected_heaps_.count(heap)) break;
      // Custom heaps are recorded in full, sampled capture or not: whole weights.
      if (replaced) Release(block.stack, {block.size, kCountUnit});
      Allocate(e.stack, {e.size, kCountUnit}, e.seq);
      sizes_.Count(e.stack, e.size, {e.size, kCountUnit}, p_);
      break;
    }
    case EventKind::kHeapFree: {
      uint32_t heap = HeapOfStack(e.stack);
      if (custom_heaps_.Free(heap, e.address, e.stack, e.seq, &block) &&
          selected_heaps_.count(heap)) {
        Release(block.stack, {block.size, kCountUnit});
        p_->totals.frees += kCountUnit;
      }
      break;
    }
    case EventKind::kHeapReset:
    case EventKind::kHeapDestroy: {
      auto heap = static_cast<uint32_t>(e.address);
      std::vector<LiveBlock> released;
      custom_heaps_.Release(heap, e.kind == EventKind::kHeapDestroy, &released);
      if (!selected_heaps_.count(heap)) break;
      for (const LiveBlock& b : released) Release(b.stack, {b.size, kCountUnit});
      p_->totals.frees += released.size() * kCountUnit;
      break;
    }
    default:
      break;
  }
}

// Each custom heap's backing memory at the snapshot: the system heap's blocks and mappings that
// hold its blocks in use.
void Replayer::FindBackingMemory() {
  struct SystemBlock {
    uint64_t start, end;
    Weight w;  // what it stands for: a sampled capture's heap blocks are estimates
    bool operator<(const SystemBlock& o) const { return start < o.start; }
  };
  std::vector<SystemBlock> system;  // by start
  heap_.ForEach([&](uint64_t a, const LiveBlock& b) {
    system.push_back({a, a + b.size, HeapWeight(b.size)});
  });
  for (const auto& [start, region] : mappings_) {  // recorded in full
    if (region.counted) system.push_back({start, region.end, {region.end - start, kCountUnit}});
  }
  std::sort(system.begin(), system.end());
  std::set<std::pair<uint32_t, size_t>> backing;  // (heap, index in system)
  custom_heaps_.ForEachLive([&](uint32_t heap, uint64_t address, const LiveBlock&) {
    auto it = std::upper_bound(system.begin(), system.end(), address,
                               [](uint64_t a, const SystemBlock& b) { return a < b.start; });
    if (it == system.begin()) return;
    --it;
    if (address < it->end) backing.insert({heap, static_cast<size_t>(it - system.begin())});
  });
  for (HeapFigures& f : p_->heaps) {
    uint64_t units = 0;
    for (auto it = backing.lower_bound({f.id, 0}); it != backing.end() && it->first == f.id; ++it) {
      const Weight& w = system[it->second].w;
      f.backing_bytes += w.bytes;
      units += w.count;
      f.backing_bytes_var += w.bytes_var;
      f.backing_blocks_var += w.count_var;
    }
    f.backing_blocks = WholeBlocks(units);
  }
}

// The live set now as the address map sees it (address_regions.h): the heap's blocks, the
// selected custom heap's (--heap) and the program's mappings, reserved ranges included.
void Replayer::MapBlocks(std::vector<MapBlock>* out) const {
  using Kind = AddressRegion::Kind;
  std::vector<MapBlock>& blocks = *out;
  blocks.clear();
  blocks.reserve(LiveBlockCount());
  heap_.ForEach([&](uint64_t a, const LiveBlock& b) {
    blocks.push_back({a, b.size, b.stack, Kind::kHeap, HeapWeight(b.size)});
  });
  if (!selected_heaps_.empty()) {  // --heap
    custom_heaps_.ForEachLive([&](uint32_t heap, uint64_t a, const LiveBlock& b) {
      if (!selected_heaps_.count(heap)) return;
      blocks.push_back({a, b.size, b.stack, Kind::kHeap, {b.size, kCountUnit}});
    });
  }
  for (const auto& [start, region] : mappings_) {
    uint64_t size = region.end - start;
    if (region.counted) {
      blocks.push_back({start, size, region.stack, Kind::kMapping, {size, kCountUnit}});
    } else {
      blocks.push_back({start, size, region.stack, Kind::kReserved, {0, kCountUnit}});
    }
  }
}

// The live set at the snapshot, by address: stretches of blocks with no gap over 1 MiB.
void Replayer::MapAddressSpace() {
  MapBlocks(&map_blocks_);
  p_->address_map = clusterer_.Cluster(&map_blocks_, 0);
}

// The map's playback: a frame at each moment due before this event (MapFrames).
void Replayer::TakeMapFrames(uint64_t before_seq) {
  map_frames_.Take(before_seq, stop_seq_, LiveBlockCount(), [this] {
    MapBlocks(&map_blocks_);
    return clusterer_.Cluster(&map_blocks_, options_.map_frame_cells);
  }, p_);
}

// Every block in use at the snapshot, by address: the live set as it is, no clustering.
void Replayer::ListBlocks() {
  using Row = LiveBlockRow;
  std::vector<Row>& rows = p_->blocks;
  rows.reserve(heap_.size() + mappings_.size());
  auto kept = [this](uint64_t stack) {
    return options_.leave_out_python_file.empty() || !LeftOut(stack);
  };
  if (options_.heap.empty()) {
    heap_.ForEach([&](uint64_t a, const LiveBlock& b) {
      if (kept(b.stack))
        rows.push_back({a, b.size, b.stack, b.python ? Row::kPython : Row::kNative});
    });
    for (const auto& [start, region] : mappings_) {
      if (region.counted && kept(region.stack)) {
        rows.push_back({start, region.end - start, region.stack, Row::kMapping});
      }
    }
  }
  custom_heaps_.ForEachLive([&](uint32_t heap, uint64_t a, const LiveBlock& b) {  // --heap
    if (selected_heaps_.count(heap)) rows.push_back({a, b.size, b.stack, Row::kCustomHeap});
  });
  std::sort(rows.begin(), rows.end(),
            [](const Row& a, const Row& b) { return a.address < b.address; });
}

}  // namespace memlens::analyzer
