// src/analyzer/reader/capture_reader.cc: see capture_reader.h.
#include "analyzer/reader/capture_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>

#include "analyzer/reader/event_orderer.h"
#include "analyzer/reader/record_tape.h"
#include "format/chunk.h"

namespace memlens::analyzer {
namespace {

// Sends events through the orderer and holds END back until every event is out.
class OrderingVisitor final : public format::RecordVisitor {
 public:
  OrderingVisitor(format::RecordVisitor* out, const ReadOptions& options)
      : out_(out), options_(options), orderer_([out](const format::Event& e) { out->OnEvent(e); }) {}

  // A second process record is the program image that replaced the first by exec: everything
  // of the first image is delivered before it, and sequence numbers start over.
  void OnProcess(const format::ProcessRecord& r) override {
    if (seen_process_) {
      orderer_.Finish();
      orderer_.Restart();
      if (end_) out_->OnEnd(*end_);
      end_.reset();
      ++image_;
    }
    if (image_ == options_.image) orderer_.SkipTo(options_.first_seq);
    seen_process_ = true;
    StartChunk();
    out_->OnProcess(r);
  }
  void OnModule(const format::ModuleRecord& r) override { out_->OnModule(r); }
  void OnModuleUnload(const format::ModuleUnloadRecord& r) override { out_->OnModuleUnload(r); }
  void OnThread(const format::ThreadRecord& r) override { out_->OnThread(r); }
  void OnStackNode(const format::StackNodeRecord& r) override { out_->OnStackNode(r); }
  // The visitor hears of each event a few ahead of it, so that its table lookups (a live
  // block by address, a stack's state) are under way before the event is replayed.
  void OnEvents(const format::Event* events, size_t count) override {
    constexpr size_t kAhead = 8;
    const size_t hinted = count > kAhead ? count - kAhead : 0;
    for (size_t i = 0; i < count; ++i) {
      if (i < hinted) out_->Upcoming(events[i + kAhead]);
      OnEvent(events[i]);
    }
  }
  bool WantsUpcoming() const override {
    return image_ >= options_.image && out_->WantsUpcoming();
  }
  void OnEvent(const format::Event& e) override {
    chunk_max_seq_ = std::max(chunk_max_seq_, static_cast<int64_t>(e.seq));
    if (chunk_min_seq_ < 0 || static_cast<int64_t>(e.seq) < chunk_min_seq_) chunk_min_seq_ = e.seq;
    if (image_ >= options_.image) orderer_.Add(e);
  }
  void OnTime(const format::TimeRecord& r) override { out_->OnTime(r); }
  void OnEnd(const format::EndRecord& r) override { end_ = r; }
  void OnDrops(const format::DropsRecord& r) override { out_->OnDrops(r); }
  void OnPythonCode(const format::PythonCodeRecord& r) override { out_->OnPythonCode(r); }
  void OnResident(const format::ResidentRecord& r) override { out_->OnResident(r); }
  void OnMappings(const format::MappingsRecord& r) override { out_->OnMappings(r); }
  void OnString(const format::StringRecord& r) override { out_->OnString(r); }
  void OnSampling(const format::SamplingRecord& r) override { out_->OnSampling(r); }

  void StartChunk() { chunk_min_seq_ = chunk_max_seq_ = -1; }
  int64_t chunk_min_seq() const { return chunk_min_seq_; }
  int64_t chunk_max_seq() const { return chunk_max_seq_; }
  uint64_t image() const { return image_; }

  void Finish(ReadStatus* status) {
    orderer_.Finish();
    status->missing_events = orderer_.gaps();
    if (end_) {
      status->ended = true;
      out_->OnEnd(*end_);
    }
  }

