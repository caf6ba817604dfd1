// src/base/varint.h
//
// LEB128 unsigned varints and zigzag signed varints: the integer encoding of every record in a
// capture (docs/capture-format.md). Header-only; used by the writer thread and the analyzer,
// never on the allocation hot path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace memlens {

// Writes value's varint at out (at most 10 bytes); returns its length.
inline int EncodeVarint(uint64_t value, char* out) {
  int n = 0;
  while (value >= 0x80) {
    out[n++] = static_cast<char>(value | 0x80);
    value >>= 7;
  }
  out[n++] = static_cast<char>(value);
  return n;
}

inline void PutVarint(std::string* out, uint64_t value) {
  char buf[10];
  out->append(buf, EncodeVarint(value, buf));
}

inline uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
inline int64_t UnZigZag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

inline void PutSignedVarint(std::string* out, int64_t value) { PutVarint(out, ZigZag(value)); }

// Reads a varint from [*p, end). Returns false (leaving *p unchanged) when the input ends
// early or the varint is longer than 10 bytes: callers treat that as corruption.
inline bool GetVarint(const uint8_t** p, const uint8_t* end, uint64_t* value) {
  const uint8_t* q = *p;
  if (__builtin_expect(q < end && *q < 0x80, 1)) {  // one byte: most of a capture's varints
    *value = *q;
    *p = q + 1;
    return true;
  }
  uint64_t result = 0;
  for (int shift = 0; shift < 64 && q < end; shift += 7) {
    uint8_t byte = *q++;
    result |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (byte < 0x80) {
      *p = q;
      *value = result;
      return true;
    }
  }
  return false;
}

}  // namespace memlens
