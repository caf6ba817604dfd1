// tests/fuzz/fuzz_records.cc: libFuzzer target for format::DecodeRecords, the decoder of chunk
// payloads (no framing, no checksum in the way). An input is a program image's chunk payloads
// separated by kChunkSeparator; its first byte picks, one bit a chunk, the chunks whose events
// are decoded for their allocations only (as a resumed read does) instead of delivered.
//
// Beyond "no crash, no hang, bounded memory" it checks what the decoder promises: the metadata
// it copies out of a chunk (DecodeRecords' last argument) decodes again without error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "format/record_decoder.h"
#include "fuzz_input.h"

namespace memlens::fuzz {
namespace {

// Touches every decoded field the way a reader would, so a bad length or count shows.
class Visitor final : public format::RecordVisitor {
 public:
  explicit Visitor(bool hints) : hints_(hints) {}
  void OnProcess(const format::ProcessRecord& r) override {
    Sum(r.executable);
    for (const auto& a : r.argv) Sum(a);
    Sum(r.agent_version);
  }
  void OnModule(const format::ModuleRecord& r) override {
    Sum(r.path);
    Sum(r.build_id);
    sum_ += r.segments.size();
  }
  void OnStackNode(const format::StackNodeRecord& r) override { sum_ += r.parent + r.ip; }
  void OnEvent(const format::Event& e) override { sum_ += e.seq + e.address + e.size + e.stack; }
  bool WantsUpcoming() const override { return hints_; }
  void Upcoming(const format::Event& e) override { sum_ += e.seq; }
  void OnString(const format::StringRecord& r) override { Sum(r.text); }
  void OnPythonCode(const format::PythonCodeRecord& r) override {
    Sum(r.filename);
    Sum(r.name);
  }
  uint64_t sum() const { return sum_; }

 private:
  void Sum(const std::string& s) {
    for (char c : s) sum_ += static_cast<uint8_t>(c);
  }
  bool hints_;
  uint64_t sum_ = 0;
};

}  // namespace
}  // namespace memlens::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace memlens;
  if (size == 0) return 0;
  const uint8_t only_allocations = data[0];
  std::vector<std::string_view> chunks =
      fuzz::SplitChunks({reinterpret_cast<const char*>(data + 1), size - 1});
  for (bool hints : {false, true}) {
    format::DecodeState state, metadata_state;
    fuzz::Visitor visitor(hints), metadata_visitor(hints);
    for (size_t i = 0; i < chunks.size(); ++i) {
      auto mode = (only_allocations >> (i % 8)) & 1 ? format::EventDecoding::kAllocations
                                                    : format::EventDecoding::kDeliver;
      std::string error, metadata;
      bool ok = format::DecodeRecords(chunks[i], &visitor, &error, mode, &state, &metadata);
      if (!ok && error.empty()) std::abort();  // a failure always says why
      if (!format::DecodeRecords(metadata, &metadata_visitor, &error, format::EventDecoding::kSkip,
                                 &metadata_state)) {
        std::abort();  // the metadata kept of a chunk must read back
      }
      if (!ok) break;  // a reader stops at a corrupt chunk
    }
  }
  return 0;
}
