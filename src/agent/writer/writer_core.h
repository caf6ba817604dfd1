// src/agent/writer/writer_core.h
//
// Writer: drains the rings, interns stacks, records modules and threads, encodes, compresses
// and writes chunks, at least every 100 ms. One loop for both places it runs (docs/agent.md,
// "The writer"): the agent's writer thread inside the program (writer.cc), or a thread of
// `memlens run` reading the program's rings from the exchange (cli/hosted_writer.cc). What
// differs between the two is what it reads from the program and where it writes: WriterIo.
//
// Runs on: one thread, its own; it meets the program's threads only through WriterControl.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agent/recorder/thread_buffer.h"
#include "agent/writer/chunk_pipeline.h"
#include "agent/writer/exchange.h"
#include "agent/writer/python_merger.h"
#include "agent/writer/stack_interner.h"
#include "format/chunk.h"
#include "format/record_encoder.h"
#include "format/records.h"

namespace memlens::agent {

struct ThreadStacks;  // writer_core.cc

// One ring, as the writer sees it this round.
struct RingView {
  ThreadBuffer* buffer;  // its header: state, thread_index, tid, the positions
  uint8_t* data;         // its bytes, in this process's mapping
  uint64_t limit;        // drain records committed up to here (checked rings), else ~0
  uint32_t* announced;   // writer side: the thread_index whose kThread record is written
  void** stacks;         // writer side: its ThreadStacks (writer_core.cc), or null
};

// What the writer reads from the program, and where it writes the capture.
class WriterIo {
 public:
  virtual ~WriterIo() = default;
  // The rings to drain now.
  virtual void Rings(std::vector<RingView>* out) = 0;
  // Ring contents come from another process: check each record before use.
  virtual bool checked() const = 0;
  // Sampling: events trickle, the writer takes long rounds.
  virtual bool sampling() const = 0;
  virtual bool ThreadAlive(uint64_t tid) = 0;
  // Before anything else: the process record, the sampling rule, the modules.
  virtual void Begin(format::RecordEncoder* meta, std::string* payload) = 0;
  // Modules loaded or unloaded since the last call; true when some were unloaded.
  virtual bool RescanModules(format::RecordEncoder* meta, std::string* payload) = 0;
  // False when ip lies in no module known so far (then the writer rescans).
  virtual bool KnownModule(uint64_t ip) = 0;
  // Names the writer describes once, before their first use.
  virtual void DescribePythonCode(uint64_t id, format::RecordEncoder* meta,
                                  std::string* payload) = 0;
  virtual void DescribeString(uint64_t id, format::RecordEncoder* meta, std::string* payload) = 0;
  virtual EvalLoopRange EvalLoop() = 0;
  // The sequence number the next event will take; drained_next: one past the last drained.
  virtual uint64_t NextSeq(uint64_t drained_next) = 0;
  virtual uint64_t TakeDroppedEvents() = 0;  // since the last call
  virtual uint64_t DroppedEventsTotal() = 0;
  virtual uint64_t UnrecordedChildren() = 0;
  virtual uint64_t StartMonotonicNs() = 0;
  // The process's resident bytes; false when they cannot be read.
  virtual bool Resident(uint64_t* bytes) = 0;
  // The process's mappings (ReadMappings, mappings_reader.h: out->mappings and page_size, the
  // writer sets the rest), page runs for at most max_pages pages; false when not readable.
  virtual bool Mappings(uint64_t max_pages, format::MappingsRecord* out) = 0;
  // Appends to the capture; false (after saying why once) when it cannot.
  virtual bool Write(const std::string& bytes) = 0;
  // The program replaced its image (exec) while the writer was paused: its writer is done.
  virtual bool ImageReplaced() = 0;
  // Chunks are compressed and written on a thread of their own (chunk_pipeline.h), and Write
  // is called from that thread: a writer outside the program, where a thread costs it nothing.
  virtual bool pipelined() const { return false; }
};

// The resident bytes in the text of /proc/PID/statm; false when it does not parse.
bool ResidentBytesOfStatm(const char* text, uint64_t* bytes);

class Writer {
 public:
  Writer(WriterIo* io, WriterControl* control, bool write_file_header);
  ~Writer();

  // Until the stop request (or, for a hosted writer, a replaced image); ends with the END record.
  void Run();
  void SetStopReason(format::EndReason reason, int64_t detail) {
    stop_reason_ = reason;
    stop_detail_ = detail;
  }
  // For a span's writer, before its own rings are drained by a later one.
  static void ForgetThreadStacks(void* stacks);
  static void DeleteThreadStacks(void* stacks);

 private:
  void WriteEnd(format::EndReason reason, int64_t detail);
  bool PauseForExec();
  size_t DrainAll();
  void RetireExitedThreads();
  void DrainRing(const RingView& ring);
  void EncodeEvent(const RingView& ring, const RawEvent& raw);
  uint64_t InternStack(ThreadStacks* stacks, const RawEvent& raw);
  void DescribePythonCode(uint64_t id);
  void DescribeString(uint64_t id);
  void DescribeStrings(const format::Event& event);
  void RescanModules();
  void MaybeRecordTime(bool force);
  void MaybeSampleResident(bool force);
  void MaybeSampleMappings(bool force);
  // Ends the chunk. `written`: returns once it is in the capture (a pipelined writer otherwise
  // hands it to its pipeline and goes on).
  void Flush(bool written = false);

  WriterIo* io_;
  WriterControl* control_;
  bool write_file_header_;
  format::EndReason stop_reason_ = format::EndReason::kExit;
  int64_t stop_detail_ = 0;
  // The chunk's payload: threads, modules, stack nodes..., then the events record, which
  // refers to them. The event encoder holds its columns until Flush's FinishEvents, which
  // appends the events record here: no second copy of the payload (a few MiB of the program's
  // resident memory on churn, docs/agent.md).
  std::string meta_;
  std::string chunk_;  // the compressed chunk, header first
  format::RecordEncoder meta_encoder_;
  format::RecordEncoder event_encoder_;
  format::ChunkCompressor compressor_;
  std::unique_ptr<ChunkPipeline> pipeline_;  // when io_->pipelined(); written out before the rest
  StackInterner interner_;
  std::vector<RingView> rings_;
  std::vector<uint64_t> frames_;  // the stack being interned, innermost first
  std::vector<bool> described_codes_;  // kPythonCode records written, by code id
  std::vector<bool> described_strings_;  // kString records written, by string id
  alignas(8) uint8_t record_copy_[kMaxRecordSize];  // a checked ring's record, copied
  uint64_t drained_next_ = 0;  // one past the highest sequence number drained
  uint64_t last_time_seq_ = 0;
  uint64_t last_time_ns_ = 0;
  uint64_t last_flush_ns_ = 0;
  uint64_t last_liveness_check_ns_ = 0;
  uint64_t last_resident_ns_ = 0;
  uint64_t last_mappings_ns_ = 0;       // when the last reading of the mappings started
  uint64_t last_mappings_cost_ns_ = 0;  // and how long it took
  format::MappingsRecord mappings_;     // kept: its vectors' room serves the next reading
  format::MappingsRecord written_mappings_;  // the last reading written
  uint64_t last_mappings_written_ns_ = 0;
  uint32_t batch_thread_ = 0;
  bool in_batch_ = false;
};

}  // namespace memlens::agent
