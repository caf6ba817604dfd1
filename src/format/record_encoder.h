// src/format/record_encoder.h
//
// RecordEncoder appends records (records.h) to a chunk payload. Used by the agent's writer
// thread and by tests that build captures by hand; never on the allocation hot path.
// Field layout of each record: docs/capture-format.md.
#pragma once

#include <string>
#include <unordered_map>
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

  // Batches of events, each of one thread in increasing seq order:
  //   BeginEvents(thread); AddEvent(e)...; EndEvents();  (repeated)  FinishEvents();
  // FinishEvents writes every batch since the last call as one kEvents record, stored column by
  // column across all batches (kinds, seq gaps, releases, addresses, sizes, stacks): like fields
  // side by side compress far better than event by event. Deltas restart with each batch; a
  // release that frees a block allocated by the same thread earlier in the record is coded as
  // a back-reference to that allocation (so a record decodes on its own).
  void BeginEvents(uint32_t thread);
  void AddEvent(const Event& e);
  void EndEvents();
  void FinishEvents();
  size_t pending_events() const { return kinds_.size(); }

 private:
  // Where recent allocations of this record are, to find a release's back-reference: a
  // set-associative table of kAllocWays entries per set, indexed by the address (bounded
  // memory: 16 bytes x kAllocSets x kAllocWays = 512 KiB, allocated with the first event; half
  // of that misses a quarter of the back-references of 4 threads each freeing what it allocated
  // 4,096 allocations earlier).
  // An entry is used when both address and thread match; a released entry is emptied.
  struct RecentAlloc {
    uint64_t address;  // 0: empty
    uint32_t thread;
    uint32_t serial;  // the thread's allocations in this record before this one, plus 1
  };
  static constexpr int kAllocSetBits = 12;
  static constexpr size_t kAllocSets = size_t{1} << kAllocSetBits;
  static constexpr size_t kAllocWays = 8;

  uint64_t BackReference(uint64_t address);  // 0: none
  void NoteAllocation(uint64_t address);

  std::string* out_;
  std::vector<std::pair<uint32_t, uint64_t>> batches_;  // (thread, event count)
  std::string kinds_, seqs_, releases_, sizes_, stacks_;
  std::vector<uint64_t> address_deltas_;  // zigzag; written as byte planes at FinishEvents
  std::string addresses_;
  uint64_t last_seq_ = 0;
  uint64_t last_address_ = 0;  // rotated
  uint64_t last_stack_ = 0;
  bool first_in_batch_ = true;
  bool batch_open_ = false;
  std::vector<RecentAlloc> recent_;  // kAllocSets * kAllocWays, or empty before the first event
  bool recent_used_ = false;         // entries to clear at FinishEvents
  // Allocations per thread in this record (the current batch's thread: batch_allocs_).
  std::unordered_map<uint32_t, uint32_t> thread_allocs_;
  uint32_t batch_allocs_ = 0;
};

}  // namespace memlens::format
