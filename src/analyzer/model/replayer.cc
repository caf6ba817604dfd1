// src/analyzer/model/replayer.cc: see replayer.h.
#include "analyzer/model/replayer.h"

#include <cmath>

namespace memlens::analyzer {

using format::EventKind;

namespace {
constexpr uint64_t kTruncatedMarkerIp = 1;  // see the agent's writer
}  // namespace

Replayer::Replayer(Profile* p, const SnapshotSpec& spec, const ReplayOptions& options,
                   uint64_t stop_before_seq)
    : p_(p),
      spec_(spec),
      options_(options),
      stop_seq_(stop_before_seq),
      checkpoints_(options),
      map_frames_(options),
      sizes_(options.stack_size_histograms),
      thread_filter_(options.thread) {
  sampled_ = p->sample_rate != 0;
  if (options.resident_parts) resident_ = std::make_unique<ResidentTimeline>();
}

void Replayer::OnProcess(const format::ProcessRecord& r) {
  if (r.Forked() && !p_->has_process && play_fork_prefix_) {  // a forked process's first image
    play_fork_prefix_(r, this);
    BeginForkedImage();
  }
  if (p_->has_process) StartOver();  // exec: the new image replaces the old one
  p_->process = r;
  if (!p_->first_image) p_->first_image = r;
  p_->has_process = true;
}

void Replayer::OnModule(const format::ModuleRecord& r) {
  const uint64_t id = r.id + module_base_;
  format::ModuleRecord& m = p_->modules[id] = r;
  m.id = id;
  loaded_.push_back(id);
  IndexLoadedSegments();
}

void Replayer::OnModuleUnload(const format::ModuleUnloadRecord& r) {
  const uint64_t id = r.id + module_base_;
  // No such module loaded: a damaged capture's record, which names nothing to unload.
  if (std::find(loaded_.begin(), loaded_.end(), id) == loaded_.end()) return;
  loaded_.erase(std::remove(loaded_.begin(), loaded_.end(), id), loaded_.end());
  unloaded_.push_back(id);
  IndexLoadedSegments();
}

// A thread that allocates again after its buffer was retired (in late TLS destructors) gets
// a second index: count OS threads, not indices.
void Replayer::OnThread(const format::ThreadRecord& r) {
  if (tids_.insert(r.tid).second) ++p_->thread_count;
  tid_of_[r.index] = r.tid;
}

void Replayer::OnTime(const format::TimeRecord& r) {
  p_->times.push_back(r);
  timeline_.OnTimeMark(r);
  // Within a chunk time marks come before its events: every event delivered so far
  // happened before this mark. The first mark past the snapshot time ends the replay.
  if (spec_.kind == SnapshotSpec::kTime && r.monotonic_ns > spec_.seconds * 1e9 &&
      stop_seq_ == UINT64_MAX) {
    stop_seq_ = r.seq;
    stop_seconds_ = static_cast<double>(r.monotonic_ns) / 1e9;
  }
  checkpoints_.OnTimeMark(r);
  map_frames_.OnTimeMark(r);
}

void Replayer::StartOver() {
  Profile fresh;
  fresh.path = p_->path;
  fresh.read = p_->read;
  fresh.first_image = std::move(p_->first_image);
  fresh.earlier_images = std::move(p_->earlier_images);
  fresh.earlier_images.push_back(p_->process.argv);
  fresh.earlier_unrecorded_children = p_->UnrecordedChildren();
  *p_ = std::move(fresh);
  loaded_.clear();
  unloaded_.clear();
  loaded_spans_.clear();
  node_base_ = module_base_ = 0;  // a forked image's numbering ends with it
  tids_.clear();
  tid_of_.clear();
  heap_ = AddressMap();
  mappings_.clear();
  slot_of_.clear();
  states_.assign(1, StackState{});
  realloc_pending_.clear();
  mremap_pending_.clear();
  live_bytes_ = live_blocks_ = mapping_live_bytes_ = reserved_bytes_ = 0;
  peak_epoch_ = 1;
  timeline_ = Timeline();
  checkpoints_ = Checkpoints(options_);
  map_frames_ = MapFrames(options_);
  arenas_ = Arenas();
  if (resident_) resident_ = std::make_unique<ResidentTimeline>();
  temporaries_ = Temporaries();
  thread_filter_ = ThreadFilter(options_.thread);
  custom_heaps_ = CustomHeaps();
  selected_heaps_.clear();
  since_checkpoint_ = 0;
  if (index_writer_) index_writer_->DropCheckpoints();  // the index is the last image's
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

// A sampled capture (docs/sampling.md): a block of s bytes was recorded with probability
// p = 1 - exp(-s/rate), so it stands for s/p bytes and 1/p blocks (the Horvitz-Thompson
// estimator: unbiased for every sum of blocks), and adds s^2(1-p)/p^2 and (1-p)/p^2 to the
// estimates' variances. The same size always gives the same weight, so a free takes back
// exactly what its allocation added.
Weight Replayer::SampledWeight(uint64_t size) const {
  double p = format::SamplingModel{p_->sample_rate, p_->sample_exact_from}.RecordProbability(size);
  double s = static_cast<double>(size), rate = static_cast<double>(p_->sample_rate);
  double per = (1 - p) / (p * p);  // (1-p)/p^2; at most ~2^38 for 1 byte at a 512 KiB rate
  auto units = [](double v) {  // whole units, far from overflow even for absurd rates
    return static_cast<uint64_t>(std::llround(std::min(v, 0x1p53)));
  };
  return {static_cast<uint64_t>(std::llround(s / p)),
          static_cast<uint64_t>(std::llround(static_cast<double>(kCountUnit) / p)),
          units(s / rate * (s / rate) * per * kByteVarianceUnits),
          units(per * kBlockVarianceUnits)};
}

void Replayer::AddVariance(StackStats& s, const Weight& w, Domain domain) {
  s.in_use_bytes_var += w.bytes_var;
  s.in_use_blocks_var += w.count_var;
  s.allocations_var += w.count_var;
  s.allocated_bytes_var += w.bytes_var;
  p_->totals.allocations_var += w.count_var;
  p_->totals.allocated_bytes_var += w.bytes_var;
  live_bytes_var_ += w.bytes_var;
  live_blocks_var_ += w.count_var;
  if (domain == Domain::kPython) {
    s.python_in_use_bytes_var += w.bytes_var;
    s.python_allocated_bytes_var += w.bytes_var;
    p_->totals.python_allocated_bytes_var += w.bytes_var;
  }
}

void Replayer::TakeVariance(StackStats& s, const Weight& w, Domain domain) {
  s.in_use_bytes_var -= w.bytes_var;
  s.in_use_blocks_var -= w.count_var;
  if (domain == Domain::kPython) s.python_in_use_bytes_var -= w.bytes_var;
  live_bytes_var_ -= w.bytes_var;
  live_blocks_var_ -= w.count_var;
}

namespace {
// Takes back from a stack's figures or the totals what Allocate added to the allocation counts
// (figures and variances alike): a failed realloc's old block put back.
template <typename Figures>
void TakeBackAllocation(Figures* f, const Weight& w, bool python) {
  f->allocations -= w.count;
  f->allocated_bytes -= w.bytes;
  f->allocations_var -= w.count_var;
  f->allocated_bytes_var -= w.bytes_var;
  if (python) {
    f->python_allocated_bytes -= w.bytes;
    f->python_allocated_bytes_var -= w.bytes_var;
  }
}
}  // namespace

void Replayer::Allocate(uint64_t stack, Weight w, uint64_t seq, Domain domain) {
  StackState& state = State(stack);
  Touch(state);
  StackStats& s = state.stats;
  s.in_use_bytes += w.bytes;
  s.in_use_blocks += w.count;
  s.allocations += w.count;
  s.allocated_bytes += w.bytes;
  if (sampled_) [[unlikely]] AddVariance(s, w, domain);
  p_->totals.allocations += w.count;
  p_->totals.allocated_bytes += w.bytes;
  live_bytes_ += w.bytes;
  live_blocks_ += w.count;
  if (domain == Domain::kMapping) {
    s.mapping_in_use_bytes += w.bytes;
    s.mapping_allocated_bytes += w.bytes;
    p_->totals.mapping_allocated_bytes += w.bytes;
    mapping_live_bytes_ += w.bytes;
    p_->totals.mapping_peak_bytes = std::max(p_->totals.mapping_peak_bytes, mapping_live_bytes_);
  } else {
    if (domain == Domain::kPython) {
      s.python_in_use_bytes += w.bytes;
      s.python_allocated_bytes += w.bytes;
      p_->totals.python_allocated_bytes += w.bytes;
    }
    uint64_t heap = live_bytes_ - mapping_live_bytes_;
    if (heap > p_->totals.heap_peak_bytes) {
      p_->totals.heap_peak_bytes = heap;
      p_->totals.heap_peak_bytes_var = live_bytes_var_;  // the mappings' share is exact
    }
  }
  if (!options_.leave_out_python_file.empty() && LeftOut(stack)) left_out_bytes_ += w.bytes;
  window_peak_ = std::max(window_peak_, WindowBytes());
  if (live_bytes_ > p_->totals.peak_bytes) {
    p_->totals.peak_bytes = live_bytes_;
    p_->totals.peak_blocks = live_blocks_;
    p_->totals.peak_bytes_var = live_bytes_var_;  // 0 in a full capture
    p_->totals.peak_blocks_var = live_blocks_var_;
    p_->totals.peak_seq = seq;
    p_->peak_at_fork = false;
    ++peak_epoch_;  // every stack's current value is now its value at the peak
  }
}

void Replayer::Release(uint64_t stack, Weight w, Domain domain) {
  StackState& state = State(stack);
  Touch(state);
  StackStats& s = state.stats;
  s.in_use_bytes -= w.bytes;
  s.in_use_blocks -= w.count;
  if (sampled_) [[unlikely]] TakeVariance(s, w, domain);
  if (domain == Domain::kPython) s.python_in_use_bytes -= w.bytes;
  if (domain == Domain::kMapping) {
    s.mapping_in_use_bytes -= w.bytes;
    mapping_live_bytes_ -= w.bytes;
  }
  live_bytes_ -= w.bytes;
  live_blocks_ -= w.count;
  if (!options_.leave_out_python_file.empty() && LeftOut(stack)) left_out_bytes_ -= w.bytes;
}

bool Replayer::LeftOut(uint64_t stack) {
  if (stack >= left_out_.size())
    left_out_.resize(std::max<size_t>(stack + 1, left_out_.size() * 2));
  if (left_out_[stack] == 0) {
    bool found = false;
    for (uint64_t node = stack; node && node < p_->nodes.size() && !found;
         node = p_->nodes[node].parent) {
      uint64_t ip = p_->nodes[node].ip;
      if (!format::IsPythonFrameIp(ip)) continue;
      auto code = p_->python_codes.find(format::PythonFrameCode(ip));
      found =
          code != p_->python_codes.end() && code->second.filename == options_.leave_out_python_file;
    }
    left_out_[stack] = found ? 1 : 2;
  }
  return left_out_[stack] == 1;
}

void Replayer::TakeCheckpoints(uint64_t before_seq) {
  checkpoints_.Take(before_seq, live_bytes_, [this](const auto& f) {
    ForEachState([&f](uint64_t stack, const StackState& s) {
      if (s.stats.in_use_blocks) f(stack, s.stats);
    });
  }, p_);
}

// Live blocks are found by address in a table far larger than the caches: one miss each, which
// the replay of a few events takes long enough to hide.
void Replayer::Upcoming(const format::Event& e) {
  if (e.kind == EventKind::kFree || e.kind == EventKind::kReallocOld || format::IsHeapAlloc(e.kind)) {
    heap_.Prefetch(e.address);
  }
  if (e.stack + node_base_ < slot_of_.size()) __builtin_prefetch(&slot_of_[e.stack + node_base_]);
}

void Replayer::Play(const format::Event& e) {
  if (!PlausibleStack(e.stack)) [[unlikely]] {  // damage: the event counts, without its stack
    ++implausible_stacks_;
    format::Event without = e;
    without.stack = 0;
    return Play(without);
  }
  if (resume_pending_) RestoreState();
  if (e.kind == EventKind::kMarker || e.kind == EventKind::kSnapshot) {  // all, for timelines
    p_->markers.push_back({p_->StringOf(e.address), e.size ? p_->StringOf(e.size) : "",
                           e.kind == EventKind::kSnapshot, e.seq});
  }
  if (e.kind == EventKind::kProgramEnd && p_->program_end_seq == 0) p_->program_end_seq = e.seq;
  // The heap as it was at every mark this event comes after; checkpoints due. (The tests
  // inline, the work not: this runs for every event.)
  if (timeline_.Due(e.seq)) timeline_.Take(e.seq, live_bytes_, live_bytes_var_, p_);
  if (checkpoints_.Due()) TakeCheckpoints(e.seq);
  if (map_frames_.Due()) TakeMapFrames(e.seq);
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
  if (resident_ && resident_->Due(e.seq)) TakeResidentSamples(e.seq);
  p_->next_seq = e.seq + 1;  // events come in sequence order
  // reset_peak: the peak starts again from what is in use now.
  if (options_.peak_since_seq && !window_open_ && e.seq >= options_.peak_since_seq) {
    window_open_ = true;
    window_peak_ = WindowBytes();
  }
  if (e.kind == EventKind::kMarker && !options_.peak_since_marker.empty() &&
      p_->StringOf(e.address) == options_.peak_since_marker) {
    window_peak_ = WindowBytes();
    p_->peak_since_marker_seq = e.seq;
  }
  ++p_->totals.events;
  if (thread_filter_.active()) {
    auto tid = tid_of_.find(e.thread);
    if (thread_filter_.LeftOut(e, tid == tid_of_.end() || tid->second != options_.thread)) return;
  }
  if (format::IsCustomHeapEvent(e.kind)) {
    // The custom heaps' state is not saved in checkpoints: such a capture's index has none.
    if (index_writer_) index_writer_->StopCheckpoints();
    index_writer_ = nullptr;
    return OnApiEvent(e);
  }
  if (!options_.heap.empty()) return;  // the figures describe a custom heap
  OnHeapEvent(e);
}

// An event of the system heap: the malloc family, Python's allocator, mappings, arenas.
void Replayer::OnHeapEvent(const format::Event& e) {
  LiveBlock block;
  if (resident_) [[unlikely]] OnResidentEvent(e);
  switch (e.kind) {
    case EventKind::kFree:
      if (heap_.Remove(e.address, &block)) {
        Weight w = HeapWeight(block.size);
        Release(block.stack, w, HeapDomain(block.python));
        p_->totals.frees += w.count;
        if (sampled_) [[unlikely]] p_->totals.frees_var += w.count_var;
        if (temporaries_.OnFree(e.thread, e.address)) {  // freed before any other allocation
          StackStats& stats = State(block.stack).stats;
          stats.temporary += w.count;
          stats.temporary_bytes += w.bytes;
          p_->totals.temporary += w.count;
          stats.temporary_var += w.count_var;
          stats.temporary_bytes_var += w.bytes_var;
          p_->totals.temporary_var += w.count_var;
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
        if (sampled_) [[unlikely]] p_->totals.frees_var += w.count_var;
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
        // A restored block is no new allocation, and its release never happened.
        TakeBackAllocation(&State(old.stack).stats, w, old.python);
        TakeBackAllocation(&p_->totals, w, old.python);
        p_->totals.frees -= w.count;
        p_->totals.frees_var -= w.count_var;
        realloc_pending_.erase(it);
      }
      break;
    }
    case EventKind::kMmap:
    case EventKind::kMmapReserved:
      AddRegion(e.address, e.size, e.stack, e.seq, e.kind == EventKind::kMmap);
      if (e.kind == EventKind::kMmap) sizes_.Count(e.stack, e.size, {e.size, kCountUnit}, p_);
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
    default:
      if (arenas_.OnEvent(e, &p_->totals)) break;
      if (format::IsHeapAlloc(e.kind)) {  // every heap allocation kind
        if (!realloc_pending_.empty()) realloc_pending_.erase(e.thread);  // a realloc ends
        bool python = format::IsPythonAlloc(e.kind);
        Weight w = HeapWeight(e.size);
        if (!heap_.Insert(e.address, {e.size, e.stack, python}, &block)) {
          // its free was dropped
          Release(block.stack, HeapWeight(block.size), HeapDomain(block.python));
        }
        Allocate(e.stack, w, e.seq, HeapDomain(python));
        sizes_.Count(e.stack, e.size, w, p_);
        temporaries_.OnAllocation(e.thread, e.address, e.stack);
      }
      break;
  }
}

// Resident memory explained: the blocks by owner as events come (resident_parts.h). A block
// is looked up here a second time rather than in each case above: only `memlens rss` pays.
void Replayer::OnResidentEvent(const format::Event& e) {
  LiveBlock block;
  switch (e.kind) {
    case EventKind::kMarker:
    case EventKind::kSnapshot:
    case EventKind::kProgramEnd:
      return;
    case EventKind::kFree:
    case EventKind::kReallocOld:
      if (heap_.Get(e.address, &block)) {
        resident_->OnBlock(e.address, block.size, HeapWeight(block.size).bytes, false);
      }
      break;
    case EventKind::kReallocFailed: {
      auto it = realloc_pending_.find(e.thread);
      if (it != realloc_pending_.end()) {
        resident_->OnBlock(e.address, it->second.size, HeapWeight(it->second.size).bytes, true);
      }
      break;
    }
    default:
      resident_->OnArenaEvent(e);
      if (format::IsHeapAlloc(e.kind)) {
        if (heap_.Get(e.address, &block)) {  // its free was dropped
          resident_->OnBlock(e.address, block.size, HeapWeight(block.size).bytes, false);
        }
        resident_->OnBlock(e.address, e.size, HeapWeight(e.size).bytes, true);
      }
      break;
  }
  resident_->last_change_seq = e.seq;
}

void Replayer::TakeResidentSamples(uint64_t before_seq) {
  resident_->Take(
      before_seq,
      [this](const auto& claim) {
        for (const auto& [start, region] : mappings_) {
          if (region.counted) claim(start, region.end);
        }
      },
      &p_->resident_samples);
}

void Replayer::SaveEnd(const std::vector<std::string>& metadata, const ReadStatus& status) {
  if (!index_writer_) return;
  timeline_.Take(UINT64_MAX, live_bytes_, live_bytes_var_, p_);
  std::string state;
  SaveState(&state);
  index_writer_->SetEnd(state, p_->timeline.size(), p_->totals.events, metadata, status);
}

void Replayer::ResumeFrom(std::string state, uint64_t seq, std::vector<TimelinePoint> timeline) {
  resume_state_ = std::move(state);
  resume_seq_ = seq;
  resume_timeline_ = std::move(timeline);
  resume_pending_ = true;
}

void Replayer::PlayInherited(const format::Event& event) {
  if (resume_pending_) return;  // a replay resumed from a checkpoint: it holds what they left
  format::Event e = event;
  if (e.stack) e.stack += node_base_;  // a parent that was forked itself
  if (!PlausibleStack(e.stack)) e.stack = 0;
  if (thread_filter_.active()) {
    auto tid = tid_of_.find(e.thread);
    if (thread_filter_.LeftOut(e, tid == tid_of_.end() || tid->second != options_.thread)) return;
  }
  if (format::IsCustomHeapEvent(e.kind)) {
    if (index_writer_) index_writer_->StopCheckpoints();  // as Play says
    index_writer_ = nullptr;
    return OnApiEvent(e);
  }
  if (options_.heap.empty()) OnHeapEvent(e);
}

void Replayer::BeginForkedImage() {
  // The index's states would hold the parent's share as it was when the index was made: a
  // forked process's capture is replayed whole each time, parent first (docs/snapshot-index.md).
  if (index_writer_) index_writer_->StopCheckpoints();
  index_writer_ = nullptr;
  implausible_stacks_ = 0;  // the parent's damage is the parent's
  node_base_ = p_->nodes.size() - 1;
  module_base_ = 0;
  for (const auto& [id, m] : p_->modules) module_base_ = std::max(module_base_, id);
  // The child's capture describes the same modules again: the parent's stay, for its stacks.
  unloaded_.insert(unloaded_.end(), loaded_.begin(), loaded_.end());
  loaded_.clear();
  loaded_spans_.clear();
  tids_.clear();
  ForEachState([](uint64_t, StackState& s) {
    StackStats inherited;  // what the child holds of this stack: the blocks in use
    for (uint64_t StackStats::*f :
         {&StackStats::in_use_bytes, &StackStats::in_use_blocks, &StackStats::python_in_use_bytes,
          &StackStats::mapping_in_use_bytes, &StackStats::in_use_bytes_var,
          &StackStats::in_use_blocks_var, &StackStats::python_in_use_bytes_var}) {
      inherited.*f = s.stats.*f;
    }
    s.stats = inherited;
  });
  Totals& t = p_->totals = Totals();
  t.peak_bytes = live_bytes_;  // the peak so far is the fork
  t.peak_blocks = live_blocks_;
  t.peak_bytes_var = live_bytes_var_;
  t.peak_blocks_var = live_blocks_var_;
  p_->peak_at_fork = true;
  t.heap_peak_bytes = live_bytes_ - mapping_live_bytes_;
  t.heap_peak_bytes_var = live_bytes_var_;
  t.mapping_peak_bytes = mapping_live_bytes_;
  arenas_.Finish(&t);
  t.arena_peak_bytes = t.arena_in_use_bytes;
  t.mimalloc_peak_bytes = t.mimalloc_in_use_bytes;
  ++peak_epoch_;  // every stack's value at that peak is what it holds now
  window_peak_ = WindowBytes();
  window_open_ = false;
  Profile& p = *p_;
  p.has_process = false;  // the child's process record is its first image, not an exec
  p.process = format::ProcessRecord();
  p.first_image.reset();
  p.earlier_images.clear();
  p.earlier_unrecorded_children = 0;
  p.end.reset();
  p.thread_count = 0;
  p.times.clear();
  p.timeline.clear();
  p.resident.clear();
  p.markers.clear();
  p.program_end_seq = 0;
  p.next_seq = 0;
  p.peak_since_marker_seq = 0;
  p.size_histogram = SizeHistogram(kSizeBuckets);
  p.stack_size_histograms.clear();
  p.checkpoints.clear();
  p.resident_samples.clear();  // the parent's mappings were the parent's
  if (resident_) resident_->ForgetSamples();
  p.map_frames.clear();
  p.map_frames_left_out = 0;
  timeline_ = Timeline();
  checkpoints_ = Checkpoints(options_);
  map_frames_ = MapFrames(options_);
  temporaries_ = Temporaries();
}

void Replayer::Finish() {
  if (resume_pending_) RestoreState();
  if (implausible_stacks_) {
    p_->warnings.push_back("the capture is damaged: " + std::to_string(implausible_stacks_) +
                           " events name a stack it does not hold, counted without their stack");
  }
  timeline_.Take(UINT64_MAX, live_bytes_, live_bytes_var_, p_);
  TakeCheckpoints(stopped_early() ? stop_seq_ : UINT64_MAX);
  checkpoints_.Finish(p_);
  TakeMapFrames(stopped_early() ? stop_seq_ : UINT64_MAX);
  p_->heap = options_.heap;
  p_->heaps = custom_heaps_.Figures();
  if (options_.heap.empty()) FindBackingMemory();
  p_->anomalies = custom_heaps_.anomalies();
  std::copy(custom_heaps_.anomaly_counts(), custom_heaps_.anomaly_counts() + Anomaly::kKinds,
            p_->anomaly_counts);
  if (options_.address_map) MapAddressSpace();
  if (options_.blocks) ListBlocks();
  if (resident_) {
    TakeResidentSamples(stop_seq_);
    if (const format::MappingsRecord* last = resident_->last()) {
      p_->mappings_sample = *last;
      p_->blocks_changed_after_sample = resident_->last_change_seq >= last->seq;
    }
    p_->python_arenas = resident_->PythonArenas();
  }
  // A window that starts after the last event replayed holds what is in use at the end.
  p_->peak_since_bytes = options_.peak_since_seq && !window_open_
                             ? WindowBytes()
                             : std::max(window_peak_, WindowBytes());
  p_->snapshot = spec_;
  p_->snapshot_seconds = stop_seconds_ >= 0 ? stop_seconds_ : p_->DurationSeconds();
  p_->stacks.reserve(states_.size());
  ForEachState([this](uint64_t stack, StackState& s) {
    if (s.changed_in_epoch < peak_epoch_) {  // unchanged since the peak
      CopyInUseToPeak(&s.stats);
      CopyInUseVarianceToPeak(&s.stats);
    }
    // Never an allocation site (a forked process's inherited stacks count while they held bytes).
    if (s.stats.allocations == 0 && s.stats.in_use_blocks == 0 && s.stats.peak_blocks == 0) return;
    p_->totals.mapping_at_peak_bytes += s.stats.mapping_peak_bytes;
    for (const StackStatField& f : kStackStatFields) {
      if (f.blocks) s.stats.*f.member = WholeBlocks(s.stats.*f.member);
    }
    p_->stacks[stack] = s.stats;
  });
  arenas_.Finish(&p_->totals);
  Totals& t = p_->totals;
  t.in_use_bytes = live_bytes_;
  t.in_use_blocks = live_blocks_;
  t.in_use_bytes_var = live_bytes_var_;
  t.in_use_blocks_var = live_blocks_var_;
  t.mapping_in_use_bytes = mapping_live_bytes_;
  t.reserved_bytes = reserved_bytes_;
  for (const TotalsField& f : kTotalsFields) {
    if (f.blocks) t.*f.member = WholeBlocks(t.*f.member);
  }
  sizes_.Finish(p_);
}

}  // namespace memlens::analyzer
