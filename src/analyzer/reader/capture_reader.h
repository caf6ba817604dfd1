// src/analyzer/reader/capture_reader.h
//
// ReadCapture streams a capture file into a RecordVisitor: metadata records (process, modules,
// threads, stack nodes, times) in file order, events in global sequence order (EventOrderer),
// and the END record, if any, last. A capture may hold several program images of one process
// (the agent follows exec): each starts with a process record, and everything of an image is
// delivered before the next one's process record. Memory use is bounded by the reordering window, not by
// the size of the capture.
//
// Damage is not fatal: a capture cut short (SIGKILL, full disk) or corrupt in the middle is
// read up to the damage and the status says so. Only a file that is not a readable capture at
// all (missing, empty, foreign, from a newer memlens) is an error.
#pragma once

#include <cstdint>
#include <string>

#include "format/record_decoder.h"

namespace memlens::analyzer {

struct ReadStatus {
  uint16_t format_major = 0;
  uint16_t format_minor = 0;
  bool ended = false;       // an END record was read: the recording finished normally
  std::string damage;       // empty, or what stopped the reading early
  uint64_t bytes_read = 0;
  uint64_t missing_events = 0;  // sequence numbers never seen
};

bool ReadCapture(const std::string& path, format::RecordVisitor* visitor, ReadStatus* status,
                 std::string* error);

}  // namespace memlens::analyzer
