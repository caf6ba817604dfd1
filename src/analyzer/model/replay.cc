// src/analyzer/model/replay.cc: see replay.h.
#include "analyzer/model/replay.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <unordered_set>

#include "analyzer/model/address_map.h"

namespace memlens::analyzer {
namespace {

using format::EventKind;

constexpr uint64_t kTruncatedMarkerIp = 1;  // see the agent's writer

struct Region {
  uint64_t end;
  uint64_t stack;
};

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
  uint64_t changed_in_epoch = 0;
};

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
  }
  void OnModuleUnload(const format::ModuleUnloadRecord& r) override {
    loaded_.erase(std::remove(loaded_.begin(), loaded_.end(), r.id), loaded_.end());
    unloaded_.push_back(r.id);
  }
  // A thread that allocates again after its buffer was retired (in late TLS destructors) gets
  // a second index: count OS threads, not indices.
  void OnThread(const format::ThreadRecord& r) override {
    if (tids_.insert(r.tid).second) ++p_->thread_count;
    if (r.index >= tid_of_.size()) tid_of_.resize(r.index + 1);
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
  void OnDrops(const format::DropsRecord& r) override { p_->totals.dropped_events += r.count; }
  void OnEnd(const format::EndRecord& r) override { p_->end = r; }
  void OnSampling(const format::SamplingRecord& r) override { p_->sample_rate = r.rate; }
  void OnEvent(const format::Event& e) override;

  void Finish();
  bool stopped_early() const { return stop_seconds_ >= 0; }

 private:
  void StartOver();
  void TakeTimelinePoints(uint64_t before_seq);
  void TakeCheckpoints(uint64_t before_seq);
  void CountSize(uint64_t stack, uint64_t size, Weight w);
  Weight HeapWeight(uint64_t size) const;
  bool LeftOut(const format::Event& e);
  void MapAddressSpace();
  uint64_t ModuleOf(uint64_t ip) const;
  StackState& State(uint64_t stack);
  void Allocate(uint64_t stack, Weight w, uint64_t seq, bool python = false);
  void Release(uint64_t stack, Weight w, bool python = false);
  void Touch(StackState& s);
  void AddRegion(uint64_t start, uint64_t size, uint64_t stack, uint64_t seq);
  void RemoveRange(uint64_t start, uint64_t size, std::vector<std::pair<uint64_t, Region>>* taken);

  Profile* p_;
  std::vector<uint64_t> loaded_, unloaded_;  // module ids, in load order
  std::unordered_set<uint64_t> tids_;
  std::vector<uint64_t> tid_of_;  // by thread index
  AddressMap other_threads_;  // ReplayOptions::thread: live blocks of the threads left out
  AddressMap heap_;
  std::map<uint64_t, Region> mappings_;  // anonymous mappings by start address
  std::vector<StackState> states_;  // by stack id: node ids are dense
  std::unordered_map<uint32_t, LiveBlock> realloc_pending_;  // by thread
  std::unordered_map<uint32_t, LiveBlock> left_out_realloc_;  // by thread
  std::unordered_map<uint32_t, std::vector<std::pair<uint64_t, Region>>> mremap_pending_;
  uint64_t live_bytes_ = 0;
  uint64_t live_blocks_ = 0;
  uint64_t peak_epoch_ = 1;
  SnapshotSpec spec_;
  ReplayOptions options_;
  size_t next_checkpoint_ = 0;
  std::deque<std::pair<size_t, format::TimeRecord>> pending_checkpoints_;
  std::unordered_map<uint32_t, std::pair<uint64_t, uint64_t>> last_alloc_;  // thread -> address, stack
  uint64_t stop_seq_;  // UINT64_MAX: replay everything
  double stop_seconds_ = -1;
  std::deque<format::TimeRecord> pending_marks_;  // time marks no delivered event has passed
  AddressMap arenas_;  // pymalloc arenas, outside the heap totals
  uint64_t arena_bytes_ = 0;
};

