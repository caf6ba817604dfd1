// src/analyzer/model/merge_profiles.cc: see merge_profiles.h.
#include "analyzer/model/merge_profiles.h"

#include <algorithm>
#include <map>

namespace memlens::analyzer {
namespace {

// What one process's ids are shifted by in the merged profile: stack nodes, modules, Python
// code objects, API strings and custom heaps are each numbered from 1 in each capture.
struct Bases {
  uint64_t node = 0, module = 0, code = 0, string = 0, heap = 0;
};

template <typename Map>
uint64_t LargestKey(const Map& map) {
  uint64_t largest = 0;
  for (const auto& [key, value] : map) largest = std::max<uint64_t>(largest, key);
  return largest;
}
// The next process's first id where id 0 is a real one (a Python code object or a string the
// agent's table had no room for, a heap): after every id taken so far, 0 included.
template <typename Map>
uint64_t NextBase(const Map& map) {
  return map.empty() ? 0 : LargestKey(map) + 1;
}

uint64_t ShiftIp(uint64_t ip, const Bases& b) {
  if (format::IsPythonFrameIp(ip)) {
    return format::PythonFrameIp(format::PythonFrameCode(ip) + b.code, format::PythonFrameLine(ip));
  }
  if (format::IsAnnotationFrameIp(ip)) {
    const format::Annotation kind = format::AnnotationKind(ip);
    const uint64_t base = kind == format::Annotation::kHeap ? b.heap : b.string;
    return format::AnnotationFrameIp(kind,
                                     static_cast<uint32_t>(format::AnnotationValue(ip) + base));
  }
  return ip;
}

uint64_t StartNs(const Profile& p) { return p.process.start_monotonic_ns; }
uint64_t EndNs(const Profile& p) {
  return StartNs(p) + static_cast<uint64_t>(p.DurationSeconds() * 1e9);
}

// The run's heap in use over time: each process's points moved onto the run's clock, and the
// sum over the processes of the last point of each at every moment.
std::vector<TimelinePoint> RunTimeline(const std::vector<Profile>& profiles, uint64_t run_start) {
  struct Change {
    uint64_t at_ns;
    size_t process;
    uint64_t bytes, var;
  };
  std::vector<Change> changes;
  for (size_t k = 0; k < profiles.size(); ++k) {
    const Profile& p = profiles[k];
    for (const TimelinePoint& t : p.timeline) {
      changes.push_back({StartNs(p) + static_cast<uint64_t>(t.seconds * 1e9) - run_start, k,
                         t.heap_bytes, t.heap_bytes_var});
    }
    if (p.end) changes.push_back({EndNs(p) - run_start, k, 0, 0});  // its memory went with it
  }
  std::stable_sort(changes.begin(), changes.end(),
                   [](const Change& a, const Change& b) { return a.at_ns < b.at_ns; });
  std::vector<uint64_t> bytes(profiles.size()), var(profiles.size());
  uint64_t total = 0, total_var = 0;
  std::vector<TimelinePoint> timeline;
  for (const Change& c : changes) {
    total = total - bytes[c.process] + c.bytes;
    total_var = total_var - var[c.process] + c.var;
    bytes[c.process] = c.bytes;
    var[c.process] = c.var;
    const double seconds = static_cast<double>(c.at_ns) / 1e9;
    if (!timeline.empty() && timeline.back().seconds == seconds) timeline.pop_back();
    timeline.push_back({seconds, total, total_var});
  }
  return timeline;
}

}  // namespace

bool MergeProfiles(std::vector<Profile> profiles, const std::string& run, Profile* merged,
                   std::string* error) {
  *merged = Profile();
  if (profiles.empty()) {
    *error = "'" + run + "' holds no process's capture";
    return false;
  }
  for (const Profile& p : profiles) {
    if (p.sample_rate != profiles[0].sample_rate ||
        p.sample_exact_from != profiles[0].sample_exact_from) {
      *error = "the processes of '" + run + "' were recorded under different sampling rules (" +
               p.path + "): view them one by one";
      return false;
    }
  }
  Profile& m = *merged;
  m.path = run;
  m.merged_processes = profiles.size();
  m.read = profiles[0].read;
  m.process = profiles[0].process;
  m.has_process = true;
  m.first_image = profiles[0].first_image;
  m.sample_rate = profiles[0].sample_rate;
  m.sample_exact_from = profiles[0].sample_exact_from;
  // Each process's own default exit (a Python program's own end) is the run's "exit".
  m.snapshot = profiles[0].AtProgramEndByDefault() ? SnapshotSpec{} : profiles[0].snapshot;
  m.heap = profiles[0].heap;
  uint64_t run_start = UINT64_MAX, run_end = 0;
  for (const Profile& p : profiles) {
    run_start = std::min(run_start, StartNs(p));
    run_end = std::max(run_end, EndNs(p));
  }
  m.process.start_monotonic_ns = run_start;
  m.timeline = RunTimeline(profiles, run_start);
  // The run's moments: its peak is the sum of each process's own, dated when the sum of what
  // they had in use was highest (SecondsAt of peak_seq 0: the first time mark), and it lasts
  // until its last process ended, finished or not (DurationSeconds: the last time mark).
  uint64_t highest = 0;
  double highest_at = 0;
  for (const TimelinePoint& t : m.timeline) {
    if (t.heap_bytes > highest) highest = t.heap_bytes, highest_at = t.seconds;
  }
  m.times = {{static_cast<uint64_t>(highest_at * 1e9), 1}, {run_end - run_start, 2}};
  if (profiles[0].end) {
    m.end = profiles[0].end;
    m.end->monotonic_ns = run_end - run_start;
  }
  for (const Profile& p : profiles) m.still_recording |= p.still_recording;
  m.snapshot_seconds = m.snapshot.kind == SnapshotSpec::kPeak ? highest_at : m.DurationSeconds();
  std::map<int64_t, Checkpoint> checkpoints;  // by the run's nanosecond
  uint64_t next_heap = 0;  // past every heap id given so far, named or not
  for (Profile& p : profiles) {
    Bases b;
    b.node = m.nodes.size() - 1;
    b.module = LargestKey(m.modules);
    b.code = NextBase(m.python_codes);
    b.string = NextBase(m.strings);
    b.heap = std::max<uint64_t>(NextBase(m.heap_names), next_heap);
    auto stack = [&b](uint64_t id) { return id ? id + b.node : 0; };
    for (size_t n = 1; n < p.nodes.size(); ++n) {
      const StackNode& node = p.nodes[n];
      m.nodes.push_back({stack(node.parent), ShiftIp(node.ip, b),
                         node.module ? node.module + b.module : 0});
    }
    for (auto& [id, module] : p.modules) {
      module.id = id + b.module;
      m.modules[module.id] = std::move(module);
    }
    for (auto& [id, code] : p.python_codes) {
      code.id = id + b.code;
      m.python_codes[code.id] = std::move(code);
    }
    for (auto& [id, text] : p.strings) m.strings[id + b.string] = std::move(text);
    for (auto& [id, name] : p.heap_names) {
      m.heap_names[static_cast<uint32_t>(id + b.heap)] = std::move(name);
    }
    for (const auto& [id, stats] : p.stacks) m.stacks[stack(id)] = stats;
    for (auto& [id, histogram] : p.stack_size_histograms) {
      m.stack_size_histograms[stack(id)] = std::move(histogram);
    }
    for (HeapFigures& heap : p.heaps) {
      heap.id = static_cast<uint32_t>(heap.id + b.heap);
      next_heap = std::max<uint64_t>(next_heap, heap.id + 1);
      heap.create_stack = stack(heap.create_stack);
      m.heaps.push_back(std::move(heap));
    }
    for (const TotalsField& f : kTotalsFields) m.totals.*f.member += p.totals.*f.member;
    for (int i = 0; i < kSizeBuckets; ++i) {
      SizeBucket& to = m.size_histogram[i];
      const SizeBucket& from = p.size_histogram[i];
      to.count += from.count;
      to.bytes += from.bytes;
      to.count_var += from.count_var;
      to.bytes_var += from.bytes_var;
    }
    for (int i = 0; i < Anomaly::kKinds; ++i) m.anomaly_counts[i] += p.anomaly_counts[i];
    m.thread_count += p.thread_count;
    // Each process's checkpoints, asked on its own clock for moments of the run (the report's):
    // on the run's clock, the processes' live stacks at the same moment together.
    const double offset = static_cast<double>(StartNs(p) - run_start) / 1e9;
    for (const Checkpoint& c : p.checkpoints) {
      Checkpoint& to = checkpoints[static_cast<int64_t>((c.seconds + offset) * 1e9 + 0.5)];
      to.seconds = to.at_seconds = c.seconds + offset;
      to.heap_bytes += c.heap_bytes;
      to.heap_bytes_var += c.heap_bytes_var;
      for (const auto& [id, live] : c.live) {
        LiveFigures& f = to.live[stack(id)];
        f.bytes += live.bytes;
        f.blocks += live.blocks;
        f.bytes_var += live.bytes_var;
        f.blocks_var += live.blocks_var;
      }
    }
    for (const std::string& w : p.warnings) {
      m.warnings.push_back("process " + std::to_string(p.process.pid) + ": " + w);
    }
    p = Profile();  // merged: its memory goes before the next one's is copied
  }
  m.totals.peak_seq = 0;  // the processes' peaks are at moments of their own
  for (auto& [ns, checkpoint] : checkpoints) m.checkpoints.push_back(std::move(checkpoint));
  return true;
}

}  // namespace memlens::analyzer
