// src/analyzer/model/markers.cc: see markers.h.
#include "analyzer/model/markers.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace memlens::analyzer {
namespace {

// Collects names and marker events; starts over at each program image (exec).
class MarkerCollector : public format::RecordVisitor {
 public:
  explicit MarkerCollector(std::vector<Marker>* out) : out_(out) {}
  void OnProcess(const format::ProcessRecord&) override {
    out_->clear();
    strings_.clear();
    program_end_seq_ = 0;
  }
  void OnString(const format::StringRecord& r) override { strings_[r.id] = r.text; }
  uint64_t program_end_seq() const { return program_end_seq_; }
  void OnEvent(const format::Event& e) override {
    if (e.kind == format::EventKind::kProgramEnd && program_end_seq_ == 0) program_end_seq_ = e.seq;
    if (e.kind != format::EventKind::kMarker && e.kind != format::EventKind::kSnapshot) return;
    out_->push_back({Name(e.address), e.size ? Name(e.size) : "",
                     e.kind == format::EventKind::kSnapshot, e.seq});
  }

 private:
  std::string Name(uint64_t id) const {
    auto it = strings_.find(id);
    return it == strings_.end() ? "(unknown name)" : it->second;
  }
  std::vector<Marker>* out_;
  std::unordered_map<uint64_t, std::string> strings_;
  uint64_t program_end_seq_ = 0;  // Profile::program_end_seq
};

}  // namespace

bool ReadMarkers(const std::string& path, std::vector<Marker>* markers, std::string* error) {
  markers->clear();
  MarkerCollector collector(markers);
  ReadStatus status;
  return ReadCapture(path, &collector, &status, error);
}

bool FindMarkerSeq(const std::string& path, const SnapshotSpec& spec, uint64_t* seq,
                   std::string* error) {
  std::vector<Marker> markers;
  return ReadMarkers(path, &markers, error) && FindMarkerSeq(markers, spec, seq, error);
}

bool FindMarkerSeq(const std::vector<Marker>& markers, const SnapshotSpec& spec, uint64_t* seq,
                   std::string* error) {
  const bool snapshot = spec.kind == SnapshotSpec::kSnapshot;
  const char* what = snapshot ? "snapshot" : "marker";
  std::map<std::string, uint64_t> counts;  // of the kind asked for, by name
  uint64_t found = 0;
  for (const Marker& m : markers) {
    if (m.snapshot != snapshot) continue;
    ++counts[m.name];
    if (m.name == spec.name && ++found == spec.occurrence) {
      *seq = m.seq;
      return true;
    }
  }
  if (found > 0) {
    *error = "@" + spec.text + ": " + what + " '" + spec.name + "' occurs " +
             std::to_string(found) + " time" + (found == 1 ? "" : "s") + " in this capture (#1 to #" +
             std::to_string(found) + ")";
    return false;
  }
  std::string names;
  size_t listed = 0;
  for (const auto& [name, count] : counts) {
    if (++listed > 20) {
      names += ", ...";
      break;
    }
    names += (names.empty() ? "" : ", ") + ("'" + name + "'") +
             (count > 1 ? " (" + std::to_string(count) + " times)" : "");
  }
  *error = "@" + spec.text + ": no " + what + " named '" + spec.name + "' in this capture (" +
           (names.empty() ? std::string("it has no ") + what + "s" : "its " + std::string(what) + "s: " + names) +
           ")";
  return false;
}

bool FindProgramEndSeq(const std::string& path, uint64_t* seq, std::string* error) {
  std::vector<Marker> markers;
  MarkerCollector collector(&markers);
  ReadStatus status;
  return ReadCapture(path, &collector, &status, error) &&
         FindProgramEndSeq(collector.program_end_seq(), seq, error);
}

bool FindProgramEndSeq(uint64_t program_end_seq, uint64_t* seq, std::string* error) {
  if (program_end_seq == 0) {
    *error = "@program-end: this capture has no end of a Python program's code (only a Python "
             "program whose main code returned, raised or called sys.exit has one)";
    return false;
  }
  *seq = program_end_seq;
  return true;
}

}  // namespace memlens::analyzer
