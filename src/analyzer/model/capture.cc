// src/analyzer/model/capture.cc: see capture.h.
#include "analyzer/model/capture.h"

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

// The records Capture::Outline keeps, as the replay keeps them (replayer.h): an exec's process
// record starts the outline over.
class OutlineProbe : public format::RecordVisitor {
 public:
  explicit OutlineProbe(Profile* p) : p_(p) {}
  void OnProcess(const format::ProcessRecord& r) override {
    Profile fresh;
    fresh.path = p_->path;
    *p_ = std::move(fresh);
    p_->process = r;
    p_->has_process = true;
  }
  void OnString(const format::StringRecord& r) override { p_->strings[r.id] = r.text; }
  void OnTime(const format::TimeRecord& r) override { p_->times.push_back(r); }
  void OnEnd(const format::EndRecord& r) override { p_->end = r; }
  void OnEvent(const format::Event& e) override {
    using format::EventKind;
    if (e.kind == EventKind::kMarker || e.kind == EventKind::kSnapshot) {
      p_->markers.push_back({p_->StringOf(e.address), e.size ? p_->StringOf(e.size) : "",
                             e.kind == EventKind::kSnapshot, e.seq});
    }
    if (e.kind == EventKind::kProgramEnd && p_->program_end_seq == 0) p_->program_end_seq = e.seq;
  }

 private:
  Profile* p_;
};

}  // namespace

bool Capture::Outline(Profile* outline, std::string* error, bool markers) {
  *outline = Profile();
  outline->path = path_;
  OutlineProbe probe(outline);
  ReadOptions read;
  std::vector<std::string> metadata;
  const SnapshotIndex* index = Index();
  const bool indexed = index && index->end.state.blob_size && ReadIndexMetadata(*index, &metadata);
  if (indexed) {
    read.metadata_only = &metadata;
  } else if (!markers) {
    read.decoding = [](uint64_t) { return format::EventDecoding::kSkip; };  // metadata is enough
  }
  if (!ReadCapture(path_, &probe, &outline->read, error, read)) return false;
  if (indexed) {
    outline->markers = index->markers;
    outline->program_end_seq = index->program_end_seq;
  }
  return true;
}

bool Capture::DurationSeconds(double* seconds, std::string* error) {
  Profile outline;
  if (!Outline(&outline, error, /*markers=*/false)) return false;
  *seconds = outline.DurationSeconds();
  return true;
}

}  // namespace memlens::analyzer
