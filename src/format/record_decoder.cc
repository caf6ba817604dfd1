// src/format/record_decoder.cc: see record_decoder.h; layout in docs/capture-format.md.
#include "format/record_decoder.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <unordered_map>
#include <vector>

#include "base/varint.h"

namespace memlens::format {
namespace {

// Cursor over a payload; every getter fails (sticky) rather than read past the end.
class Cursor {
 public:
  explicit Cursor(std::string_view data)
      : begin_(reinterpret_cast<const uint8_t*>(data.data())), p_(begin_), end_(p_ + data.size()) {}

  bool AtEnd() const { return p_ >= end_; }
  uint64_t Remaining() const { return static_cast<uint64_t>(end_ - p_); }
  bool ok() const { return ok_; }
  size_t offset() const { return p_ - begin_; }

  uint64_t Varint() {
    uint64_t v = 0;
    if (ok_ && !GetVarint(&p_, end_, &v)) ok_ = false;
    return ok_ ? v : 0;
  }
  int64_t SignedVarint() { return UnZigZag(Varint()); }
  uint8_t Byte() {
    if (!ok_ || p_ >= end_) {
      ok_ = false;
      return 0;
    }
    return *p_++;
  }
  std::string String() {
    uint64_t n = Varint();
    if (!ok_ || n > static_cast<uint64_t>(end_ - p_)) {
      ok_ = false;
      return {};
    }
    std::string s(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return s;
  }
  std::string_view Bytes(uint64_t n) {
    if (!ok_ || n > static_cast<uint64_t>(end_ - p_)) {
      ok_ = false;
      return {};
    }
    std::string_view out(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return out;
  }
  // Guards counts read from the input before they size a loop or a vector.
  uint64_t Count(uint64_t min_bytes_each) {
    uint64_t n = Varint();
    if (ok_ && n > static_cast<uint64_t>(end_ - p_) / min_bytes_each) ok_ = false;
    return ok_ ? n : 0;
  }

 private:
  const uint8_t* begin_;
  const uint8_t* p_;
  const uint8_t* end_;
  bool ok_ = true;
};

// A column of an event batch: its own cursor over its own bytes.
Cursor TakeColumn(Cursor* c) {
  uint64_t size = c->Count(1);
  std::string_view bytes = c->Bytes(size);
  return Cursor(bytes);
}

// A column of byte planes (see the encoder's PutPlanes): a width byte, then `width` planes of
// one byte per value.
class Planes {
 public:
  // False when the column is malformed.
  bool Open(Cursor column) {
    width_ = column.Byte();
    values_ = width_ == 0 ? 0 : column.Remaining() / width_;
    if (!column.ok() || width_ > 8 || (width_ == 0 && !column.AtEnd()) ||
        (width_ != 0 && column.Remaining() % width_ != 0)) {
      return false;
    }
    bytes_ = reinterpret_cast<const uint8_t*>(column.Bytes(width_ * values_).data());
    return true;
  }
  uint64_t Next() {
    if (width_ == 0) return 0;
    if (next_ >= values_) {
      ok_ = false;
      return 0;
    }
    uint64_t v = 0;
    for (int plane = 0; plane < width_; ++plane) {
      v |= static_cast<uint64_t>(bytes_[plane * values_ + next_]) << (8 * plane);
    }
    ++next_;
    return v;
  }
  bool ok() const { return ok_; }
  bool AllRead() const { return next_ == values_; }

 private:
  uint8_t width_ = 0;
  uint64_t values_ = 0, next_ = 0;
  const uint8_t* bytes_ = nullptr;
  bool ok_ = true;
};

// Events go to the visitor in groups (OnEvents), so that it sees a few ahead (Upcoming); small
// ones, which stay in the first-level cache between being decoded and being replayed.
constexpr size_t kDeliveryGroup = 256;

void Deliver(RecordVisitor* v, DecodeState* state) {
  if (!state->delivered.empty()) v->OnEvents(state->delivered.data(), state->delivered.size());
  state->delivered.clear();
}

// Decodes a kEventColumns record (or 8.x's kEvents, which lacks the neighbours column): its
// events go to the visitor one by one, or, when it wants hints, in groups gathered in
// state->delivered.
bool DecodeEventColumns(Cursor* c, RecordVisitor* v, std::string* error, EventDecoding mode,
                        DecodeState* state, bool has_neighbours) {
  uint64_t batch_count = c->Count(2);
  std::vector<std::pair<uint32_t, uint64_t>> batches;
  uint64_t total = 0;
  for (uint64_t b = 0; b < batch_count && c->ok(); ++b) {
    uint32_t thread = static_cast<uint32_t>(c->Varint());
    uint64_t count = c->Varint();
    if (count > (uint64_t{1} << 32)) {
      *error = "implausible event batch size";
      return false;
    }
    total += count;
    batches.push_back({thread, count});
  }
  Cursor kinds = TakeColumn(c), seqs = TakeColumn(c), releases = TakeColumn(c),
         reuses = TakeColumn(c), neighbours = has_neighbours ? TakeColumn(c) : Cursor({}),
         addresses = TakeColumn(c), sizes = TakeColumn(c), stacks = TakeColumn(c);
  if (!c->ok()) return false;
  if (mode == EventDecoding::kSkip) return true;  // the columns are stepped over
  const bool deliver = mode == EventDecoding::kDeliver;
  const bool grouped = deliver && v->WantsUpcoming();  // else one by one, without the copy
  if (kinds.Remaining() != total) {  // one kind byte per event: the counts must add up
    *error = "event counts do not match the kinds column";
    return false;
  }
  // Address deltas (and 9.0's sizes): byte planes.
  Planes address_planes, size_planes;
  if (!address_planes.Open(addresses)) {
    *error = "bad address column";
    return false;
  }
  if (has_neighbours && !size_planes.Open(sizes)) {
    *error = "bad size column";
    return false;
  }
  auto next_delta = [&]() -> uint64_t {
    return static_cast<uint64_t>(UnZigZag(address_planes.Next()));
  };
  // Chunks before the first decoded one may be missing from what this chunk's events are coded
  // against; with kAllocations that is allowed until kResumeChunks are decoded (the addresses
  // it gets wrong are not ones a delivered chunk names), and the address is then 0.
  const bool tolerant = mode == EventDecoding::kAllocations && !state->previous_known();
  const uint32_t chunk = state->chunk();
  for (const auto& [thread, count] : batches) {
    Event e;
    e.thread = thread;
    ReachableAllocations& list = state->allocations[thread];
    uint64_t seq = 0, stack = 0, last_address = 0;
    for (uint64_t k = 0; k < count; ++k) {
      uint8_t kind = kinds.Byte();
      if (!kinds.ok()) break;
      if (!IsKnownEventKind(kind)) {
        *error = "unknown event kind " + std::to_string(kind);
        return false;
      }
      e.kind = static_cast<EventKind>(kind);
      uint64_t gap = seqs.Varint();
      seq = k == 0 ? gap : seq + gap + 1;
      e.size = !HasSize(e.kind) ? 0 : has_neighbours ? size_planes.Next() : sizes.Varint();
      // The address: in full (a delta on the chain), a back-reference, or a reused block. The
      // chain moves only to addresses coded in full in this chunk (see the encoder).
      bool coded_in_full = true;
      bool moves_chain = true;
      uint32_t origin = chunk;
      if (AddressChain(e.kind) == 0) {
        uint64_t rank = reuses.Varint();  // 0: the address is in full
        ReusedBlocks::Block block;
        uint64_t neighbour = rank == 0 && has_neighbours ? neighbours.Varint() : 0;
        if (rank == 0 && neighbour == 0) {
          // (coded in full)
        } else if (neighbour != 0 && neighbour <= list.size() && list.End(neighbour) != 0) {
          e.address = list.End(neighbour);
          origin = list.Origin(neighbour);
          coded_in_full = false;
          moves_chain = origin == chunk;
        } else if (neighbour != 0 && !tolerant) {
          *error = "an allocation names neighbour " + std::to_string(neighbour) +
                   " of its thread, beyond those decoded or of no known end";
          return false;
        } else if (neighbour == 0 && rank <= ReusedBlocks::kDepth &&
                   list.reused.Take(ReuseClass(e.size), static_cast<uint32_t>(rank), &block)) {
          e.address = block.address;
          origin = block.origin;
          coded_in_full = false;
          moves_chain = origin == chunk;
        } else if (tolerant) {  // a reuse or a neighbour of what was not decoded
          e.address = 0;
          origin = chunk - static_cast<uint32_t>(kResumeChunks);  // unknown: never moves a chain
          coded_in_full = moves_chain = false;
        } else {
          *error = "an allocation names reused block " + std::to_string(rank) +
                   " of its size class, beyond those its thread released in the chunk";
          return false;
        }
      } else {
        uint64_t back = releases.Varint();  // 0: the address is in full
        if (back == 0) {
          // (coded in full)
        } else if (back <= list.size()) {
          e.address = list.Address(back);
          coded_in_full = false;
          moves_chain = list.InCurrentChunk(back) && list.Origin(back) == chunk;
          list.Released(e.kind, back);
        } else if (tolerant) {
          e.address = 0;  // an allocation of a skipped chunk: not needed here
          coded_in_full = moves_chain = false;
        } else {
          *error = "a release refers back to allocation " + std::to_string(back) +
                   " of its thread, beyond those decoded";
          return false;
        }
      }
      if (coded_in_full) {
        last_address += next_delta();
        e.address = UnrotateAddress(last_address);
      } else if (moves_chain) {
        last_address = RotateAddress(e.address);
      }
      if (AddressChain(e.kind) == 0) list.Add(e.address, e.size, origin);
      e.seq = seq;
      if (HasStack(e.kind)) {
        stack += static_cast<uint64_t>(stacks.SignedVarint());
        e.stack = stack;
      } else {
        e.stack = 0;
      }
      if (!seqs.ok() || !releases.ok() || !reuses.ok() || !neighbours.ok() ||
          !address_planes.ok() || !sizes.ok() || !size_planes.ok() || !stacks.ok()) {
        break;
      }
      if (grouped) {
        state->delivered.push_back(e);
        if (state->delivered.size() == kDeliveryGroup) Deliver(v, state);
      } else if (deliver) {
        v->OnEvent(e);
      }
    }
  }
  bool complete = kinds.ok() && seqs.ok() && releases.ok() && reuses.ok() && neighbours.ok() &&
                  address_planes.ok() && sizes.ok() && size_planes.ok() && stacks.ok();
  if (!complete) {
    *error = "an event column ends early";
  } else if (!address_planes.AllRead()) {
    *error = "bytes left over in the address column";
    complete = false;
  } else if (has_neighbours && !size_planes.AllRead()) {
    *error = "bytes left over in the size column";
    complete = false;
  }
  return complete;
}

// Those decoded before a corrupt event are delivered all the same.
bool DecodeEvents(Cursor* c, RecordVisitor* v, std::string* error, EventDecoding mode,
                  DecodeState* state, bool has_neighbours) {
  state->delivered.clear();
  bool ok = DecodeEventColumns(c, v, error, mode, state, has_neighbours);
  Deliver(v, state);
  return ok;
}

// kMappings (records.h): a mapping that ends before it starts, overlaps the one before, or
// whose runs of pages or resident figures exceed it is corrupt.
bool DecodeMappings(Cursor* c, MappingsRecord* r) {
  r->monotonic_ns = c->Varint();
  r->seq = c->Varint();
  r->read_ns = c->Varint();
  r->page_size = c->Varint();
  const uint64_t page = r->page_size;
  if (page == 0 || (page & (page - 1)) != 0 || page > (uint64_t{1} << 30)) return false;
  const uint64_t max_pages = UINT64_MAX / page;
  uint64_t count = c->Count(10);  // every mapping takes at least 10 bytes
  r->mappings.reserve(count);
  uint64_t previous_end_pages = 0;
  for (uint64_t i = 0; i < count && c->ok(); ++i) {
    Mapping m;
    uint64_t gap = c->Varint(), pages = c->Varint();
    if (gap > max_pages - previous_end_pages || pages > max_pages - previous_end_pages - gap ||
        (pages == 0 && c->ok())) {  // the kernel lists no empty mapping
      return false;
    }
    m.start = (previous_end_pages + gap) * page;
    m.end = m.start + pages * page;
    previous_end_pages += gap + pages;
    m.flags = c->Byte();
    m.offset = c->Varint();
    m.inode = c->Varint();
    m.name = c->String();
    uint64_t rss = c->Varint(), anonymous = c->Varint(), swap = c->Varint();
    if (rss > pages || anonymous > pages || swap > pages) return false;
    m.rss = rss * page;
    m.anonymous = anonymous * page;
    m.swap = swap * page;
    uint64_t runs = c->Count(1);
    m.page_runs.reserve(runs);
    uint64_t covered = 0;
    for (uint64_t k = 0; k < runs && c->ok(); ++k) {
      uint64_t run = c->Varint();
      if (run > pages - covered) return false;
      covered += run;
      m.page_runs.push_back(run);
    }
    r->mappings.push_back(std::move(m));
  }
  uint64_t own = c->Count(2);
  uint64_t previous_start = 0;
  for (uint64_t i = 0; i < own && c->ok(); ++i) {
    uint64_t gap = c->Varint(), bytes = c->Varint();
    if (gap > UINT64_MAX - previous_start || bytes > UINT64_MAX - previous_start - gap) return false;
    previous_start += gap;
    r->own.push_back({previous_start, bytes});
  }
  return c->ok();
}

}  // namespace

void DecodeState::StartChunk(EventDecoding events) {
  ++chunk_;
  decoded_since_skip_ = chunk_decoded_ ? std::min(decoded_since_skip_ + 1, kResumeChunks) : 0;
  chunk_decoded_ = events != EventDecoding::kSkip;
  if (decoded_since_skip_ == 0) allocations.clear();  // the chunk before was stepped over
  for (auto it = allocations.begin(); it != allocations.end();) {
    it->second.NextChunk();
    it = it->second.empty() ? allocations.erase(it) : std::next(it);
  }
}

bool DecodeRecords(std::string_view payload, RecordVisitor* v, std::string* error,
                   EventDecoding events, DecodeState* state, std::string* metadata) {
  DecodeState local;
  if (!state) state = &local;
  state->StartChunk(events);
  Cursor c(payload);
  while (!c.AtEnd()) {
    size_t record_offset = c.offset();
    auto type = static_cast<RecordType>(c.Byte());
    std::string detail;
    switch (type) {
      case RecordType::kProcess: {
        ProcessRecord r;
        r.pid = c.Varint();
        r.ppid = c.Varint();
        r.start_realtime_ns = c.Varint();
        r.start_monotonic_ns = c.Varint();
        r.executable = c.String();
        uint64_t argc = c.Count(1);
        for (uint64_t i = 0; i < argc && c.ok(); ++i) r.argv.push_back(c.String());
        DecodeAgentVersion(c.String(), &r);
        if (c.ok()) state->StartImage();
        if (c.ok()) v->OnProcess(r);
        break;
      }
      case RecordType::kModule: {
        ModuleRecord r;
        r.id = c.Varint();
        r.load_bias = c.Varint();
        r.path = c.String();
        r.build_id = c.String();
        uint64_t n = c.Count(2);
        for (uint64_t i = 0; i < n && c.ok(); ++i) {
          Segment s;
          s.start = c.Varint();
          s.size = c.Varint();
          r.segments.push_back(s);
        }
        if (c.ok()) v->OnModule(r);
        break;
      }
      case RecordType::kModuleUnload: {
        ModuleUnloadRecord r{c.Varint()};
        if (c.ok()) v->OnModuleUnload(r);
        break;
      }
      case RecordType::kThread: {
        ThreadRecord r;
        r.index = c.Varint();
        r.tid = c.Varint();
        if (c.ok()) v->OnThread(r);
        break;
      }
      case RecordType::kStackNode: {
        StackNodeRecord r;
        uint64_t gap = c.Varint();  // the node's id - 1 - its parent
        r.ip = c.Varint();
        if (c.ok() && gap >= state->stack_nodes + 1) {
          *error = "stack node " + std::to_string(state->stack_nodes + 1) +
                   " names a parent after it at payload offset " + std::to_string(record_offset);
          return false;
        }
        r.parent = state->stack_nodes - gap;
        if (c.ok()) {
          ++state->stack_nodes;
          v->OnStackNode(r);
        }
        break;
      }
      case RecordType::kEvents:
      case RecordType::kEventColumns:
        if (!DecodeEvents(&c, v, &detail, events, state, type == RecordType::kEventColumns)) {
          *error = "corrupt event batch at payload offset " + std::to_string(record_offset) +
                   (detail.empty() ? "" : ": " + detail);
          return false;
        }
        break;
      case RecordType::kTime: {
        TimeRecord r;
        r.monotonic_ns = c.Varint();
        r.seq = c.Varint();
        if (c.ok()) v->OnTime(r);
        break;
      }
      case RecordType::kEnd: {
        EndRecord r;
        r.reason = static_cast<EndReason>(c.Byte());
        r.monotonic_ns = c.Varint();
        r.events = c.Varint();
        r.dropped = c.Varint();
        r.detail = c.SignedVarint();
        r.unrecorded_children = c.Varint();
        if (c.ok()) v->OnEnd(r);
        break;
      }
      case RecordType::kDrops: {
        DropsRecord r{c.Varint()};
        if (c.ok()) v->OnDrops(r);
        break;
      }
      case RecordType::kPythonCode: {
        PythonCodeRecord r;
        r.id = c.Varint();
        r.filename = c.String();
        r.name = c.String();
        r.first_line = c.Varint();
        if (c.ok()) v->OnPythonCode(r);
        break;
      }
      case RecordType::kResident: {
        ResidentRecord r;
        r.monotonic_ns = c.Varint();
        r.bytes = c.Varint();
        if (c.ok()) v->OnResident(r);
        break;
      }
      case RecordType::kMappings: {
        MappingsRecord r;
        if (!DecodeMappings(&c, &r) && c.ok()) {
          *error = "impossible mappings at payload offset " + std::to_string(record_offset);
          return false;
        }
        if (c.ok()) v->OnMappings(r);
        break;
      }
      case RecordType::kString: {
        StringRecord r;
        r.id = c.Varint();
        r.text = c.String();
        if (c.ok()) v->OnString(r);
        break;
      }
      case RecordType::kSampling: {
        // 8.x: the rate alone. 9.0: 0, the rate, then exact_from (0: none).
        SamplingRecord r{c.Varint()};
        if (c.ok() && r.rate == 0) {
          r.rate = c.Varint();
          uint64_t exact_from = c.Varint();
          if (exact_from != 0) r.exact_from = exact_from;
        }
        if (c.ok() && r.rate == 0) {
          *error = "sampling record with rate 0 at payload offset " + std::to_string(record_offset);
          return false;
        }
        if (c.ok()) v->OnSampling(r);
        break;
      }
      default:
        *error = "unknown record type " + std::to_string(static_cast<int>(type)) +
                 " at payload offset " + std::to_string(record_offset);
        return false;
    }
    if (!c.ok()) {
      *error = "record cut short at payload offset " + std::to_string(record_offset);
      return false;
    }
    // Mapping samples are many and big: kept out of the snapshot index (a view that explains
    // resident memory reads the capture itself).
    if (metadata && type != RecordType::kEvents && type != RecordType::kEventColumns &&
        type != RecordType::kMappings) {
      metadata->append(payload.substr(record_offset, c.offset() - record_offset));
    }
  }
  return true;
}

const char* EventKindName(EventKind kind) {
  switch (kind) {
    case EventKind::kMalloc: return "malloc";
    case EventKind::kCalloc: return "calloc";
    case EventKind::kRealloc: return "realloc";
    case EventKind::kPosixMemalign: return "posix_memalign";
    case EventKind::kAlignedAlloc: return "aligned_alloc";
    case EventKind::kMemalign: return "memalign";
    case EventKind::kValloc: return "valloc";
    case EventKind::kPvalloc: return "pvalloc";
    case EventKind::kReallocArray: return "reallocarray";
    case EventKind::kPyObjAlloc: return "PyObject_Malloc";
    case EventKind::kPyMemAlloc: return "PyMem_Malloc";
    case EventKind::kPyRawAlloc: return "PyMem_RawMalloc";
    case EventKind::kPyArenaAlloc: return "pymalloc arena";
    case EventKind::kPyArenaFree: return "pymalloc arena (free)";
    case EventKind::kMimallocMap: return "mimalloc mapping";
    case EventKind::kMimallocUnmap: return "mimalloc mapping (unmap)";
    case EventKind::kFree: return "free";
    case EventKind::kReallocOld: return "realloc(old)";
    case EventKind::kReallocFailed: return "realloc(failed)";
    case EventKind::kMmap: return "mmap";
    case EventKind::kMunmap: return "munmap";
    case EventKind::kMremapOld: return "mremap(old)";
    case EventKind::kMremapNew: return "mremap";
    case EventKind::kMremapFailed: return "mremap(failed)";
    case EventKind::kMmapReserved: return "mmap(PROT_NONE)";
    case EventKind::kProtect: return "mprotect";
    case EventKind::kProtectNone: return "mprotect(PROT_NONE)";
    case EventKind::kHeapCreate: return "heap create";
    case EventKind::kHeapAlloc: return "heap alloc";
    case EventKind::kHeapRealloc: return "heap realloc";
    case EventKind::kHeapFree: return "heap free";
    case EventKind::kHeapReset: return "heap reset";
    case EventKind::kHeapDestroy: return "heap destroy";
    case EventKind::kMarker: return "marker";
    case EventKind::kSnapshot: return "snapshot";
    case EventKind::kProgramEnd: return "program end";
  }
  return "?";
}

namespace {
// The numbers kProcess carries inside agent_version, each as " mark=DIGITS", in this order.
struct VersionNumber {
  const char* mark;
  uint64_t ProcessRecord::*member;
};
constexpr VersionNumber kVersionNumbers[] = {
    {kRecordedParentMark, &ProcessRecord::recorded_parent},
    {kForkParentImageMark, &ProcessRecord::fork_parent_image_ns},
    {kForkSeqMark, &ProcessRecord::fork_seq},
};
}  // namespace

std::string CodedAgentVersion(const ProcessRecord& p) {
  std::string numbers;
  for (const VersionNumber& n : kVersionNumbers) {
    if (p.*n.member) numbers += n.mark + std::to_string(p.*n.member);
  }
  std::string version = p.agent_version;
  const size_t at = PythonStacksOnly(p) ? version.size() - (sizeof(kPythonStacksMark) - 1)
                                        : version.size();
  version.insert(at, numbers);
  return version;
}

void DecodeAgentVersion(const std::string& coded, ProcessRecord* p) {
  p->agent_version = coded;
  for (const VersionNumber& n : kVersionNumbers) {
    p->*n.member = 0;
    std::string& version = p->agent_version;
    const size_t at = version.find(n.mark);
    if (at == std::string::npos) continue;
    const size_t digits = at + strlen(n.mark);
    size_t end = digits;
    while (end < version.size() && version[end] >= '0' && version[end] <= '9') ++end;
    if (end == digits || end - digits > 19) continue;  // not a number: left in the version
    p->*n.member = std::stoull(version.substr(digits, end - digits));
    version.erase(at, end - at);
  }
}

const char* EndReasonName(EndReason reason) {
  switch (reason) {
    case EndReason::kExit: return "exit";
    case EndReason::kExec: return "exec";
    case EndReason::kSignal: return "signal";
    case EndReason::kStopped: return "stopped";
  }
  return "unknown";
}

}  // namespace memlens::format
