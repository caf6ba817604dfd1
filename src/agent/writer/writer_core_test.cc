// The writer's loop (writer_core.h) and its chunk pipeline (chunk_pipeline.h) as the hosted
// writer uses them. Reading a ring another process writes: ids an event names (strings, Python
// code) come from the program's memory, and a program that scribbled over its ring must not
// make the writer index or size anything by them.
#include "agent/writer/writer_core.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "analyzer/reader/capture_reader.h"
#include "base/memory_file.h"
#include "format/record_decoder.h"

namespace memlens::agent {
namespace {

class FakeIo : public WriterIo {
 public:
  ThreadBuffer buffer;
  std::unique_ptr<uint8_t[]> bytes{new uint8_t[ThreadBuffer::kInitialCapacity]()};
  uint32_t announced = 0;
  void* stacks = nullptr;
  std::string capture;
  std::vector<uint64_t> strings_described, codes_described;
  bool is_checked = true;  // a hosted writer's ring (false: the in-process writer's)
  std::function<bool(uint64_t)> alive = [](uint64_t) { return true; };

  FakeIo() {
    buffer.data = bytes.get();
    buffer.state.store(ThreadBuffer::kActive);
    buffer.tid = static_cast<uint64_t>(gettid());
  }
  ~FakeIo() override { Writer::DeleteThreadStacks(stacks); }

  // One record: `words` after the header (the `kept` word first when kHasStack).
  void Add(uint64_t seq, format::EventKind kind, uint64_t address, uint64_t size, uint8_t flags,
           uint16_t frames, std::vector<uint64_t> words) {
    const auto record = static_cast<uint32_t>(sizeof(RawEvent) + words.size() * 8);
    RawEvent* e = buffer.Reserve(record);
    *e = RawEvent{};
    e->seq = seq;
    e->address = address;
    e->size = size;
    e->kind = static_cast<uint8_t>(kind);
    e->flags = flags;
    e->frame_count = frames;
    e->record_size = record;
    std::copy(words.begin(), words.end(), reinterpret_cast<uint64_t*>(e + 1));
    buffer.Commit(record);
  }

