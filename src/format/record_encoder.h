// src/format/record_encoder.h
//
// RecordEncoder appends records (records.h) to a chunk payload. Used by the agent's writer
// thread and by tests that build captures by hand; never on the allocation hot path.
// Field layout of each record: docs/capture-format.md.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "base/byte_column.h"
#include "base/zero_mapped_cache.h"
#include "format/reachable_allocations.h"
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
  void Mappings(const MappingsRecord& r);
  void String(const StringRecord& r);
  void Sampling(const SamplingRecord& r);

  // Batches of events, each of one thread in increasing seq order:
  //   BeginEvents(thread); AddEvent(e)...; EndEvents();  (repeated)  FinishEvents();
  // FinishEvents writes every batch since the last call as one kEventColumns record, stored column
  // by column across all batches (kinds, seq gaps, releases, reuses, neighbours, addresses,
  // sizes, stacks):
  // like fields side by side compress far better than event by event. Deltas restart with each
  // batch; a release that frees a block allocated by the same thread earlier in this chunk or in
  // the kReleaseReachChunks chunks before is coded as a back-reference to that allocation, and
  // an allocation that gets back a block its thread freed earlier in this chunk as that block's
  // rank among the freed blocks of its size class, else one that starts where an allocation of
  // its thread in reach ends (as glibc carves blocks) as a back-reference to that allocation:
  // an address costs some 20 bits in full, a back-reference about 10. NextChunk says that a chunk was written (the
  // writer calls it after each one, as the reader starts each one).
  void BeginEvents(uint32_t thread);
  void AddEvent(const Event& e);
  void EndEvents();
  void FinishEvents();
  void NextChunk();
  size_t pending_events() const { return kinds_.size(); }
  // Offsets in the output of the event records' columns and byte planes since the last
  // NextChunk: where the chunk compressor should start a new block (ChunkCompressor).
  const std::vector<size_t>& block_starts() const { return block_starts_; }

 private:
  // A thread's reachable allocations, as the reader keeps them, and the back-references its
  // releases used last. Memory: 14 bytes per allocation in reach, all threads together, and
  // 60 KiB of reused-block lists per thread that released a block (reused_blocks.h).
  struct ThreadAllocations : ReachableAllocations {
    uint64_t last_back = 0;    // the last back-reference: right for runs of the same one
    uint64_t window_back = 0;  // the last above 1: a FIFO window, right again after temporaries
  };
  // Where a recent allocation sits in its thread's list, direct-mapped by address: found again
  // there when the guesses (the last back-reference, which is right for FIFO windows, and 1,
  // right for temporaries) miss. 8 bytes x kRecentSlots = 64 KiB; every hit is checked against
  // the list, so a stale slot only costs a miss.
  struct RecentSlot {
    uint32_t thread;
    uint32_t serial;  // the allocation's number in its thread, added() (mod 2^32); 0: empty
  };
  static constexpr int kRecentBits = 13;
  // Where a recent allocation ends, with all Neighbour needs to check and use it, so that a
  // lookup reads this one slot and nothing of the thread's list (three more cache misses).
  struct EndSlot {
    uint64_t end;     // ReachableAllocations::End of the allocation
    uint64_t serial;  // its number in its thread's list, added(), never reused; 0: empty
    uint32_t thread;
    uint32_t origin;  // the chunk that coded its address in full
  };

  uint64_t BackReference(uint64_t address);  // 0: none
  uint64_t Neighbour(uint64_t address, uint32_t* origin);  // 0: none
  void NoteAllocation(uint64_t address, uint64_t size, uint32_t origin);
  static size_t RecentIndex(uint64_t address) {
    return static_cast<size_t>((RotateAddress(address) * 0x9e3779b97f4a7c15ULL) >> (64 - kRecentBits));
  }
  static size_t EndIndex(uint64_t end) {
    return static_cast<size_t>((RotateAddress(end) * 0x9e3779b97f4a7c15ULL) >> (64 - kEndBits));
  }
  // Where recent allocations end (ReachableAllocations::End), direct-mapped like recent_: an
  // allocation made there names that one (Neighbour). 24 bytes x 2^kEndBits = 384 KiB: churn's
  // neighbours are some 1,000 allocations back, up to its 4,096 live blocks.
  static constexpr int kEndBits = 14;

  std::string* out_;
  std::vector<std::pair<uint32_t, uint64_t>> batches_;  // (thread, event count)
  ByteColumn kinds_, seqs_, releases_, reuses_, neighbours_, stacks_;
  // Written as byte planes at FinishEvents (PutPlanes).
  std::vector<uint64_t> address_deltas_;  // zigzag
  std::vector<uint64_t> size_values_;
  ByteColumn addresses_, sizes_;
  uint64_t last_seq_ = 0;
  uint64_t last_address_ = 0;  // rotated
  uint64_t last_stack_ = 0;
  bool first_in_batch_ = true;
  bool batch_open_ = false;
  ZeroMappedCache<RecentSlot, size_t{1} << kRecentBits> recent_;
  std::vector<size_t> block_starts_;
  ZeroMappedCache<EndSlot, size_t{1} << kEndBits> ends_;
  std::unordered_map<uint32_t, ThreadAllocations> thread_allocations_;
  uint64_t stack_nodes_ = 0;  // of the image so far
  uint64_t allocations_noted_ = 0;  // by all threads: a new thread's list numbers from here
  uint32_t chunk_ = 0;        // chunks written so far (an address's origin is one of them)
  ThreadAllocations* batch_allocations_ = nullptr;  // the current batch's thread's
};

}  // namespace memlens::format
