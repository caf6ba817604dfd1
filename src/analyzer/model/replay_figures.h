// src/analyzer/model/replay_figures.h
//
// The optional figures of a replay, one accumulator each beside the core replay (replayer.h,
// the live set and the peak): the heap over time (Timeline), the live set at chosen moments
// (Checkpoints), allocation sizes (SizeHistograms), pymalloc's and mimalloc's arenas (Arenas),
// temporary allocations (Temporaries) and the events of one thread (ThreadFilter). Each is
// told what it needs (an allocation, a release, a time mark), saves and restores its part of
// the snapshot index's state when it has one, and puts its result into the Profile.
//
// They are concrete members of the Replayer, not behind virtual calls: their hooks run for
// every event and inline into its switch (the replay is not slower for being split).
// Runs on: the analyzer's main thread.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analyzer/model/address_map.h"
#include "analyzer/model/replay.h"
#include "analyzer/model/snapshot_index.h"
#include "base/varint.h"
#include "format/records.h"

namespace memlens::analyzer {

// What one recorded block stands for. Block counts are kept in 1/65536ths during the replay, so
// that the fractional counts of a sampled capture add up without rounding bias; the result
// turns them back into whole blocks. Bytes are whole bytes.
inline constexpr uint64_t kCountUnit = uint64_t{1} << 16;
struct Weight {
  uint64_t bytes;
  uint64_t count;  // in kCountUnit
  // A sampled capture: the block's share of its figures' variances (stats.h, ErrorScale units).
  uint64_t bytes_var = 0;
  uint64_t count_var = 0;
};
inline uint64_t WholeBlocks(uint64_t units) { return (units + kCountUnit / 2) / kCountUnit; }

// Appends to / reads from the snapshot index's state (SaveState / RestoreState).
inline void Put(std::string* out, uint64_t v) { PutVarint(out, v); }
// The blocks of an AddressMap, by address as deltas. stack_id checks a stack read back (a
// damaged index may name any).
void SaveBlocks(const AddressMap& map, std::string* out);
void RestoreBlocks(StateReader* r, const std::function<uint64_t(uint64_t)>& stack_id,
                   AddressMap* map);

// The heap in use at each of the writer's time marks (Profile::timeline). Within a chunk time
// marks come before its events: a mark is passed once an event after it is delivered.
class Timeline {
 public:
  void OnTimeMark(const format::TimeRecord& r) { pending_.push_back(r); }
  // Before the event with this seq (inline: every event asks).
  bool Due(uint64_t seq) const { return !pending_.empty() && pending_.front().seq <= seq; }
  void Take(uint64_t before_seq, uint64_t live_bytes, uint64_t live_bytes_var, Profile* p);
  // A resumed replay: the state's timeline holds every mark up to its event.
  void ResumeAt(uint64_t seq, std::vector<TimelinePoint> points, Profile* p);

 private:
  std::deque<format::TimeRecord> pending_;  // time marks no delivered event has passed
};

// The live set per stack at the moments ReplayOptions asks for (Profile::checkpoints): times,
// taken at the first time mark past them, and sequence numbers (markers), just before them.
class Checkpoints {
 public:
  // Calls fn(stack, its figures: blocks in kCountUnit) for each stack with live blocks.
  using LiveSet =
      std::function<void(const std::function<void(uint64_t, const StackStats&)>&)>;
  explicit Checkpoints(const ReplayOptions& options)
      : seconds_(options.checkpoint_seconds), seqs_(options.checkpoint_seqs) {}
  void OnTimeMark(const format::TimeRecord& r);
  bool Due() const { return !pending_.empty() || next_seq_ < seqs_.size(); }
  void Take(uint64_t before_seq, uint64_t live_bytes, const LiveSet& live, Profile* p);
  void Finish(Profile* p) const;  // a checkpoint at a seq gets its time

 private:
  void TakeOne(double seconds, double at_seconds, uint64_t before_seq, uint64_t live_bytes,
               const LiveSet& live, Profile* p);
  std::vector<double> seconds_;  // ascending
  std::vector<uint64_t> seqs_;   // ascending
  size_t next_ = 0;              // into seconds_
  size_t next_seq_ = 0;          // into seqs_
  std::deque<std::pair<size_t, format::TimeRecord>> pending_;
};

// Frames of the address map's playback (ReplayOptions::map_frame_seconds, Profile::map_frames),
// taken at the first time mark past each moment, as checkpoints are. A frame sorts and clusters
// the whole live set (address_regions.h), about 45 ms a million blocks: frames x live blocks,
// which for 40 frames of 30 million blocks would take a minute. So the frames share a budget of
// kBlockBudget blocks visited, earned evenly: frame k of n is taken only when the blocks visited
// so far, its own included, stay within k+1 n-ths of the budget. A huge live set then gets fewer
// frames, still spread over the recording (Profile::map_frames_left_out counts the others); a
// small one gets them all. Frames past the snapshot (stop_seq) are not taken: the replay stops
// there.
class MapFrames {
 public:
  static constexpr uint64_t kBlockBudget = uint64_t{1} << 24;  // under a second of clustering
  // Clusters the live set as it is now (Replayer::MapBlocks and RegionClusterer).
  using Map = std::function<std::vector<AddressRegion>()>;
  explicit MapFrames(const ReplayOptions& options, uint64_t block_budget = kBlockBudget)
      : seconds_(options.map_frame_seconds), budget_(block_budget) {}
  void OnTimeMark(const format::TimeRecord& r);
  bool Due() const { return !pending_.empty(); }
  // The frames due before the event before_seq, with live_blocks blocks live now.
  void Take(uint64_t before_seq, uint64_t stop_seq, uint64_t live_blocks, const Map& map,
            Profile* p);

