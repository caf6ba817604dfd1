// tests/fuzz/make_seeds.cc: turns recorded captures into the fuzz targets' seed inputs
// (make_corpus.sh runs it; the corpus is committed).
//   make_seeds raw CAPTURE OUT        the capture with its chunks stored uncompressed
//   make_seeds records CAPTURE OUT    its chunk payloads, for fuzz_records
//   make_seeds index CAPTURE OUT      the capture and CAPTURE.index, for fuzz_index
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "format/chunk.h"
#include "fuzz_input.h"

namespace {

using memlens::format::ChunkReader;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Calls f on each chunk's payload; false when the capture is not whole.
template <typename F>
bool EachPayload(const std::string& path, F f) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) return false;
  ChunkReader reader(file);
  uint16_t major, minor;
  std::string payload, error;
  bool ok = reader.ReadFileHeader(&major, &minor, &error);
  ChunkReader::Result result = ChunkReader::Result::kEnd;
  while (ok && (result = reader.Next(&payload, &error)) == ChunkReader::Result::kChunk) {
    f(payload);
  }
  std::fclose(file);
  if (!error.empty()) std::fprintf(stderr, "make_seeds: %s: %s\n", path.c_str(), error.c_str());
  return ok && result == ChunkReader::Result::kEnd;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: make_seeds raw|records|index CAPTURE OUT\n");
    return 2;
  }
  const std::string mode = argv[1], capture = argv[2];
  std::string out;
  bool ok = true;
  if (mode == "raw") {
    memlens::format::ChunkCompressor store(memlens::format::ChunkCompressor::kStoreRaw);
    out = memlens::format::EncodeFileHeader();
    ok = EachPayload(capture, [&](const std::string& p) { store.AppendChunk(p, &out); });
  } else if (mode == "records") {
    out.push_back('\0');  // every chunk's events delivered
    bool first = true;
    ok = EachPayload(capture, [&](const std::string& p) {
      if (!first) out.append(memlens::fuzz::kChunkSeparator);
      first = false;
      out.append(p);
    });
  } else if (mode == "index") {
    std::string bytes = Slurp(capture), index = Slurp(capture + ".index");
    uint32_t n = static_cast<uint32_t>(bytes.size());
    out.assign(reinterpret_cast<const char*>(&n), 4);
    out += bytes + index;
    ok = !index.empty();
  } else {
    ok = false;
  }
  if (!ok || !memlens::fuzz::WriteFile(argv[3], out)) {
    std::fprintf(stderr, "make_seeds: cannot make a %s seed of %s\n", mode.c_str(), argv[2]);
    return 1;
  }
  return 0;
}
