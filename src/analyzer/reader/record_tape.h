// src/analyzer/reader/record_tape.h
//
// RecordTape: the records one chunk decoded to, kept in order to be handed to a visitor later,
// on another thread. The reader decodes chunks on its prefetching thread, ahead of the replay
// (capture_reader.cc), so decoding and replaying a long capture take a core each. Events and
// stack nodes, nearly all of a chunk, are kept in arrays of their own; the rare records beside
// them in a list of variants.
//
// Runs on: filled by one thread, played by another after it is handed over (never both at once).
#pragma once

#include <cstdint>
#include <variant>
#include <vector>

#include "format/record_decoder.h"

namespace memlens::analyzer {

class RecordTape final : public format::RecordVisitor {
 public:
  void OnProcess(const format::ProcessRecord& r) override { Rare(r); }
  void OnModule(const format::ModuleRecord& r) override { Rare(r); }
  void OnModuleUnload(const format::ModuleUnloadRecord& r) override { Rare(r); }
  void OnThread(const format::ThreadRecord& r) override { Rare(r); }
  void OnTime(const format::TimeRecord& r) override { Rare(r); }
  void OnEnd(const format::EndRecord& r) override { Rare(r); }
  void OnDrops(const format::DropsRecord& r) override { Rare(r); }
  void OnPythonCode(const format::PythonCodeRecord& r) override { Rare(r); }
  void OnResident(const format::ResidentRecord& r) override { Rare(r); }
  void OnMappings(const format::MappingsRecord& r) override { Rare(r); }
  void OnString(const format::StringRecord& r) override { Rare(r); }
  void OnSampling(const format::SamplingRecord& r) override { Rare(r); }
  void OnStackNode(const format::StackNodeRecord& r) override {
    Extend(kNodes, nodes_.size(), 1);
    nodes_.push_back(r);
  }
  void OnEvent(const format::Event& e) override { OnEvents(&e, 1); }
  void OnEvents(const format::Event* events, size_t count) override {
    // The writer closes a chunk once it holds 128 Ki events (writer.cc): one allocation for
    // most chunks, where doubling would leave up to half of a larger one unused.
    if (events_.empty()) events_.reserve(kChunkEvents);
    Extend(kEvents, events_.size(), count);
    events_.insert(events_.end(), events, events + count);
  }
  bool WantsUpcoming() const override { return true; }  // events come in groups: one insert each

  // Hands every record to `visitor`, in the order they were decoded. Events go in groups
  // (OnEvents, with hints) to a visitor that wants hints, else one by one, as the decoder would.
  void PlayTo(format::RecordVisitor* visitor) const {
    for (const Entry& entry : entries_) {
      switch (entry.kind) {
        case kEvents:
          if (visitor->WantsUpcoming()) {
            visitor->OnEvents(&events_[entry.begin], entry.count);
          } else {
            for (size_t i = entry.begin; i < entry.begin + entry.count; ++i) visitor->OnEvent(events_[i]);
          }
          break;
        case kNodes:
          for (size_t i = entry.begin; i < entry.begin + entry.count; ++i) visitor->OnStackNode(nodes_[i]);
          break;
        case kRare:
          std::visit([visitor](const auto& r) { Deliver(visitor, r); }, rare_[entry.begin]);
          break;
      }
    }
  }

 private:
  using RareRecord =
      std::variant<format::ProcessRecord, format::ModuleRecord, format::ModuleUnloadRecord,
                   format::ThreadRecord, format::TimeRecord, format::EndRecord, format::DropsRecord,
                   format::PythonCodeRecord, format::ResidentRecord, format::StringRecord,
                   format::SamplingRecord, format::MappingsRecord>;
  static constexpr size_t kChunkEvents = size_t{1} << 17;
  enum Kind : uint8_t { kEvents, kNodes, kRare };
  struct Entry {
    Kind kind;
    size_t begin;  // in events_, nodes_ or rare_
    size_t count;
  };

  // Consecutive events (or nodes) make one entry.
  void Extend(Kind kind, size_t begin, size_t count) {
    if (!entries_.empty() && entries_.back().kind == kind) {
      entries_.back().count += count;
    } else {
      entries_.push_back({kind, begin, count});
    }
  }
  template <typename Record>
  void Rare(const Record& r) {
    entries_.push_back({kRare, rare_.size(), 1});
    rare_.emplace_back(r);
  }

  static void Deliver(format::RecordVisitor* v, const format::ProcessRecord& r) { v->OnProcess(r); }
  static void Deliver(format::RecordVisitor* v, const format::ModuleRecord& r) { v->OnModule(r); }
  static void Deliver(format::RecordVisitor* v, const format::ModuleUnloadRecord& r) { v->OnModuleUnload(r); }
  static void Deliver(format::RecordVisitor* v, const format::ThreadRecord& r) { v->OnThread(r); }
  static void Deliver(format::RecordVisitor* v, const format::TimeRecord& r) { v->OnTime(r); }
  static void Deliver(format::RecordVisitor* v, const format::EndRecord& r) { v->OnEnd(r); }
  static void Deliver(format::RecordVisitor* v, const format::DropsRecord& r) { v->OnDrops(r); }
  static void Deliver(format::RecordVisitor* v, const format::PythonCodeRecord& r) { v->OnPythonCode(r); }
  static void Deliver(format::RecordVisitor* v, const format::ResidentRecord& r) { v->OnResident(r); }
  static void Deliver(format::RecordVisitor* v, const format::MappingsRecord& r) { v->OnMappings(r); }
  static void Deliver(format::RecordVisitor* v, const format::StringRecord& r) { v->OnString(r); }
  static void Deliver(format::RecordVisitor* v, const format::SamplingRecord& r) { v->OnSampling(r); }

  std::vector<Entry> entries_;
  std::vector<format::Event> events_;
  std::vector<format::StackNodeRecord> nodes_;
  std::vector<RareRecord> rare_;
};

}  // namespace memlens::analyzer