 private:
  std::vector<double> seconds_;  // ascending
  uint64_t budget_;
  size_t next_ = 0;              // into seconds_
  std::deque<std::pair<size_t, format::TimeRecord>> pending_;
  uint64_t visited_ = 0;  // blocks clustered so far
};

// Allocation sizes in log2 buckets, overall and per stack on demand (Profile::size_histogram,
// stack_size_histograms), counted in kCountUnit until Finish.
class SizeHistograms {
 public:
  explicit SizeHistograms(bool per_stack) : per_stack_(per_stack) {}
  void Count(uint64_t stack, uint64_t size, Weight w, Profile* p) {
    int bucket = SizeBucketOf(size);
    p->size_histogram[bucket].count += w.count;
    p->size_histogram[bucket].bytes += w.bytes;
    if (w.count_var) [[unlikely]] {  // a sampled block (never in a full capture)
      p->size_histogram[bucket].count_var += w.count_var;
      p->size_histogram[bucket].bytes_var += w.bytes_var;
    }
    if (per_stack_) CountForStack(stack, bucket, w, p);
  }
  void Save(const Profile& p, std::string* out) const;
  void Restore(StateReader* r, Profile* p) const;
  void Finish(Profile* p) const;

 private:
  void CountForStack(uint64_t stack, int bucket, Weight w, Profile* p) const;
  bool per_stack_;
};

// pymalloc's arenas and what mimalloc mapped inside Python's allocator: memory the allocator
// holds from the system, apart from the heap totals (Totals::arena_*, mimalloc_*).
class Arenas {
 public:
  // True for one of their events (handled).
  bool OnEvent(const format::Event& e, Totals* t);
  void Save(std::string* out) const;
  void Restore(StateReader* r, const std::function<uint64_t(uint64_t)>& stack_id);
  void Finish(Totals* t) const;

 private:
  AddressMap arenas_;
  uint64_t arena_bytes_ = 0;
  AddressMap mimalloc_;
  uint64_t mimalloc_bytes_ = 0;
};

// Temporary allocations (StackStats::temporary): a block freed by the thread that made it
// before that thread allocated anything else. By thread index: the address (0: none) and stack
// of the thread's last allocation.
class Temporaries {
 public:
  void OnAllocation(uint32_t thread, uint64_t address, uint64_t stack) {
    LastAlloc(thread) = {address, stack};
  }
  // True when the free of this address ends the thread's last allocation: a temporary.
  bool OnFree(uint32_t thread, uint64_t address) {
    auto& last = LastAlloc(thread);
    if (last.first != address) return false;
    last = {0, 0};
    return true;
  }
  void Save(std::string* out) const;
  void Restore(StateReader* r, const std::function<uint64_t(uint64_t)>& stack_id);

 private:
  // Indexes are small and dense as the agent gives them; a damaged capture's may be anything,
  // and those past kDenseThreads go to a map rather than size the vector.
  static constexpr uint32_t kDenseThreads = 1 << 16;
  std::pair<uint64_t, uint64_t>& LastAlloc(uint32_t thread) {
    if (thread >= kDenseThreads) return sparse_[thread];
    if (thread >= dense_.size()) dense_.resize(thread + 1, {0, 0});
    return dense_[thread];
  }
  std::vector<std::pair<uint64_t, uint64_t>> dense_;
  std::unordered_map<uint32_t, std::pair<uint64_t, uint64_t>> sparse_;
};

// ReplayOptions::thread: only that OS thread's allocations count. Not in the index's state:
// such a replay does not use the index (IndexServes).
class ThreadFilter {
 public:
  explicit ThreadFilter(uint64_t tid) : tid_(tid) {}
  bool active() const { return tid_ != 0; }
  // True for an event that belongs to a thread left out (an allocation it made, or the free
  // or realloc of a block it allocated). other: the event's thread is not the one kept.
  bool LeftOut(const format::Event& e, bool other);

 private:
  uint64_t tid_;
  AddressMap other_threads_;  // live blocks of the threads left out
  std::unordered_map<uint32_t, LiveBlock> left_out_realloc_;  // by thread
};

}  // namespace memlens::analyzer
