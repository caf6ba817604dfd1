// src/format/record_decoder.h
//
// DecodeRecords walks one chunk payload and hands each record to a RecordVisitor. It validates
// every length and kind: a corrupt payload is reported, never read out of bounds. Used by the
// analyzer's reader and by tests (one thread per DecodeState).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "format/reachable_allocations.h"
#include "format/records.h"

namespace memlens::format {

class RecordVisitor {
 public:
  virtual ~RecordVisitor() = default;
  virtual void OnProcess(const ProcessRecord&) {}
  virtual void OnModule(const ModuleRecord&) {}
  virtual void OnModuleUnload(const ModuleUnloadRecord&) {}
  virtual void OnThread(const ThreadRecord&) {}
  virtual void OnStackNode(const StackNodeRecord&) {}
  virtual void OnEvent(const Event&) {}
  virtual void OnTime(const TimeRecord&) {}
  virtual void OnEnd(const EndRecord&) {}
  virtual void OnDrops(const DropsRecord&) {}
  virtual void OnPythonCode(const PythonCodeRecord&) {}
  virtual void OnResident(const ResidentRecord&) {}
  virtual void OnString(const StringRecord&) {}
  virtual void OnSampling(const SamplingRecord&) {}
};

// What DecodeRecords does with a chunk's event batches.
// Metadata records are delivered in every case.
enum class EventDecoding : uint8_t {
  kDeliver,      // decode and deliver every event
  kAllocations,  // decode the addresses into the state (the next chunk's releases need them)
  kSkip,         // step over the columns (a reader that wants only this chunk's metadata)
};

// What a chunk's decoding needs from the chunks before it in its program image: how many stack
// nodes there are (a node's parent is coded relative to its id) and each thread's allocations
// of the kReleaseReachChunks chunks before (a release may refer back to them). A reader keeps
// one across the chunks of a capture, in file order; a kProcess record resets it.
class DecodeState {
 public:
  uint64_t stack_nodes = 0;  // nodes of the image so far
  std::unordered_map<uint32_t, ReachableAllocations> allocations;  // by thread index

  void StartImage() {
    stack_nodes = 0;
    allocations.clear();
    decoded_since_skip_ = kReleaseReachChunks;
  }
  // False when a chunk in reach was stepped over (kSkip): its allocations are not known.
  bool previous_known() const { return decoded_since_skip_ == kReleaseReachChunks; }
  // At the start of every chunk: the allocations of the chunk before join the earlier ones, and
  // those of the chunk that falls out of reach are forgotten.
  void StartChunk(EventDecoding events);

 private:
  bool chunk_decoded_ = true;  // the events of the chunk being decoded are (kSkip: not)
  size_t decoded_since_skip_ = kReleaseReachChunks;  // chunks decoded since the last skipped one
};

// Returns false and sets *error (naming the payload offset) on malformed input. Records before
// the bad one have already been delivered. Without a state the payload is decoded as the first
// chunk of an image. A release that refers to a chunk in reach whose events were skipped is
// corrupt with kDeliver; with kAllocations it is passed over (it does not change the
// address chain: docs/capture-format.md, section 5). With metadata given, the bytes of every
// record but the event batches are appended to it: a payload of the chunk's metadata alone,
// which decodes to the same records (the snapshot index keeps it).
bool DecodeRecords(std::string_view payload, RecordVisitor* visitor, std::string* error,
                   EventDecoding events = EventDecoding::kDeliver, DecodeState* state = nullptr,
                   std::string* metadata = nullptr);

}  // namespace memlens::format