  void Rings(std::vector<RingView>* out) override {
    out->assign(1, {&buffer, bytes.get(), is_checked ? buffer.committed_end() : ~uint64_t{0},
                    &announced, &stacks});
  }
  bool checked() const override { return is_checked; }
  bool sampling() const override { return false; }
  bool ThreadAlive(uint64_t tid) override { return alive(tid); }
  void Begin(format::RecordEncoder* meta, std::string*) override {
    meta->Process({1, 0, 0, 0, "/bin/scribbler", {"scribbler"}, "0"});
    meta->Module({1, 0x400000, "/bin/scribbler", "", {{0x400000, 0x1000}}});
  }
  bool RescanModules(format::RecordEncoder*, std::string*) override { return false; }
  bool KnownModule(uint64_t) override { return true; }
  void DescribePythonCode(uint64_t id, format::RecordEncoder*, std::string*) override {
    codes_described.push_back(id);
  }
  void DescribeString(uint64_t id, format::RecordEncoder* meta, std::string*) override {
    strings_described.push_back(id);
    meta->String({id, "name"});
  }
  EvalLoopRange EvalLoop() override { return {0x400100, 0x400200}; }
  uint64_t NextSeq(uint64_t drained_next) override { return drained_next; }
  uint64_t TakeDroppedEvents() override { return 0; }
  uint64_t DroppedEventsTotal() override { return 0; }
  uint64_t UnrecordedChildren() override { return 0; }
  uint64_t StartMonotonicNs() override { return 0; }
  bool Resident(uint64_t*) override { return false; }
  bool Mappings(uint64_t, format::MappingsRecord*) override { return false; }
  bool Write(const std::string& bytes) override {
    capture += bytes;
    return true;
  }
  bool ImageReplaced() override { return false; }
};

class Count final : public format::RecordVisitor {
 public:
  std::vector<uint64_t> seqs;
  uint64_t end_events = ~uint64_t{0};
  void OnEvent(const format::Event& e) override { seqs.push_back(e.seq); }
  void OnEnd(const format::EndRecord& r) override { end_events = r.events; }
};

TEST(WriterCheckedRing, ScribbledIdsAreNeitherIndexedNorSized) {
  FakeIo io;
  using format::EventKind;
  io.Add(0, EventKind::kMalloc, 0x1000, 16, kHasStack, 1, {0, 0x400010});
  // A marker naming string ids near 2^64: the writer's table of described names was indexed
  // (and sized, wrapping around) by them.
  io.Add(1, EventKind::kMarker, ~uint64_t{0} - 5, ~uint64_t{0} - 5, 0, 0, {});
  io.Add(2, EventKind::kHeapCreate, 7, uint64_t{1} << 20, 0, 0, {});
  // A Python frame (after the eval loop's native frame) naming a code id past every real one.
  io.Add(3, EventKind::kMalloc, 0x2000, 32, kHasStack, 1,
         {0, 0x400150, format::PythonFrameIp(uint64_t{1} << 30, 12)});
  io.Add(4, EventKind::kMarker, 5, 0, 0, 0, {});
  WriterControl control;
  control.stop_requested.store(1);
  Writer(&io, &control, true).Run();

  EXPECT_EQ(io.strings_described, std::vector<uint64_t>{5});  // the one real id
  EXPECT_TRUE(io.codes_described.empty());
  MemoryFile capture(io.capture);  // the reader takes a path
  ASSERT_TRUE(capture.ok());
  Count count;
  analyzer::ReadStatus status;
  std::string error;
  ASSERT_TRUE(analyzer::ReadCapture(capture.path(), &count, &status, &error)) << error;
  EXPECT_EQ(count.seqs, (std::vector<uint64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(count.end_events, 5u);
}

// The payloads of a capture's chunks, in order.
std::vector<std::string> ChunksOf(const std::string& capture) {
  std::FILE* file = fmemopen(const_cast<char*>(capture.data()), capture.size(), "rb");
  format::ChunkReader reader(file);
  uint16_t major = 0, minor = 0;
  std::string error, payload;
  std::vector<std::string> chunks;
  if (reader.ReadFileHeader(&major, &minor, &error)) {
    while (reader.Next(&payload, &error) == format::ChunkReader::Result::kChunk) {
      chunks.push_back(payload);
    }
  }
  std::fclose(file);
  return chunks;
}

// The hosted writer's io: chunks written on the pipeline's thread (chunk_pipeline.h), each
// write slow (a busy disk).
class SlowPipelinedIo : public FakeIo {
 public:
  std::mutex mutex;
  std::thread::id writing_thread;
  bool pipelined() const override { return true; }
  bool Write(const std::string& bytes) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::lock_guard<std::mutex> lock(mutex);
    writing_thread = std::this_thread::get_id();
    capture += bytes;
    return true;
  }
  std::vector<std::string> Chunks() {
    std::lock_guard<std::mutex> lock(mutex);
    return ChunksOf(capture);
  }
};

TEST(ChunkPipeline, WritesEveryChunkWholeInOrderOnItsOwnThread) {
  SlowPipelinedIo io;
  io.capture = format::EncodeFileHeader();  // the writer's part
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
    EXPECT_EQ(io.Chunks(), sent);  // all four, before the pipeline ends
    EXPECT_NE(io.writing_thread, std::this_thread::get_id());
    std::string last = "after the wait";
    sent.push_back(last);
    pipeline.Submit(&last, {});
  }  // the destructor writes what is pending
  EXPECT_EQ(io.Chunks(), sent);
}

// memlens_flush and the exec pause rely on it: a flush ticket is done only once its chunk is in
// the capture, although a pipelined writer hands chunks to another thread.
TEST(WriterPipelined, AFlushIsDoneOnlyOnceItsChunkIsWritten) {
  SlowPipelinedIo io;
  io.Add(0, format::EventKind::kMalloc, 0x1000, 16, kHasStack, 1, {0, 0x400010});
  WriterControl control;
  std::thread writer([&] { Writer(&io, &control, true).Run(); });
  control.flush_requested.store(1, std::memory_order_release);
  control.wake.fetch_add(1);
  while (control.flush_done.load(std::memory_order_acquire) != 1) std::this_thread::yield();
  // The process and module records' chunk, then the one the flush ended, with the event (a
  // round that flushed on its own timer in between adds one).
  EXPECT_GE(io.Chunks().size(), 2u);
  control.stop_requested.store(1, std::memory_order_release);
  control.wake.fetch_add(1);
  writer.join();
  EXPECT_GE(io.Chunks().size(), 3u);  // and the END record's
}

// The mappings are read as the program starts and before each END record, and in between at
// most every 100 ms and no sooner than 100 times the last reading's duration after its start.
class MappingsIo : public FakeIo {
 public:
  std::chrono::milliseconds cost{0};
  int readings = 0;
  bool growing = false;  // each reading finds one more page resident (up to 15)
  bool Mappings(uint64_t max_pages, format::MappingsRecord* out) override {
    EXPECT_GT(max_pages, 0u);
    ++readings;
    std::this_thread::sleep_for(cost);
    out->page_size = 4096;
    out->mappings.assign(1, {});
    out->mappings[0].start = 0x10000;
    out->mappings[0].end = 0x20000;
    out->mappings[0].rss = growing ? 0x1000 * std::min(readings, 15) : 0x3000;
    out->mappings[0].page_runs = growing ? std::vector<uint64_t>{} : std::vector<uint64_t>{1, 2};
    return true;
  }
};

class MappingsSeen final : public format::RecordVisitor {
 public:
  std::vector<format::MappingsRecord> records;
  void OnMappings(const format::MappingsRecord& r) override { records.push_back(r); }
};

std::vector<format::MappingsRecord> MappingsOf(const std::string& capture) {
  MappingsSeen seen;
  format::DecodeState state;
  std::string error;
  for (const std::string& payload : ChunksOf(capture)) {
    EXPECT_TRUE(format::DecodeRecords(payload, &seen, &error, format::EventDecoding::kDeliver,
                                      &state))
        << error;
  }
  return seen.records;
}

TEST(WriterMappings, ReadAtTheStartAndBeforeTheEnd) {
  MappingsIo io;
  io.Add(0, format::EventKind::kMalloc, 0x1000, 16, kHasStack, 1, {0, 0x400010});
  io.Add(1, format::EventKind::kMalloc, 0x2000, 16, kHasStack, 1, {0, 0x400020});
  WriterControl control;
  control.stop_requested.store(1);
  Writer(&io, &control, true).Run();
  std::vector<format::MappingsRecord> records = MappingsOf(io.capture);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].seq, 2u);  // the events in the rings by the reading's end: drained
  EXPECT_EQ(records[1].seq, 2u);  // and nothing since
  EXPECT_EQ(records[1].mappings.size(), 1u);
  EXPECT_EQ(records[1].mappings[0].page_runs, (std::vector<uint64_t>{1, 2}));
  EXPECT_GE(records[1].monotonic_ns, records[0].monotonic_ns);
}

