// src/format/reused_blocks.h
//
// ReusedBlocks: the last releases of one thread in the current chunk, by size class. Allocators
// hand a new block of a size class out of the blocks of that class freed last (glibc's tcache
// and bins, pymalloc's pools), so an allocation's address is very often one of these; it is
// then coded as the age of that release in its class, a small number, instead of an address
// (docs/capture-format.md, section 5). The writer (RecordEncoder) and every reader
// (DecodeState) keep the same lists.
//
// Memory: 60 KiB per thread that released a back-referenced block, made at its first.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "format/records.h"

namespace memlens::format {

// A class holds the sizes one allocator bin serves: 16-byte steps up to 4096 bytes (with the
// 8-byte header of glibc's chunks counted, so requests in one glibc bin share a class), then
// four classes per power of two.
inline uint32_t ReuseClass(uint64_t size) {
  if (size <= 24) return 2;  // glibc's smallest chunk, 32 bytes, serves 0..24
  if (size <= 4096) return static_cast<uint32_t>((size + 23) >> 4);  // 3..257
  int bits = 64 - __builtin_clzll(size - 1);                         // 13..64
  return 258 + static_cast<uint32_t>((bits - 13) * 4) + static_cast<uint32_t>(((size - 1) >> (bits - 3)) & 3);
}

class ReusedBlocks {
 public:
  static constexpr uint32_t kClasses = 258 + 52 * 4;
  static constexpr uint32_t kDepth = 8;  // the latest releases a class keeps

  struct Block {
    uint64_t address;
    uint32_t origin;  // the chunk whose event coded this address in full
  };

  // A new chunk: every list starts empty.
  void Clear() {
    if (lists_) std::fill(std::begin(heads_), std::end(heads_), Head{});
  }
  // A block of `size_class` was released: it takes the next of the class's kDepth slots, in
  // turn, so the release kDepth before drops out (if no allocation took it yet).
  void Push(uint32_t size_class, Block block) {
    if (!lists_) {
      lists_ = std::make_unique<List[]>(kClasses);
      Clear();
    }
    Head& head = heads_[size_class];
    head.latest = static_cast<uint8_t>((head.latest + 1) % kDepth);
    head.live = static_cast<uint8_t>(head.live | 1u << head.latest);
    List& list = lists_[size_class];
    list.address[head.latest] = block.address;
    list.origin[head.latest] = block.origin;
  }
  // The rank of the block at `address` in its class: 1 for the latest release of the class, 2
  // for the one before, and so on, counting releases whose block was taken since; 0 when it is
  // not there. The block is stored in *found.
  uint32_t Rank(uint32_t size_class, uint64_t address, Block* found) const {
    const Head head = heads_[size_class];
    if (head.live == 0) return 0;
    const List& list = lists_[size_class];
    uint32_t hits = Matches(list, address) & head.live;
    if (hits == 0) return 0;
    // Rotate so that slot `latest` lands on bit 7 and older slots below it: the highest bit
    // set is the latest hit, and 7 minus its position is its age in releases.
    uint32_t rotated = ((hits << (kDepth - 1 - head.latest)) | (hits >> (head.latest + 1))) & 0xff;
    uint32_t age = kDepth - 1 - static_cast<uint32_t>(31 - __builtin_clz(rotated));
    uint32_t slot = (head.latest + kDepth - age) % kDepth;
    *found = {address, list.origin[slot]};
    return age + 1;
  }
  // Removes the block of that rank and returns it. False when there is none (corrupt input).
  bool Take(uint32_t size_class, uint32_t rank, Block* out) {
    if (!lists_ || rank == 0 || rank > kDepth) return false;
    Head& head = heads_[size_class];
    uint32_t slot = (head.latest + kDepth + 1 - rank) % kDepth;
    if (!(head.live >> slot & 1)) return false;
    head.live = static_cast<uint8_t>(head.live & ~(1u << slot));
    *out = {lists_[size_class].address[slot], lists_[size_class].origin[slot]};
    return true;
  }

 private:
  struct Head {
    uint8_t latest;  // the slot of the latest release
    uint8_t live;    // a bit per slot: a released block no allocation took yet
  };
  struct alignas(64) List {  // the addresses, compared most, in one cache line
    uint64_t address[kDepth];
    uint32_t origin[kDepth];
  };
  static_assert(kDepth == 8, "live is one byte");
  // A bit per slot whose address is `address`. No early exit: where a block sits is too
  // random for a branch; with SSE2 two slots are compared at once (the writer ranks every
  // allocation).
  static uint32_t Matches(const List& list, uint64_t address) {
#if defined(__SSE2__)
    const __m128i wanted = _mm_set1_epi64x(static_cast<long long>(address));
    uint32_t hits = 0;
    for (uint32_t i = 0; i < kDepth; i += 2) {
      __m128i halves = _mm_cmpeq_epi32(
          _mm_load_si128(reinterpret_cast<const __m128i*>(&list.address[i])), wanted);
      // A slot matches where both its 32-bit halves do.
      __m128i both = _mm_and_si128(halves, _mm_shuffle_epi32(halves, _MM_SHUFFLE(2, 3, 0, 1)));
      hits |= static_cast<uint32_t>(_mm_movemask_pd(_mm_castsi128_pd(both))) << i;
    }
    return hits;
#else
    uint32_t hits = 0;
    for (uint32_t i = 0; i < kDepth; ++i) {
      hits |= static_cast<uint32_t>(list.address[i] == address) << i;
    }
    return hits;
#endif
  }
  std::unique_ptr<List[]> lists_;  // kClasses, made at the first Push
  Head heads_[kClasses] = {};      // empty for every class until lists_ is made
};

}  // namespace memlens::format