void Replayer::StartOver() {
  Profile fresh;
  fresh.path = p_->path;
  fresh.read = p_->read;
  fresh.earlier_images = std::move(p_->earlier_images);
  fresh.earlier_images.push_back(p_->process.argv);
  *p_ = std::move(fresh);
  loaded_.clear();
  unloaded_.clear();
  tids_.clear();
  tid_of_.clear();
  other_threads_ = AddressMap();
  left_out_realloc_.clear();
  heap_ = AddressMap();
  arenas_ = AddressMap();
  arena_bytes_ = 0;
  mappings_.clear();
  states_.clear();
  realloc_pending_.clear();
  mremap_pending_.clear();
  live_bytes_ = live_blocks_ = 0;
  peak_epoch_ = 1;
  pending_marks_.clear();
  pending_checkpoints_.clear();
  next_checkpoint_ = 0;
  last_alloc_.clear();
  if (spec_.kind == SnapshotSpec::kTime) {  // a time is a time of the last image
    stop_seq_ = UINT64_MAX;
    stop_seconds_ = -1;
  }
}

uint64_t Replayer::ModuleOf(uint64_t ip) const {
  if (ip == kTruncatedMarkerIp) return 0;
  // The newest mapping wins: an address may have been reused after a dlclose.
  for (auto list : {&loaded_, &unloaded_}) {
    for (auto it = list->rbegin(); it != list->rend(); ++it) {
      const auto& m = p_->modules.at(*it);
      for (const auto& s : m.segments) {
        if (ip - s.start < s.size) return m.id;
      }
    }
  }
  return 0;
}

StackState& Replayer::State(uint64_t stack) {
  if (stack >= states_.size()) states_.resize(std::max<size_t>(stack + 1, states_.size() * 2));
  return states_[stack];
}

void Replayer::Touch(StackState& s) {
  if (s.changed_in_epoch < peak_epoch_) {  // first change since the last peak: remember it
    s.stats.peak_bytes = s.live_bytes;
    s.stats.peak_blocks = s.live_blocks;
    s.stats.python_peak_bytes = s.python_live_bytes;
    s.changed_in_epoch = peak_epoch_;
  }
}

// A sampled capture (docs/sampling.md): a block of s bytes was recorded with probability
// p = 1 - exp(-s/rate), so it stands for s/p bytes and 1/p blocks (the Horvitz-Thompson
// estimator: unbiased for every sum of blocks). The same size always gives the same weight,
// so a free takes back exactly what its allocation added.
Weight Replayer::HeapWeight(uint64_t size) const {
  if (p_->sample_rate == 0 || size == 0) return {size, kCountUnit};
  double p = -std::expm1(-static_cast<double>(size) / static_cast<double>(p_->sample_rate));
  return {static_cast<uint64_t>(std::llround(static_cast<double>(size) / p)),
          static_cast<uint64_t>(std::llround(static_cast<double>(kCountUnit) / p))};
}

void Replayer::Allocate(uint64_t stack, Weight w, uint64_t seq, bool python) {
  StackState& s = State(stack);
  Touch(s);
  s.live_bytes += w.bytes;
  s.live_blocks += w.count;
  s.stats.allocations += w.count;
  s.stats.allocated_bytes += w.bytes;
  p_->totals.allocations += w.count;
  p_->totals.allocated_bytes += w.bytes;
  if (python) {
    s.python_live_bytes += w.bytes;
    s.stats.python_allocated_bytes += w.bytes;
    p_->totals.python_allocated_bytes += w.bytes;
  }
  live_bytes_ += w.bytes;
  live_blocks_ += w.count;
  if (live_bytes_ > p_->totals.peak_bytes) {
    p_->totals.peak_bytes = live_bytes_;
    p_->totals.peak_blocks = live_blocks_;
    p_->totals.peak_seq = seq;
    ++peak_epoch_;  // every stack's current value is now its value at the peak
  }
}

void Replayer::Release(uint64_t stack, Weight w, bool python) {
  StackState& s = State(stack);
  Touch(s);
  s.live_bytes -= w.bytes;
  s.live_blocks -= w.count;
  if (python) s.python_live_bytes -= w.bytes;
  live_bytes_ -= w.bytes;
  live_blocks_ -= w.count;
}

