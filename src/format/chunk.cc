// src/format/chunk.cc: see chunk.h.
#include "format/chunk.h"

#include <zstd.h>

#include <algorithm>
#include <cstring>

#include "base/crc32c.h"
#include "format/records.h"

namespace memlens::format {
namespace {

void PutU16(char* p, uint16_t v) { std::memcpy(p, &v, 2); }  // captures are little-endian
void PutU32(char* p, uint32_t v) { std::memcpy(p, &v, 4); }
uint16_t GetU16(const char* p) { uint16_t v; std::memcpy(&v, p, 2); return v; }
uint32_t GetU32(const char* p) { uint32_t v; std::memcpy(&v, p, 4); return v; }

// The checksum covers the header fields after the magic (sizes, codec) and the stored bytes, so
// a corrupt length is caught as surely as a corrupt payload.
uint32_t ChunkChecksum(const char* header, const char* stored, size_t stored_size) {
  std::string covered(header + 4, 12);
  covered.append(stored, stored_size);
  return Crc32c(covered.data(), covered.size());
}

}  // namespace

std::string EncodeFileHeader() {
  char header[kFileHeaderSize] = {};
  std::memcpy(header, kFileMagic, 8);
  PutU16(header + 8, kFormatMajor);
  PutU16(header + 10, kFormatMinor);
  PutU32(header + 12, 0);  // flags, none defined yet
  return std::string(header, sizeof header);
}

ChunkCompressor::ChunkCompressor(int zstd_level) : cctx_(ZSTD_createCCtx()), level_(zstd_level) {}

// One zstd frame whose blocks start at the breaks (ZSTD_e_flush ends a block) into `into`,
// which holds the worst case (AppendChunk's bound), so every call completes. Returns the size, or the
// payload's size when zstd fails (the chunk is then stored raw).
size_t ChunkCompressor::CompressInBlocks(std::string_view payload,
                                         const std::vector<size_t>& breaks, char* into,
                                         size_t capacity) {
  ZSTD_CCtx_reset(cctx_, ZSTD_reset_session_only);
  ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, level_);
  ZSTD_CCtx_setPledgedSrcSize(cctx_, payload.size());
  ZSTD_outBuffer output{into, capacity, 0};
  size_t from = 0;
  for (size_t i = 0; i <= breaks.size(); ++i) {
    const bool last = i == breaks.size();
    const size_t to = last ? payload.size() : std::min(std::max(breaks[i], from), payload.size());
    ZSTD_inBuffer input{payload.data() + from, to - from, 0};
    size_t left = ZSTD_compressStream2(cctx_, &output, &input, last ? ZSTD_e_end : ZSTD_e_flush);
    if (ZSTD_isError(left) || left != 0 || input.pos != input.size) return payload.size();
    from = to;
  }
  return output.pos;
}

ChunkCompressor::~ChunkCompressor() { ZSTD_freeCCtx(cctx_); }

void ChunkCompressor::AppendChunk(std::string_view payload, std::string* out,
                                  const std::vector<size_t>* breaks) {
  // Compressed straight into *out, after room for the header: no scratch copy of the chunk,
  // whose pages would stay resident in the recorded program (the writer runs there).
  const size_t start = out->size();
  const size_t body = start + kChunkHeaderSize;
  size_t n = 0;
  if (level_ != kStoreRaw) {
    // Each block may add a 3-byte block header to zstd's one-block bound.
    const size_t bound =
        ZSTD_compressBound(payload.size()) + (breaks ? 3 * (breaks->size() + 1) : 0);
    out->resize(body + bound);
    n = breaks && !breaks->empty()
            ? CompressInBlocks(payload, *breaks, out->data() + body, bound)
            : ZSTD_compressCCtx(cctx_, out->data() + body, bound, payload.data(), payload.size(),
                                level_);
  }
  Codec codec = Codec::kZstd;
  if (level_ == kStoreRaw || ZSTD_isError(n) || n >= payload.size()) {
    codec = Codec::kRaw;
    out->resize(body);
    out->append(payload);
    n = payload.size();
  } else {
    out->resize(body + n);
  }
  char* header = out->data() + start;
  PutU32(header, kChunkMagic);
  PutU32(header + 4, static_cast<uint32_t>(n));
  PutU32(header + 8, static_cast<uint32_t>(payload.size()));
  header[12] = static_cast<char>(codec);
  PutU32(header + 16, ChunkChecksum(header, out->data() + body, n));
}

