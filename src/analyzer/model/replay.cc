// src/analyzer/model/replay.cc: see replay.h.
#include "analyzer/model/replay.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <cstdio>
#include <cstring>
#include <cerrno>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <cstdlib>
#include <deque>
#include <map>
#include <set>
#include <unordered_set>

#include "analyzer/model/address_map.h"
#include "analyzer/model/snapshot_index.h"
#include "base/varint.h"
#include "analyzer/model/markers.h"

namespace memlens::analyzer {
namespace {

using format::EventKind;

constexpr uint64_t kTruncatedMarkerIp = 1;  // see the agent's writer

// A tracked anonymous mapping, or a piece of one: mprotect cuts mappings into pieces.
struct Region {
  uint64_t end;
  uint64_t stack;
  bool counted;  // accessible memory (format::MappingCounts), else reserved address space
};

// Where an allocation's bytes come from: the heap (native or Python) or the mappings.
enum class Domain { kNative, kPython, kMapping };
Domain HeapDomain(bool python) { return python ? Domain::kPython : Domain::kNative; }

// What one recorded block stands for. Block counts are kept in 1/65536ths during the replay, so
// that the fractional counts of a sampled capture add up without rounding bias; Finish turns
// them back into whole blocks. Bytes are whole bytes.
constexpr uint64_t kCountUnit = uint64_t{1} << 16;
struct Weight {
  uint64_t bytes;
  uint64_t count;  // in kCountUnit
};
uint64_t WholeBlocks(uint64_t units) { return (units + kCountUnit / 2) / kCountUnit; }

// Per-stack counters plus the bookkeeping that yields each stack's share of the global peak
// without copying the live set at every new peak: a stack's value at the last peak is
// snapshotted lazily, the first time the stack changes after that peak.
struct StackState {
  StackStats stats;
  uint64_t live_bytes = 0;
  uint64_t live_blocks = 0;
  uint64_t python_live_bytes = 0;
  uint64_t mapping_live_bytes = 0;
  uint64_t changed_in_epoch = 0;
};

// The fields of the saved state (SaveState), one list for saving and restoring.
template <typename T, typename F>
void TotalsFields(T& t, F&& f) {  // dropped_events is metadata; the leaked figures come at Finish
  for (auto* v : {&t.allocations, &t.allocated_bytes, &t.frees, &t.peak_bytes, &t.peak_blocks,
                  &t.peak_seq, &t.python_allocated_bytes, &t.arena_peak_bytes,
                  &t.mimalloc_peak_bytes, &t.temporary,
                  &t.unmatched_frees, &t.events, &t.heap_peak_bytes, &t.mapping_peak_bytes,
                  &t.mapping_allocated_bytes}) {
    f(*v);
  }
}
template <typename T, typename F>
void StateFields(T& s, F&& f) {
  for (auto* v : {&s.stats.allocations, &s.stats.allocated_bytes, &s.stats.peak_bytes,
                  &s.stats.peak_blocks, &s.stats.python_allocated_bytes,
                  &s.stats.python_peak_bytes, &s.stats.temporary, &s.stats.temporary_bytes,
                  &s.live_bytes, &s.live_blocks, &s.python_live_bytes, &s.changed_in_epoch,
                  &s.stats.mapping_allocated_bytes, &s.stats.mapping_peak_bytes,
                  &s.mapping_live_bytes}) {
    f(*v);
  }
}

class Replayer : public format::RecordVisitor {
 public:
  // stop_before_seq: events from this sequence number on are not replayed (a snapshot).
  Replayer(Profile* p, const SnapshotSpec& spec, const ReplayOptions& options,
           uint64_t stop_before_seq)
      : p_(p), spec_(spec), options_(options), stop_seq_(stop_before_seq) {}

  void OnProcess(const format::ProcessRecord& r) override {
    if (p_->has_process) StartOver();  // exec: the new image replaces the old one
    p_->process = r;
    p_->has_process = true;
  }
  void OnModule(const format::ModuleRecord& r) override {
    p_->modules[r.id] = r;
    loaded_.push_back(r.id);
    IndexLoadedSegments();
  }
  void OnModuleUnload(const format::ModuleUnloadRecord& r) override {
    // No such module loaded: a damaged capture's record, which names nothing to unload.
    if (std::find(loaded_.begin(), loaded_.end(), r.id) == loaded_.end()) return;
    loaded_.erase(std::remove(loaded_.begin(), loaded_.end(), r.id), loaded_.end());
    unloaded_.push_back(r.id);
    IndexLoadedSegments();
  }
  // A thread that allocates again after its buffer was retired (in late TLS destructors) gets
  // a second index: count OS threads, not indices.
  void OnThread(const format::ThreadRecord& r) override {
    if (tids_.insert(r.tid).second) ++p_->thread_count;
    tid_of_[r.index] = r.tid;
  }
  void OnStackNode(const format::StackNodeRecord& r) override {
    p_->nodes.push_back({r.parent, r.ip, ModuleOf(r.ip)});
  }
  void OnTime(const format::TimeRecord& r) override {
    p_->times.push_back(r);
    pending_marks_.push_back(r);
    // Within a chunk time marks come before its events: every event delivered so far
    // happened before this mark. The first mark past the snapshot time ends the replay.
    if (spec_.kind == SnapshotSpec::kTime && r.monotonic_ns > spec_.seconds * 1e9 &&
        stop_seq_ == UINT64_MAX) {
      stop_seq_ = r.seq;
      stop_seconds_ = static_cast<double>(r.monotonic_ns) / 1e9;
    }
    // Checkpoints the same way: taken once the delivered events reach this mark.
    while (next_checkpoint_ < options_.checkpoint_seconds.size() &&
           r.monotonic_ns > options_.checkpoint_seconds[next_checkpoint_] * 1e9) {
      pending_checkpoints_.push_back({next_checkpoint_++, r});
    }
  }
  void OnResident(const format::ResidentRecord& r) override { p_->resident.push_back(r); }
  void OnPythonCode(const format::PythonCodeRecord& r) override { p_->python_codes[r.id] = r; }
  void OnString(const format::StringRecord& r) override { p_->strings[r.id] = r.text; }
  void OnDrops(const format::DropsRecord& r) override { p_->totals.dropped_events += r.count; }
  void OnEnd(const format::EndRecord& r) override { p_->end = r; }
  void OnSampling(const format::SamplingRecord& r) override { p_->sample_rate = r.rate; }
  void OnEvent(const format::Event& e) override;
  // Worth it once the live blocks' table outgrows the second-level cache (churn's stays small).
  bool WantsUpcoming() const override { return heap_.table_bytes() > (size_t{1} << 20); }
  void Upcoming(const format::Event& e) override;

  void Finish();
  bool stopped_early() const { return stop_seconds_ >= 0; }
  uint64_t stop_seq() const { return stop_seq_; }  // events from this one on are not wanted

  // The snapshot index: take checkpoints into `writer` while replaying everything, or start
  // from a checkpoint's state (the reader then delivers events from its seq on).
  void BuildIndex(SnapshotIndexWriter* writer) { index_writer_ = writer; }
  // Once every event is in: the end of the index (IndexEnd). The timeline points still due are
  // taken first, as Finish would take them, so the saved state has them all.
  void SaveEnd(const std::vector<std::string>& metadata, const ReadStatus& status) {
    if (!index_writer_) return;
    TakeTimelinePoints(UINT64_MAX);
    std::string state;
    SaveState(&state);
    index_writer_->SetEnd(state, p_->timeline.size(), p_->totals.events, metadata, status);
  }
  void ResumeFrom(std::string state, uint64_t seq, std::vector<TimelinePoint> timeline) {
    resume_state_ = std::move(state);
    resume_seq_ = seq;
    resume_timeline_ = std::move(timeline);
    resume_pending_ = true;
  }