void Replayer::AddRegion(uint64_t start, uint64_t size, uint64_t stack, uint64_t seq) {
  if (size == 0) return;
  std::vector<std::pair<uint64_t, Region>> replaced;
  RemoveRange(start, size, &replaced);  // MAP_FIXED over an existing mapping replaces it
  mappings_[start] = {start + size, stack};
  Allocate(stack, {size, kCountUnit}, seq);
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
    // Mappings are recorded in full even in a sampled capture: whole weights.
    Release(r.stack, {r.end - r_start, kCountUnit});
    p_->totals.frees += kCountUnit;
    if (r_start < cut_start) {
      mappings_[r_start] = {cut_start, r.stack};
      Allocate(r.stack, {cut_start - r_start, kCountUnit}, 0);
      State(r.stack).stats.allocations -= kCountUnit;  // a split is not a new allocation
      State(r.stack).stats.allocated_bytes -= cut_start - r_start;
      p_->totals.allocations -= kCountUnit;
      p_->totals.allocated_bytes -= cut_start - r_start;
    }
    if (cut_end < r.end) {
      mappings_[cut_end] = {r.end, r.stack};
      Allocate(r.stack, {r.end - cut_end, kCountUnit}, 0);
      State(r.stack).stats.allocations -= kCountUnit;
      State(r.stack).stats.allocated_bytes -= r.end - cut_end;
      p_->totals.allocations -= kCountUnit;
      p_->totals.allocated_bytes -= r.end - cut_end;
    }
    taken->push_back({cut_start, {cut_end, r.stack}});
    it = mappings_.lower_bound(cut_end);
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
    Checkpoint c;
    c.seconds = options_.checkpoint_seconds[index];
    c.at_seconds = mark.monotonic_ns / 1e9;
    c.heap_bytes = live_bytes_;
    for (uint64_t stack = 0; stack < states_.size(); ++stack) {
      if (states_[stack].live_blocks) {
        c.live[stack] = {states_[stack].live_bytes, WholeBlocks(states_[stack].live_blocks)};
      }
    }
    p_->checkpoints.push_back(std::move(c));
  }
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
  bool other = e.thread >= tid_of_.size() || tid_of_[e.thread] != options_.thread;
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
    case EventKind::kMremapNew:
    case EventKind::kPyArenaAlloc:
    case EventKind::kPyArenaFree:
      return other;  // a left-out mapping is never tracked; unmapping it finds nothing
    default:
      if (!format::IsHeapAlloc(e.kind)) return false;
      left_out_realloc_.erase(e.thread);
      if (!other) return false;
      other_threads_.Insert(e.address, {e.size, e.stack, false});
      return true;
  }
}