 private:
  format::RecordVisitor* out_;
  const ReadOptions& options_;
  EventOrderer orderer_;
  uint64_t image_ = 0;
  int64_t chunk_min_seq_ = -1, chunk_max_seq_ = -1;
  std::optional<format::EndRecord> end_;
  bool seen_process_ = false;
};

// Reads, checks and decompresses chunks on a thread of its own, a few ahead of the replay on
// the caller's thread, so a long capture keeps both cores busy. Asked to, it decodes them there
// too (every event delivered), onto a tape the caller plays: decoding was a third of the
// caller's work. A read whose chunks' decoding depends on the replay (a snapshot's, which
// stops where the replay says) decodes on the caller's thread instead, and so does one that
// follows a capture being written until its writer is done.
class ChunkPrefetcher {
 public:
  struct Item {
    uint64_t offset = 0;      // where the chunk starts
    uint64_t end_offset = 0;  // where it ends
    format::ChunkReader::Result result = format::ChunkReader::Result::kEnd;
    std::string payload;      // empty once decoded here
    std::string why;
    bool decoded = false;     // the tape holds the chunk's records
    bool decode_ok = true;    // else decode_error says why, after the records before it
    std::string decode_error;
    RecordTape tape;
    std::string metadata;     // with keep_metadata: the chunk's records but its events
  };
  struct Decoding {
    bool ahead = false;          // decode on the prefetching thread
    bool keep_metadata = false;  // and keep each chunk's metadata (ReadOptions::keep_metadata)
    // A capture being written: decode on the caller's thread while its writer runs, then ahead
    // (the caller's DecodeState handed over in Next), once the program has left both cores free.
    const std::atomic<int>* follow = nullptr;
  };

  ChunkPrefetcher(format::ChunkReader* chunks, Decoding decoding)
      : chunks_(chunks), decoding_(decoding), ahead_(decoding.ahead),
        thread_([this] { Run(); }) {}
  ~ChunkPrefetcher() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }

  // The next chunk, or the end or the damage that stopped the reading (then always again).
  // `state` is the caller's, for the chunks that come undecoded; once the prefetching thread
  // waits to decode ahead, with every chunk it read played, it is moved there (then unused).
  void Next(Item* item, format::DecodeState* state) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return !ready_.empty() || (waiting_for_state_ && !ahead_); });
    if (ready_.empty()) {
      state_ = std::move(*state);
      ahead_ = true;
      changed_.notify_all();
      changed_.wait(lock, [this] { return !ready_.empty(); });
    }
    *item = std::move(ready_.front());
    if (item->result == format::ChunkReader::Result::kChunk) ready_.pop_front();
    changed_.notify_all();
  }

 private:
  // Chunks waiting. A decoded one takes some 50 bytes an event, 6 MiB for most chunks: one
  // waits while the caller plays another (as fast as two, measured; 30 MiB less than four).
  static constexpr size_t kAhead = 4;
  static constexpr size_t kDecodedAhead = 1;

  void Run() {
    for (;;) {
      bool ahead;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        if (!ahead_ && decoding_.follow &&
            decoding_.follow->load(std::memory_order_acquire) == kWriterDone) {
          waiting_for_state_ = true;  // Next hands the caller's state over
          changed_.notify_all();
          changed_.wait(lock, [this] { return stop_ || ahead_; });
          if (stop_) return;
        }
        ahead = ahead_;
      }
      Item item;
      item.offset = chunks_->offset();
      item.result = chunks_->Next(&item.payload, &item.why);
      item.end_offset = chunks_->offset();
      bool last = item.result != format::ChunkReader::Result::kChunk;
      if (!last && ahead) {
        // state_ is this thread's alone from here on, in file order.
        item.decode_ok = format::DecodeRecords(item.payload, &item.tape, &item.decode_error,
                                               format::EventDecoding::kDeliver, &state_,
                                               decoding_.keep_metadata ? &item.metadata : nullptr);
        item.decoded = true;
        std::string().swap(item.payload);
      }
      const size_t queue = ahead ? kDecodedAhead : kAhead;
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [this, queue] { return stop_ || ready_.size() < queue; });
      if (stop_) return;
      ready_.push_back(std::move(item));
      changed_.notify_all();
      if (last) return;
    }
  }

  format::ChunkReader* chunks_;
  const Decoding decoding_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Item> ready_;
  bool stop_ = false;
  bool ahead_;                      // chunks are decoded here, with state_
  bool waiting_for_state_ = false;  // to decode ahead from the next chunk on
  format::DecodeState state_;
  std::thread thread_;  // last: starts once the rest is set up
};

// A FILE over a capture that is still being written: a read at the end of the file waits for
// more until the writer is done, and then meets the real end; a cancelled read ends at once.
// It polls: the wait grows from 1 to 8 ms while nothing comes, so an idle program costs about
// a hundred wake-ups a second and the end of a run is seen within 8 ms.
struct FollowedFile {
  int fd;
  const std::atomic<int>* state;
  useconds_t wait_us = 1000;
};

ssize_t ReadFollowed(void* cookie, char* buffer, size_t size) {
  auto* f = static_cast<FollowedFile*>(cookie);
  for (;;) {
    int state = f->state->load(std::memory_order_acquire);
    if (state == kReadCancelled) return 0;
    ssize_t n = read(f->fd, buffer, size);
    if (n != 0 || state == kWriterDone) {  // done before this read: the end is real
      f->wait_us = 1000;
      return n;
    }
    usleep(f->wait_us);
    f->wait_us = std::min<useconds_t>(f->wait_us * 2, 8000);
  }
}