 private:
  // Everything the events have built up, as a byte string; see kIndexVersion.
  void SaveState(std::string* out) const;
  void RestoreState();
  void StartOver();
  void TakeTimelinePoints(uint64_t before_seq);
  void TakeCheckpoints(uint64_t before_seq);
  void TakeCheckpoint(double seconds, double at_seconds, uint64_t before_seq);
  void OnApiEvent(const format::Event& e);
  uint32_t HeapOfStack(uint64_t stack) const;
  void FindBackingMemory();
  void CountSize(uint64_t stack, uint64_t size, Weight w);
  // Inline, as State below: one of each for every event.
  Weight HeapWeight(uint64_t size) const {
    return p_->sample_rate == 0 || size == 0 ? Weight{size, kCountUnit} : SampledWeight(size);
  }
  Weight SampledWeight(uint64_t size) const;
  bool LeftOut(const format::Event& e);
  void MapAddressSpace();
  uint64_t ModuleOf(uint64_t ip) const;
  void IndexLoadedSegments();
  StackState& State(uint64_t stack) {
    uint32_t slot = stack < slot_of_.size() ? slot_of_[stack] : 0;
    return slot ? states_[slot] : NewState(stack);
  }
  StackState& NewState(uint64_t stack);  // the first event of a stack
  // Stack ids index vectors (slot_of_), so a damaged capture's must not be any number: at most
  // kStackSlack past the nodes read so far (tests write events without their nodes).
  static constexpr uint64_t kStackSlack = uint64_t{1} << 20;
  bool PlausibleStack(uint64_t stack) const { return stack < p_->nodes.size() + kStackSlack; }
  uint64_t implausible_stacks_ = 0;  // events whose stack was not
  void Allocate(uint64_t stack, Weight w, uint64_t seq, Domain domain = Domain::kNative);
  void Release(uint64_t stack, Weight w, Domain domain = Domain::kNative);
  void Touch(StackState& s);
  void AddRegion(uint64_t start, uint64_t size, uint64_t stack, uint64_t seq, bool counted);
  void KeepPiece(uint64_t start, uint64_t end, const Region& r);
  void RemoveRange(uint64_t start, uint64_t size, std::vector<std::pair<uint64_t, Region>>* taken);
  void Protect(uint64_t start, uint64_t size, uint64_t stack, uint64_t seq, bool counted);

