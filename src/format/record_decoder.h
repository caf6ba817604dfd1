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
  // Consecutive events of a kEvents record, in file order (each delivered once, here or above).
  virtual void OnEvents(const Event* events, size_t count) {
    for (size_t i = 0; i < count; ++i) OnEvent(events[i]);
  }
  // A hint: this event comes soon. A visitor may prefetch what it will touch then. Events go
  // through OnEvents, with hints, only while WantsUpcoming (asked once per record): grouping
  // them costs where nothing misses the cache.
  virtual bool WantsUpcoming() const { return false; }
  virtual void Upcoming(const Event&) {}
  virtual void OnTime(const TimeRecord&) {}
  virtual void OnEnd(const EndRecord&) {}
  virtual void OnDrops(const DropsRecord&) {}
  virtual void OnPythonCode(const PythonCodeRecord&) {}
  virtual void OnResident(const ResidentRecord&) {}
  virtual void OnMappings(const MappingsRecord&) {}
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
// of the kReleaseReachChunks chunks before (a release may refer back to them), with their sizes
// and origins (a released block may be reused). A reader keeps one across the chunks of a
// capture, in file order; a kProcess record resets it.
class DecodeState {
 public:
  uint64_t stack_nodes = 0;  // nodes of the image so far
  std::unordered_map<uint32_t, ReachableAllocations> allocations;  // by thread index

  void StartImage() {
    stack_nodes = 0;
    allocations.clear();
    decoded_since_skip_ = kResumeChunks;
  }
  // False when one of the kResumeChunks chunks before was stepped over (kSkip): allocations in
  // reach may have been decoded wrong.
  bool previous_known() const { return decoded_since_skip_ == kResumeChunks; }
  // Chunks started so far: the origins of addresses are counted in them.
  uint32_t chunk() const { return chunk_; }
  // At the start of every chunk: the allocations of the chunk before join the earlier ones, and
  // those of the chunk that falls out of reach are forgotten.
  void StartChunk(EventDecoding events);

  std::vector<Event> delivered;  // a group of events for a visitor that wants hints (OnEvents)

 private:
  bool chunk_decoded_ = true;  // the events of the chunk being decoded are (kSkip: not)
  size_t decoded_since_skip_ = kResumeChunks;  // chunks decoded since the last skipped one
  uint32_t chunk_ = 0;
};

// Returns false and sets *error (naming the payload offset) on malformed input. Records before
// the bad one have already been delivered. Without a state the payload is decoded as the first
// chunk of an image. A release that refers to a chunk in reach whose events were skipped, or an
// allocation that names a reused block its thread's lists lack, is corrupt with kDeliver; with
// kAllocations, until kResumeChunks chunks have been decoded, its address is taken as 0 and
// leaves the address chain alone (docs/capture-format.md, section 5). With metadata given, the bytes of every
// record but the event batches are appended to it: a payload of the chunk's metadata alone,
// which decodes to the same records (the snapshot index keeps it).
bool DecodeRecords(std::string_view payload, RecordVisitor* visitor, std::string* error,
                   EventDecoding events = EventDecoding::kDeliver, DecodeState* state = nullptr,
                   std::string* metadata = nullptr);

}  // namespace memlens::format
