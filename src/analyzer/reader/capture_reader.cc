// src/analyzer/reader/capture_reader.cc: see capture_reader.h.
#include "analyzer/reader/capture_reader.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>

#include "analyzer/reader/event_orderer.h"
#include "format/chunk.h"

namespace memlens::analyzer {
namespace {

// Sends events through the orderer and holds END back until every event is out.
class OrderingVisitor : public format::RecordVisitor {
 public:
  explicit OrderingVisitor(format::RecordVisitor* out)
      : out_(out), orderer_([out](const format::Event& e) { out->OnEvent(e); }) {}

  // A second process record is the program image that replaced the first by exec: everything
  // of the first image is delivered before it, and sequence numbers start over.
  void OnProcess(const format::ProcessRecord& r) override {
    if (seen_process_) {
      orderer_.Finish();
      orderer_.Restart();
      if (end_) out_->OnEnd(*end_);
      end_.reset();
    }
    seen_process_ = true;
    out_->OnProcess(r);
  }
  void OnModule(const format::ModuleRecord& r) override { out_->OnModule(r); }
  void OnModuleUnload(const format::ModuleUnloadRecord& r) override { out_->OnModuleUnload(r); }
  void OnThread(const format::ThreadRecord& r) override { out_->OnThread(r); }
  void OnStackNode(const format::StackNodeRecord& r) override { out_->OnStackNode(r); }
  void OnEvent(const format::Event& e) override { orderer_.Add(e); }
  void OnTime(const format::TimeRecord& r) override { out_->OnTime(r); }
  void OnEnd(const format::EndRecord& r) override { end_ = r; }
  void OnDrops(const format::DropsRecord& r) override { out_->OnDrops(r); }
  void OnPythonCode(const format::PythonCodeRecord& r) override { out_->OnPythonCode(r); }
  void OnResident(const format::ResidentRecord& r) override { out_->OnResident(r); }
  void OnSampling(const format::SamplingRecord& r) override { out_->OnSampling(r); }

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
  EventOrderer orderer_;
  std::optional<format::EndRecord> end_;
  bool seen_process_ = false;
};

}  // namespace

bool ReadCapture(const std::string& path, format::RecordVisitor* visitor, ReadStatus* status,
                 std::string* error) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    *error = "cannot open '" + path + "': " + std::strerror(errno);
    return false;
  }
  if (S_ISDIR(st.st_mode)) {
    *error = "'" + path + "' is a directory, not a capture";
    return false;
  }
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), std::fclose);
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
  OrderingVisitor ordering(visitor);
  std::string payload;
  for (;;) {
    auto result = chunks.Next(&payload, &why);
    if (result == format::ChunkReader::Result::kEnd) break;
    if (result != format::ChunkReader::Result::kChunk) {
      status->damage = why;
      break;
    }
    if (!format::DecodeRecords(payload, &ordering, &why)) {
      status->damage = "capture is corrupt at byte " + std::to_string(chunks.offset()) + ": " + why;
      break;
    }
  }
  status->bytes_read = chunks.offset();
  ordering.Finish(status);
  return true;
}

}  // namespace memlens::analyzer
