// ChunkPipeline (chunk_pipeline.h): chunks reach the capture whole, in the order submitted, and
// Wait returns only once all of them are written, while Write is slow.
#include "agent/writer/chunk_pipeline.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "agent/writer/writer_core.h"

namespace memlens::agent {
namespace {

class SlowIo : public WriterIo {
 public:
  std::string capture = format::EncodeFileHeader();
  std::thread::id writing_thread;
  void Rings(std::vector<RingView>*) override {}
  bool checked() const override { return true; }
  bool sampling() const override { return false; }
  bool ThreadAlive(uint64_t) override { return true; }
  void Begin(format::RecordEncoder*, std::string*) override {}
  bool RescanModules(format::RecordEncoder*, std::string*) override { return false; }
  bool KnownModule(uint64_t) override { return true; }
  void DescribePythonCode(uint64_t, format::RecordEncoder*, std::string*) override {}
  void DescribeString(uint64_t, format::RecordEncoder*, std::string*) override {}
  EvalLoopRange EvalLoop() override { return {0, 0}; }
  uint64_t NextSeq(uint64_t drained_next) override { return drained_next; }
  uint64_t TakeDroppedEvents() override { return 0; }
  uint64_t DroppedEventsTotal() override { return 0; }
  uint64_t UnrecordedChildren() override { return 0; }
  uint64_t StartMonotonicNs() override { return 0; }
  bool Resident(uint64_t*) override { return false; }
  bool Write(const std::string& bytes) override {
    writing_thread = std::this_thread::get_id();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a slow disk
    capture += bytes;
    return true;
  }
  bool ImageReplaced() override { return false; }
};

std::vector<std::string> Chunks(const std::string& capture) {
  std::FILE* file = fmemopen(const_cast<char*>(capture.data()), capture.size(), "rb");
  format::ChunkReader reader(file);
  uint16_t major = 0, minor = 0;
  std::string error, payload;
  std::vector<std::string> chunks;
  EXPECT_TRUE(reader.ReadFileHeader(&major, &minor, &error)) << error;
  while (reader.Next(&payload, &error) == format::ChunkReader::Result::kChunk) {
    chunks.push_back(payload);
  }
  std::fclose(file);
  return chunks;
}

TEST(ChunkPipeline, WritesEveryChunkWholeInOrderOnItsOwnThread) {
  SlowIo io;
  std::vector<std::string> sent;
  {
    ChunkPipeline pipeline(&io);
    for (int i = 0; i < 4; ++i) {
      std::string payload(1000 + i, static_cast<char>('a' + i));
      payload += std::to_string(i);
      sent.push_back(payload);
      pipeline.Submit(&payload, {0, 500});
      EXPECT_TRUE(payload.empty());  // handed over: the writer fills a fresh one
    }
    pipeline.Wait();
    EXPECT_EQ(Chunks(io.capture), sent);  // all four, before the pipeline ends
    EXPECT_NE(io.writing_thread, std::this_thread::get_id());
    std::string last = "after the wait";
    sent.push_back(last);
    pipeline.Submit(&last, {});
  }  // the destructor writes what is pending
  EXPECT_EQ(Chunks(io.capture), sent);
}

}  // namespace
}  // namespace memlens::agent
