// src/format/record_decoder.h
//
// DecodeRecords walks one chunk payload and hands each record to a RecordVisitor. It validates
// every length and kind: a corrupt payload is reported, never read out of bounds. Used by the
// analyzer's reader and by tests.
#pragma once

#include <string>
#include <string_view>

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

// Returns false and sets *error (naming the payload offset) on malformed input. Records before
// the bad one have already been delivered. With events false, event batches are stepped over
// without being decoded (a reader that wants only the metadata of this chunk). With metadata
// given, the bytes of every record but the event batches are appended to it: a payload of
// the chunk's metadata alone, which decodes to the same records (the snapshot index keeps it).
bool DecodeRecords(std::string_view payload, RecordVisitor* visitor, std::string* error,
                   bool events = true, std::string* metadata = nullptr);

}  // namespace memlens::format
