// src/format/chunk.h
//
// Framing of a capture file: the file header, then self-checking chunks. A chunk is written
// whole with one write() by the agent's writer thread, so a capture cut short (SIGKILL, full
// disk) stays readable up to its last complete chunk. Layout: docs/capture-format.md.
//
// Thread safety: a ChunkCompressor or ChunkReader is used by one thread at a time.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

struct ZSTD_CCtx_s;
struct ZSTD_DCtx_s;

namespace memlens::format {

inline constexpr uint32_t kChunkMagic = 0x4B434C4D;  // "MLCK" little-endian
inline constexpr size_t kChunkHeaderSize = 20;
inline constexpr uint32_t kMaxChunkRawSize = 64u << 20;
enum class Codec : uint8_t { kRaw = 0, kZstd = 1 };

std::string EncodeFileHeader();

class ChunkCompressor {
 public:
  // A level that stores every chunk as it is (Codec::kRaw): the fuzzers' seed captures, whose
  // records a mutation can then reach (tests/fuzz).
  static constexpr int kStoreRaw = -1000000;
  explicit ChunkCompressor(int zstd_level = 1);
  ~ChunkCompressor();
  ChunkCompressor(const ChunkCompressor&) = delete;
  ChunkCompressor& operator=(const ChunkCompressor&) = delete;

  // Appends header + compressed payload to *out. The payload must be at most kMaxChunkRawSize.
  // With `breaks` (ascending payload offsets), zstd starts a new block at each: a block's
  // literals share one Huffman table, so each column of an event batch (and each byte plane)
  // gets a table of its own instead of one for the mix (RecordEncoder::block_starts).
  void AppendChunk(std::string_view payload, std::string* out,
                   const std::vector<size_t>* breaks = nullptr);

 private:
  size_t CompressInBlocks(std::string_view payload, const std::vector<size_t>& breaks,
                          char* into, size_t capacity);

  ZSTD_CCtx_s* cctx_;
  int level_;
};

// Reads a capture file chunk by chunk. Never throws; problems are reported as results with a
// message that names the byte offset.
class ChunkReader {
 public:
  enum class Result { kChunk, kEnd, kTruncated, kCorrupt };

  explicit ChunkReader(std::FILE* file);
  ~ChunkReader();
  ChunkReader(const ChunkReader&) = delete;
  ChunkReader& operator=(const ChunkReader&) = delete;

  // Checks the file header. On failure returns false and sets *error to one line for the user.
  bool ReadFileHeader(uint16_t* major, uint16_t* minor, std::string* error);
  // Reads the next chunk's decompressed payload into *payload.
  Result Next(std::string* payload, std::string* error);
  uint64_t offset() const { return offset_; }

 private:
  std::FILE* file_;
  ZSTD_DCtx_s* dctx_;
  uint64_t offset_ = 0;
  std::string stored_;
};

}  // namespace memlens::format
