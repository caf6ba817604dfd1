// src/agent/api/string_table.cc: see string_table.h. Open addressing over a fixed table of
// slots keyed by a hash of the text; the text goes to a fixed store, each name once.
#include "agent/api/string_table.h"

#include <atomic>
#include <cstring>

namespace memlens::agent {

std::atomic<void (*)(uint32_t)> g_on_new_string{nullptr};
namespace {

constexpr size_t kSlots = kMaxStringIds;     // power of two; at most kSlots - 1 names
constexpr size_t kTextBytes = 1 << 20;       // static storage: untouched pages cost nothing

struct Slot {
  std::atomic<uint64_t> hash{0};  // 0: free; else the text's hash with the low bit set
  std::atomic<uint32_t> id{0};    // 0 until the text is in place
};

struct Entry {  // by id
  uint32_t offset;
  uint32_t length;
};

Slot g_slots[kSlots];
Entry g_entries[kSlots];
char g_text[kTextBytes];
std::atomic<uint32_t> g_next_id{1};
std::atomic<size_t> g_text_used{0};
std::atomic<bool> g_full{false};

uint64_t Hash(const char* text, size_t length) {  // FNV-1a: names are short
  uint64_t h = 14695981039346656037ull;
  for (size_t i = 0; i < length; ++i) {
    h ^= static_cast<unsigned char>(text[i]);
    h *= 1099511628211ull;
  }
  return h | 1;
}

bool SameText(uint32_t id, const char* text, size_t length) {
  const Entry& e = g_entries[id];
  return e.length == length && std::memcmp(g_text + e.offset, text, length) == 0;
}

// Claimed slot: store the text, give it an id, publish.
uint32_t Publish(Slot& slot, const char* text, size_t length) {
  size_t offset = g_text_used.fetch_add(length, std::memory_order_relaxed);
  uint32_t id = g_next_id.fetch_add(1, std::memory_order_relaxed);
  if (offset + length > kTextBytes || id >= kSlots) {
    g_full.store(true, std::memory_order_relaxed);
    return 0;  // the slot stays claimed and never matches: harmless
  }
  std::memcpy(g_text + offset, text, length);
  g_entries[id] = {static_cast<uint32_t>(offset), static_cast<uint32_t>(length)};
  slot.id.store(id, std::memory_order_release);
  if (void (*published)(uint32_t) = g_on_new_string.load(std::memory_order_acquire)) published(id);
  return id;
}

}  // namespace

uint32_t InternString(const char* text) {
  if (!text) return 0;
  size_t length = strnlen(text, kMaxStringLength);
  uint64_t hash = Hash(text, length);
  for (size_t probe = 0; probe < kSlots; ++probe) {
    Slot& slot = g_slots[(hash + probe) & (kSlots - 1)];
    uint64_t seen = slot.hash.load(std::memory_order_acquire);
    if (seen == 0) {
      if (g_full.load(std::memory_order_relaxed)) return 0;
      if (slot.hash.compare_exchange_strong(seen, hash, std::memory_order_acq_rel)) {
        return Publish(slot, text, length);
      }
      // Another thread claimed it first: `seen` now holds its hash; compare below.
    }
    if (seen != hash) continue;
    uint32_t id = slot.id.load(std::memory_order_acquire);
    if (id != 0 && SameText(id, text, length)) return id;
    // A different text with the same hash, or one being published: look further.
  }
  return 0;
}

const char* StringText(uint32_t id, size_t* length) {
  if (id == 0 || id >= kSlots || id >= g_next_id.load(std::memory_order_acquire)) {
    *length = 0;
    return "";
  }
  *length = g_entries[id].length;
  return g_text + g_entries[id].offset;
}

}  // namespace memlens::agent