// Runs the writer for `ms` and returns how many readings it took.
int ReadingsIn(MappingsIo* io, int ms) {
  WriterControl control;
  std::thread writer([&] { Writer(io, &control, true).Run(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  control.stop_requested.store(1, std::memory_order_release);
  control.wake.fetch_add(1);
  writer.join();
  return io->readings;
}

TEST(WriterMappings, AtMostEvery100MsAndAtMostOnePercentOfTheTime) {
  MappingsIo cheap;
  // 550 ms: the start's, about 5 more, the end's (a loaded machine may give fewer).
  const int cheap_readings = ReadingsIn(&cheap, 550);
  EXPECT_LE(cheap_readings, 2 + 5);
  EXPECT_GE(cheap_readings, 3);
  MappingsIo costly;
  costly.cost = std::chrono::milliseconds(4);  // the next no sooner than 400 ms after
  EXPECT_LE(ReadingsIn(&costly, 550), 2 + 1);
}

// A reading the same as the last one written is left out, but for one a second; one that
// differs is written.
TEST(WriterMappings, TheSameReadingIsWrittenOnceASecond) {
  MappingsIo same;
  ReadingsIn(&same, 550);
  EXPECT_GE(same.readings, 3);
  EXPECT_EQ(MappingsOf(same.capture).size(), 2u);  // the start's and the end's
  MappingsIo growing;
  growing.growing = true;
  ReadingsIn(&growing, 550);
  EXPECT_EQ(MappingsOf(growing.capture).size(), static_cast<size_t>(growing.readings));
}

// A thread's ring and a new thread that takes it over once the thread has exited
// (AcquireThreadBuffer), against the writer that retires exited threads' rings: the writer
// looks at the old thread's tid, and the new thread takes the ring over (kActive, kClaimed,
// kActive again, with its own tid and thread_index) before the writer's compare-exchange.
TEST(WriterRetire, ARingTakenOverMeanwhileStaysTheNewThreads) {
  FakeIo io;
  io.is_checked = false;
  io.buffer.thread_index = 1;
  io.buffer.tid = 111;
  io.alive = [&](uint64_t tid) {
    if (tid != 111) return true;
    int expected = ThreadBuffer::kActive;
    EXPECT_TRUE(io.buffer.state.compare_exchange_strong(expected, ThreadBuffer::kClaimed));
    io.buffer.thread_index = 2;
    io.buffer.tid = 222;
    io.buffer.state.store(ThreadBuffer::kActive);
    return false;  // 111 has exited
  };
  WriterControl control;
  control.stop_requested.store(1);
  Writer(&io, &control, true).Run();
  EXPECT_EQ(io.buffer.state.load(), ThreadBuffer::kActive) << "the live thread's ring was freed";
}

// A hosted writer takes each ring's end before draining it: a thread that commits its last
// records and exits between that and the look for exited threads must still have them drained
// before its ring is freed.
TEST(WriterRetire, AnExitedThreadsLastRecordsAreDrainedBeforeItsRingIsFreed) {
  FakeIo io;
  using format::EventKind;
  io.Add(0, EventKind::kMalloc, 0x1000, 16, 0, 0, {});
  bool exited = false;
  io.alive = [&](uint64_t) {
    if (!exited) {  // its last records (the frees of thread-exit code, say), then it exits
      io.Add(1, EventKind::kMalloc, 0x2000, 16, 0, 0, {});
      io.Add(2, EventKind::kMalloc, 0x3000, 16, 0, 0, {});
      exited = true;
    }
    return false;
  };
  WriterControl control;
  std::thread stopper([&] {  // a few rounds, so that the ring is looked at and then freed
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    control.stop_requested.store(1);
  });
  Writer(&io, &control, true).Run();
  stopper.join();
  MemoryFile capture(io.capture);
  ASSERT_TRUE(capture.ok());
  Count count;
  analyzer::ReadStatus status;
  std::string error;
  ASSERT_TRUE(analyzer::ReadCapture(capture.path(), &count, &status, &error)) << error;
  EXPECT_EQ(count.seqs, (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_EQ(io.buffer.state.load(), ThreadBuffer::kFree);
  EXPECT_TRUE(io.buffer.Drained()) << "a free ring with records left in it";
}

}  // namespace
}  // namespace memlens::agent
