// src/format/record_encoder.cc: see record_encoder.h; layout in docs/capture-format.md.
#include "format/record_encoder.h"

#include "base/varint.h"

namespace memlens::format {
namespace {

void PutType(std::string* out, RecordType type) { out->push_back(static_cast<char>(type)); }
void PutString(std::string* out, const std::string& s) {
  PutVarint(out, s.size());
  out->append(s);
}

}  // namespace

void RecordEncoder::Process(const ProcessRecord& r) {
  PutType(out_, RecordType::kProcess);
  PutVarint(out_, r.pid);
  PutVarint(out_, r.ppid);
  PutVarint(out_, r.start_realtime_ns);
  PutVarint(out_, r.start_monotonic_ns);
  PutString(out_, r.executable);
  PutVarint(out_, r.argv.size());
  for (const auto& arg : r.argv) PutString(out_, arg);
  PutString(out_, r.agent_version);
}

void RecordEncoder::Module(const ModuleRecord& r) {
  PutType(out_, RecordType::kModule);
  PutVarint(out_, r.id);
  PutVarint(out_, r.load_bias);
  PutString(out_, r.path);
  PutString(out_, r.build_id);
  PutVarint(out_, r.segments.size());
  for (const auto& s : r.segments) {
    PutVarint(out_, s.start);
    PutVarint(out_, s.size);
  }
}

void RecordEncoder::ModuleUnload(const ModuleUnloadRecord& r) {
  PutType(out_, RecordType::kModuleUnload);
  PutVarint(out_, r.id);
}

void RecordEncoder::Thread(const ThreadRecord& r) {
  PutType(out_, RecordType::kThread);
  PutVarint(out_, r.index);
  PutVarint(out_, r.tid);
}

void RecordEncoder::StackNode(const StackNodeRecord& r) {
  PutType(out_, RecordType::kStackNode);
  PutVarint(out_, r.parent);
  PutVarint(out_, r.ip);
}

void RecordEncoder::Time(const TimeRecord& r) {
  PutType(out_, RecordType::kTime);
  PutVarint(out_, r.monotonic_ns);
  PutVarint(out_, r.seq);
}

void RecordEncoder::End(const EndRecord& r) {
  PutType(out_, RecordType::kEnd);
  out_->push_back(static_cast<char>(r.reason));
  PutVarint(out_, r.monotonic_ns);
  PutVarint(out_, r.events);
  PutVarint(out_, r.dropped);
  PutSignedVarint(out_, r.detail);
}

void RecordEncoder::Drops(const DropsRecord& r) {
  PutType(out_, RecordType::kDrops);
  PutVarint(out_, r.count);
}

void RecordEncoder::BeginEvents(uint32_t thread) {
  PutType(out_, RecordType::kEvents);
  PutVarint(out_, thread);
  last_seq_ = 0;
  last_address_ = 0;
  last_stack_ = 0;
  first_in_batch_ = true;
}

void RecordEncoder::AddEvent(const Event& e) {
  out_->push_back(static_cast<char>(e.kind));
  // Seqs rise within a batch: store the gap minus one (0 for a single-threaded program).
  PutVarint(out_, first_in_batch_ ? e.seq : e.seq - last_seq_ - 1);
  PutSignedVarint(out_, static_cast<int64_t>(e.address - last_address_));
  if (HasSize(e.kind)) PutVarint(out_, e.size);
  if (HasStack(e.kind)) {
    PutSignedVarint(out_, static_cast<int64_t>(e.stack - last_stack_));
    last_stack_ = e.stack;
  }
  last_seq_ = e.seq;
  last_address_ = e.address;
  first_in_batch_ = false;
}

void RecordEncoder::EndEvents() { out_->push_back(0); }

}  // namespace memlens::format
