// src/analyzer/model/replay.h
//
// Replaying a capture: every event in sequence order updates the live set, so that the
// analyzer knows, per call stack, what was allocated, what was live at the peak of the whole
// heap, and what was still live at the end. The result, a Profile, is what every view reads.
// This header is the model's interface: the figures (stats.h), the moment (capture_argument.h),
// the Profile and LoadProfile; the replay (replayer.h, replay_figures.h) and the load policy
// (load_profile.cc) are behind it.
//
// "In use" counts the heap (malloc-family blocks and Python's allocator) and the program's
// own anonymous mappings, the parts of them it can access (format::MappingCounts): PROT_NONE
// reservations are address space, not memory (docs/architecture.md). Both are kept apart too.
// Runs on: the analyzer's main thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "analyzer/model/capture_argument.h"
#include "analyzer/model/custom_heaps.h"
#include "analyzer/model/resident_parts.h"
#include "analyzer/model/stats.h"
#include "analyzer/reader/capture_reader.h"
#include "format/sampling_model.h"
#include "format/records.h"

namespace memlens::analyzer {

// A marker or a snapshot request the program made (memlens_add_marker, memlens_take_snapshot).
struct Marker {
  std::string name;
  std::string category;  // "" for none
  bool snapshot = false;
  uint64_t seq = 0;  // its place in the sequence of events
};

struct TimelinePoint {
  double seconds = 0;
  uint64_t heap_bytes = 0;  // malloc-family blocks and anonymous mappings in use
  uint64_t heap_bytes_var = 0;  // a sampled capture: its variance (stats.h, ErrorScale)
};

// Allocation sizes in log2 buckets: bucket b holds sizes in [2^b, 2^(b+1)) (0 holds 0 and 1);
// the last one also holds every larger size, which only a damaged capture claims.
inline constexpr int kSizeBuckets = 48;
struct SizeBucket {
  uint64_t count = 0;
  uint64_t bytes = 0;
  uint64_t count_var = 0;  // a sampled capture: their variances (stats.h, ErrorScale)
  uint64_t bytes_var = 0;
};
inline int SizeBucketOf(uint64_t size) {
  return size < 2 ? 0 : std::min(63 - __builtin_clzll(size), kSizeBuckets - 1);
}
using SizeHistogram = std::vector<SizeBucket>;  // kSizeBuckets entries

// What one stack holds live at a moment: bytes, whole blocks and, in a sampled capture, their
// variances (stats.h, ErrorScale).
struct LiveFigures {
  uint64_t bytes = 0;
  uint64_t blocks = 0;
  uint64_t bytes_var = 0;
  uint64_t blocks_var = 0;
  bool operator==(const LiveFigures&) const = default;
};

// What was live per stack at a moment, taken in the same pass as everything else.
struct Checkpoint {
  double seconds = 0;     // asked for (for a checkpoint at a sequence number: at_seconds)
  uint64_t before_seq = 0;  // a checkpoint at a sequence number: taken just before it
  double at_seconds = 0;  // the time mark it was taken at
  uint64_t heap_bytes = 0;
  uint64_t heap_bytes_var = 0;
  std::unordered_map<uint64_t, LiveFigures> live;  // by stack
};

// A stretch of address space holding live blocks, none of its gaps over 1 MiB.
struct AddressRegion {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t in_use_bytes = 0;
  uint64_t blocks = 0;
  uint64_t largest_gap = 0;  // the largest free stretch between two of its blocks
  // Heap blocks, anonymous mappings the program made itself, or their reserved (PROT_NONE)
  // ranges, which hold no bytes in use.
  enum Kind { kHeap, kMapping, kReserved } kind = kHeap;
  uint64_t top_stack = 0;    // the stack holding most of its bytes
  // A sampled capture: the variances of in_use_bytes and blocks (stats.h, ErrorScale). Its
  // begin, end and gaps are those of the recorded blocks (unrecorded ones may lie between).
  uint64_t in_use_bytes_var = 0;
  uint64_t blocks_var = 0;
  // A frame of the map's playback (MapFrame): the region cut into equal stretches (at most
  // ReplayOptions::map_frame_cells, one a byte when the region is smaller), each the share of
  // its bytes that live blocks cover, 0 (none) to 255 (all; any live byte makes it at least 1).
  // The recorded blocks' real sizes, even in a sampled capture. Empty in the snapshot's map.
  std::vector<uint8_t> cells;
};
inline const char* RegionKindName(AddressRegion::Kind kind) {
  if (kind == AddressRegion::kHeap) return "heap";
  return kind == AddressRegion::kMapping ? "mapping" : "reserved";
}

// The address map at one moment of the recording (ReplayOptions::map_frame_seconds): a frame of
// the report's memory-map playback, to see which phase fragments the heap.
struct MapFrame {
  double seconds = 0;     // asked for
  double at_seconds = 0;  // the time mark it was taken at
  std::vector<AddressRegion> regions;  // by address, each with its cells
};

// What a replay gathers besides the always-on figures.
struct ReplayOptions {
  std::vector<double> checkpoint_seconds;  // ascending
  std::vector<uint64_t> checkpoint_seqs;   // ascending: just before these events (markers)
  bool address_map = false;                // cluster the live set at the snapshot
  // Frames of the address map over the recording (Profile::map_frames): the live set clustered
  // as for address_map at the first time mark past each of these moments (ascending; none past
  // the snapshot, where the replay stops), each region with map_frame_cells cells. A frame costs
  // a pass over the live set: MapFrames (replay_figures.h) bounds the whole and leaves frames
  // out when the live set is huge. The index cannot serve it (each frame needs the live set).
  std::vector<double> map_frame_seconds;
  size_t map_frame_cells = 64;
  // Size histograms per stack (Profile::stack_size_histograms): 768 bytes a stack, so only
  // for the views that show them; the overall histogram is always there.
  bool stack_size_histograms = false;
  // Only allocations made by this OS thread (its tid), 0 for all: the others are left out of
  // every figure (their frees and reallocs are paired with them, silently).
  uint64_t thread = 0;
  // The heap every figure describes: "" for the system heap (malloc, mmap, Python's allocator),
  // else the name of one of the program's custom heaps (include/memlens/memlens.h).
  std::string heap;
  // Every block in use at the snapshot, one by one (Profile::blocks): `memlens blocks`.
  bool blocks = false;
  // The peak of the in-use bytes since the last marker of this name before the snapshot, or
  // since the event of this sequence number (Profile::peak_since_bytes; the whole capture's
  // peak when there is no such marker): the tracemalloc API's reset_peak. The index cannot
  // serve it (the replay starts at the start).
  std::string peak_since_marker;
  uint64_t peak_since_seq = 0;  // 0: none
  // Blocks allocated with a Python frame of this file (a code object's co_filename) in their
  // stack are left out of Profile::blocks and peak_since_bytes: a tool's own memory
  // (memlens.tracemalloc's, reading the analyzer's answers) is not the program's. Worked out
  // from the stack nodes, nothing symbolized (an --exclude pattern symbolizes every stack).
  std::string leave_out_python_file;
  // Resident memory explained (resident_parts.h): the parts at every mapping sample up to the
  // snapshot (Profile::resident_samples) and the last of those samples, with Python's arenas
  // then (Profile::mappings_sample, python_arenas). Needs every event from the start.
  bool resident_parts = false;
  // Events from this sequence number on are not replayed (UINT64_MAX: no such limit): `memlens
  // rss` moves its moment back to a mapping sample.
  uint64_t stop_before_seq = UINT64_MAX;
};

// One block in use at the snapshot (ReplayOptions::blocks): a heap block (Python's allocator or
// the malloc family), an anonymous mapping the program made (its accessible part), or a block
// of the custom heap that ReplayOptions::heap names. Its real size, even in a sampled capture.
struct LiveBlockRow {
  enum Domain : uint8_t { kPython, kNative, kMapping, kCustomHeap };
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t stack = 0;
  Domain domain = kNative;
};
inline const char* BlockDomainName(LiveBlockRow::Domain domain) {
  static constexpr const char* kNames[] = {"python", "native", "mapping", "custom_heap"};
  return kNames[domain];
}

// The runtime's blocks in use at the snapshot that one rule of runtime_allocations.h covers.
struct RuntimeRule;
struct RuntimeShare {
  const RuntimeRule* rule = nullptr;  // one of RuntimeRules()
  uint64_t stacks = 0, bytes = 0, blocks = 0;
  uint64_t bytes_var = 0, blocks_var = 0;  // a sampled capture (stats.h, ErrorScale)
};

struct StackNode {
  uint64_t parent = 0;
  uint64_t ip = 0;
  uint64_t module = 0;  // id of the module holding ip when the node was recorded; 0 unknown
};

struct Profile {
  std::string path;
  // A run of several processes merged into one profile (merge_profiles.h): how many; 0 for one
  // process's capture. path is then the run's directory, process the first process's.
  uint64_t merged_processes = 0;
  ReadStatus read;
  format::ProcessRecord process;
  bool has_process = false;
  // A sampled capture's rate (docs/sampling.md), 0 when every allocation was recorded. When
  // set, every byte and block figure is an unbiased estimate scaled up from the samples.
  uint64_t sample_rate = 0;
  uint64_t sample_exact_from = format::kNoExactThreshold;  // blocks recorded whole from this size
  std::optional<format::EndRecord> end;
  bool still_recording = false;  // no kEnd yet, and the agent still holds the capture
  std::unordered_map<uint64_t, format::ModuleRecord> modules;
  std::unordered_map<uint64_t, format::PythonCodeRecord> python_codes;
  std::vector<StackNode> nodes{StackNode{}};  // index = node id; [0] is the root
  std::unordered_map<uint64_t, StackStats> stacks;  // by stack id (innermost node)
  std::vector<format::TimeRecord> times;
  uint64_t thread_count = 0;
  Totals totals;
  // The capture follows exec: the profile describes the last program image; these are the
  // command lines of the images it replaced, first first.
  std::vector<std::vector<std::string>> earlier_images;
  // The first image's process record: when the process started, and its recorded parent
  // (a run of memlens run --follow-children, process_set.h).
  std::optional<format::ProcessRecord> first_image;
  uint64_t earlier_unrecorded_children = 0;  // those the images before the last one started
  // Child processes the recorded images started, none of them recorded (kEnd).
  uint64_t UnrecordedChildren() const {
    return earlier_unrecorded_children + (end ? end->unrecorded_children : 0);
  }
  // Where a Python program's own code ended (format::EventKind::kProgramEnd) in the last image,
  // even past the snapshot; 0 when it has none (native programs, os._exit, a killed process).
  uint64_t program_end_seq = 0;
  // A forked process's peak was what it inherited, before its first event (fork_prefix.h):
  // totals.peak_seq then names no event.
  bool peak_at_fork = false;
  SnapshotSpec snapshot;            // the moment the in-use figures describe
  double snapshot_seconds = 0;      // when that moment was
  uint64_t from_checkpoint_seq = 0;  // the replay started from the snapshot index's state there
  std::vector<TimelinePoint> timeline;  // heap in use at each of the writer's time marks
  std::vector<format::ResidentRecord> resident;  // RSS samples
  // As ReplayOptions::resident_parts asked: the parts at each mapping sample up to the
  // snapshot; the last such sample (none in a capture before format 10.0), Python's arenas
  // then, and whether a block changed between it and the snapshot.
  std::vector<ResidentSample> resident_samples;
  std::optional<format::MappingsRecord> mappings_sample;
  std::vector<Claim> python_arenas;
  bool blocks_changed_after_sample = false;
  SizeHistogram size_histogram = SizeHistogram(kSizeBuckets);  // every allocation
  std::unordered_map<uint64_t, SizeHistogram> stack_size_histograms;  // by stack id, on demand
  std::vector<Checkpoint> checkpoints;  // as ReplayOptions asked
  std::vector<AddressRegion> address_map;  // as ReplayOptions asked, by address
  std::vector<MapFrame> map_frames;        // as ReplayOptions asked, by time
  uint64_t map_frames_left_out = 0;        // asked for, not taken: the live set was too big
  std::vector<LiveBlockRow> blocks;        // as ReplayOptions asked, by address
  uint64_t peak_since_bytes = 0;       // as ReplayOptions asked (peak_since_marker, peak_since_seq)
  uint64_t peak_since_marker_seq = 0;  // the marker it counts from; 0: the capture's start
  // The sequence number after the last event replayed (0 when none was: a view of a whole
  // capture served from the end of its snapshot index): where a later peak_since_seq starts.
  uint64_t next_seq = 0;
  // The instrumentation API. The figures above describe `heap` ("" for the system heap, else
  // a custom heap's name, ReplayOptions::heap); every custom heap has figures of its own.
  std::string heap;
  std::unordered_map<uint64_t, std::string> strings;  // interned names, by id
  std::vector<Marker> markers;  // all of them, in sequence order, even past the snapshot
  std::vector<HeapFigures> heaps;  // custom heaps, in creation order, at the snapshot
  std::unordered_map<uint32_t, std::string> heap_names;  // by heap id
  std::vector<Anomaly> anomalies;  // the first CustomHeaps::kMaxAnomaliesKept
  // Set by SetRuntimeApart: the runtime's blocks in use at the snapshot, by rule (in the
  // rules' order, those with blocks) and by stack (bytes, blocks; their StackStats say 0).
  std::vector<RuntimeShare> runtime;
  std::unordered_map<uint64_t, LiveFigures> runtime_stacks;
  uint64_t anomaly_counts[Anomaly::kKinds] = {};
  const std::string& StringOf(uint64_t id) const;
  std::string HeapDisplayName() const { return heap.empty() ? "system" : heap; }