void Replayer::OnEvent(const format::Event& e) {
  TakeTimelinePoints(e.seq);  // the heap as it was at every mark this event comes after
  TakeCheckpoints(e.seq);
  if (e.seq >= stop_seq_) {
    if (stop_seconds_ < 0) stop_seconds_ = p_->SecondsAt(e.seq - 1);
    return;  // past the snapshot
  }
  ++p_->totals.events;
  LiveBlock block;
  if (options_.thread != 0 && LeftOut(e)) return;
  switch (e.kind) {
    case EventKind::kFree:
      if (heap_.Remove(e.address, &block)) {
        Weight w = HeapWeight(block.size);
        Release(block.stack, w, block.python);
        p_->totals.frees += w.count;
        auto last = last_alloc_.find(e.thread);
        if (last != last_alloc_.end() && last->second.first == e.address) {
          StackStats& stats = State(block.stack).stats;  // freed before any other allocation
          stats.temporary += w.count;
          stats.temporary_bytes += w.bytes;
          p_->totals.temporary += w.count;
          last_alloc_.erase(last);
        }
      } else {
        ++p_->totals.unmatched_frees;
      }
      break;
    case EventKind::kReallocOld:
      if (heap_.Remove(e.address, &block)) {
        Weight w = HeapWeight(block.size);
        Release(block.stack, w, block.python);
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
        Allocate(old.stack, w, e.seq, old.python);
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
      AddRegion(e.address, e.size, e.stack, e.seq);
      CountSize(e.stack, e.size, {e.size, kCountUnit});
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
      if (it != mremap_pending_.end() && !it->second.empty()) AddRegion(e.address, e.size, e.stack, e.seq);
      if (it != mremap_pending_.end()) it->second.clear();
      break;
    }
    case EventKind::kMremapFailed: {
      auto it = mremap_pending_.find(e.thread);
      if (it == mremap_pending_.end()) break;
      for (auto& [start, region] : it->second) AddRegion(start, region.end - start, region.stack, e.seq);
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
    default:  // every heap allocation kind
      if (format::IsHeapAlloc(e.kind)) {
        realloc_pending_.erase(e.thread);  // any allocation ends a realloc in progress
        if (heap_.Remove(e.address, &block)) {  // a free we never saw (dropped): forget it
          Release(block.stack, HeapWeight(block.size), block.python);
        }
        bool python = format::IsPythonAlloc(e.kind);
        Weight w = HeapWeight(e.size);
        heap_.Insert(e.address, {e.size, e.stack, python});
        Allocate(e.stack, w, e.seq, python);
        CountSize(e.stack, e.size, w);
        last_alloc_[e.thread] = {e.address, e.stack};
      }
      break;
  }
}

// The live set at the snapshot, by address: stretches of blocks with no gap over 1 MiB.
void Replayer::MapAddressSpace() {
  constexpr uint64_t kRegionGap = 1 << 20;
  struct Block {
    uint64_t begin, size, stack;
    bool mapping;
    Weight w;  // in a sampled capture, what the block stands for
  };
  std::vector<Block> blocks;
  heap_.ForEach([&](uint64_t a, const LiveBlock& b) {
    blocks.push_back({a, b.size, b.stack, false, HeapWeight(b.size)});
  });
  for (const auto& [start, region] : mappings_) {
    uint64_t size = region.end - start;
    blocks.push_back({start, size, region.stack, true, {size, kCountUnit}});
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
                 p_->address_map.back().mapping != b.mapping;
    if (fresh) {
      close_region();
      p_->address_map.push_back({b.begin, b.begin, 0, 0, 0, b.mapping, 0});
    }
    AddressRegion& r = p_->address_map.back();
    if (b.begin > r.end) r.largest_gap = std::max(r.largest_gap, b.begin - r.end);
    r.end = std::max(r.end, b.begin + b.size);
    r.in_use_bytes += b.w.bytes;
    r.blocks += b.w.count;
    bytes_by_stack[b.stack] += b.w.bytes;
  }
  close_region();
  for (AddressRegion& r : p_->address_map) r.blocks = WholeBlocks(r.blocks);
}

void Replayer::Finish() {
  TakeTimelinePoints(UINT64_MAX);
  TakeCheckpoints(UINT64_MAX);
  if (options_.address_map) MapAddressSpace();
  p_->snapshot = spec_;
  p_->snapshot_seconds = stop_seconds_ >= 0 ? stop_seconds_ : p_->DurationSeconds();
  for (uint64_t stack = 0; stack < states_.size(); ++stack) {
    StackState& s = states_[stack];
    if (s.stats.allocations == 0 && s.live_blocks == 0) continue;  // never an allocation site
    if (s.changed_in_epoch < peak_epoch_) {  // unchanged since the last peak
      s.stats.peak_bytes = s.live_bytes;
      s.stats.peak_blocks = s.live_blocks;
      s.stats.python_peak_bytes = s.python_live_bytes;
    }
    s.stats.leaked_bytes = s.live_bytes;
    s.stats.leaked_blocks = s.live_blocks;
    s.stats.python_leaked_bytes = s.python_live_bytes;
    for (uint64_t* count : {&s.stats.allocations, &s.stats.peak_blocks, &s.stats.leaked_blocks,
                            &s.stats.temporary}) {
      *count = WholeBlocks(*count);
    }
    p_->stacks[stack] = s.stats;
  }
  p_->totals.arena_leaked_bytes = arena_bytes_;
  p_->totals.leaked_bytes = live_bytes_;
  p_->totals.leaked_blocks = live_blocks_;
  Totals& t = p_->totals;
  for (uint64_t* count : {&t.allocations, &t.frees, &t.peak_blocks, &t.leaked_blocks, &t.temporary}) {
    *count = WholeBlocks(*count);
  }
  for (SizeBucket& b : p_->size_histogram) b.count = WholeBlocks(b.count);
  for (auto& [stack, h] : p_->stack_size_histograms) {
    for (SizeBucket& b : h) b.count = WholeBlocks(b.count);
  }
  for (const auto& [start, region] : mappings_) p_->totals.mmap_leaked_bytes += region.end - start;
}

}  // namespace

