// src/analyzer/model/custom_heaps.cc: see custom_heaps.h.
#include "analyzer/model/custom_heaps.h"

namespace memlens::analyzer {

const char* AnomalyName(Anomaly::Kind kind) {
  switch (kind) {
    case Anomaly::kUnknownFree: return "free of a pointer the heap never handed out";
    case Anomaly::kDoubleFree: return "double free";
    case Anomaly::kFreeAfterReset: return "block freed after its heap was reset";
    case Anomaly::kFreeAfterDestroy: return "block freed after its heap was destroyed";
    case Anomaly::kNameReused: return "heap name reused by a second live heap";
  }
  return "?";
}

CustomHeaps::Heap& CustomHeaps::Find(uint32_t id) {
  auto [it, fresh] = heaps_.try_emplace(id);
  if (fresh) {  // its create event was lost: a nameless heap
    it->second.figures.id = id;
    it->second.figures.name = "heap#" + std::to_string(id);
    order_.push_back(id);
  }
  return it->second;
}

const std::string& CustomHeaps::Name(uint32_t heap) const {
  static const std::string kNone;
  auto it = heaps_.find(heap);
  return it == heaps_.end() ? kNone : it->second.figures.name;
}

void CustomHeaps::Report(Anomaly::Kind kind, const Heap& heap, uint64_t address, uint64_t stack,
                         uint64_t seq) {
  ++counts_[kind];
  if (anomalies_.size() < kMaxAnomaliesKept) {
    anomalies_.push_back({kind, heap.figures.name, address, stack, seq});
  }
}

void CustomHeaps::Create(uint32_t id, const std::string& name, uint64_t stack, uint64_t seq) {
  Heap& heap = Find(id);
  heap.figures.name = name;
  heap.figures.create_stack = stack;
  for (const auto& [other_id, other] : heaps_) {
    if (other_id != id && !other.figures.destroyed && other.figures.name == name) {
      Report(Anomaly::kNameReused, heap, 0, stack, seq);
      break;
    }
  }
}

bool CustomHeaps::Alloc(uint32_t id, uint64_t address, uint64_t size, uint64_t stack,
                        uint64_t seq, LiveBlock* replaced) {
  Heap& heap = Find(id);
  HeapFigures& f = heap.figures;
  bool twice = heap.live.Remove(address, replaced);
  if (twice) {  // handed out twice without a free: the old one ends
    f.in_use_bytes -= replaced->size;
    f.in_use_blocks -= 1;
  }
  heap.dead.erase(address);
  heap.live.Insert(address, {size, stack, false});
  f.allocations += 1;
  f.allocated_bytes += size;
  f.in_use_bytes += size;
  f.in_use_blocks += 1;
  if (f.in_use_bytes > f.peak_bytes) {
    f.peak_bytes = f.in_use_bytes;
    f.peak_blocks = f.in_use_blocks;
    f.peak_seq = seq;
  }
  return twice;
}

bool CustomHeaps::Free(uint32_t id, uint64_t address, uint64_t stack, uint64_t seq,
                       LiveBlock* freed) {
  Heap& heap = Find(id);
  if (heap.figures.destroyed) {
    Report(Anomaly::kFreeAfterDestroy, heap, address, stack, seq);
    return false;
  }
  if (!heap.live.Remove(address, freed)) {
    auto dead = heap.dead.find(address);
    Anomaly::Kind kind = dead == heap.dead.end()    ? Anomaly::kUnknownFree
                         : dead->second == kFreed ? Anomaly::kDoubleFree
                                                  : Anomaly::kFreeAfterReset;
    Report(kind, heap, address, stack, seq);
    return false;
  }
  heap.dead[address] = kFreed;
  heap.figures.frees += 1;
  heap.figures.in_use_bytes -= freed->size;
  heap.figures.in_use_blocks -= 1;
  return true;
}

void CustomHeaps::Release(uint32_t id, bool destroy, std::vector<LiveBlock>* released) {
  Heap& heap = Find(id);
  if (heap.figures.destroyed) return;
  heap.live.ForEach([&](uint64_t address, const LiveBlock& block) {
    released->push_back(block);
    heap.dead[address] = kReset;
  });
  heap.figures.reset_blocks += released->size();
  heap.figures.resets += destroy ? 0 : 1;
  heap.figures.in_use_bytes = heap.figures.in_use_blocks = 0;
  heap.live = AddressMap();
  if (destroy) {
    heap.figures.destroyed = true;
    heap.dead.clear();  // any later free on it is misuse, whatever the address
  }
}

std::vector<HeapFigures> CustomHeaps::Figures() const {
  std::vector<HeapFigures> out;
  for (uint32_t id : order_) out.push_back(heaps_.at(id).figures);
  return out;
}

}  // namespace memlens::analyzer
