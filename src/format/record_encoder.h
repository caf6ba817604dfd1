// src/format/record_encoder.h
//
// RecordEncoder appends records (records.h) to a chunk payload. Used by the agent's writer
// thread and by tests that build captures by hand; never on the allocation hot path.
// Field layout of each record: docs/capture-format.md.
#pragma once

#include <string>

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

  // A batch of events of one thread, in increasing seq order:
  //   BeginEvents(thread); Event(e)...; EndEvents();
  // The batch deltas (seq, address, stack) restart with each batch.
  void BeginEvents(uint32_t thread);
  void AddEvent(const Event& e);
  void EndEvents();

 private:
  std::string* out_;
  uint64_t last_seq_ = 0;
  uint64_t last_address_ = 0;
  uint64_t last_stack_ = 0;
  bool first_in_batch_ = true;
};

}  // namespace memlens::format
