// src/analyzer/reader/capture_reader.h
//
// ReadCapture streams a capture file into a RecordVisitor: metadata records (process, modules,
// threads, stack nodes, times) in file order, events in global sequence order (EventOrderer),
// and the END record, if any, last. A capture may hold several program images of one process
// (the agent follows exec): each starts with a process record, and everything of an image is
// delivered before the next one's process record. Memory use is bounded by the reordering window, not by
// the size of the capture.
//
// Damage is not fatal: a capture cut short (SIGKILL, full disk) or corrupt in the middle is
// read up to the damage and the status says so. Only a file that is not a readable capture at
// all (missing, empty, foreign, from a newer memlens) is an error.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "format/record_decoder.h"

namespace memlens::analyzer {

struct ReadStatus {
  uint16_t format_major = 0;
  uint16_t format_minor = 0;
  bool ended = false;       // an END record was read: the recording finished normally
  std::string damage;       // empty, or what stopped the reading early
  uint64_t bytes_read = 0;
  uint64_t missing_events = 0;  // sequence numbers never seen
  uint64_t chunks_decoded_ahead = 0;  // on the prefetching thread (the rest on the caller's)
};

// Reading part of a capture, for a replay resumed from a checkpoint of the snapshot index:
// metadata is always delivered in full, events only from program image `image` (0 is the
// first) and, in it, only from sequence number `first_seq` on. `decoding(offset)` says what to
// do with each chunk's events: deliver them, decode only their allocations (a later chunk's
// releases may name them) or step over them, reading the chunk for its metadata only (the index
// knows which chunks hold the events a snapshot needs), which is what makes such a read cheap.
struct ReadOptions {
  uint64_t image = 0;
  uint64_t first_seq = 0;
  std::function<format::EventDecoding(uint64_t chunk_offset)> decoding;  // null: deliver all
  // For the index: after each chunk, its offset in the file, the program image it ended in,
  // and the smallest and largest sequence numbers of that image's events in it (-1: none).
  std::function<void(uint64_t offset, uint64_t image, int64_t min_seq, int64_t max_seq)> on_chunk;
  // For the index: each chunk's metadata records (all but its event batches), one string a
  // chunk holding any, in file order (format::DecodeRecords).
  std::vector<std::string>* keep_metadata = nullptr;
  // The metadata the index kept: read it instead of the file, which is not opened. No event is
  // delivered; the status's format fields stay 0 (the index has them).
  const std::vector<std::string>* metadata_only = nullptr;
  // A capture still being written (memlens run indexes it as it grows): at the end of the file,
  // reading waits for more until this says the writer is done, or stops when it says cancelled.
  const std::atomic<int>* follow = nullptr;
};
enum FollowState : int { kWriterRunning = 0, kWriterDone = 1, kReadCancelled = 2 };

bool ReadCapture(const std::string& path, format::RecordVisitor* visitor, ReadStatus* status,
                 std::string* error, const ReadOptions& options = ReadOptions{});

}  // namespace memlens::analyzer
