// src/base/byte_column.h
//
// ByteColumn: a growable byte array for the capture's column encoders (format/record_encoder),
// which append a byte or a varint per event to each of seven columns. Each append makes one
// capacity check and plain stores: std::string's push_back was an out-of-line call per byte,
// and append(buf, n) a call to memcpy per varint, together some 150 instructions per event on
// the writer thread (bench/instruction_cost.py). Growth does not zero-fill.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "base/varint.h"

namespace memlens {

class ByteColumn {
 public:
  size_t size() const { return static_cast<size_t>(end_ - begin_); }
  const char* data() const { return begin_; }
  void clear() { end_ = begin_; }

  void PutByte(uint8_t byte) {
    Reserve(1);
    *end_++ = static_cast<char>(byte);
  }
  void PutVarint(uint64_t value) {
    Reserve(10);
    end_ += EncodeVarint(value, end_);
  }
  void PutSignedVarint(int64_t value) { PutVarint(ZigZag(value)); }
  // Room for n bytes at the end, for the caller to write; they are part of the column now.
  char* Append(size_t n) {
    Reserve(n);
    char* at = end_;
    end_ += n;
    return at;
  }

 private:
  void Reserve(size_t n) {
    if (static_cast<size_t>(cap_ - end_) < n) Grow(n);
  }
  void Grow(size_t n) {
    const size_t used = size();
    size_t capacity = cap_ - begin_ ? 2 * static_cast<size_t>(cap_ - begin_) : 4096;
    while (capacity - used < n) capacity *= 2;
    std::unique_ptr<char[]> bigger(new char[capacity]);
    if (used) std::memcpy(bigger.get(), begin_, used);
    storage_ = std::move(bigger);
    begin_ = storage_.get();
    end_ = begin_ + used;
    cap_ = begin_ + capacity;
  }

  std::unique_ptr<char[]> storage_;
  char* begin_ = nullptr;
  char* end_ = nullptr;
  char* cap_ = nullptr;
};

}  // namespace memlens
