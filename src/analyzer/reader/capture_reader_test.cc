// The reader decodes a full read's chunks on its prefetching thread, onto tapes the caller
// plays (record_tape.h): a visitor must hear exactly what it hears when the caller decodes
// (as a snapshot's read does), in the same order, a corrupt chunk's records before the damage
// included, and with the same damage reported.
#include "analyzer/reader/capture_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <thread>
#include <string>
#include <vector>

#include "base/memory_file.h"
#include "format/chunk.h"
#include "format/record_encoder.h"

namespace memlens::analyzer {
namespace {

using format::EventKind;

// Writes one line per record it hears, events and hints included.
class Log final : public format::RecordVisitor {
 public:
  explicit Log(bool hints) : hints_(hints) {}
  std::vector<std::string> lines;
  size_t events = 0;

  void OnProcess(const format::ProcessRecord& r) override { Add("process " + r.executable); }
  void OnModule(const format::ModuleRecord& r) override { Add("module " + r.path); }
  void OnThread(const format::ThreadRecord& r) override { Add("thread " + N(r.index)); }
  void OnStackNode(const format::StackNodeRecord& r) override {
    Add("node " + N(r.parent) + " " + N(r.ip));
  }
  void OnEvent(const format::Event& e) override {
    ++events;
    Add("event " + N(e.seq) + " " + N(static_cast<int>(e.kind)) + " " + N(e.address) + " " +
        N(e.size) + " " + N(e.stack) + " " + N(e.thread));
  }
  bool WantsUpcoming() const override { return hints_; }
  void Upcoming(const format::Event& e) override { ++hinted; (void)e; }
  void OnTime(const format::TimeRecord& r) override { Add("time " + N(r.monotonic_ns)); }
  void OnEnd(const format::EndRecord& r) override { Add("end " + N(r.events)); }
  void OnString(const format::StringRecord& r) override { Add("string " + r.text); }
  size_t hinted = 0;

 private:
  template <typename T>
  static std::string N(T v) { return std::to_string(v); }
  void Add(std::string line) { lines.push_back(std::move(line)); }
  bool hints_;
};

// `chunks` chunks: metadata and stack nodes before, between and after the event records of two
// threads written out of order; with `damaged`, the last chunk's payload ends in a record of an
// unknown type. Where each chunk ends goes to *ends.
std::string Capture(int chunks = 3, bool damaged = true, std::vector<size_t>* ends = nullptr) {
  std::string payload, file = format::EncodeFileHeader();
  format::RecordEncoder enc(&payload);
  auto end_chunk = [&] {
    enc.FinishEvents();
    format::ChunkCompressor().AppendChunk(payload, &file);
    if (ends) ends->push_back(file.size());
    payload.clear();
    enc.NextChunk();
  };
  enc.Process({1, 0, 0, 0, "/bin/test", {"test"}, "0"});
  enc.Module({1, 0x400000, "/bin/test", "", {{0x400000, 0x1000}}});
  uint64_t seq = 0;
  for (int chunk = 0; chunk < chunks; ++chunk) {
    for (int i = 0; i < 40; ++i) enc.StackNode({0, 0x401000u + 16 * (chunk * 40 + i)});
    enc.Thread({static_cast<uint64_t>(chunk + 1), 100u + chunk});
    enc.String({static_cast<uint64_t>(chunk + 1), "name" + std::to_string(chunk)});
    std::vector<format::Event> ones, twos;  // alternate numbers, thread 2's batch first
    for (int i = 0; i < 3000; ++i) {
      uint64_t a = 0x10000000 + 64 * (chunk * 3000 + i);
      ones.push_back({seq++, EventKind::kMalloc, a, 16u + i % 100, 1u + i % 40, 1});
      twos.push_back({seq++, i % 2 ? EventKind::kFree : EventKind::kCalloc, a + 32, 8, 2, 2});
    }
    for (const auto* batch : {&twos, &ones}) {
      enc.BeginEvents(batch->front().thread);
      for (const format::Event& e : *batch) enc.AddEvent(e);
      enc.EndEvents();
      enc.FinishEvents();  // a record of its own: the string and node below come between
      enc.String({10u + chunk, "between" + std::to_string(chunk)});
      enc.StackNode({0, 0x402000u + 16 * chunk});
    }
    enc.Time({1000u * (chunk + 1), seq});
    if (chunk < chunks - 1) end_chunk();
  }
  enc.FinishEvents();
  if (damaged) payload.push_back('\x7f');  // no such record type
  format::ChunkCompressor().AppendChunk(payload, &file);
  if (ends) ends->push_back(file.size());
  return file;
}

struct Read {
  Log log;
  ReadStatus status;
};

void ReadWith(const std::string& path, bool on_caller, Read* read) {
  ReadOptions options;
  if (on_caller) options.decoding = [](uint64_t) { return format::EventDecoding::kDeliver; };
  std::string error;
  ASSERT_TRUE(ReadCapture(path, &read->log, &read->status, &error, options)) << error;
}

TEST(CaptureReader, DecodingAheadDeliversWhatDecodingOnTheCallerDoes) {
  MemoryFile file(Capture());
  ASSERT_TRUE(file.ok());
  for (bool hints : {false, true}) {
    Read ahead{Log(hints), {}}, caller{Log(hints), {}};
    ReadWith(file.path(), /*on_caller=*/false, &ahead);
    ReadWith(file.path(), /*on_caller=*/true, &caller);
    EXPECT_EQ(ahead.log.events, 18000u);  // the third chunk's events precede the damage
    EXPECT_EQ(ahead.log.lines, caller.log.lines);
    // Hints are advice: the tape hands events on in longer runs than the decoder's groups, so
    // more of them are hinted; a visitor that wants none gets none.
    EXPECT_EQ(hints, ahead.log.hinted > 0);
    EXPECT_EQ(hints, caller.log.hinted > 0);
    EXPECT_NE(ahead.status.damage.find("corrupt"), std::string::npos) << ahead.status.damage;
    EXPECT_EQ(ahead.status.damage, caller.status.damage);
    EXPECT_EQ(ahead.status.bytes_read, caller.status.bytes_read);
  }
}

// Reports, on the reading thread, once it has heard `events` events.
class LogUntil final : public format::RecordVisitor {
 public:
  LogUntil(Log* log, size_t events, std::promise<void>* heard)
      : log_(log), events_(events), heard_(heard) {}
  void OnProcess(const format::ProcessRecord& r) override { log_->OnProcess(r); }
  void OnModule(const format::ModuleRecord& r) override { log_->OnModule(r); }
  void OnThread(const format::ThreadRecord& r) override { log_->OnThread(r); }
  void OnStackNode(const format::StackNodeRecord& r) override { log_->OnStackNode(r); }
  void OnEvent(const format::Event& e) override {
    log_->OnEvent(e);
    if (log_->events == events_) heard_->set_value();
  }
  void OnTime(const format::TimeRecord& r) override { log_->OnTime(r); }
  void OnEnd(const format::EndRecord& r) override { log_->OnEnd(r); }
  void OnString(const format::StringRecord& r) override { log_->OnString(r); }

