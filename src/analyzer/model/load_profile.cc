// src/analyzer/model/load_profile.cc: the load policy (replay.h, LoadProfile): which moment
// to replay to, whether from the snapshot index (and building it on the way), and a peak's two
// replays (the peak is known only at the end). The replay itself is replayer.h's.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "analyzer/model/capture.h"
#include "analyzer/model/fork_prefix.h"
#include "analyzer/model/markers.h"
#include "analyzer/model/replay.h"
#include "analyzer/model/replayer.h"
#include "analyzer/model/snapshot_index.h"

namespace memlens::analyzer {
namespace {

// The agent holds an exclusive flock on the capture while it records (docs/agent.md); the
// kernel drops it when the writer closes the file or the process dies.
bool StillRecording(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool locked = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  close(fd);
  return locked;
}

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
  stop_seq = std::min(stop_seq, options.stop_before_seq);
  Replayer replayer(profile, spec, options, stop_seq);
  // A forked process's capture starts in its parent's, beside it (fork_prefix.h).
  const size_t slash = path.rfind('/');
  const std::string directory =
      slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  replayer.PlayForkPrefixWith([&](const format::ProcessRecord& child, Replayer* r) {
    PlayForkPrefix(directory, child, r, &profile->warnings);
  });
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
  // memlens run stopped following the capture (^C while it was being indexed): no index. Nor
  // for a forked process's, replayed with its parent's each time (Replayer::BeginForkedImage).
  const bool cancelled = (use.follow && use.follow->load() == kReadCancelled) ||
                         (profile->first_image && profile->first_image->Forked());
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

// The index serves a plain replay (no per-thread view, no extra per-moment figures: checkpoints
// or the map's frames, no peak since a moment or without a file's blocks, which need every event
// from the start): a snapshot, or the whole capture when the index has its end.
bool IndexServes(const ReplayOptions& options) {
  return !IndexTurnedOff() && options.thread == 0 && options.heap.empty() &&
         options.checkpoint_seconds.empty() && options.checkpoint_seqs.empty() &&
         options.map_frame_seconds.empty() &&
         !options.stack_size_histograms && options.peak_since_marker.empty() &&
         options.peak_since_seq == 0 && options.leave_out_python_file.empty() &&
         !options.resident_parts && options.stop_before_seq == UINT64_MAX;
}

// The whole capture, from the end of its index when it has one (memlens run writes it while
// the program runs), else replayed. The index is only read, never built, here: a first view of
// the whole capture costs a replay either way.
bool LoadWhole(Capture* capture, const SnapshotSpec& snapshot, const ReplayOptions& options,
               Profile* profile, std::string* error) {
  const std::string& path = capture->path();
  const SnapshotIndex* index = IndexServes(options) ? capture->Index() : nullptr;
  std::vector<std::string> metadata;
  if (index && index->end.state.blob_size && ReadIndexMetadata(*index, &metadata)) {
    IndexUse use;
    use.index = index;
    use.from = &index->end.state;
    use.end_metadata = &metadata;
    return Replay(path, snapshot, options, UINT64_MAX, profile, error, use);
  }
  return Replay(path, snapshot, options, UINT64_MAX, profile, error);
}

// No specifier: "exit" is where a Python program's own code ended when the capture has that
// moment (docs/python.md), else the end of the process. The index says which without a replay;
// without one, the whole replay tells, and a Python capture is replayed again up to its end.
bool LoadAtExit(Capture* capture, const ReplayOptions& options, Profile* profile,
                std::string* error) {
  SnapshotSpec program_end;
  program_end.kind = SnapshotSpec::kProgramEnd;  // its text stays empty: the default
  const SnapshotIndex* index = IndexServes(options) ? capture->Index() : nullptr;
  if (index && index->program_end_seq) {
    return LoadProfile(capture, program_end, options, profile, error);
  }
  if (!LoadWhole(capture, SnapshotSpec{}, options, profile, error)) return false;
  if (index || profile->program_end_seq == 0) return true;
  *profile = Profile();
  return LoadProfile(capture, program_end, options, profile, error);
}

}  // namespace

bool LoadProfile(const std::string& path, const SnapshotSpec& snapshot,
                 const ReplayOptions& options, Profile* profile, std::string* error) {
  Capture capture(path);
  return LoadProfile(&capture, snapshot, options, profile, error);
}

bool LoadProfile(Capture* capture, const SnapshotSpec& snapshot, const ReplayOptions& options,
                 Profile* profile, std::string* error) {
  if (snapshot.kind == SnapshotSpec::kEnd) {
    return snapshot.text.empty() ? LoadAtExit(capture, options, profile, error)
                                 : LoadWhole(capture, snapshot, options, profile, error);
  }
  const std::string& path = capture->path();
  uint64_t stop_seq = UINT64_MAX;
  const bool at_marker = snapshot.kind == SnapshotSpec::kMarker ||
                         snapshot.kind == SnapshotSpec::kSnapshot ||
                         snapshot.kind == SnapshotSpec::kProgramEnd;
  const bool serves = IndexServes(options);
  SnapshotIndex index;
  const SnapshotIndex* read = serves ? capture->Index() : nullptr;
  bool indexed = read != nullptr;
  if (read) index = *read;
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
      if (indexed) capture->SetIndex(index);  // the next load of this capture reads no index
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
    // A forked process's peak at the fork is before its first event (never indexed).
    stop_seq = !indexed && full.peak_at_fork ? 0 : index.peak_seq + 1;
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
    profile->peak_at_fork = stop_seq == 0;
    profile->snapshot_seconds = stop_seq == 0 ? 0 : profile->SecondsAt(index.peak_seq);
  }
  return true;
}

bool LoadAtMappingSample(Capture* capture, const SnapshotSpec& snapshot, Profile* profile,
                         std::string* asked, std::string* error) {
  ReplayOptions options;
  options.resident_parts = true;
  options.blocks = true;
  if (!LoadProfile(capture, snapshot, options, profile, error)) return false;
  *asked = profile->SnapshotLabel();
  if (!profile->mappings_sample || !profile->blocks_changed_after_sample) return true;
  options.stop_before_seq = profile->mappings_sample->seq;
  const uint64_t sample_seq = options.stop_before_seq;
  // A whole replay (LoadWhole: not a Python program's end), stopped at the sample.
  SnapshotSpec whole;
  whole.text = "sample";
  Profile at_sample;
  if (!LoadProfile(capture, whole, options, &at_sample, error)) return false;
  if (!at_sample.mappings_sample || at_sample.mappings_sample->seq != sample_seq) {
    *error = "'" + capture->path() + "': its mapping sample could not be found again";
    return false;
  }
  *profile = std::move(at_sample);
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
    *error = full.first_image && full.first_image->Forked()
                 ? "'" + path + "' is a forked process's capture: it is replayed with its " +
                       "parent's each time, and has no index"
             : full.read.missing_events ? "'" + path + "' misses events: it cannot be indexed"
                                        : "could not write the index of '" + path + "'";
    return false;
  }
  return true;
}

}  // namespace memlens::analyzer
