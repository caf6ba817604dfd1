#pragma once
// src/analyzer/model/replay_test_capture.h: hand-built captures for the model's unit tests
// (replay_test.cc, load_profile_test.cc): a capture written record by record, saved to a
// temporary file and loaded.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "analyzer/model/replay.h"
#include "format/chunk.h"
#include "format/record_encoder.h"

namespace memlens::analyzer::testing {

using format::EventKind;

class CaptureBuilder {
 public:
  explicit CaptureBuilder(uint64_t sample_rate = 0)
      : CaptureBuilder({1, 0, 0, 0, "/bin/test", {"test"}, "0"}, sample_rate) {}
  // Stacks 1..4 (depth 1) are the return addresses first_ip, first_ip + 1, ...
  explicit CaptureBuilder(const format::ProcessRecord& process, uint64_t sample_rate = 0,
                          uint64_t first_ip = 0x1000)
      : enc_(&payload_) {
    enc_.Process(process);
    if (sample_rate) enc_.Sampling({sample_rate});
    for (uint64_t i = 0; i < 4; ++i) enc_.StackNode({0, first_ip + i});
  }
  // Events are given in order; each lands in the batch of its thread.
  void Add(EventKind kind, uint64_t address, uint64_t size = 0, uint64_t stack = 0,
           uint32_t thread = 1) {
    enc_.BeginEvents(thread);
    enc_.AddEvent({seq_++, kind, address, size, stack, thread});
    enc_.EndEvents();
  }
  format::RecordEncoder& encoder() { return enc_; }
  // The next sequence number, for events written through encoder() directly.
  uint64_t NextSeq() { return seq_++; }
  // Ends the chunk being written; what follows goes into the next one.
  void NextChunk() {
    enc_.FinishEvents();
    format::ChunkCompressor().AppendChunk(payload_, &chunks_);
    payload_.clear();
    enc_.NextChunk();
  }
  std::string File(bool with_end) {
    enc_.FinishEvents();
    if (with_end) enc_.End({format::EndReason::kExit, 1000, seq_, 0, 0});
    std::string file = format::EncodeFileHeader() + chunks_;
    format::ChunkCompressor().AppendChunk(payload_, &file);
    return file;
  }

 private:
  std::string chunks_;  // the chunks ended so far
  std::string payload_;
  format::RecordEncoder enc_;
  uint64_t seq_ = 0;
};

inline std::string Save(const std::string& bytes) {
  char path[] = "/tmp/memlens-replay-test-XXXXXX";
  int fd = mkstemp(path);
  EXPECT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  close(fd);
  return path;
}

inline Profile Load(const std::string& bytes) {
  std::string path = Save(bytes);
  Profile p;
  std::string error;
  EXPECT_TRUE(LoadProfile(path, &p, &error)) << error;
  std::remove(path.c_str());
  return p;
}

}  // namespace memlens::analyzer::testing
