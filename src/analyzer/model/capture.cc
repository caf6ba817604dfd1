// src/analyzer/model/capture.cc: see capture.h.
#include "analyzer/model/capture.h"

namespace memlens::analyzer {

Capture::Capture(std::string path) : path_(std::move(path)) {
  found_ = StatCapture(path_, &stamp_);
}

const SnapshotIndex* Capture::Index() {
  if (!index_) {
    SnapshotIndex index;
    bool loaded = found_ && !IndexTurnedOff() && LoadSnapshotIndex(path_, stamp_, &index);
    index_ = loaded ? std::optional<SnapshotIndex>(std::move(index)) : std::nullopt;
  }
  return *index_ ? &**index_ : nullptr;
}

}  // namespace memlens::analyzer