  Profile* p_;
  std::vector<uint64_t> loaded_, unloaded_;  // module ids, in load order
  // The loaded modules' segments by start address, for ModuleOf's binary search: a Python
  // program's capture has millions of stack nodes and its process hundreds of modules. Empty
  // when two of them overlap (a dlclose the agent missed): then the newest-first scan decides.
  struct SegmentSpan {
    uint64_t start, end, module;
  };
  std::vector<SegmentSpan> loaded_spans_;
  std::unordered_set<uint64_t> tids_;
  std::unordered_map<uint64_t, uint64_t> tid_of_;  // by thread index (any, in a damaged capture)
  AddressMap other_threads_;  // ReplayOptions::thread: live blocks of the threads left out
  AddressMap heap_;
  std::map<uint64_t, Region> mappings_;  // anonymous mappings (and pieces) by start address
  // Stacks' states, compact: slot_of_[stack id] (node ids are dense; 4 bytes a node) is the
  // stack's place in states_, 0 for a node no event has named (most are inner nodes).
  std::vector<uint32_t> slot_of_;
  std::vector<StackState> states_{1};
  // Each state with its stack id, by increasing id (the saved state lists them so).
  template <typename Self, typename F>
  static void ForEachStateOf(Self& self, F&& f) {
    for (uint64_t stack = 0; stack < self.slot_of_.size(); ++stack) {
      if (uint32_t slot = self.slot_of_[stack]) f(stack, self.states_[slot]);
    }
  }
  template <typename F>
  void ForEachState(F&& f) { ForEachStateOf(*this, f); }
  template <typename F>
  void ForEachState(F&& f) const { ForEachStateOf(*this, f); }
  std::unordered_map<uint32_t, LiveBlock> realloc_pending_;  // by thread
  std::unordered_map<uint32_t, LiveBlock> left_out_realloc_;  // by thread
  std::unordered_map<uint32_t, std::vector<std::pair<uint64_t, Region>>> mremap_pending_;
  uint64_t live_bytes_ = 0;
  uint64_t live_blocks_ = 0;
  uint64_t mapping_live_bytes_ = 0;  // the part of live_bytes_ in mappings; the rest is heap
  uint64_t reserved_bytes_ = 0;      // PROT_NONE pieces of mappings_
  uint64_t peak_epoch_ = 1;
  SnapshotSpec spec_;
  ReplayOptions options_;
  size_t next_checkpoint_ = 0;
  std::deque<std::pair<size_t, format::TimeRecord>> pending_checkpoints_;
  // By thread index: the address (0: none) and stack of the thread's last allocation.
  // Indexes are small and dense as the agent gives them; a damaged capture's may be anything,
  // and those past kDenseThreads go to a map rather than size the vector.
  static constexpr uint32_t kDenseThreads = 1 << 16;
  std::vector<std::pair<uint64_t, uint64_t>> last_alloc_;
  std::unordered_map<uint32_t, std::pair<uint64_t, uint64_t>> sparse_last_alloc_;
  std::pair<uint64_t, uint64_t>& LastAlloc(uint32_t thread) {
    if (thread >= kDenseThreads) return sparse_last_alloc_[thread];
    if (thread >= last_alloc_.size()) last_alloc_.resize(thread + 1, {0, 0});
    return last_alloc_[thread];
  }
  uint64_t stop_seq_;  // UINT64_MAX: replay everything
  double stop_seconds_ = -1;
  std::deque<format::TimeRecord> pending_marks_;  // time marks no delivered event has passed
  AddressMap arenas_;  // pymalloc arenas, outside the heap totals
  uint64_t arena_bytes_ = 0;
  AddressMap mimalloc_;  // what mimalloc mapped inside Python's allocator, likewise
  uint64_t mimalloc_bytes_ = 0;
  SnapshotIndexWriter* index_writer_ = nullptr;
  uint64_t since_checkpoint_ = 0;
  bool resume_pending_ = false;
  std::string resume_state_;
  uint64_t resume_seq_ = 0;
  std::vector<TimelinePoint> resume_timeline_;
  CustomHeaps custom_heaps_;  // the program's own heaps: figures of their own
  std::unordered_set<uint32_t> selected_heaps_;  // ids of the custom heap ReplayOptions::heap names
  size_t next_seq_checkpoint_ = 0;  // into ReplayOptions::checkpoint_seqs
};

void Replayer::StartOver() {
  Profile fresh;
  fresh.path = p_->path;
  fresh.read = p_->read;
  fresh.earlier_images = std::move(p_->earlier_images);
  fresh.earlier_images.push_back(p_->process.argv);
  fresh.earlier_unrecorded_children = p_->UnrecordedChildren();
  *p_ = std::move(fresh);
  loaded_.clear();
  unloaded_.clear();
  loaded_spans_.clear();
  tids_.clear();
  tid_of_.clear();
  other_threads_ = AddressMap();
  left_out_realloc_.clear();
  heap_ = AddressMap();
  arenas_ = AddressMap();
  arena_bytes_ = 0;
  mimalloc_ = AddressMap();
  mimalloc_bytes_ = 0;
  mappings_.clear();
  slot_of_.clear();
  states_.assign(1, StackState{});
  realloc_pending_.clear();
  mremap_pending_.clear();
  live_bytes_ = live_blocks_ = mapping_live_bytes_ = reserved_bytes_ = 0;
  peak_epoch_ = 1;
  pending_marks_.clear();
  pending_checkpoints_.clear();
  next_checkpoint_ = 0;
  last_alloc_.clear();
  sparse_last_alloc_.clear();
  since_checkpoint_ = 0;
  if (index_writer_) index_writer_->DropCheckpoints();  // the index is the last image's
  custom_heaps_ = CustomHeaps();
  selected_heaps_.clear();
  next_seq_checkpoint_ = 0;
  if (spec_.kind == SnapshotSpec::kTime) {  // a time is a time of the last image
    stop_seq_ = UINT64_MAX;
    stop_seconds_ = -1;
  }
}

uint64_t Replayer::ModuleOf(uint64_t ip) const {
  if (ip == kTruncatedMarkerIp || format::IsPythonFrameIp(ip) || format::IsAnnotationFrameIp(ip)) {
    return 0;  // a Python line or an annotation, not an address
  }
  const bool searched = !loaded_spans_.empty();
  if (searched) {
    auto after = std::upper_bound(loaded_spans_.begin(), loaded_spans_.end(), ip,
                                  [](uint64_t a, const SegmentSpan& s) { return a < s.start; });
    if (after != loaded_spans_.begin() && ip < std::prev(after)->end) return std::prev(after)->module;
  }
  // The newest mapping wins: an address may have been reused after a dlclose.
  for (auto list : {&loaded_, &unloaded_}) {
    if (searched && list == &loaded_) continue;  // the search above has answered for them
    for (auto it = list->rbegin(); it != list->rend(); ++it) {
      const auto& m = p_->modules.at(*it);
      for (const auto& s : m.segments) {
        if (ip - s.start < s.size) return m.id;
      }
    }
  }
  return 0;
}

void Replayer::IndexLoadedSegments() {
  loaded_spans_.clear();
  for (uint64_t id : loaded_) {
    for (const auto& s : p_->modules.at(id).segments) {
      if (s.size) loaded_spans_.push_back({s.start, s.start + s.size, id});
    }
  }
  std::sort(loaded_spans_.begin(), loaded_spans_.end(),
            [](const SegmentSpan& a, const SegmentSpan& b) { return a.start < b.start; });
  for (size_t i = 1; i < loaded_spans_.size(); ++i) {
    if (loaded_spans_[i].start < loaded_spans_[i - 1].end) {
      loaded_spans_.clear();  // overlapping: the scan in ModuleOf, which knows which is newer
      return;
    }
  }
}

StackState& Replayer::NewState(uint64_t stack) {
  if (stack >= slot_of_.size()) slot_of_.resize(std::max<size_t>(stack + 1, slot_of_.size() * 2));
  slot_of_[stack] = static_cast<uint32_t>(states_.size());
  return states_.emplace_back();
}

void Replayer::Touch(StackState& s) {
  if (s.changed_in_epoch < peak_epoch_) {  // first change since the last peak: remember it
    s.stats.peak_bytes = s.live_bytes;
    s.stats.peak_blocks = s.live_blocks;
    s.stats.python_peak_bytes = s.python_live_bytes;
    s.stats.mapping_peak_bytes = s.mapping_live_bytes;
    s.changed_in_epoch = peak_epoch_;
  }
}

// A sampled capture (docs/sampling.md): a block of s bytes was recorded with probability
// p = 1 - exp(-s/rate), so it stands for s/p bytes and 1/p blocks (the Horvitz-Thompson
// estimator: unbiased for every sum of blocks). The same size always gives the same weight,
// so a free takes back exactly what its allocation added.
Weight Replayer::SampledWeight(uint64_t size) const {
  double p = -std::expm1(-static_cast<double>(size) / static_cast<double>(p_->sample_rate));
  return {static_cast<uint64_t>(std::llround(static_cast<double>(size) / p)),
          static_cast<uint64_t>(std::llround(static_cast<double>(kCountUnit) / p))};
}

void Replayer::Allocate(uint64_t stack, Weight w, uint64_t seq, Domain domain) {
  StackState& s = State(stack);
  Touch(s);
  s.live_bytes += w.bytes;
  s.live_blocks += w.count;
  s.stats.allocations += w.count;
  s.stats.allocated_bytes += w.bytes;
  p_->totals.allocations += w.count;
  p_->totals.allocated_bytes += w.bytes;
  live_bytes_ += w.bytes;
  live_blocks_ += w.count;
  if (domain == Domain::kMapping) {
    s.mapping_live_bytes += w.bytes;
    s.stats.mapping_allocated_bytes += w.bytes;
    p_->totals.mapping_allocated_bytes += w.bytes;
    mapping_live_bytes_ += w.bytes;
    p_->totals.mapping_peak_bytes = std::max(p_->totals.mapping_peak_bytes, mapping_live_bytes_);
  } else {
    if (domain == Domain::kPython) {
      s.python_live_bytes += w.bytes;
      s.stats.python_allocated_bytes += w.bytes;
      p_->totals.python_allocated_bytes += w.bytes;
    }
    uint64_t heap = live_bytes_ - mapping_live_bytes_;
    p_->totals.heap_peak_bytes = std::max(p_->totals.heap_peak_bytes, heap);
  }
  if (live_bytes_ > p_->totals.peak_bytes) {
    p_->totals.peak_bytes = live_bytes_;
    p_->totals.peak_blocks = live_blocks_;
    p_->totals.peak_seq = seq;
    ++peak_epoch_;  // every stack's current value is now its value at the peak
  }
}

void Replayer::Release(uint64_t stack, Weight w, Domain domain) {
  StackState& s = State(stack);
  Touch(s);
  s.live_bytes -= w.bytes;
  s.live_blocks -= w.count;
  if (domain == Domain::kPython) s.python_live_bytes -= w.bytes;
  if (domain == Domain::kMapping) {
    s.mapping_live_bytes -= w.bytes;
    mapping_live_bytes_ -= w.bytes;
  }
  live_bytes_ -= w.bytes;
  live_blocks_ -= w.count;
}

// A mapping (or a piece of one) whose memory counts is an allocation of the mappings' domain;
// a reserved one is only address space. Mappings are recorded in full even in a sampled
// capture: whole weights.
void Replayer::AddRegion(uint64_t start, uint64_t size, uint64_t stack, uint64_t seq,
                         bool counted) {
  if (size == 0) return;
  std::vector<std::pair<uint64_t, Region>> replaced;
  RemoveRange(start, size, &replaced);  // MAP_FIXED over an existing mapping replaces it
  mappings_[start] = {start + size, stack, counted};
  if (!counted) {
    reserved_bytes_ += size;
    return;
  }
  Allocate(stack, {size, kCountUnit}, seq, Domain::kMapping);
}

// What is left of a region after a cut: the same block, not a new allocation.
void Replayer::KeepPiece(uint64_t start, uint64_t end, const Region& r) {
  mappings_[start] = {end, r.stack, r.counted};
  if (!r.counted) {
    reserved_bytes_ += end - start;
    return;
  }
  uint64_t size = end - start;
  Allocate(r.stack, {size, kCountUnit}, 0, Domain::kMapping);
  StackState& s = State(r.stack);
  s.stats.allocations -= kCountUnit;
  s.stats.allocated_bytes -= size;
  s.stats.mapping_allocated_bytes -= size;
  p_->totals.allocations -= kCountUnit;
  p_->totals.allocated_bytes -= size;
  p_->totals.mapping_allocated_bytes -= size;
}

// Cuts [start, start+size) out of the tracked mappings; what was cut goes to *taken.
void Replayer::RemoveRange(uint64_t start, uint64_t size,
                           std::vector<std::pair<uint64_t, Region>>* taken) {
  uint64_t end = start + size;
  auto it = mappings_.upper_bound(start);
  if (it != mappings_.begin()) --it;
  while (it != mappings_.end() && it->first < end) {
    uint64_t r_start = it->first;
    Region r = it->second;
    if (r.end <= start) {
      ++it;
      continue;
    }
    it = mappings_.erase(it);
    uint64_t cut_start = std::max(r_start, start), cut_end = std::min(r.end, end);
    // The whole old region leaves the accounting; the parts outside the cut come back.
    if (r.counted) {
      Release(r.stack, {r.end - r_start, kCountUnit}, Domain::kMapping);
      p_->totals.frees += kCountUnit;
    } else {
      reserved_bytes_ -= r.end - r_start;
    }
    if (r_start < cut_start) KeepPiece(r_start, cut_start, r);
    if (cut_end < r.end) KeepPiece(cut_end, r.end, r);
    taken->push_back({cut_start, {cut_end, r.stack, r.counted}});
    it = mappings_.lower_bound(cut_end);
  }
}

// mprotect: the pieces of tracked mappings in [start, start+size) that change between counted
// and reserved are cut out and put back. A piece committed counts from now, as an allocation
// at the mprotect's stack; a piece made PROT_NONE is released and stays reserved. Addresses in
// no tracked mapping are not the program's anonymous memory: ignored.
void Replayer::Protect(uint64_t start, uint64_t size, uint64_t stack, uint64_t seq, bool counted) {
  uint64_t end = start + size;
  std::vector<std::pair<uint64_t, uint64_t>> changing;
  auto it = mappings_.upper_bound(start);
  if (it != mappings_.begin()) --it;
  for (; it != mappings_.end() && it->first < end; ++it) {
    if (it->second.end > start && it->second.counted != counted) {
      changing.push_back({std::max(it->first, start), std::min(it->second.end, end)});
    }
  }
  for (const auto& [from, to] : changing) {
    std::vector<std::pair<uint64_t, Region>> taken;
    RemoveRange(from, to - from, &taken);
    for (const auto& [piece, r] : taken) {
      AddRegion(piece, r.end - piece, counted ? stack : r.stack, seq, counted);
      if (counted) CountSize(stack, r.end - piece, {r.end - piece, kCountUnit});
    }
  }
}

void Replayer::TakeTimelinePoints(uint64_t before_seq) {
  while (!pending_marks_.empty() && pending_marks_.front().seq <= before_seq) {
    p_->timeline.push_back({pending_marks_.front().monotonic_ns / 1e9, live_bytes_});
    pending_marks_.pop_front();
  }
}

void Replayer::TakeCheckpoints(uint64_t before_seq) {
  while (!pending_checkpoints_.empty() && pending_checkpoints_.front().second.seq <= before_seq) {
    auto [index, mark] = pending_checkpoints_.front();
    pending_checkpoints_.pop_front();
    TakeCheckpoint(options_.checkpoint_seconds[index], mark.monotonic_ns / 1e9, 0);
  }
  // Checkpoints at sequence numbers (markers): exactly before those events.
  while (next_seq_checkpoint_ < options_.checkpoint_seqs.size() &&
         options_.checkpoint_seqs[next_seq_checkpoint_] <= before_seq) {
    TakeCheckpoint(0, 0, options_.checkpoint_seqs[next_seq_checkpoint_++]);
  }
}

void Replayer::TakeCheckpoint(double seconds, double at_seconds, uint64_t before_seq) {
  Checkpoint c;
  c.seconds = seconds;
  c.at_seconds = at_seconds;
  c.before_seq = before_seq;
  c.heap_bytes = live_bytes_;
  ForEachState([&c](uint64_t stack, const StackState& s) {
    if (s.live_blocks) c.live[stack] = {s.live_bytes, WholeBlocks(s.live_blocks)};
  });
  p_->checkpoints.push_back(std::move(c));
}

// Counts in kCountUnit until Finish.
void Replayer::CountSize(uint64_t stack, uint64_t size, Weight w) {
  int bucket = SizeBucketOf(size);
  p_->size_histogram[bucket].count += w.count;
  p_->size_histogram[bucket].bytes += w.bytes;
  if (!options_.stack_size_histograms) return;
  SizeHistogram& h = p_->stack_size_histograms[stack];
  if (h.empty()) h.resize(kSizeBuckets);
  h[bucket].count += w.count;
  h[bucket].bytes += w.bytes;
}

// ReplayOptions::thread: true for an event that belongs to a thread left out (an allocation it
// made, or the free or realloc of a block it allocated).
bool Replayer::LeftOut(const format::Event& e) {
  auto tid = tid_of_.find(e.thread);
  bool other = tid == tid_of_.end() || tid->second != options_.thread;
  LiveBlock block;
  switch (e.kind) {
    case EventKind::kFree:
    case EventKind::kReallocOld:
      if (other_threads_.Remove(e.address, &block)) {
        if (e.kind == EventKind::kReallocOld) left_out_realloc_[e.thread] = block;
        return true;
      }
      return false;
    case EventKind::kReallocFailed: {
      auto it = left_out_realloc_.find(e.thread);
      if (it == left_out_realloc_.end()) return false;
      other_threads_.Insert(e.address, it->second);
      left_out_realloc_.erase(it);
      return true;
    }
    case EventKind::kMmap:
    case EventKind::kMmapReserved:
    case EventKind::kProtect:
    case EventKind::kMremapNew:
    case EventKind::kPyArenaAlloc:
    case EventKind::kPyArenaFree:
    case EventKind::kMimallocMap:
    case EventKind::kMimallocUnmap:
      return other;  // a left-out mapping is never tracked; unmapping it finds nothing
    default:
      if (!format::IsHeapAlloc(e.kind)) return false;
      left_out_realloc_.erase(e.thread);
      if (!other) return false;
      other_threads_.Insert(e.address, {e.size, e.stack, false});
      return true;
  }
}

// Live blocks are found by address in a table far larger than the caches: one miss each, which
// the replay of a few events takes long enough to hide.
void Replayer::Upcoming(const format::Event& e) {
  if (e.kind == EventKind::kFree || e.kind == EventKind::kReallocOld || format::IsHeapAlloc(e.kind)) {
    heap_.Prefetch(e.address);
  }
  if (e.stack < slot_of_.size()) __builtin_prefetch(&slot_of_[e.stack]);
}

void Replayer::OnEvent(const format::Event& e) {
  if (!PlausibleStack(e.stack)) [[unlikely]] {  // damage: the event counts, without its stack
    ++implausible_stacks_;
    format::Event without = e;
    without.stack = 0;
    return OnEvent(without);
  }
  if (resume_pending_) RestoreState();
  if (e.kind == EventKind::kMarker || e.kind == EventKind::kSnapshot) {  // all, for timelines
    p_->markers.push_back({p_->StringOf(e.address), e.size ? p_->StringOf(e.size) : "",
                           e.kind == EventKind::kSnapshot, e.seq});
  }
  if (e.kind == EventKind::kProgramEnd && p_->program_end_seq == 0) p_->program_end_seq = e.seq;
  // The heap as it was at every mark this event comes after; checkpoints due. (The tests
  // inline, the work not: this runs for every event.)
  if (!pending_marks_.empty() && pending_marks_.front().seq <= e.seq) TakeTimelinePoints(e.seq);
  if (!pending_checkpoints_.empty() || next_seq_checkpoint_ < options_.checkpoint_seqs.size()) {
    TakeCheckpoints(e.seq);
  }
  if (index_writer_ && ++since_checkpoint_ > index_writer_->spacing()) {
    std::string state;
    SaveState(&state);
    index_writer_->Add(e.seq, state, p_->timeline.size());
    since_checkpoint_ = 0;
  }
  if (e.seq >= stop_seq_) {
    if (stop_seconds_ < 0) stop_seconds_ = p_->SecondsAt(e.seq - 1);
    return;  // past the snapshot
  }
  ++p_->totals.events;
  LiveBlock block;
  if (options_.thread != 0 && LeftOut(e)) return;
  if (format::IsCustomHeapEvent(e.kind)) {
    // The custom heaps' state is not saved in checkpoints: such a capture's index has none.
    if (index_writer_) index_writer_->StopCheckpoints();
    index_writer_ = nullptr;
    return OnApiEvent(e);
  }
  if (!options_.heap.empty()) return;  // the figures describe a custom heap
  switch (e.kind) {
    case EventKind::kFree:
      if (heap_.Remove(e.address, &block)) {
        Weight w = HeapWeight(block.size);
        Release(block.stack, w, HeapDomain(block.python));
        p_->totals.frees += w.count;
        auto& last = LastAlloc(e.thread);
        if (last.first == e.address) {
          StackStats& stats = State(block.stack).stats;  // freed before any other allocation
          stats.temporary += w.count;
          stats.temporary_bytes += w.bytes;
          p_->totals.temporary += w.count;
          last = {0, 0};
        }
      } else {
        ++p_->totals.unmatched_frees;
      }
      break;
    case EventKind::kReallocOld:
      if (heap_.Remove(e.address, &block)) {
        Weight w = HeapWeight(block.size);
        Release(block.stack, w, HeapDomain(block.python));
        p_->totals.frees += w.count;
        realloc_pending_[e.thread] = block;
      } else {
        realloc_pending_.erase(e.thread);
      }
      break;
    case EventKind::kReallocFailed: {
      auto it = realloc_pending_.find(e.thread);
      if (it != realloc_pending_.end()) {  // undo: the old block was never released
        const LiveBlock& old = it->second;
        Weight w = HeapWeight(old.size);
        heap_.Insert(e.address, old);
        Allocate(old.stack, w, e.seq, HeapDomain(old.python));
        StackStats& stats = State(old.stack).stats;  // a restored block is no new allocation
        stats.allocations -= w.count;
        stats.allocated_bytes -= w.bytes;
        p_->totals.allocations -= w.count;
        p_->totals.allocated_bytes -= w.bytes;
        if (old.python) {
          stats.python_allocated_bytes -= w.bytes;
          p_->totals.python_allocated_bytes -= w.bytes;
        }
        p_->totals.frees -= w.count;
        realloc_pending_.erase(it);
      }
      break;
    }
    case EventKind::kMmap:
    case EventKind::kMmapReserved:
      AddRegion(e.address, e.size, e.stack, e.seq, e.kind == EventKind::kMmap);
      if (e.kind == EventKind::kMmap) CountSize(e.stack, e.size, {e.size, kCountUnit});
      break;
    case EventKind::kProtect:
    case EventKind::kProtectNone:
      Protect(e.address, e.size, e.stack, e.seq, e.kind == EventKind::kProtect);
      break;
    case EventKind::kMunmap: {
      std::vector<std::pair<uint64_t, Region>> taken;
      RemoveRange(e.address, e.size, &taken);
      break;
    }
    case EventKind::kMremapOld: {
      auto& taken = mremap_pending_[e.thread];
      taken.clear();
      RemoveRange(e.address, e.size, &taken);
      break;
    }
    case EventKind::kMremapNew: {
      auto it = mremap_pending_.find(e.thread);
      // The range keeps its protection (one mremap moves one mapping, of one protection).
      if (it != mremap_pending_.end() && !it->second.empty()) {
        AddRegion(e.address, e.size, e.stack, e.seq, it->second.front().second.counted);
      }
      if (it != mremap_pending_.end()) it->second.clear();
      break;
    }
    case EventKind::kMremapFailed: {
      auto it = mremap_pending_.find(e.thread);
      if (it == mremap_pending_.end()) break;
      for (auto& [start, region] : it->second) {
        AddRegion(start, region.end - start, region.stack, e.seq, region.counted);
      }
      it->second.clear();
      break;
    }
    case EventKind::kPyArenaAlloc:
      arenas_.Insert(e.address, {e.size, e.stack, true});
      arena_bytes_ += e.size;
      p_->totals.arena_peak_bytes = std::max(p_->totals.arena_peak_bytes, arena_bytes_);
      break;
    case EventKind::kPyArenaFree:
      if (arenas_.Remove(e.address, &block)) arena_bytes_ -= block.size;
      break;
    case EventKind::kMimallocMap:
      mimalloc_.Insert(e.address, {e.size, e.stack, true});
      mimalloc_bytes_ += e.size;
      p_->totals.mimalloc_peak_bytes = std::max(p_->totals.mimalloc_peak_bytes, mimalloc_bytes_);
      break;
    case EventKind::kMimallocUnmap:  // of a whole mapping, or of its start (mimalloc trims)
      if (mimalloc_.Remove(e.address, &block)) {
        mimalloc_bytes_ -= std::min(e.size, block.size);
        if (e.size < block.size) {
          mimalloc_.Insert(e.address + e.size, {block.size - e.size, block.stack, true});
        }
      }
      break;
    default:  // every heap allocation kind
      if (format::IsHeapAlloc(e.kind)) {
        if (!realloc_pending_.empty()) realloc_pending_.erase(e.thread);  // a realloc ends
        bool python = format::IsPythonAlloc(e.kind);
        Weight w = HeapWeight(e.size);
        if (!heap_.Insert(e.address, {e.size, e.stack, python}, &block)) {
          // its free was dropped
          Release(block.stack, HeapWeight(block.size), HeapDomain(block.python));
        }
        Allocate(e.stack, w, e.seq, HeapDomain(python));
        CountSize(e.stack, e.size, w);
        LastAlloc(e.thread) = {e.address, e.stack};
      }
      break;
  }
}

uint32_t Replayer::HeapOfStack(uint64_t stack) const {
  uint64_t ip = stack < p_->nodes.size() ? p_->nodes[stack].ip : 0;
  bool heap = format::IsAnnotationFrameIp(ip) && format::AnnotationKind(ip) == format::Annotation::kHeap;
  return heap ? format::AnnotationValue(ip) : 0;
}

// A custom heap's event: its own figures always; the profile's figures too when it is the heap
// the profile describes (ReplayOptions::heap).
void Replayer::OnApiEvent(const format::Event& e) {
  LiveBlock block;
  switch (e.kind) {
    case EventKind::kHeapCreate: {
      auto id = static_cast<uint32_t>(e.address);
      const std::string& name = p_->StringOf(e.size);
      custom_heaps_.Create(id, name, e.stack, e.seq);
      p_->heap_names[id] = name;
      if (!options_.heap.empty() && name == options_.heap) selected_heaps_.insert(id);
      break;
    }
    case EventKind::kHeapAlloc:
    case EventKind::kHeapRealloc: {
      uint32_t heap = HeapOfStack(e.stack);
      bool replaced = custom_heaps_.Alloc(heap, e.address, e.size, e.stack, e.seq, &block);
      if (!selected_heaps_.count(heap)) break;
      // Custom heaps are recorded in full, sampled capture or not: whole weights.
      if (replaced) Release(block.stack, {block.size, kCountUnit});
      Allocate(e.stack, {e.size, kCountUnit}, e.seq);
      CountSize(e.stack, e.size, {e.size, kCountUnit});
      break;
    }
    case EventKind::kHeapFree: {
      uint32_t heap = HeapOfStack(e.stack);
      if (custom_heaps_.Free(heap, e.address, e.stack, e.seq, &block) &&
          selected_heaps_.count(heap)) {
        Release(block.stack, {block.size, kCountUnit});
        p_->totals.frees += kCountUnit;
      }
      break;
    }
    case EventKind::kHeapReset:
    case EventKind::kHeapDestroy: {
      auto heap = static_cast<uint32_t>(e.address);
      std::vector<LiveBlock> released;
      custom_heaps_.Release(heap, e.kind == EventKind::kHeapDestroy, &released);
      if (!selected_heaps_.count(heap)) break;
      for (const LiveBlock& b : released) Release(b.stack, {b.size, kCountUnit});
      p_->totals.frees += released.size() * kCountUnit;
      break;
    }
    default:
      break;
  }
}

// Each custom heap's backing memory at the snapshot: the system heap's blocks and mappings that
// hold its blocks in use.
void Replayer::FindBackingMemory() {
  std::vector<std::pair<uint64_t, uint64_t>> system;  // (start, end), by start
  heap_.ForEach([&](uint64_t a, const LiveBlock& b) { system.push_back({a, a + b.size}); });
  for (const auto& [start, region] : mappings_) {
    if (region.counted) system.push_back({start, region.end});
  }
  std::sort(system.begin(), system.end());
  std::set<std::pair<uint32_t, size_t>> backing;  // (heap, index in system)
  custom_heaps_.ForEachLive([&](uint32_t heap, uint64_t address, const LiveBlock&) {
    auto it = std::upper_bound(system.begin(), system.end(), std::make_pair(address, UINT64_MAX));
    if (it == system.begin()) return;
    --it;
    if (address < it->second) backing.insert({heap, static_cast<size_t>(it - system.begin())});
  });
  for (HeapFigures& f : p_->heaps) {
    for (auto it = backing.lower_bound({f.id, 0}); it != backing.end() && it->first == f.id; ++it) {
      f.backing_bytes += system[it->second].second - system[it->second].first;
      f.backing_blocks += 1;
    }
  }
}

// The live set at the snapshot, by address: stretches of blocks with no gap over 1 MiB.
void Replayer::MapAddressSpace() {
  constexpr uint64_t kRegionGap = 1 << 20;
  using Kind = AddressRegion::Kind;
  struct Block {
    uint64_t begin, size, stack;
    Kind kind;
    Weight w;  // in a sampled capture, what the block stands for; nothing for a reservation
  };
  std::vector<Block> blocks;
  heap_.ForEach([&](uint64_t a, const LiveBlock& b) {
    blocks.push_back({a, b.size, b.stack, Kind::kHeap, HeapWeight(b.size)});
  });
  custom_heaps_.ForEachLive([&](uint32_t heap, uint64_t a, const LiveBlock& b) {  // --heap
    if (!selected_heaps_.count(heap)) return;
    blocks.push_back({a, b.size, b.stack, Kind::kHeap, {b.size, kCountUnit}});
  });
  for (const auto& [start, region] : mappings_) {
    uint64_t size = region.end - start;
    if (region.counted) {
      blocks.push_back({start, size, region.stack, Kind::kMapping, {size, kCountUnit}});
    } else {
      blocks.push_back({start, size, region.stack, Kind::kReserved, {0, kCountUnit}});
    }
  }
  std::sort(blocks.begin(), blocks.end(), [](const Block& a, const Block& b) { return a.begin < b.begin; });
  std::unordered_map<uint64_t, uint64_t> bytes_by_stack;
  auto close_region = [&] {
    if (p_->address_map.empty() || bytes_by_stack.empty()) return;
    uint64_t best = 0;
    for (const auto& [stack, bytes] : bytes_by_stack) {
      if (bytes > best) {
        best = bytes;
        p_->address_map.back().top_stack = stack;
      }
    }
    bytes_by_stack.clear();
  };
  for (const Block& b : blocks) {
    bool fresh = p_->address_map.empty() || b.begin > p_->address_map.back().end + kRegionGap ||
                 p_->address_map.back().kind != b.kind;
    if (fresh) {
      close_region();
      p_->address_map.push_back({b.begin, b.begin, 0, 0, 0, b.kind, 0});
    }
    AddressRegion& r = p_->address_map.back();
    if (b.begin > r.end) r.largest_gap = std::max(r.largest_gap, b.begin - r.end);
    r.end = std::max(r.end, b.begin + b.size);
    r.in_use_bytes += b.w.bytes;
    r.blocks += b.w.count;
    bytes_by_stack[b.stack] += b.kind == Kind::kReserved ? b.size : b.w.bytes;
  }
  close_region();
  for (AddressRegion& r : p_->address_map) r.blocks = WholeBlocks(r.blocks);
}

void Replayer::SaveState(std::string* out) const {
  auto put = [out](uint64_t v) { PutVarint(out, v); };
  TotalsFields(p_->totals, put);
  for (const SizeBucket& b : p_->size_histogram) {
    put(b.count);
    put(b.bytes);
  }
  for (uint64_t v : {live_bytes_, live_blocks_, peak_epoch_, arena_bytes_, mimalloc_bytes_,
                     mapping_live_bytes_, reserved_bytes_}) {
    put(v);
  }
  uint64_t touched = 0;
  for (const StackState& s : states_) touched += s.changed_in_epoch != 0;  // [0] never is
  put(touched);
  uint64_t last = 0;
  ForEachState([&](uint64_t stack, const StackState& s) {
    if (s.changed_in_epoch == 0) return;  // never allocated or released
    put(stack - last);
    last = stack;
    StateFields(s, put);
  });
  for (const AddressMap* map : {&heap_, &arenas_, &mimalloc_}) {  // by address, as deltas
    std::vector<std::pair<uint64_t, LiveBlock>> blocks;
    blocks.reserve(map->size());
    map->ForEach([&](uint64_t a, const LiveBlock& b) { blocks.push_back({a, b}); });
    std::sort(blocks.begin(), blocks.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    put(blocks.size());
    last = 0;
    for (const auto& [address, b] : blocks) {
      for (uint64_t v : {address - last, b.size, b.stack, uint64_t{b.python}}) put(v);
      last = address;
    }
  }
  put(mappings_.size());
  for (const auto& [start, r] : mappings_) {
    for (uint64_t v : {start, r.end - start, r.stack, uint64_t{r.counted}}) put(v);
  }
  put(realloc_pending_.size());
  for (const auto& [thread, b] : realloc_pending_) {
    for (uint64_t v : {uint64_t{thread}, b.size, b.stack, uint64_t{b.python}}) put(v);
  }
  put(mremap_pending_.size());
  for (const auto& [thread, taken] : mremap_pending_) {
    put(thread);
    put(taken.size());
    for (const auto& [start, r] : taken) {
      for (uint64_t v : {start, r.end - start, r.stack, uint64_t{r.counted}}) put(v);
    }
  }
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> with_last;  // by thread
  for (uint64_t thread = 0; thread < last_alloc_.size(); ++thread) {
    if (last_alloc_[thread].first) with_last[thread] = last_alloc_[thread];
  }
  for (const auto& [thread, alloc] : sparse_last_alloc_) {
    if (alloc.first) with_last[thread] = alloc;
  }
  put(with_last.size());
  for (const auto& [thread, alloc] : with_last) {
    for (uint64_t v : {thread, alloc.first, alloc.second}) put(v);
  }
}

// Restores what SaveState saved, in the same order, at the first event of a resumed replay:
// the metadata read so far (stack nodes, modules, time marks) stays as read.
void Replayer::RestoreState() {
  resume_pending_ = false;
  StateReader r(resume_state_);
  auto get = [&r](uint64_t& v) { v = r.Next(); };
  // A damaged index may name any stack (PlausibleStack).
  auto stack_id = [&](uint64_t id) {
    if (!PlausibleStack(id)) r.Fail();
    return r.ok() ? id : 0;
  };
  uint64_t dropped = p_->totals.dropped_events;
  TotalsFields(p_->totals, get);
  p_->totals.dropped_events = dropped;
  for (SizeBucket& b : p_->size_histogram) {
    get(b.count);
    get(b.bytes);
  }
  for (uint64_t* v : {&live_bytes_, &live_blocks_, &peak_epoch_, &arena_bytes_, &mimalloc_bytes_,
                      &mapping_live_bytes_, &reserved_bytes_}) {
    get(*v);
  }
  uint64_t touched = r.Next(), stack = 0;
  for (uint64_t i = 0; i < touched && r.ok(); ++i) {
    stack += r.Next();
    if (stack_id(stack) != stack) break;
    StateFields(State(stack), get);
  }
  for (AddressMap* map : {&heap_, &arenas_, &mimalloc_}) {
    uint64_t count = r.Next(), address = 0;
    for (uint64_t i = 0; i < count && r.ok(); ++i) {
      address += r.Next();
      LiveBlock b;
      b.size = r.Next();
      b.stack = stack_id(r.Next());
      b.python = r.Next() != 0;
      if (r.ok()) map->Insert(address, b);
    }
  }
  for (uint64_t i = 0, n = r.Next(); i < n && r.ok(); ++i) {
    uint64_t start = r.Next(), size = r.Next(), stack = stack_id(r.Next());
    mappings_[start] = {start + size, stack, r.Next() != 0};
  }
  for (uint64_t i = 0, n = r.Next(); i < n && r.ok(); ++i) {
    uint32_t thread = static_cast<uint32_t>(r.Next());
    LiveBlock& b = realloc_pending_[thread];
    b.size = r.Next();
    b.stack = stack_id(r.Next());
    b.python = r.Next() != 0;
  }
  for (uint64_t i = 0, n = r.Next(); i < n && r.ok(); ++i) {
    auto& taken = mremap_pending_[static_cast<uint32_t>(r.Next())];
    for (uint64_t k = 0, m = r.Next(); k < m && r.ok(); ++k) {
      uint64_t start = r.Next(), size = r.Next(), stack = stack_id(r.Next());
      taken.push_back({start, {start + size, stack, r.Next() != 0}});
    }
  }
  for (uint64_t i = 0, n = r.Next(); i < n && r.ok(); ++i) {
    uint32_t thread = static_cast<uint32_t>(r.Next());
    uint64_t address = r.Next();
    uint64_t stack = stack_id(r.Next());
    if (r.ok()) LastAlloc(thread) = {address, stack};
  }
  if (!r.ok() || !r.AtEnd()) p_->warnings.push_back("the snapshot index is damaged: delete " + p_->path + ".index");
  // The state's timeline held every mark up to its event; marks read since are still due.
  p_->timeline = std::move(resume_timeline_);
  while (!pending_marks_.empty() && pending_marks_.front().seq <= resume_seq_) pending_marks_.pop_front();
  resume_state_.clear();
}

void Replayer::Finish() {
  if (resume_pending_) RestoreState();
  if (implausible_stacks_) {
    p_->warnings.push_back("the capture is damaged: " + std::to_string(implausible_stacks_) +
                           " events name a stack it does not hold, counted without their stack");
  }
  TakeTimelinePoints(UINT64_MAX);
  TakeCheckpoints(stopped_early() ? stop_seq_ : UINT64_MAX);
  for (Checkpoint& c : p_->checkpoints) {
    if (c.before_seq) c.seconds = c.at_seconds = p_->SecondsAt(c.before_seq - 1);
  }
  p_->heap = options_.heap;
  p_->heaps = custom_heaps_.Figures();
  if (options_.heap.empty()) FindBackingMemory();
  p_->anomalies = custom_heaps_.anomalies();
  std::copy(custom_heaps_.anomaly_counts(), custom_heaps_.anomaly_counts() + Anomaly::kKinds,
            p_->anomaly_counts);
  if (options_.address_map) MapAddressSpace();
  p_->snapshot = spec_;
  p_->snapshot_seconds = stop_seconds_ >= 0 ? stop_seconds_ : p_->DurationSeconds();
  p_->stacks.reserve(states_.size());
  ForEachState([this](uint64_t stack, StackState& s) {
    if (s.stats.allocations == 0 && s.live_blocks == 0) return;  // never an allocation site
    if (s.changed_in_epoch < peak_epoch_) {  // unchanged since the last peak
      s.stats.peak_bytes = s.live_bytes;
      s.stats.peak_blocks = s.live_blocks;
      s.stats.python_peak_bytes = s.python_live_bytes;
      s.stats.mapping_peak_bytes = s.mapping_live_bytes;
    }
    s.stats.in_use_bytes = s.live_bytes;
    s.stats.in_use_blocks = s.live_blocks;
    s.stats.python_in_use_bytes = s.python_live_bytes;
    s.stats.mapping_in_use_bytes = s.mapping_live_bytes;
    p_->totals.mapping_at_peak_bytes += s.stats.mapping_peak_bytes;
    for (uint64_t* count : {&s.stats.allocations, &s.stats.peak_blocks, &s.stats.in_use_blocks,
                            &s.stats.temporary}) {
      *count = WholeBlocks(*count);
    }
    p_->stacks[stack] = s.stats;
  });
  p_->totals.arena_in_use_bytes = arena_bytes_;
  p_->totals.mimalloc_in_use_bytes = mimalloc_bytes_;
  p_->totals.in_use_bytes = live_bytes_;
  p_->totals.in_use_blocks = live_blocks_;
  Totals& t = p_->totals;
  for (uint64_t* count : {&t.allocations, &t.frees, &t.peak_blocks, &t.in_use_blocks, &t.temporary}) {
    *count = WholeBlocks(*count);
  }
  for (SizeBucket& b : p_->size_histogram) b.count = WholeBlocks(b.count);
  for (auto& [stack, h] : p_->stack_size_histograms) {
    for (SizeBucket& b : h) b.count = WholeBlocks(b.count);
  }
  p_->totals.mapping_in_use_bytes = mapping_live_bytes_;
  p_->totals.reserved_bytes = reserved_bytes_;
}


// The agent holds an exclusive flock on the capture while it records (docs/agent.md); the
// kernel drops it when the writer closes the file or the process dies.
bool StillRecording(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool locked = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  close(fd);
  return locked;
}
}  // namespace

double Profile::SecondsAt(uint64_t seq) const {
  // The first time mark with a larger seq bounds the event from above.
  auto it = std::upper_bound(times.begin(), times.end(), seq,
                             [](uint64_t s, const format::TimeRecord& t) { return s < t.seq; });
  if (it == times.end()) return DurationSeconds();
  return static_cast<double>(it->monotonic_ns) / 1e9;
}

const std::string& Profile::StringOf(uint64_t id) const {
  static const std::string kUnknown = "(unknown name)";
  auto it = strings.find(id);
  return it == strings.end() ? kUnknown : it->second;
}

double Profile::DurationSeconds() const {
  if (end) return static_cast<double>(end->monotonic_ns) / 1e9;
  return times.empty() ? 0.0 : static_cast<double>(times.back().monotonic_ns) / 1e9;
}

namespace {

// How a replay uses the snapshot index: builds it (writer), or starts from a checkpoint.
struct IndexUse {
  SnapshotIndexWriter* writer = nullptr;
  SnapshotIndex* built = nullptr;  // filled when the writer finished an index
  const std::atomic<int>* follow = nullptr;  // the writer's capture is still growing
  const SnapshotIndex* index = nullptr;
  const IndexCheckpoint* from = nullptr;  // &index->end.state: the whole capture
  const std::vector<std::string>* end_metadata = nullptr;  // with from == &index->end.state
};
std::string HeapNamesForError(const Profile& p) {
  std::string names;
  for (const HeapFigures& h : p.heaps) {
    if (names.find("'" + h.name + "'") != std::string::npos) continue;
    names += (names.empty() ? "" : ", ") + ("'" + h.name + "'");
  }
  return names.empty() ? "it has none; the system heap is the default"
                       : "its heaps: " + names + "; the system heap is the default";
}

bool Replay(const std::string& path, const SnapshotSpec& spec, const ReplayOptions& options,
            uint64_t stop_seq, Profile* profile, std::string* error, const IndexUse& use = {}) {
  *profile = Profile();
  profile->path = path;
  Replayer replayer(profile, spec, options, stop_seq);
  ReadOptions read;
  std::vector<IndexChunk> chunks;  // of the last image: see the index
  std::vector<std::string> metadata;  // of the whole capture, for the index's end
  uint64_t chunks_image = 0;
  if (use.writer) {
    replayer.BuildIndex(use.writer);
    read.keep_metadata = &metadata;
    read.follow = use.follow;
    read.on_chunk = [&](uint64_t offset, uint64_t image, int64_t min_seq, int64_t max_seq) {
      if (image != chunks_image) chunks.clear();
      chunks_image = image;
      if (min_seq >= 0) chunks.push_back({offset, uint64_t(min_seq), uint64_t(max_seq)});
    };
  }
  if (use.index) {  // only the chunks with events between the checkpoint and the snapshot
    read.image = use.index->image;
    uint64_t from_offset = use.from ? use.from->events_from_offset : 0;
    // A chunk is delivered when it holds events between the checkpoint and the stop. Its
    // events are coded against allocations of the chunks before (a release names one, and that
    // allocation may have reused a block freed before it), so the kResumeChunks chunks before a
    // delivered one are decoded for their allocations. The index lists only chunks with events:
    // counting in it reaches at least as far back as needed.
    read.decoding = [&replayer, &use, from_offset](uint64_t offset) {
      const std::vector<IndexChunk>& listed = use.index->chunks;
      auto delivered = [&](const IndexChunk& c) {
        return c.offset >= from_offset && c.min_seq < replayer.stop_seq();
      };
      auto at = std::lower_bound(listed.begin(), listed.end(), offset,
                                 [](const IndexChunk& c, uint64_t o) { return c.offset < o; });
      if (at != listed.end() && at->offset == offset) {
        if (delivered(*at)) return format::EventDecoding::kDeliver;
        ++at;
      }
      for (size_t k = 0; k < format::kResumeChunks && at != listed.end(); ++k, ++at) {
        if (delivered(*at)) return format::EventDecoding::kAllocations;
      }
      return format::EventDecoding::kSkip;
    };
  }
  if (use.from) {
    std::string state;
    if (!ReadCheckpointState(*use.index, *use.from, &state)) {
      *error = "cannot read the snapshot index " + use.index->path + ": delete it and try again";
      return false;
    }
    replayer.ResumeFrom(std::move(state), use.from->seq,
                        {use.index->timeline.begin(),
                         use.index->timeline.begin() + use.from->timeline_points});
    read.first_seq = use.from->seq;
  }
  if (use.end_metadata) read.metadata_only = use.end_metadata;  // no chunk of the capture is read
  if (!ReadCapture(path, &replayer, &profile->read, error, read)) return false;
  // After the reading: an exec's process record starts the profile over.
  if (use.from) profile->from_checkpoint_seq = use.end_metadata ? use.index->end.events : use.from->seq;
  if (use.end_metadata) {
    const IndexEnd& end = use.index->end;
    profile->read.format_major = static_cast<uint16_t>(end.format_major);
    profile->read.format_minor = static_cast<uint16_t>(end.format_minor);
    profile->read.ended = end.ended != 0;
    profile->read.bytes_read = end.bytes_read;
    profile->read.damage = end.damage;
  }
  // memlens run stopped following the capture (^C while it was being indexed): no index.
  const bool cancelled = use.follow && use.follow->load() == kReadCancelled;
  if (use.writer && profile->read.missing_events == 0 && !cancelled) {
    replayer.SaveEnd(metadata, profile->read);
  }
  // Events after the snapshot in chunks left undecoded look missing to the reader; only a
  // capture with none missing gets an index. Markers past the snapshot are among them: the
  // index has them all.
  if (use.index) {
    profile->read.missing_events = 0;
    profile->markers = use.index->markers;
    profile->program_end_seq = use.index->program_end_seq;
  }
  if (!profile->has_process) {
    *error = "'" + path + "' holds no recording (" +
             (profile->read.damage.empty() ? std::string("it ends after the file header")
                                           : profile->read.damage) +
             ")";
    return false;
  }
  replayer.Finish();
  if (!options.heap.empty() && !std::any_of(profile->heaps.begin(), profile->heaps.end(),
                                            [&](const HeapFigures& h) { return h.name == options.heap; })) {
    *error = "--heap " + options.heap + ": no custom heap of that name in this capture (" +
             HeapNamesForError(*profile) + ")";
    return false;
  }
  if (spec.kind == SnapshotSpec::kTime && spec.seconds > profile->DurationSeconds()) {
    char message[160];
    std::snprintf(message, sizeof message, "@%s is after the end of the capture (%.3f s)",
                  spec.text.c_str(), profile->DurationSeconds());
    *error = message;
    return false;
  }
  // A capture with missing events would resume with a different count of them: no index.
  if (use.writer && profile->read.missing_events == 0 && !cancelled) {
    if (use.follow) use.writer->Restat();
    use.built->image = profile->earlier_images.size();
    use.built->peak_seq = profile->totals.peak_seq;
    use.built->peak_bytes = profile->totals.peak_bytes;
    use.built->peak_blocks = profile->totals.peak_blocks;
    use.built->timeline = profile->timeline;
    use.built->chunks = std::move(chunks);
    use.built->markers = profile->markers;
    use.built->program_end_seq = profile->program_end_seq;
    if (!use.writer->Finish(use.built, profile->times)) use.built->path.clear();
  }
  if (!profile->read.damage.empty()) profile->warnings.push_back(profile->read.damage);
  if (!profile->end) {
    profile->still_recording = StillRecording(profile->path);
    std::string state = profile->still_recording
                            ? "the program is still recording"
                            : "the recording did not finish (the program was killed or the "
                              "capture was cut short)";
    profile->warnings.push_back(state + ": figures cover the first " +
                                std::to_string(profile->DurationSeconds()) + " s");
  }
  if (profile->read.missing_events) {
    profile->warnings.push_back(std::to_string(profile->read.missing_events) +
                                " events are missing from the capture");
  }
  if (profile->end && profile->end->dropped) profile->totals.dropped_events = profile->end->dropped;
  if (profile->totals.dropped_events) {
    profile->warnings.push_back(std::to_string(profile->totals.dropped_events) +
                                " events were dropped while recording: figures are incomplete");
  }
  return true;
}

// A whole replay, writing the index on the way when a writer is given (index->path is then
// set once it is in place).
bool ReplayAll(const std::string& path, SnapshotIndexWriter* writer, Profile* full,
               SnapshotIndex* index, std::string* error,
               const std::atomic<int>* follow = nullptr) {
  return Replay(path, SnapshotSpec{}, ReplayOptions{}, UINT64_MAX, full, error,
                IndexUse{writer, index, follow});
}

// The index serves a plain replay (no per-thread view, no extra per-moment figures): a
// snapshot, or the whole capture when the index has its end.
bool IndexServes(const ReplayOptions& options) {
  return !IndexTurnedOff() && options.thread == 0 && options.heap.empty() && options.checkpoint_seconds.empty() &&
         options.checkpoint_seqs.empty() && !options.stack_size_histograms;
}

// The whole capture, from the end of its index when it has one (memlens run writes it while
// the program runs), else replayed. The index is only read, never built, here: a first view of
// the whole capture costs a replay either way.
bool LoadWhole(const std::string& path, const SnapshotSpec& snapshot, const ReplayOptions& options,
               Profile* profile, std::string* error) {
  SnapshotIndex index;
  std::vector<std::string> metadata;
  if (IndexServes(options) && LoadSnapshotIndex(path, &index) && index.end.state.blob_size &&
      ReadIndexMetadata(index, &metadata)) {
    IndexUse use;
    use.index = &index;
    use.from = &index.end.state;
    use.end_metadata = &metadata;
    return Replay(path, snapshot, options, UINT64_MAX, profile, error, use);
  }
  return Replay(path, snapshot, options, UINT64_MAX, profile, error);
}

// No specifier: "exit" is where a Python program's own code ended when the capture has that
// moment (docs/python.md), else the end of the process. The index says which without a replay;
// without one, the whole replay tells, and a Python capture is replayed again up to its end.
bool LoadAtExit(const std::string& path, const ReplayOptions& options, Profile* profile,
                std::string* error) {
  SnapshotSpec program_end;
  program_end.kind = SnapshotSpec::kProgramEnd;  // its text stays empty: the default
  SnapshotIndex index;
  const bool indexed = IndexServes(options) && LoadSnapshotIndex(path, &index);
  if (indexed && index.program_end_seq) {
    return LoadProfile(path, program_end, options, profile, error);
  }
  if (!LoadWhole(path, SnapshotSpec{}, options, profile, error)) return false;
  if (indexed || profile->program_end_seq == 0) return true;
  *profile = Profile();
  return LoadProfile(path, program_end, options, profile, error);
}

}  // namespace

bool LoadProfile(const std::string& path, const SnapshotSpec& snapshot,
                 const ReplayOptions& options, Profile* profile, std::string* error) {
  if (snapshot.kind == SnapshotSpec::kEnd) {
    return snapshot.text.empty() ? LoadAtExit(path, options, profile, error)
                                 : LoadWhole(path, snapshot, options, profile, error);
  }
  uint64_t stop_seq = UINT64_MAX;
  const bool at_marker = snapshot.kind == SnapshotSpec::kMarker ||
                         snapshot.kind == SnapshotSpec::kSnapshot ||
                         snapshot.kind == SnapshotSpec::kProgramEnd;
  const bool serves = IndexServes(options);
  SnapshotIndex index;
  bool indexed = serves && LoadSnapshotIndex(path, &index);
  // A marker is an exact place in the sequence of events: replay up to it (markers.h). The
  // index has every marker; without one, they are read from the capture.
  if (snapshot.kind == SnapshotSpec::kProgramEnd) {
    if (!(indexed ? FindProgramEndSeq(index.program_end_seq, &stop_seq, error)
                  : FindProgramEndSeq(path, &stop_seq, error))) {
      return false;
    }
  } else if (at_marker && !(indexed ? FindMarkerSeq(index.markers, snapshot, &stop_seq, error)
                                    : FindMarkerSeq(path, snapshot, &stop_seq, error))) {
    return false;
  }
  Profile full;  // a whole replay, when one is needed to find the peak or to build the index
  bool have_full = false;
  if (serves && !indexed) {
    SnapshotIndexWriter writer(path);
    if (writer.ok() || snapshot.kind == SnapshotSpec::kPeak) {
      if (!ReplayAll(path, writer.ok() ? &writer : nullptr, &full, &index, error)) return false;
      have_full = true;
      indexed = !index.path.empty();
    }
  }
  if (snapshot.kind == SnapshotSpec::kPeak) {
    // The peak is known only at the end: from the index, or from a whole replay first.
    if (!indexed && !have_full) {
      if (!Replay(path, SnapshotSpec{}, ReplayOptions{}, UINT64_MAX, &full, error)) return false;
    }
    if (!indexed) {
      index.peak_seq = full.totals.peak_seq;
      index.peak_bytes = full.totals.peak_bytes;
      index.peak_blocks = full.totals.peak_blocks;
    }
    stop_seq = index.peak_seq + 1;
  }
  IndexUse resume;
  if (indexed) {
    resume.index = &index;
    resume.from = snapshot.kind == SnapshotSpec::kTime ? index.BeforeTime(snapshot.seconds)
                                                       : index.Before(stop_seq);
  }
  if (!Replay(path, snapshot, options, stop_seq, profile, error, resume)) return false;
  if (at_marker) profile->snapshot_seconds = profile->SecondsAt(stop_seq);
  if (snapshot.kind == SnapshotSpec::kPeak) {
    profile->totals.peak_bytes = index.peak_bytes;
    profile->totals.peak_blocks = index.peak_blocks;
    profile->totals.peak_seq = index.peak_seq;
    profile->snapshot_seconds = profile->SecondsAt(index.peak_seq);
  }
  return true;
}

bool BuildSnapshotIndex(const std::string& path, SnapshotIndex* index, std::string* error,
                        const std::atomic<int>* follow) {
  SnapshotIndexWriter writer(path);
  if (!writer.ok() && access(path.c_str(), R_OK) != 0) {
    *error = "cannot open '" + path + "': " + std::strerror(errno);
    return false;
  }
  if (!writer.ok()) {
    *error = "no writable place for the index of '" + path + "' (next to it, or in " +
             "$XDG_CACHE_HOME/memlens or ~/.cache/memlens)";
    return false;
  }
  Profile full;
  if (!ReplayAll(path, &writer, &full, index, error, follow)) return false;
  if (follow && follow->load() == kReadCancelled) {
    *error = "indexing was cancelled";
    return false;
  }
  if (index->path.empty()) {
    *error = full.read.missing_events ? "'" + path + "' misses events: it cannot be indexed"
                                      : "could not write the index of '" + path + "'";
    return false;
  }
  return true;
}

std::string Profile::SnapshotLabel() const {
  if (snapshot.kind == SnapshotSpec::kEnd) {
    // @end named in a capture whose default "exit" is the program's end: not that exit.
    if (!snapshot.text.empty() && program_end_seq) return "the end of the process";
    return end ? "exit" : "the end of the capture";
  }
  if (AtProgramEndByDefault()) return "exit";  // ProgramEndNote says which exit
  char when[48];
  std::snprintf(when, sizeof when, " (%.3f s)", snapshot_seconds);
  return snapshot.text + when;
}

bool ParseCaptureArgument(const std::string& argument, std::string* path, SnapshotSpec* spec,
                          std::string* error) {
  *spec = SnapshotSpec{};
  // A marker's name may hold '@': the first "@marker:" or "@snapshot:" starts the specifier.
  size_t at = std::min(argument.find("@marker:"), argument.find("@snapshot:"));
  if (at == std::string::npos) at = argument.rfind('@');
  std::string text = at == std::string::npos ? "" : argument.substr(at + 1);
  bool known = text == "end" || text == "peak" || text == "program-end" ||
               text.rfind("t=", 0) == 0 ||
               text.rfind("marker:", 0) == 0 || text.rfind("snapshot:", 0) == 0;
  if (at == std::string::npos || !known) {
    *path = argument;  // no snapshot; a path may contain '@'
    return true;
  }
  *path = argument.substr(0, at);
  spec->text = text;
  if (text == "end") return true;
  if (text == "peak") {
    spec->kind = SnapshotSpec::kPeak;
    return true;
  }
  if (text == "program-end") {
    spec->kind = SnapshotSpec::kProgramEnd;
    return true;
  }
  if (text.rfind("t=", 0) == 0) {
    std::string number = text.substr(2);
    if (!number.empty() && number.back() == 's') number.pop_back();
    char* rest = nullptr;
    double seconds = std::strtod(number.c_str(), &rest);
    if (number.empty() || *rest != '\0' || !(seconds >= 0) || seconds > 1e9) {
      *error = "@" + text + ": the time must be a number of seconds, 0 or more (as in @t=2.5s)";
      return false;
    }
    spec->kind = SnapshotSpec::kTime;
    spec->seconds = seconds;
    return true;
  }
  // marker:NAME[#K] or snapshot:NAME[#K]
  bool marker = text.rfind("marker:", 0) == 0;
  std::string name = text.substr(marker ? 7 : 9);
  size_t hash = name.rfind('#');
  if (hash != std::string::npos && hash + 1 < name.size() &&
      name.find_first_not_of("0123456789", hash + 1) == std::string::npos) {
    std::string digits = name.substr(hash + 1);
    uint64_t k = digits.size() > 9 ? 0 : std::strtoull(digits.c_str(), nullptr, 10);
    if (k == 0) {
      *error = "@" + text + ": the occurrence after '#' counts from 1 (as in @marker:" +
               name.substr(0, hash) + "#2)";
      return false;
    }
    spec->occurrence = k;
    name.resize(hash);
  }
  if (name.empty()) {
    *error = "@" + text + ": a name is needed (as in @marker:frame, @marker:frame#3, @snapshot:menu)";
    return false;
  }
  spec->kind = marker ? SnapshotSpec::kMarker : SnapshotSpec::kSnapshot;
  spec->name = name;
  return true;
}

}  // namespace memlens::analyzer
