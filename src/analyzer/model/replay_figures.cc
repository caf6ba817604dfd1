// src/analyzer/model/replay_figures.cc: see replay_figures.h.
#include "analyzer/model/replay_figures.h"

#include <algorithm>
#include <map>

namespace memlens::analyzer {

using format::EventKind;

void Timeline::Take(uint64_t before_seq, uint64_t live_bytes, uint64_t live_bytes_var,
                    Profile* p) {
  while (!pending_.empty() && pending_.front().seq <= before_seq) {
    p->timeline.push_back({pending_.front().monotonic_ns / 1e9, live_bytes, live_bytes_var});
    pending_.pop_front();
  }
}

void Timeline::ResumeAt(uint64_t seq, std::vector<TimelinePoint> points, Profile* p) {
  p->timeline = std::move(points);
  // The marks read since are still due.
  while (!pending_.empty() && pending_.front().seq <= seq) pending_.pop_front();
}

void Checkpoints::OnTimeMark(const format::TimeRecord& r) {
  // Taken once the delivered events reach this mark.
  while (next_ < seconds_.size() && r.monotonic_ns > seconds_[next_] * 1e9) {
    pending_.push_back({next_++, r});
  }
}

void Checkpoints::Take(uint64_t before_seq, uint64_t live_bytes, const LiveSet& live, Profile* p) {
  while (!pending_.empty() && pending_.front().second.seq <= before_seq) {
    auto [index, mark] = pending_.front();
    pending_.pop_front();
    TakeOne(seconds_[index], mark.monotonic_ns / 1e9, 0, live_bytes, live, p);
  }
  // Checkpoints at sequence numbers (markers): exactly before those events.
  while (next_seq_ < seqs_.size() && seqs_[next_seq_] <= before_seq) {
    TakeOne(0, 0, seqs_[next_seq_++], live_bytes, live, p);
  }
}

void Checkpoints::TakeOne(double seconds, double at_seconds, uint64_t before_seq,
                          uint64_t live_bytes, const LiveSet& live, Profile* p) {
  Checkpoint c;
  c.seconds = seconds;
  c.at_seconds = at_seconds;
  c.before_seq = before_seq;
  c.heap_bytes = live_bytes;
  live([&c](uint64_t stack, const StackStats& s) {
    c.live[stack] = {s.in_use_bytes, WholeBlocks(s.in_use_blocks), s.in_use_bytes_var,
                     s.in_use_blocks_var};
    c.heap_bytes_var += s.in_use_bytes_var;
  });
  p->checkpoints.push_back(std::move(c));
}

void Checkpoints::Finish(Profile* p) const {
  for (Checkpoint& c : p->checkpoints) {
    if (c.before_seq) c.seconds = c.at_seconds = p->SecondsAt(c.before_seq - 1);
  }
}

void MapFrames::OnTimeMark(const format::TimeRecord& r) {
  while (next_ < seconds_.size() && r.monotonic_ns > seconds_[next_] * 1e9) {
    pending_.push_back({next_++, r});
  }
}

void MapFrames::Take(uint64_t before_seq, uint64_t stop_seq, uint64_t live_blocks, const Map& map,
                     Profile* p) {
  std::vector<AddressRegion> regions;
  bool mapped = false;  // regions holds the live set now (every frame due here shares it)
  while (!pending_.empty() && pending_.front().second.seq <= before_seq) {
    auto [index, mark] = pending_.front();
    pending_.pop_front();
    if (mark.seq > stop_seq) continue;  // past the snapshot: the live set is not that moment's
    const auto earned = static_cast<uint64_t>(static_cast<unsigned __int128>(budget_) *
                                              (index + 1) / seconds_.size());
    if (!mapped && visited_ + live_blocks > earned) {
      ++p->map_frames_left_out;
      continue;
    }
    if (!mapped) {
      regions = map();
      visited_ += live_blocks;
      mapped = true;
    }
    p->map_frames.push_back({seconds_[index], mark.monotonic_ns / 1e9, regions});
  }
}

void SizeHistograms::CountForStack(uint64_t stack, int bucket, Weight w, Profile* p) const {
  SizeHistogram& h = p->stack_size_histograms[stack];
  if (h.empty()) h.resize(kSizeBuckets);
  h[bucket].count += w.count;
  h[bucket].bytes += w.bytes;
  h[bucket].count_var += w.count_var;
  h[bucket].bytes_var += w.bytes_var;
}

// Only the overall histogram: a replay with per-stack ones does not use the index.
void SizeHistograms::Save(const Profile& p, std::string* out) const {
  for (const SizeBucket& b : p.size_histogram) {
    for (uint64_t v : {b.count, b.bytes, b.count_var, b.bytes_var}) Put(out, v);
  }
}

void SizeHistograms::Restore(StateReader* r, Profile* p) const {
  for (SizeBucket& b : p->size_histogram) {
    for (uint64_t* v : {&b.count, &b.bytes, &b.count_var, &b.bytes_var}) *v = r->Next();
  }
}

void SizeHistograms::Finish(Profile* p) const {
  for (SizeBucket& b : p->size_histogram) b.count = WholeBlocks(b.count);
  for (auto& [stack, h] : p->stack_size_histograms) {
    for (SizeBucket& b : h) b.count = WholeBlocks(b.count);
  }
}

bool Arenas::OnEvent(const format::Event& e, Totals* t) {
  LiveBlock block;
  switch (e.kind) {
    case EventKind::kPyArenaAlloc:
      arenas_.Insert(e.address, {e.size, e.stack, true});
      arena_bytes_ += e.size;
      t->arena_peak_bytes = std::max(t->arena_peak_bytes, arena_bytes_);
      return true;
    case EventKind::kPyArenaFree:
      if (arenas_.Remove(e.address, &block)) arena_bytes_ -= block.size;
      return true;
    case EventKind::kMimallocMap:
      mimalloc_.Insert(e.address, {e.size, e.stack, true});
      mimalloc_bytes_ += e.size;
      t->mimalloc_peak_bytes = std::max(t->mimalloc_peak_bytes, mimalloc_bytes_);
      return true;
    case EventKind::kMimallocUnmap:  // of a whole mapping, or of its start (mimalloc trims)
      if (mimalloc_.Remove(e.address, &block)) {
        mimalloc_bytes_ -= std::min(e.size, block.size);
        if (e.size < block.size) {
          mimalloc_.Insert(e.address + e.size, {block.size - e.size, block.stack, true});
        }
      }
      return true;
    default:
      return false;
  }
}

// The blocks of an AddressMap by address, as deltas.
void SaveBlocks(const AddressMap& map, std::string* out) {
  std::vector<std::pair<uint64_t, LiveBlock>> blocks;
  blocks.reserve(map.size());
  map.ForEach([&](uint64_t a, const LiveBlock& b) { blocks.push_back({a, b}); });
  std::sort(blocks.begin(), blocks.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  Put(out, blocks.size());
  uint64_t last = 0;
  for (const auto& [address, b] : blocks) {
    for (uint64_t v : {address - last, b.size, b.stack, uint64_t{b.python}}) Put(out, v);
    last = address;
  }
}

void RestoreBlocks(StateReader* r, const std::function<uint64_t(uint64_t)>& stack_id,
                   AddressMap* map) {
  uint64_t count = r->Next(), address = 0;
  for (uint64_t i = 0; i < count && r->ok(); ++i) {
    address += r->Next();
    LiveBlock b;
    b.size = r->Next();
    b.stack = stack_id(r->Next());
    b.python = r->Next() != 0;
    if (r->ok()) map->Insert(address, b);
  }
}

void Arenas::Save(std::string* out) const {
  Put(out, arena_bytes_);
  Put(out, mimalloc_bytes_);
  SaveBlocks(arenas_, out);
  SaveBlocks(mimalloc_, out);
}

void Arenas::Restore(StateReader* r, const std::function<uint64_t(uint64_t)>& stack_id) {
  arena_bytes_ = r->Next();
  mimalloc_bytes_ = r->Next();
  RestoreBlocks(r, stack_id, &arenas_);
  RestoreBlocks(r, stack_id, &mimalloc_);
}

void Arenas::Finish(Totals* t) const {
  t->arena_in_use_bytes = arena_bytes_;
  t->mimalloc_in_use_bytes = mimalloc_bytes_;
}

void Temporaries::Save(std::string* out) const {
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> with_last;  // by thread
  for (uint64_t thread = 0; thread < dense_.size(); ++thread) {
    if (dense_[thread].first) with_last[thread] = dense_[thread];
  }
  for (const auto& [thread, alloc] : sparse_) {
    if (alloc.first) with_last[thread] = alloc;
  }
  Put(out, with_last.size());
  for (const auto& [thread, alloc] : with_last) {
    for (uint64_t v : {thread, alloc.first, alloc.second}) Put(out, v);
  }
}

void Temporaries::Restore(StateReader* r, const std::function<uint64_t(uint64_t)>& stack_id) {
  for (uint64_t i = 0, n = r->Next(); i < n && r->ok(); ++i) {
    uint32_t thread = static_cast<uint32_t>(r->Next());
    uint64_t address = r->Next();
    uint64_t stack = stack_id(r->Next());
    if (r->ok()) LastAlloc(thread) = {address, stack};
  }
}

bool ThreadFilter::LeftOut(const format::Event& e, bool other) {
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

}  // namespace memlens::analyzer
