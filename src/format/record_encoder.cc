// src/format/record_encoder.cc: see record_encoder.h; layout in docs/capture-format.md.
#include "format/record_encoder.h"

#include <iterator>

#include "base/varint.h"

namespace memlens::format {
namespace {

void PutType(std::string* out, RecordType type) { out->push_back(static_cast<char>(type)); }
// Values as fixed-width little-endian numbers stored byte plane by byte plane (all low bytes,
// then all second bytes...): a width byte, then the planes; the high planes are nearly all zero
// and each plane's bytes have statistics of their own. Returns the width.
int PutPlanes(const std::vector<uint64_t>& values, ByteColumn* column) {
  uint64_t widest = 0;
  for (uint64_t v : values) widest |= v;
  int width = 0;
  while (width < 8 && (widest >> (8 * width)) != 0) ++width;
  column->clear();
  column->PutByte(static_cast<uint8_t>(width));
  char* plane_bytes = column->Append(width * values.size());
  for (int plane = 0; plane < width; ++plane) {
    for (uint64_t v : values) *plane_bytes++ = static_cast<char>(v >> (8 * plane));
  }
  return width;
}
void PutString(std::string* out, const std::string& s) {
  PutVarint(out, s.size());
  out->append(s);
}

}  // namespace

void RecordEncoder::Process(const ProcessRecord& r) {
  stack_nodes_ = 0;  // a new program image numbers everything afresh
  thread_allocations_.clear();
  batch_allocations_ = nullptr;
  PutType(out_, RecordType::kProcess);
  PutVarint(out_, r.pid);
  PutVarint(out_, r.ppid);
  PutVarint(out_, r.start_realtime_ns);
  PutVarint(out_, r.start_monotonic_ns);
  PutString(out_, r.executable);
  PutVarint(out_, r.argv.size());
  for (const auto& arg : r.argv) PutString(out_, arg);
  PutString(out_, CodedAgentVersion(r));
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
  PutVarint(out_, stack_nodes_ - r.parent);  // the node's id - 1 - its parent: 0 along a path
  ++stack_nodes_;
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
  PutVarint(out_, r.unrecorded_children);
}

void RecordEncoder::Drops(const DropsRecord& r) {
  PutType(out_, RecordType::kDrops);
  PutVarint(out_, r.count);
}

void RecordEncoder::PythonCode(const PythonCodeRecord& r) {
  PutType(out_, RecordType::kPythonCode);
  PutVarint(out_, r.id);
  PutString(out_, r.filename);
  PutString(out_, r.name);
  PutVarint(out_, r.first_line);
}

void RecordEncoder::Resident(const ResidentRecord& r) {
  PutType(out_, RecordType::kResident);
  PutVarint(out_, r.monotonic_ns);
  PutVarint(out_, r.bytes);
}

// Addresses and sizes in pages; each mapping's start as the gap from the previous one's end.
void RecordEncoder::Mappings(const MappingsRecord& r) {
  PutType(out_, RecordType::kMappings);
  PutVarint(out_, r.monotonic_ns);
  PutVarint(out_, r.seq);
  PutVarint(out_, r.read_ns);
  PutVarint(out_, r.page_size);
  PutVarint(out_, r.mappings.size());
  const uint64_t page = r.page_size ? r.page_size : 1;
  uint64_t previous_end = 0;
  for (const Mapping& m : r.mappings) {
    PutVarint(out_, (m.start - previous_end) / page);
    PutVarint(out_, (m.end - m.start) / page);
    out_->push_back(static_cast<char>(m.flags));
    PutVarint(out_, m.offset);
    PutVarint(out_, m.inode);
    PutString(out_, m.name);
    PutVarint(out_, m.rss / page);
    PutVarint(out_, m.anonymous / page);
    PutVarint(out_, m.swap / page);
    PutVarint(out_, m.page_runs.size());
    for (uint64_t run : m.page_runs) PutVarint(out_, run);
    previous_end = m.end;
  }
  PutVarint(out_, r.own.size());
  uint64_t previous_start = 0;
  for (const auto& [start, bytes] : r.own) {
    PutVarint(out_, start - previous_start);
    PutVarint(out_, bytes);
    previous_start = start;
  }
}

void RecordEncoder::String(const StringRecord& r) {
  PutType(out_, RecordType::kString);
  PutVarint(out_, r.id);
  PutString(out_, r.text);
}

void RecordEncoder::Sampling(const SamplingRecord& r) {
  PutType(out_, RecordType::kSampling);
  PutVarint(out_, 0);  // the 9.0 layout: a rate is never 0 (docs/capture-format.md)
  PutVarint(out_, r.rate);
  PutVarint(out_, r.exact_from == kNoExactThreshold ? 0 : r.exact_from);
}

void RecordEncoder::BeginEvents(uint32_t thread) {
  EndEvents();
  batches_.push_back({thread, 0});
  batch_open_ = true;
  last_seq_ = 0;
  last_address_ = 0;
  last_stack_ = 0;
  first_in_batch_ = true;
  auto [it, added] = thread_allocations_.try_emplace(thread);
  if (added) it->second.StartAt(allocations_noted_);  // EndSlot's serials never repeat
  batch_allocations_ = &it->second;  // stays valid: the map is node-based
}

uint64_t RecordEncoder::BackReference(uint64_t address) {
  ThreadAllocations& mine = *batch_allocations_;
  if (address == 0 || mine.empty()) return 0;
  uint64_t back = 0;
  if (mine.Holds(mine.last_back, address)) {
    back = mine.last_back;
  } else if (mine.Holds(mine.window_back, address)) {
    back = mine.window_back;
  } else if (mine.Holds(1, address)) {
    back = 1;
  } else {
    const RecentSlot& slot = recent_[RecentIndex(address)];
    uint64_t guess = static_cast<uint32_t>(static_cast<uint32_t>(mine.added()) - slot.serial) + 1ull;
    if (slot.serial != 0 && slot.thread == batches_.back().first && mine.Holds(guess, address)) {
      back = guess;
    }
  }
  if (back != 0) mine.last_back = back;
  if (back > 1) mine.window_back = back;
  return back;
}

// The allocation, of this batch's thread and in reach, that ends where `address` starts, with
// an address coded in full recently enough (as for reuses); *origin: that chunk.
uint64_t RecordEncoder::Neighbour(uint64_t address, uint32_t* origin) {
  const ThreadAllocations& mine = *batch_allocations_;
  const EndSlot& slot = ends_[EndIndex(address)];
  // The slot's serial is the allocation's full number, so its fields are that allocation's
  // as the list holds them, while the list still does (back within size()).
  if (slot.end != address || slot.thread != batches_.back().first || slot.serial == 0) return 0;
  const uint64_t back = mine.added() - slot.serial + 1;
  if (back > mine.size() || chunk_ - slot.origin > kReuseOriginChunks) return 0;
  *origin = slot.origin;
  return back;
}

void RecordEncoder::NoteAllocation(uint64_t address, uint64_t size, uint32_t origin) {
  ThreadAllocations& mine = *batch_allocations_;
  mine.Add(address, size, origin);
  ++allocations_noted_;
  if (address == 0) return;
  const uint32_t thread = batches_.back().first;
  const uint64_t serial = mine.added();
  const uint32_t low = static_cast<uint32_t>(serial);
  recent_[RecentIndex(address)] = {thread, low == 0 ? 1 : low};
  if (uint64_t end = ReachableAllocations::EndOf(address, size)) {
    ends_[EndIndex(end)] = {end, serial, thread, origin};
  }
}

void RecordEncoder::AddEvent(const Event& e) {
  kinds_.PutByte(static_cast<uint8_t>(e.kind));
  // Seqs rise within a batch: store the gap minus one (0 for a single-threaded program).
  seqs_.PutVarint(first_in_batch_ ? e.seq : e.seq - last_seq_ - 1);
  const uint64_t rotated = RotateAddress(e.address);
  const uint64_t size = HasSize(e.kind) ? e.size : 0;
  ThreadAllocations& mine = *batch_allocations_;
  // The address chain moves only to addresses coded in full in this chunk, so that a reader
  // resuming mid-capture decodes them right (docs/capture-format.md, section 5).
  bool coded_in_full = true;
  bool moves_chain = true;
  if (AddressChain(e.kind) == 0) {
    // Neighbour's slot, fetched while the reused blocks are searched (the table is too large
    // to stay in the cache).
    __builtin_prefetch(&ends_[EndIndex(e.address)]);
    // A block freed earlier in this chunk, unless its address was coded in full too long ago.
    const uint32_t size_class = ReuseClass(size);
    ReusedBlocks::Block block{e.address, chunk_};
    uint32_t rank = mine.reused.Rank(size_class, e.address, &block);
    if (rank != 0 && chunk_ - block.origin <= kReuseOriginChunks) {
      mine.reused.Take(size_class, rank, &block);
      coded_in_full = false;
      moves_chain = block.origin == chunk_;
    } else {
      rank = 0;
      block.origin = chunk_;
    }
    static_assert(ReusedBlocks::kDepth < 0x80);
    reuses_.PutByte(static_cast<uint8_t>(rank));  // a one-byte varint
    if (rank == 0) {
      uint32_t origin = chunk_;
      uint64_t neighbour = Neighbour(e.address, &origin);
      neighbours_.PutVarint(neighbour);
      if (neighbour != 0) {
        coded_in_full = false;
        block.origin = origin;
        moves_chain = origin == chunk_;
      }
    }
    NoteAllocation(e.address, size, block.origin);
  } else {
    uint64_t reference = BackReference(e.address);
    releases_.PutVarint(reference);
    if (reference != 0) {
      coded_in_full = false;
      moves_chain = mine.InCurrentChunk(reference) && mine.Origin(reference) == chunk_;
      mine.Released(e.kind, reference);
    }
  }
  if (coded_in_full) address_deltas_.push_back(ZigZag(static_cast<int64_t>(rotated - last_address_)));
  if (moves_chain) last_address_ = rotated;
  if (HasSize(e.kind)) size_values_.push_back(e.size);
  if (HasStack(e.kind)) {
    stacks_.PutSignedVarint(static_cast<int64_t>(e.stack - last_stack_));
    last_stack_ = e.stack;
  }
  last_seq_ = e.seq;
  first_in_batch_ = false;
  ++batches_.back().second;
}

void RecordEncoder::EndEvents() {
  if (!batch_open_) return;
  batch_open_ = false;
  if (batches_.back().second == 0) batches_.pop_back();
}

void RecordEncoder::FinishEvents() {
  EndEvents();
  batch_allocations_ = nullptr;
  if (batches_.empty()) return;
  PutType(out_, RecordType::kEventColumns);
  PutVarint(out_, batches_.size());
  for (const auto& [thread, count] : batches_) {
    PutVarint(out_, thread);
    PutVarint(out_, count);
  }
  const int address_width = PutPlanes(address_deltas_, &addresses_);
  const int size_width = PutPlanes(size_values_, &sizes_);
  for (ByteColumn* column :
       {&kinds_, &seqs_, &releases_, &reuses_, &neighbours_, &addresses_, &sizes_, &stacks_}) {
    PutVarint(out_, column->size());
    block_starts_.push_back(out_->size());
    const bool planes = column == &addresses_ || column == &sizes_;
    const int width = column == &addresses_ ? address_width : size_width;
    const size_t values = column == &addresses_ ? address_deltas_.size() : size_values_.size();
    for (int plane = 1; planes && plane < width; ++plane) {  // each plane a block of its own
      block_starts_.push_back(out_->size() + 1 + plane * values);
    }
    out_->append(column->data(), column->size());
    column->clear();
  }
  batches_.clear();
  address_deltas_.clear();
  size_values_.clear();
}

// Back-references reach kReleaseReachChunks chunks back: forget the allocations of the chunk
// that falls out of reach (the recent table needs no clearing: its hits are checked).
void RecordEncoder::NextChunk() {
  ++chunk_;
  block_starts_.clear();
  for (auto it = thread_allocations_.begin(); it != thread_allocations_.end();) {
    it->second.NextChunk();
    it = it->second.empty() ? thread_allocations_.erase(it) : std::next(it);
  }
}

}  // namespace memlens::format