ChunkReader::ChunkReader(std::FILE* file) : file_(file), dctx_(ZSTD_createDCtx()) {}
ChunkReader::~ChunkReader() { ZSTD_freeDCtx(dctx_); }

bool ChunkReader::ReadFileHeader(uint16_t* major, uint16_t* minor, std::string* error) {
  char header[kFileHeaderSize];
  size_t n = std::fread(header, 1, sizeof header, file_);
  offset_ += n;
  if (n == 0) {
    *error = "the file is empty, not a memlens capture";
    return false;
  }
  if (n < sizeof header || std::memcmp(header, kFileMagic, 8) != 0) {
    *error = "not a memlens capture (bad file header)";
    return false;
  }
  *major = GetU16(header + 8);
  *minor = GetU16(header + 10);
  if (*major > kFormatMajor) {
    *error = "capture format version " + std::to_string(*major) + "." + std::to_string(*minor) +
             " is newer than this memlens reads (" + std::to_string(kFormatMajor) + "." +
             std::to_string(kFormatMinor) + "): upgrade memlens";
    return false;
  }
  if (*major < kOldestReadableMajor) {  // nothing older was released
    *error = "capture format version " + std::to_string(*major) + "." + std::to_string(*minor) +
             " is older than this memlens reads (" + std::to_string(kOldestReadableMajor) +
             ".0 and later): record it again";
    return false;
  }
  return true;
}

ChunkReader::Result ChunkReader::Next(std::string* payload, std::string* error) {
  char header[kChunkHeaderSize];
  size_t n = std::fread(header, 1, sizeof header, file_);
  if (n == 0) return Result::kEnd;
  const std::string where = "at byte " + std::to_string(offset_);
  if (n < sizeof header) {
    *error = "capture is truncated " + where + " (incomplete chunk header)";
    return Result::kTruncated;
  }
  uint32_t stored_size = GetU32(header + 4);
  uint32_t raw_size = GetU32(header + 8);
  auto codec = static_cast<Codec>(header[12]);
  if (GetU32(header) != kChunkMagic || raw_size > kMaxChunkRawSize ||
      stored_size > ZSTD_compressBound(kMaxChunkRawSize) ||
      (codec != Codec::kRaw && codec != Codec::kZstd)) {
    *error = "capture is corrupt " + where + " (bad chunk header)";
    return Result::kCorrupt;
  }
  stored_.resize(stored_size);
  size_t got = std::fread(stored_.data(), 1, stored_size, file_);
  if (got < stored_size) {
    *error = "capture is truncated " + where + " (the last chunk is incomplete)";
    return Result::kTruncated;
  }
  // A fuzzer's mutations would almost never get past the checksum to the records behind it.
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
  if (ChunkChecksum(header, stored_.data(), stored_size) != GetU32(header + 16)) {
    *error = "capture is corrupt " + where + " (chunk checksum mismatch)";
    return Result::kCorrupt;
  }
#endif
  offset_ += sizeof header + stored_size;
  if (codec == Codec::kRaw) {
    if (raw_size != stored_size) {
      *error = "capture is corrupt " + where + " (raw chunk size mismatch)";
      return Result::kCorrupt;
    }
    payload->swap(stored_);
    return Result::kChunk;
  }
  payload->resize(raw_size);
  size_t out = ZSTD_decompressDCtx(dctx_, payload->data(), raw_size, stored_.data(), stored_size);
  if (ZSTD_isError(out) || out != raw_size) {
    *error = "capture is corrupt " + where + " (chunk does not decompress)";
    return Result::kCorrupt;
  }
  return Result::kChunk;
}

}  // namespace memlens::format
