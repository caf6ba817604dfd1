// src/analyzer/model/capture.cc: see capture.h.
#include "analyzer/model/capture.h"

#include <algorithm>
#include <vector>

#include "analyzer/reader/capture_reader.h"

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

namespace {

// As Profile::DurationSeconds, of the last program image.
class DurationProbe : public format::RecordVisitor {
 public:
  void OnProcess(const format::ProcessRecord&) override {
    last_ns_ = 0;
    end_ns_ = -1;
  }
  void OnTime(const format::TimeRecord& r) override {
    last_ns_ = std::max(last_ns_, r.monotonic_ns);
  }
  void OnEnd(const format::EndRecord& r) override {
    end_ns_ = static_cast<int64_t>(r.monotonic_ns);
  }
  double Seconds() const { return (end_ns_ >= 0 ? end_ns_ : static_cast<int64_t>(last_ns_)) / 1e9; }

 private:
  uint64_t last_ns_ = 0;
  int64_t end_ns_ = -1;
};

}  // namespace

bool Capture::DurationSeconds(double* seconds, std::string* error) {
  DurationProbe probe;
  ReadStatus status;
  ReadOptions read;
  std::vector<std::string> metadata;
  const SnapshotIndex* index = Index();
  if (index && index->end.state.blob_size && ReadIndexMetadata(*index, &metadata)) {
    read.metadata_only = &metadata;
  } else {
    read.decoding = [](uint64_t) { return format::EventDecoding::kSkip; };  // metadata is enough
  }
  if (!ReadCapture(path_, &probe, &status, error, read)) return false;
  *seconds = probe.Seconds();
  return true;
}

}  // namespace memlens::analyzer
