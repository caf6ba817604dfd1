// src/analyzer/model/snapshot_index.h
//
// The snapshot index: the replay's complete state, saved every so many events while a capture
// is replayed in full once, in a file next to the capture (CAPTURE.index). A snapshot at any
// moment then restores the nearest checkpoint before it and replays only the events since,
// reading the chunks before that point for their metadata alone. docs/snapshot-index.md has
// the file layout and the measured costs.
//
// The index is a cache: it is rebuilt whenever the capture's size or modification time, or
// kIndexVersion, differs from what it was made for, and nothing fails without one.
//
// Runs on: the analyzer's main thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/model/replay.h"

namespace memlens::analyzer {

// Bump whenever the replay's saved state (Replayer::SaveState) changes shape or meaning.
inline constexpr uint32_t kIndexVersion = 9;

// What identifies the capture an index was made from. Size and mtime alone may match a capture
// recorded again in its place (an mtime is only as fine as the kernel's clock tick); the first
// chunk's CRC covers its process record, whose pid and start time differ for every recording.
struct CaptureStamp {
  uint64_t size = 0, mtime_ns = 0;
  uint32_t first_chunk_crc = 0;  // 0 while the capture has no chunk yet
};

struct IndexCheckpoint {
  uint64_t seq = 0;           // the state before the event with this sequence number
  uint64_t prev_mark_ns = 0;  // the last time mark before it: serves snapshots at t >= this
  uint64_t events_from_offset = 0;  // no chunk before this byte holds an event from seq on
  uint64_t timeline_points = 0;     // how much of SnapshotIndex::timeline the state had
  uint64_t blob_offset = 0;         // where its compressed state lies in the index file
  uint64_t blob_size = 0;
  uint64_t raw_size = 0;
};

// A chunk of the capture holding events of the indexed image: the smallest and largest of
// their sequence numbers.
struct IndexChunk {
  uint64_t offset = 0;
  uint64_t min_seq = 0;
  uint64_t max_seq = 0;
};

// The whole capture replayed: the state once every event is in (timeline points all taken),
// the capture's metadata records (ReadOptions::keep_metadata) and how its reading ended. A view
// of the whole capture restores it and reads the metadata instead of the capture's chunks.
struct IndexEnd {
  IndexCheckpoint state;  // state.blob_size 0: the index has no end (custom heaps)
  uint64_t metadata_offset = 0, metadata_size = 0, metadata_raw_size = 0;
  uint64_t events = 0;  // the last image's events: where the replay stood
  uint64_t format_major = 0, format_minor = 0, ended = 0, bytes_read = 0;
  std::string damage;
};

struct SnapshotIndex {
  std::string path;   // of the index file
  uint64_t image = 0;  // the program image the checkpoints belong to: the capture's last
  uint64_t peak_seq = 0;
  uint64_t peak_bytes = 0;
  uint64_t peak_blocks = 0;
  uint64_t program_end_seq = 0;  // Profile::program_end_seq
  std::vector<TimelinePoint> timeline;  // the whole capture's
  std::vector<IndexCheckpoint> checkpoints;  // by seq
  std::vector<IndexChunk> chunks;            // by offset
  std::vector<Marker> markers;               // all of the image's, in order
  IndexEnd end;

