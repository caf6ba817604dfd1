// src/analyzer/model/replayer.h
//
// The core replay: every event in sequence order updates the live set (heap blocks and the
// program's anonymous mappings, per stack), and the peak of the whole heap is attributed to
// stacks without copying the live set at each new peak (Touch). The optional figures are the
// accumulators of replay_figures.h; the custom heaps (replay_custom_heaps.cc) and mappings
// (replay_mappings.cc) feed the live set. Which moment to replay to, and whether from the
// snapshot index, is load_profile.cc's policy. Internal to src/analyzer/model.
// Runs on: the analyzer's main thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "analyzer/model/address_map.h"
#include "analyzer/model/address_regions.h"
#include "analyzer/model/custom_heaps.h"
#include "analyzer/model/replay.h"
#include "analyzer/model/replay_figures.h"
#include "analyzer/model/snapshot_index.h"
#include "format/records.h"

namespace memlens::analyzer {

// A tracked anonymous mapping, or a piece of one: mprotect cuts mappings into pieces.
struct Region {
  uint64_t end;
  uint64_t stack;
  bool counted;  // accessible memory (format::MappingCounts), else reserved address space
};

// Where an allocation's bytes come from: the heap (native or Python) or the mappings.
enum class Domain { kNative, kPython, kMapping };
inline Domain HeapDomain(bool python) { return python ? Domain::kPython : Domain::kNative; }

// A stack's figures during the replay: its in_use_* are what is live now (blocks in
// kCountUnit); its peak_* are set lazily, the first time the stack changes after a new peak.
struct StackState {
  StackStats stats;
  uint64_t changed_in_epoch = 0;
};

class Replayer : public format::RecordVisitor {
 public:
  // stop_before_seq: events from this sequence number on are not replayed (a snapshot).
  Replayer(Profile* p, const SnapshotSpec& spec, const ReplayOptions& options,
           uint64_t stop_before_seq);

  void OnProcess(const format::ProcessRecord& r) override;
  void OnModule(const format::ModuleRecord& r) override;
  void OnModuleUnload(const format::ModuleUnloadRecord& r) override;
  void OnThread(const format::ThreadRecord& r) override;
  void OnStackNode(const format::StackNodeRecord& r) override {
    p_->nodes.push_back({r.parent ? r.parent + node_base_ : 0, r.ip, ModuleOf(r.ip)});
  }
  void OnTime(const format::TimeRecord& r) override;
  void OnResident(const format::ResidentRecord& r) override { p_->resident.push_back(r); }
  // Samples past the snapshot are not kept (a long capture's would fill memory).
  void OnMappings(const format::MappingsRecord& r) override {
    if (!resident_ || r.seq > stop_seq_) return;
    if (spec_.kind == SnapshotSpec::kTime && r.monotonic_ns > spec_.seconds * 1e9) return;
    resident_->OnMappings(r);
  }
  void OnPythonCode(const format::PythonCodeRecord& r) override { p_->python_codes[r.id] = r; }
  void OnString(const format::StringRecord& r) override { p_->strings[r.id] = r.text; }
  void OnDrops(const format::DropsRecord& r) override { p_->totals.dropped_events += r.count; }
  void OnEnd(const format::EndRecord& r) override { p_->end = r; }
  void OnSampling(const format::SamplingRecord& r) override {
    p_->sample_rate = r.rate;
    p_->sample_exact_from = r.exact_from;
    sampled_ = r.rate != 0;
  }
  void OnEvent(const format::Event& e) override {
    if (node_base_ == 0 || e.stack == 0) [[likely]] return Play(e);
    format::Event shifted = e;
    shifted.stack += node_base_;
    Play(shifted);
  }
  // Worth it once the live blocks' table outgrows the second-level cache (churn's stays small).
  bool WantsUpcoming() const override { return heap_.table_bytes() > (size_t{1} << 20); }
  void Upcoming(const format::Event& e) override;