int CloseFollowed(void* cookie) {
  auto* f = static_cast<FollowedFile*>(cookie);
  int rc = close(f->fd);
  delete f;
  return rc;
}

std::FILE* OpenFollowed(const std::string& path, const std::atomic<int>* state) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  auto* cookie = new FollowedFile{fd, state};  // deleted by CloseFollowed
  std::FILE* file = fopencookie(cookie, "rb", {ReadFollowed, nullptr, nullptr, CloseFollowed});
  if (!file) CloseFollowed(cookie);
  return file;
}

// The index's copy of the metadata, read as if from the capture's chunks.
void ReadMetadataOnly(const std::vector<std::string>& segments, OrderingVisitor* ordering,
                      ReadStatus* status) {
  std::string why;
  format::DecodeState state;  // stack nodes count on from segment to segment, as from chunk to chunk
  for (const std::string& segment : segments) {
    ordering->StartChunk();
    if (!format::DecodeRecords(segment, ordering, &why, format::EventDecoding::kSkip, &state)) {
      status->damage = "the snapshot index is damaged: " + why;
      return;
    }
  }
}

}  // namespace

bool ReadCapture(const std::string& path, format::RecordVisitor* visitor, ReadStatus* status,
                 std::string* error, const ReadOptions& options) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    *error = "cannot open '" + path + "': " + std::strerror(errno);
    return false;
  }
  if (S_ISDIR(st.st_mode)) {
    *error = "'" + path + "' is a directory, not a capture";
    return false;
  }
  if (options.metadata_only) {
    OrderingVisitor ordering(visitor, options);
    ReadMetadataOnly(*options.metadata_only, &ordering, status);
    ordering.Finish(status);
    return true;
  }
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(
      options.follow ? OpenFollowed(path, options.follow) : std::fopen(path.c_str(), "rb"),
      std::fclose);
  if (!file) {
    *error = "cannot open '" + path + "': " + std::strerror(errno);
    return false;
  }
  format::ChunkReader chunks(file.get());
  std::string why;
  if (!chunks.ReadFileHeader(&status->format_major, &status->format_minor, &why)) {
    *error = "'" + path + "': " + why;
    return false;
  }
  OrderingVisitor ordering(visitor, options);
  format::DecodeState decode_state;  // decoding on this thread
  ChunkPrefetcher::Item chunk;
  {
    // Not while following a capture being written: `memlens run`'s index then takes CPU time
    // the program could use, and the tape costs some more of it. Once the program has exited,
    // what is left of the index is decoded ahead too.
    ChunkPrefetcher prefetcher(&chunks, {.ahead = !options.decoding && !options.follow,
                                         .keep_metadata = options.keep_metadata != nullptr,
                                         .follow = options.decoding ? nullptr : options.follow});
    for (;;) {
      prefetcher.Next(&chunk, &decode_state);
      status->bytes_read = chunk.end_offset;
      if (chunk.result == format::ChunkReader::Result::kEnd) break;
      if (chunk.result != format::ChunkReader::Result::kChunk) {
        status->damage = chunk.why;
        break;
      }
      ordering.StartChunk();
      std::string metadata;  // of the records delivered, even when a corrupt one follows them
      bool decoded;
      if (chunk.decoded) {
        ++status->chunks_decoded_ahead;
        chunk.tape.PlayTo(&ordering);
        decoded = chunk.decode_ok;
        why = std::move(chunk.decode_error);
        metadata = std::move(chunk.metadata);
      } else {
        auto events = options.decoding ? options.decoding(chunk.offset) : format::EventDecoding::kDeliver;
        decoded = format::DecodeRecords(chunk.payload, &ordering, &why, events, &decode_state,
                                        options.keep_metadata ? &metadata : nullptr);
      }
      if (!metadata.empty()) options.keep_metadata->push_back(std::move(metadata));
      if (!decoded) {
        status->damage = "capture is corrupt at byte " + std::to_string(chunk.end_offset) + ": " + why;
        break;
      }
      if (options.on_chunk) {
        options.on_chunk(chunk.offset, ordering.image(), ordering.chunk_min_seq(),
                         ordering.chunk_max_seq());
      }
    }
  }
  ordering.Finish(status);
  return true;
}

}  // namespace memlens::analyzer