  // The latest checkpoint a replay stopping before stop_seq (a peak) or at the first time
  // mark after `seconds` (@t) may start from; null when it must start from the beginning.
  const IndexCheckpoint* Before(uint64_t stop_seq) const;
  const IndexCheckpoint* BeforeTime(double seconds) const;
};

// MEMLENS_INDEX=0 in the environment: no index is used or built (the tests compare both ways).
bool IndexTurnedOff();

// Where the index of a capture lives: next to it, or in $XDG_CACHE_HOME/memlens (~/.cache)
// when the capture's folder is not writable.
std::vector<std::string> IndexPathsFor(const std::string& capture_path);

// Replays the whole capture once and writes its index. Returns false with *error when the
// capture is unreadable, or when there is no writable place for the index or the capture
// cannot have one (events are missing from it). With follow, the capture is still being
// written (ReadOptions::follow): it is read as it grows, until follow says it is complete.
bool BuildSnapshotIndex(const std::string& capture_path, SnapshotIndex* index, std::string* error,
                        const std::atomic<int>* follow = nullptr);

// Returns false when there is no index for this capture or it is stale.
bool LoadSnapshotIndex(const std::string& capture_path, SnapshotIndex* index);
// The same for a capture stamped already (Capture, capture.h): its file is not opened again.
bool LoadSnapshotIndex(const std::string& capture_path, const CaptureStamp& stamp,
                       SnapshotIndex* index);
// The capture's stamp as it is now; false when it cannot be found.
bool StatCapture(const std::string& path, CaptureStamp* stamp);
bool ReadCheckpointState(const SnapshotIndex& index, const IndexCheckpoint& checkpoint,
                         std::string* state);
bool ReadIndexMetadata(const SnapshotIndex& index, std::vector<std::string>* segments);

// Writes an index while the capture is replayed: checkpoint states go to a temporary file as
// they come; Finish adds the table and moves the file into place. Without a writable place,
// every call is a no-op and Finish returns false.
class SnapshotIndexWriter {
 public:
  explicit SnapshotIndexWriter(const std::string& capture_path);
  ~SnapshotIndexWriter();
  SnapshotIndexWriter(const SnapshotIndexWriter&) = delete;
  SnapshotIndexWriter& operator=(const SnapshotIndexWriter&) = delete;

  bool ok() const { return file_ != nullptr; }
  // Events to replay between two checkpoints: at least kMinSpacing, and at least four per
  // compressed byte of the last checkpoint, so the index stays under a quarter of a byte per
  // event (the capture takes about 3.7) while restoring a checkpoint costs no more than
  // replaying the events up to the next. MEMLENS_INDEX_SPACING overrides the minimum (tests
  // use small captures).
  uint64_t spacing() const { return spacing_; }
  void Add(uint64_t seq, std::string_view state, uint64_t timeline_points);
  void DropCheckpoints() { checkpoints_.clear(); }  // a new program image began
  // For good: the replay reached state that checkpoints do not save (custom heaps).
  void StopCheckpoints() {
    checkpoints_.clear();
    stopped_ = true;
  }
  // The replay's state after the last event, with the metadata and the read status (IndexEnd).
  void SetEnd(std::string_view state, uint64_t timeline_points, uint64_t events,
              const std::vector<std::string>& metadata, const ReadStatus& status);
  // The capture was still growing when the writer was made (memlens run indexes it as it is
  // written): the index is for its size and modification time now.
  void Restat();
  // index: all but the checkpoints filled in, chunks included; times: the indexed image's.
  bool Finish(SnapshotIndex* index, const std::vector<format::TimeRecord>& times);

 private:
  static constexpr uint64_t kMinSpacing = uint64_t{1} << 20;
  std::string capture_path_, final_path_, temp_path_;
  std::FILE* file_ = nullptr;
  uint64_t offset_ = 0;
  uint64_t spacing_ = kMinSpacing;
  uint64_t min_spacing_ = kMinSpacing;
  CaptureStamp capture_;
  std::vector<IndexCheckpoint> checkpoints_;
  IndexEnd end_;
  bool stopped_ = false;
  bool WriteBlob(std::string_view raw, uint64_t* offset, uint64_t* stored_size);
};

// Varint byte strings for the saved state.
class StateReader {
 public:
  explicit StateReader(std::string_view data)
      : p_(reinterpret_cast<const uint8_t*>(data.data())), end_(p_ + data.size()) {}
  uint64_t Next();
  std::string Text();  // a varint length, then the bytes
  bool ok() const { return ok_; }
  void Fail() { ok_ = false; }  // the caller found a value implausible
  bool AtEnd() const { return p_ == end_; }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
  bool ok_ = true;
};

}  // namespace memlens::analyzer
