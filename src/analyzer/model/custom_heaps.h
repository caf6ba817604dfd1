// src/analyzer/model/custom_heaps.h
//
// The program's own heaps, as it reported them through the instrumentation API
// (include/memlens/memlens.h): replaying their events gives each heap its figures (blocks in
// use, peak, allocations) and finds misuse (a free of a pointer the heap never handed out, a
// double free, a block freed after its heap was reset or destroyed, a heap name reused), each
// an Anomaly with the stack where it happened. A custom heap's blocks live inside memory the
// system heap already counts (the pool's backing block): they are a figure of their own, never
// added to the system heap's totals.
//
// Runs on: the analyzer's main thread, inside the replay (replay.cc).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "analyzer/model/address_map.h"

namespace memlens::analyzer {

// One custom heap's figures, at the snapshot.
struct HeapFigures {
  uint32_t id = 0;
  std::string name;
  uint64_t create_stack = 0;
  uint64_t allocations = 0;
  uint64_t allocated_bytes = 0;
  uint64_t frees = 0;          // blocks given back one by one
  uint64_t resets = 0;
  uint64_t reset_blocks = 0;   // blocks released by resets and the destroy
  uint64_t in_use_bytes = 0;
  uint64_t in_use_blocks = 0;
  uint64_t peak_bytes = 0;     // this heap's own peak (up to the snapshot)
  uint64_t peak_blocks = 0;
  uint64_t peak_seq = 0;
  bool destroyed = false;
  // The system heap's blocks and mappings that hold this heap's blocks in use at the snapshot:
  // its backing memory, already part of the system heap's figures. In a sampled capture an
  // estimate, as the system heap's figures are (of the recorded blocks, each weighted), with
  // its variances (stats.h, ErrorScale).
  uint64_t backing_bytes = 0;
  uint64_t backing_blocks = 0;
  uint64_t backing_bytes_var = 0;
  uint64_t backing_blocks_var = 0;
};

struct Anomaly {
  enum Kind { kUnknownFree, kDoubleFree, kFreeAfterReset, kFreeAfterDestroy, kNameReused };
  static constexpr int kKinds = 5;
  Kind kind = kUnknownFree;
  std::string heap;
  uint64_t address = 0;
  uint64_t stack = 0;  // where it happened
  uint64_t seq = 0;
};
const char* AnomalyName(Anomaly::Kind kind);  // "double free", ...

// Replays the custom heaps' events. The Replayer hands each event over and applies the
// returned blocks to its own figures when the heap is the one the profile describes.
class CustomHeaps {
 public:
  static constexpr size_t kMaxAnomaliesKept = 1000;  // every one is counted

  void Create(uint32_t id, const std::string& name, uint64_t stack, uint64_t seq);
  // A block handed out (an unknown heap id gets a nameless heap). Returns true with the block
  // it replaces in *replaced when the address was already in use (a free never reported).
  bool Alloc(uint32_t heap, uint64_t address, uint64_t size, uint64_t stack, uint64_t seq,
             LiveBlock* replaced);
  // A block given back. Returns true with the block in *freed; false for misuse (recorded).
  bool Free(uint32_t heap, uint64_t address, uint64_t stack, uint64_t seq, LiveBlock* freed);
  // Every block released at once (reset), and for a destroy the heap gone too.
  void Release(uint32_t heap, bool destroy, std::vector<LiveBlock>* released);

  const std::string& Name(uint32_t heap) const;
  // Calls fn(heap id, address, block) for every live block.
  template <typename Fn>
  void ForEachLive(Fn&& fn) const {
    // Not a structured binding: a lambda may capture one only from clang 16 on (the fuzz build).
    for (const auto& entry : heaps_) {
      const uint32_t id = entry.first;
      entry.second.live.ForEach([&](uint64_t a, const LiveBlock& b) { fn(id, a, b); });
    }
  }

  std::vector<HeapFigures> Figures() const;  // in creation order
  const std::vector<Anomaly>& anomalies() const { return anomalies_; }
  const uint64_t* anomaly_counts() const { return counts_; }

 private:
  enum Death : uint8_t { kFreed, kReset };
  struct Heap {
    HeapFigures figures;
    AddressMap live;
    std::unordered_map<uint64_t, Death> dead;  // released addresses not handed out again
  };
  Heap& Find(uint32_t id);
  void Report(Anomaly::Kind kind, const Heap& heap, uint64_t address, uint64_t stack,
              uint64_t seq);

  std::unordered_map<uint32_t, Heap> heaps_;
  std::vector<uint32_t> order_;
  std::vector<Anomaly> anomalies_;
  uint64_t counts_[Anomaly::kKinds] = {};
};

}  // namespace memlens::analyzer