  // A forked process's capture (format 9.2) is replayed after its parent's, up to the fork
  // (load_profile.cc): the parent's blocks in use then are the child's, with their stacks. Called
  // between the two: the live set stays; every cumulative figure (allocations, time marks,
  // markers, the peak) starts again from the fork; the child's stack nodes and modules, numbered
  // from 1 in its capture, are numbered after the parent's.
  void BeginForkedImage();
  // Plays the parent's records up to the fork (fork_prefix.h), called by OnProcess for a
  // capture whose first image is a forked process's; then BeginForkedImage. Unset: such a
  // capture is replayed alone (the frees of inherited blocks then match nothing).
  using ForkPrefixPlayer = std::function<void(const format::ProcessRecord& child, Replayer*)>;
  void PlayForkPrefixWith(ForkPrefixPlayer player) { play_fork_prefix_ = std::move(player); }
  // One of the parent's events before the fork: only what it leaves in use counts.
  void PlayInherited(const format::Event& e);

  void Finish();
  bool stopped_early() const { return stop_seconds_ >= 0; }
  uint64_t stop_seq() const { return stop_seq_; }  // events from this one on are not wanted

  // The snapshot index: take checkpoints into `writer` while replaying everything, or start
  // from a checkpoint's state (the reader then delivers events from its seq on).
  void BuildIndex(SnapshotIndexWriter* writer) { index_writer_ = writer; }
  // Once every event is in: the end of the index (IndexEnd). The timeline points still due are
  // taken first, as Finish would take them, so the saved state has them all.
  void SaveEnd(const std::vector<std::string>& metadata, const ReadStatus& status);
  void ResumeFrom(std::string state, uint64_t seq, std::vector<TimelinePoint> timeline);

 private:
  // Everything the events have built up, as a byte string (replay_state.cc; kIndexVersion).
  void SaveState(std::string* out) const;
  void RestoreState();
  void StartOver();
  void Play(const format::Event& e);
  void OnHeapEvent(const format::Event& e);
  void OnResidentEvent(const format::Event& e);
  uint64_t ModuleOf(uint64_t ip) const;
  void IndexLoadedSegments();

  // The live set: inline, one of each for every event.
  Weight HeapWeight(uint64_t size) const {
    return p_->sample_rate == 0 || size == 0 ? Weight{size, kCountUnit} : SampledWeight(size);
  }
  Weight SampledWeight(uint64_t size) const;
  StackState& State(uint64_t stack) {
    uint32_t slot = stack < slot_of_.size() ? slot_of_[stack] : 0;
    return slot ? states_[slot] : NewState(stack);
  }
  StackState& NewState(uint64_t stack);  // the first event of a stack
  // Stack ids index vectors (slot_of_), so a damaged capture's must not be any number: at most
  // kStackSlack past the nodes read so far (tests write events without their nodes).
  static constexpr uint64_t kStackSlack = uint64_t{1} << 20;
  bool PlausibleStack(uint64_t stack) const { return stack < p_->nodes.size() + kStackSlack; }
  void Allocate(uint64_t stack, Weight w, uint64_t seq, Domain domain = Domain::kNative);
  void Release(uint64_t stack, Weight w, Domain domain = Domain::kNative);
  // A sampled capture's variances (stats.h), beside Allocate's and Release's figures: kept out
  // of line, so that a full capture's replay pays one predictable branch for them.
  void AddVariance(StackStats& s, const Weight& w, Domain domain);
  void TakeVariance(StackStats& s, const Weight& w, Domain domain);
  // First change since the last peak: the stack's value at that peak is what it holds now.
  void Touch(StackState& s) {
    if (s.changed_in_epoch < peak_epoch_) {
      CopyInUseToPeak(&s.stats);
      if (sampled_) CopyInUseVarianceToPeak(&s.stats);
      s.changed_in_epoch = peak_epoch_;
    }
  }
  // Calls f(stack id, state) for each stack an event has named, by increasing id.
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
  void TakeCheckpoints(uint64_t before_seq);

  // The program's anonymous mappings (replay_mappings.cc).
  void AddRegion(uint64_t start, uint64_t size, uint64_t stack, uint64_t seq, bool counted);
  void KeepPiece(uint64_t start, uint64_t end, const Region& r);
  void RemoveRange(uint64_t start, uint64_t size, std::vector<std::pair<uint64_t, Region>>* taken);
  void Protect(uint64_t start, uint64_t size, uint64_t stack, uint64_t seq, bool counted);

  // The program's custom heaps (replay_custom_heaps.cc).
  void OnApiEvent(const format::Event& e);
  uint32_t HeapOfStack(uint64_t stack) const;
  void FindBackingMemory();
  void MapBlocks(std::vector<MapBlock>* blocks) const;  // the live set now, for the map
  // Blocks MapBlocks would list (the selected custom heap's counted as its live blocks).
  uint64_t LiveBlockCount() const {
    return heap_.size() + mappings_.size() +
           (selected_heaps_.empty() ? 0 : WholeBlocks(live_blocks_));
  }
  void MapAddressSpace();
  void TakeMapFrames(uint64_t before_seq);
  void ListBlocks();