 private:
  Log* log_;
  size_t events_;
  std::promise<void>* heard_;
};

// memlens run's indexer follows the capture as it is written, decoding on its own thread; once
// the program is done it hands its decoding state to the prefetching thread, which decodes the
// rest ahead (stack nodes numbered and blocks referred to across chunks, as before it).
TEST(CaptureReader, AFollowedReadDecodesAheadOnceTheWriterIsDone) {
  std::vector<size_t> ends;
  const std::string bytes = Capture(/*chunks=*/6, /*damaged=*/false, &ends);
  MemoryFile file(std::string_view(bytes).substr(0, ends[1]));
  ASSERT_TRUE(file.ok());
  std::atomic<int> follow{kWriterRunning};
  Log followed(false);
  std::promise<void> heard;
  ReadStatus status;
  std::thread reader([&] {
    LogUntil visitor(&followed, 12000, &heard);  // the two chunks written so far
    ReadOptions options;
    options.follow = &follow;
    std::string error;
    EXPECT_TRUE(ReadCapture(file.path(), &visitor, &status, &error, options)) << error;
  });
  // The prefetcher waits at the end of the file, in the read that gets the third chunk, with
  // its decision to leave that one to the caller taken; the rest come as the writer is done.
  ASSERT_EQ(heard.get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready);
  file.Append(std::string_view(bytes).substr(ends[1]));
  ASSERT_TRUE(file.ok());
  follow.store(kWriterDone);  // before the prefetcher's next poll (1 ms or more) reads on
  reader.join();
  Read caller{Log(false), {}};
  ReadWith(file.path(), /*on_caller=*/true, &caller);
  EXPECT_EQ(followed.events, 36000u);
  EXPECT_EQ(followed.lines, caller.log.lines);
  EXPECT_EQ(status.damage, "");
  EXPECT_EQ(status.bytes_read, bytes.size());
  // The third chunk was read while the writer ran; those after it, decoded ahead (all three
  // unless this thread stalled between the write and the store above).
  EXPECT_GE(status.chunks_decoded_ahead, 1u);
  EXPECT_LE(status.chunks_decoded_ahead, 3u);
}

}  // namespace
}  // namespace memlens::analyzer
