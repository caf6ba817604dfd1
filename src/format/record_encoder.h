// src/format/record_encoder.h
//
// RecordEncoder appends records (records.h) to a chunk payload. Used by the agent's writer
// thread and by tests that build captures by hand; never on the allocation hot path.
// Field layout of each record: docs/capture-format.md.
#pragma once

#include <string>
#include <vector>

#include "format/records.h"

namespace memlens::format {

class RecordEncoder {
 public:
  explicit RecordEncoder(std::string* out) : out_(out) {}

  void Process(const ProcessRecord& r);
  void Module(const ModuleRecord& r);
  void ModuleUnload(const ModuleUnloadRecord& r);
  void Thread(const ThreadRecord& r);
  void StackNode(const StackNodeRecord& r);
  void Time(const TimeRecord& r);
  void End(const EndRecord& r);
  void Drops(const DropsRecord& r);
  void PythonCode(const PythonCodeRecord& r);
  void Resident(const ResidentRecord& r);
  void String(const StringRecord& r);
  void Sampling(const SamplingRecord& r);

  // Batches of events, each of one thread in increasing seq order:
  //   BeginEvents(thread); AddEvent(e)...; EndEvents();  (repeated)  FinishEvents();
  // FinishEvents writes every batch since the last call as one kEvents record, stored column by
  // column across all batches (kinds, seq gaps, addresses, sizes, stacks): like fields side by
  // side compress far better than event by event. Deltas restart with each batch.
  void BeginEvents(uint32_t thread);
  void AddEvent(const Event& e);
  void EndEvents();
  void FinishEvents();
  size_t pending_events() const { return kinds_.size(); }

 private:
  std::string* out_;
  std::vector<std::pair<uint32_t, uint64_t>> batches_;  // (thread, event count)
  std::string kinds_, seqs_, sizes_, stacks_;
  std::vector<uint64_t> address_deltas_;  // zigzag; written as byte planes at EndEvents
  std::string addresses_;
  uint64_t last_seq_ = 0;
  uint64_t last_address_[2] = {0, 0};  // deltas chain separately for allocations and releases
  uint64_t last_stack_ = 0;
  bool first_in_batch_ = true;
};

}  // namespace memlens::format
