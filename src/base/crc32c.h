// src/base/crc32c.h
//
// CRC-32C (Castagnoli), the checksum of every capture chunk. Uses the SSE4.2 instruction when
// the CPU has it, a table otherwise. Thread-safe (no mutable state after static init).
#pragma once

#include <cstddef>
#include <cstdint>

namespace memlens {

uint32_t Crc32c(const void* data, size_t size);

}  // namespace memlens
