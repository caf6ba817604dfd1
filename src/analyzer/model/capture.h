// src/analyzer/model/capture.h
//
// One capture file as an analysis found it, opened once: its path, size and modification time
// (with the first chunk's CRC: CaptureStamp), and its snapshot index, read at most once, for
// whoever needs them (LoadProfile and the load policy behind it, the commands). Without it the
// path travelled alone and each layer stat'ed the file and read the index again.
// Runs on: the analyzer's main thread.
#pragma once

#include <optional>
#include <string>

#include "analyzer/model/snapshot_index.h"

namespace memlens::analyzer {

class Capture {
 public:
  // Stamps the file now. A file that cannot be found is still a Capture: reading it says why
  // (LoadProfile's error), as it did before there was a handle.
  explicit Capture(std::string path);

  const std::string& path() const { return path_; }
  bool found() const { return found_; }
  const CaptureStamp& stamp() const { return stamp_; }

  // The capture's snapshot index, read on first use; null when it has none or a stale one, or
  // when MEMLENS_INDEX=0.
  const SnapshotIndex* Index();
  // How long the capture lasts (Profile::DurationSeconds of its Outline without markers), for
  // the views that place moments across it before they load it (report's checkpoints).
  bool DurationSeconds(double* seconds, std::string* error);
  // The capture's outline, for a view that places moments across it before it loads it
  // (leaks --growth): of its last program image, the Profile fields process, has_process,
  // strings, times, end, markers and program_end_seq (so SecondsAt and DurationSeconds answer
  // as the loaded profile's will), read without replaying an event: from the index when it has
  // one (its markers, its copy of the metadata, no chunk of the capture read), else from the
  // capture, its events decoded only (not even that without `markers`: then the outline has no
  // markers and no program end). Returns false with one line in *error when unreadable.
  bool Outline(Profile* outline, std::string* error, bool markers = true);
  // An index just built for it (BuildSnapshotIndex, or a replay that wrote one).
  void SetIndex(const SnapshotIndex& index) { index_ = index; }

 private:
  std::string path_;
  bool found_ = false;
  CaptureStamp stamp_;
  std::optional<std::optional<SnapshotIndex>> index_;  // outer: read yet; inner: found
};

}  // namespace memlens::analyzer