  // "exit", "peak (2.310 s)", "t=2.5s (2.501 s)": what the in-use figures describe.
  std::string SnapshotLabel() const;
  // The in-use figures are a Python program's "at exit" by default: the end of its own code,
  // not of the process (the text views say so in ProgramEndNote, the JSON in "snapshot").
  bool AtProgramEndByDefault() const {
    return snapshot.kind == SnapshotSpec::kProgramEnd && snapshot.text.empty();
  }
  std::vector<std::string> warnings;

  // Seconds since the start of recording at which the event with this seq had happened.
  double SecondsAt(uint64_t seq) const;
  double DurationSeconds() const;
};

// Reads and replays a capture up to the snapshot. Returns false with a one-line *error when
// the file is not a readable capture or the snapshot is not in it; damage inside a capture
// becomes a warning in the profile. A snapshot at the peak replays the capture twice.
bool LoadProfile(const std::string& path, const SnapshotSpec& snapshot,
                 const ReplayOptions& options, Profile* profile, std::string* error);
// The same for a capture opened already (capture.h): the file is stamped, and its index read,
// once for every load of it.
class Capture;
bool LoadProfile(Capture* capture, const SnapshotSpec& snapshot, const ReplayOptions& options,
                 Profile* profile, std::string* error);
inline bool LoadProfile(const std::string& path, const SnapshotSpec& snapshot, Profile* profile,
                        std::string* error) {
  return LoadProfile(path, snapshot, ReplayOptions{}, profile, error);
}
inline bool LoadProfile(const std::string& path, Profile* profile, std::string* error) {
  return LoadProfile(path, SnapshotSpec{}, profile, error);
}
// `memlens rss` (docs/rss.md): the profile at the last mapping sample at or before the
// snapshot, with the parts at every sample up to it and every block in use at it
// (ReplayOptions::resident_parts, blocks). When blocks changed between that sample and the
// snapshot, the capture is replayed again, up to the sample. *asked: the snapshot's label.
// The profile has no mappings_sample when the capture has none by then.
bool LoadAtMappingSample(Capture* capture, const SnapshotSpec& snapshot, Profile* profile,
                         std::string* asked, std::string* error);

}  // namespace memlens::analyzer
