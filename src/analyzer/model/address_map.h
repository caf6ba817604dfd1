// src/analyzer/model/address_map.h
//
// AddressMap: live heap blocks by address, for pairing frees with allocations during replay.
// Open addressing with linear probing and backward-shift deletion (no tombstones), so a long
// replay with billions of malloc/free pairs never degrades. Header-only; single-threaded.
#pragma once

#include <cstdint>
#include <vector>

namespace memlens::analyzer {

struct LiveBlock {
  uint64_t size = 0;
  uint64_t stack = 0;
  bool python = false;  // allocated through Python's allocator
};

class AddressMap {
 public:
  AddressMap() : slots_(1024) {}

  // Inserts or overwrites. Returns false when the address was already live (and overwrites,
  // handing the block it held to *replaced when given).
  bool Insert(uint64_t address, LiveBlock block, LiveBlock* replaced = nullptr) {
    if ((used_ + 1) * 4 > slots_.size() * 3) Grow();
    size_t i = Find(address);
    bool fresh = slots_[i].address == kEmpty;
    if (fresh) {
      ++used_;
    } else if (replaced) {
      *replaced = slots_[i].block;
    }
    slots_[i] = {address, block};
    return fresh;
  }

  // Removes the block at address into *out. Returns false when it is not live.
  bool Remove(uint64_t address, LiveBlock* out) {
    size_t i = Find(address);
    if (slots_[i].address == kEmpty) return false;
    *out = slots_[i].block;
    // Backward shift: pull later members of the probe run into the hole.
    size_t mask = slots_.size() - 1;
    size_t hole = i;
    for (size_t j = (i + 1) & mask; slots_[j].address != kEmpty; j = (j + 1) & mask) {
      size_t home = Home(slots_[j].address);
      if (((j - home) & mask) >= ((j - hole) & mask)) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole].address = kEmpty;
    --used_;
    return true;
  }

  // The block at address into *out; false when none is live there.
  bool Get(uint64_t address, LiveBlock* out) const {
    const Slot& s = slots_[Find(address)];
    if (s.address == kEmpty) return false;
    *out = s.block;
    return true;
  }

  size_t size() const { return used_; }

  size_t table_bytes() const { return slots_.size() * sizeof(Slot); }

  // Starts loading the slot where a lookup of address begins (a hint; no effect on contents).
  void Prefetch(uint64_t address) const { __builtin_prefetch(&slots_[Home(address)]); }

  template <typename Fn>
  void ForEach(Fn&& fn) const {
    for (const Slot& s : slots_) {
      if (s.address != kEmpty) fn(s.address, s.block);
    }
  }

 private:
  // Address 0 is never a live block (malloc never returns it successfully).
  static constexpr uint64_t kEmpty = 0;
  struct Slot {
    uint64_t address = kEmpty;
    LiveBlock block;
  };

  // Fibonacci hashing: the top bits of the product mix every bit of the address, where the
  // low bits of a multiply would keep the sameness of nearby, 16-byte-aligned blocks.
  size_t Home(uint64_t address) const {
    return static_cast<size_t>((address * 0x9e3779b97f4a7c15ULL) >> shift_);
  }

  size_t Find(uint64_t address) const {
    size_t mask = slots_.size() - 1;
    size_t i = Home(address);
    while (slots_[i].address != kEmpty && slots_[i].address != address) i = (i + 1) & mask;
    return i;
  }

  void Grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    --shift_;
    size_t mask = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.address == kEmpty) continue;
      size_t i = Home(s.address);
      while (slots_[i].address != kEmpty) i = (i + 1) & mask;
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;
  size_t used_ = 0;
  int shift_ = 64 - 10;  // 64 - log2(slots_.size())
};

}  // namespace memlens::analyzer