  Profile* p_;
  SnapshotSpec spec_;
  ReplayOptions options_;
  uint64_t stop_seq_;  // UINT64_MAX: replay everything
  double stop_seconds_ = -1;
  uint64_t implausible_stacks_ = 0;  // events whose stack was not plausible

  std::vector<uint64_t> loaded_, unloaded_;  // module ids, in load order
  // A forked process's: what its stack node ids and module ids are shifted by (BeginForkedImage).
  uint64_t node_base_ = 0;
  uint64_t module_base_ = 0;
  ForkPrefixPlayer play_fork_prefix_;
  // The loaded modules' segments by start address, for ModuleOf's binary search: a Python
  // program's capture has millions of stack nodes and its process hundreds of modules. Empty
  // when two of them overlap (a dlclose the agent missed): then the newest-first scan decides.
  struct SegmentSpan {
    uint64_t start, end, module;
  };
  std::vector<SegmentSpan> loaded_spans_;
  std::unordered_set<uint64_t> tids_;
  std::unordered_map<uint64_t, uint64_t> tid_of_;  // by thread index (any, in a damaged capture)

  // The live set.
  AddressMap heap_;
  std::map<uint64_t, Region> mappings_;  // anonymous mappings (and pieces) by start address
  // Stacks' states, compact: slot_of_[stack id] (node ids are dense; 4 bytes a node) is the
  // stack's place in states_, 0 for a node no event has named (most are inner nodes).
  std::vector<uint32_t> slot_of_;
  std::vector<StackState> states_{1};
  std::unordered_map<uint32_t, LiveBlock> realloc_pending_;  // by thread
  std::unordered_map<uint32_t, std::vector<std::pair<uint64_t, Region>>> mremap_pending_;
  uint64_t live_bytes_ = 0;
  uint64_t live_blocks_ = 0;
  bool sampled_ = false;  // p_->sample_rate != 0
  uint64_t live_bytes_var_ = 0;  // the variances of live_bytes_ and live_blocks_
  uint64_t live_blocks_var_ = 0;
  uint64_t mapping_live_bytes_ = 0;  // the part of live_bytes_ in mappings; the rest is heap
  uint64_t reserved_bytes_ = 0;      // PROT_NONE pieces of mappings_
  uint64_t peak_epoch_ = 1;
  // The peak since ReplayOptions::peak_since_* of live_bytes_ less left_out_bytes_, the bytes
  // of the stacks ReplayOptions::leave_out_python_file names (LeftOut, by stack id: 0 not
  // worked out yet, 1 left out, 2 counted), which ListBlocks leaves out too.
  uint64_t window_peak_ = 0;
  bool window_open_ = false;  // ReplayOptions::peak_since_seq was reached
  uint64_t left_out_bytes_ = 0;
  std::vector<uint8_t> left_out_;
  bool LeftOut(uint64_t stack);
  uint64_t WindowBytes() const { return live_bytes_ - left_out_bytes_; }

  // The optional figures.
  Timeline timeline_;
  Checkpoints checkpoints_;
  MapFrames map_frames_;
  std::vector<MapBlock> map_blocks_;  // MapBlocks' and clusterer_'s buffers, kept for each frame
  RegionClusterer clusterer_;
  SizeHistograms sizes_;
  Arenas arenas_;
  std::unique_ptr<ResidentTimeline> resident_;  // ReplayOptions::resident_parts
  void TakeResidentSamples(uint64_t before_seq);
  Temporaries temporaries_;
  ThreadFilter thread_filter_;
  CustomHeaps custom_heaps_;  // the program's own heaps: figures of their own
  std::unordered_set<uint32_t> selected_heaps_;  // ids of the custom heap ReplayOptions::heap names

  // The snapshot index.
  SnapshotIndexWriter* index_writer_ = nullptr;
  uint64_t since_checkpoint_ = 0;
  bool resume_pending_ = false;
  std::string resume_state_;
  uint64_t resume_seq_ = 0;
  std::vector<TimelinePoint> resume_timeline_;
};

}  // namespace memlens::analyzer