double Profile::SecondsAt(uint64_t seq) const {
  // The first time mark with a larger seq bounds the event from above.
  auto it = std::upper_bound(times.begin(), times.end(), seq,
                             [](uint64_t s, const format::TimeRecord& t) { return s < t.seq; });
  if (it == times.end()) return DurationSeconds();
  return static_cast<double>(it->monotonic_ns) / 1e9;
}

double Profile::DurationSeconds() const {
  if (end) return static_cast<double>(end->monotonic_ns) / 1e9;
  return times.empty() ? 0.0 : static_cast<double>(times.back().monotonic_ns) / 1e9;
}

namespace {

bool Replay(const std::string& path, const SnapshotSpec& spec, const ReplayOptions& options,
            uint64_t stop_seq, Profile* profile, std::string* error) {
  *profile = Profile();
  profile->path = path;
  Replayer replayer(profile, spec, options, stop_seq);
  if (!ReadCapture(path, &replayer, &profile->read, error)) return false;
  if (!profile->has_process) {
    *error = "'" + path + "' holds no recording (" +
             (profile->read.damage.empty() ? std::string("it ends after the file header")
                                           : profile->read.damage) +
             ")";
    return false;
  }
  replayer.Finish();
  if (spec.kind == SnapshotSpec::kTime && spec.seconds > profile->DurationSeconds()) {
    char message[160];
    std::snprintf(message, sizeof message, "@%s is after the end of the capture (%.3f s)",
                  spec.text.c_str(), profile->DurationSeconds());
    *error = message;
    return false;
  }
  if (!profile->read.damage.empty()) profile->warnings.push_back(profile->read.damage);
  if (!profile->end) {
    profile->warnings.push_back(
        "the recording did not finish (the program was killed or the capture was cut short): "
        "figures cover the first " + std::to_string(profile->DurationSeconds()) + " s");
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

}  // namespace

bool LoadProfile(const std::string& path, const SnapshotSpec& snapshot,
                 const ReplayOptions& options, Profile* profile, std::string* error) {
  if (snapshot.kind != SnapshotSpec::kPeak) {
    return Replay(path, snapshot, options, UINT64_MAX, profile, error);
  }
  // The peak is known only at the end: find it, then replay up to it.
  if (!Replay(path, SnapshotSpec{}, ReplayOptions{}, UINT64_MAX, profile, error)) return false;
  uint64_t peak_seq = profile->totals.peak_seq;
  Profile at_peak;
  if (!Replay(path, snapshot, options, peak_seq + 1, &at_peak, error)) return false;
  at_peak.totals.peak_bytes = profile->totals.peak_bytes;
  at_peak.totals.peak_blocks = profile->totals.peak_blocks;
  at_peak.totals.peak_seq = peak_seq;
  at_peak.snapshot_seconds = profile->SecondsAt(peak_seq);
  *profile = std::move(at_peak);
  return true;
}

std::string Profile::SnapshotLabel() const {
  if (snapshot.kind == SnapshotSpec::kEnd) return end ? "exit" : "the end of the capture";
  char when[48];
  std::snprintf(when, sizeof when, " (%.3f s)", snapshot_seconds);
  return snapshot.text + when;
}

bool ParseCaptureArgument(const std::string& argument, std::string* path, SnapshotSpec* spec,
                          std::string* error) {
  *spec = SnapshotSpec{};
  size_t at = argument.rfind('@');
  std::string text = at == std::string::npos ? "" : argument.substr(at + 1);
  bool known = text == "end" || text == "peak" || text.rfind("t=", 0) == 0 ||
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
  *error = "@" + text + ": this capture has no markers or snapshots (programs add them through "
           "memlens's instrumentation API); use @t=SECONDS, @peak or @end";
  return false;
}

}  // namespace memlens::analyzer
