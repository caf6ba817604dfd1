// src/analyzer/export/report_data.cc: see report_data.h. The JSON shape is in docs/report.md.
#include "analyzer/export/report_data.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "analyzer/export/format_units.h"
#include "analyzer/export/json_writer.h"
#include "analyzer/model/capture.h"
#include "analyzer/model/runtime_allocations.h"
#include "analyzer/views/call_tree.h"
#include "analyzer/views/map.h"

namespace memlens::analyzer {
namespace {

// Strings and frames are written once, in tables, and referred to by index.
class Tables {
 public:
  int String(const std::string& s) {
    auto [it, fresh] = strings_.emplace(s, static_cast<int>(string_list_.size()));
    if (fresh) string_list_.push_back(&it->first);
    return it->second;
  }
  int Frame(const SourceFrame& f) {
    std::string name = f.function.empty() ? FunctionName(f) : f.function;
    int flags = (f.inlined ? 1 : 0) | (f.python ? 2 : 0);
    auto key = std::make_tuple(String(name), String(f.file), f.line, String(f.module), flags);
    auto [it, fresh] = frames_.emplace(key, static_cast<int>(frame_list_.size()));
    if (fresh) frame_list_.push_back(key);
    return it->second;
  }
  void Write(JsonWriter* json) const {
    json->Key("strings");
    json->BeginArray();
    for (const std::string* s : string_list_) json->String(*s);
    json->EndArray();
    json->Key("frames");  // [function, file, line, module, flags]; strings by index
    json->BeginArray();
    for (const auto& [name, file, line, module, flags] : frame_list_) {
      json->BeginArray();
      json->Int(name);
      json->Int(file);
      json->Uint(line);
      json->Int(module);
      json->Int(flags);
      json->EndArray();
    }
    json->EndArray();
  }

 private:
  using FrameKey = std::tuple<int, int, uint32_t, int, int>;
  std::unordered_map<std::string, int> strings_;
  std::vector<const std::string*> string_list_;
  std::map<FrameKey, int> frames_;
  std::vector<FrameKey> frame_list_;
};

// Standard base64 (RFC 4648, padded): a map frame's cells, a byte each, in a third less text
// than a JSON array of numbers (the page decodes them with atob).
std::string Base64(const std::vector<uint8_t>& bytes) {
  static constexpr char kDigits[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t v = uint32_t{bytes[i]} << 16;
    if (i + 1 < bytes.size()) v |= uint32_t{bytes[i + 1]} << 8;
    if (i + 2 < bytes.size()) v |= bytes[i + 2];
    out += kDigits[(v >> 18) & 63];
    out += kDigits[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kDigits[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kDigits[v & 63] : '=';
  }
  return out;
}

// --- flame trees -------------------------------------------------------------------------------

void WriteTreeNode(JsonWriter* json, const TreeNode& n, Tables* tables, bool root,
                   ErrorScale errors) {
  // [frame, total, self, children?]; an "(other)" node is [-1, total, folded children]. A
  // sampled capture's nodes always have their children (maybe []), then the standard errors
  // of total and self: [frame, total, self, children, total_error, self_error], and
  // [-1, total, folded children, [], total_error].
  json->BeginArray();
  json->Int(root ? -1 : tables->Frame(n.frame));
  json->Uint(n.total);
  json->Uint(n.self);
  if (!n.children.empty() || n.pruned_children || errors.sampled()) {
    json->BeginArray();
    for (const auto& c : n.children) WriteTreeNode(json, *c, tables, false, errors);
    if (n.pruned_children) {
      json->BeginArray();
      json->Int(-1);
      json->Uint(n.pruned_total);
      json->Uint(n.pruned_children);
      if (errors.sampled()) {
        json->BeginArray();
        json->EndArray();
        json->Double(errors.Bytes(n.pruned_total_var));
      }
      json->EndArray();
    }
    json->EndArray();
  }
  if (errors.sampled()) {
    json->Double(errors.Bytes(n.total_var));
    json->Double(errors.Bytes(n.self_var));
  }
  json->EndArray();
}

void WriteTree(JsonWriter* json, const Profile& profile, StackResolver* resolver, SortBy metric,
               const char* name, size_t budget, Tables* tables) {
  uint64_t threshold = 0;
  auto root = BuildBudgetTree(profile, resolver, metric, budget, &threshold);
  json->Key(name);
  json->BeginObject();
  json->Field("threshold_bytes", threshold);  // nodes below this were folded into "(other)"
  json->Field("nodes", static_cast<uint64_t>(CountNodes(*root)));
  json->Key("root");
  WriteTreeNode(json, *root, tables, true, ErrorScale{profile.sample_rate});
  json->EndObject();
}

// --- the series --------------------------------------------------------------------------------

struct Point {
  double seconds;
  uint64_t bytes;
};

// At most `limit` points: the series split into equal stretches of time, the largest point of
// each kept (so the peak stays visible).
std::vector<Point> Reduce(const std::vector<Point>& points, double duration, size_t limit) {
  if (points.size() <= limit || duration <= 0) return points;
  std::vector<Point> out;
  size_t bucket = SIZE_MAX;
  for (const Point& p : points) {
    size_t b = std::min(limit - 1, static_cast<size_t>(p.seconds / duration * limit));
    if (b != bucket || out.empty()) {
      out.push_back(p);
      bucket = b;
    } else if (p.bytes > out.back().bytes) {
      out.back() = p;
    }
  }
  return out;
}

void WriteSeries(JsonWriter* json, const char* name, const std::vector<Point>& points) {
  json->Key(name);  // [seconds, bytes, seconds, bytes, ...]
  json->BeginArray();
  for (const Point& p : points) {
    json->Double(p.seconds);
    json->Uint(p.bytes);
  }
  json->EndArray();
}

}  // namespace

std::vector<double> ReportCheckpointTimes(double duration, size_t count) {
  std::vector<double> times;
  if (duration <= 0 || count == 0) return times;
  for (size_t i = 0; i < count; ++i) times.push_back(duration * (i + 0.5) / count);
  return times;
}

std::string BuildReportData(const Profile& p, StackResolver* resolver, const ReportLimits& limits,
                            const std::vector<ReportProcess>& processes) {
  std::ostringstream stream;
  JsonWriter json(stream, JsonWriter::Style::kCompactScriptSafe);
  Tables tables;
  json.BeginObject();
  json.Field("format", "memlens-report");
  json.Field("version", 1);
  json.Field("generator", "memlens " MEMLENS_VERSION);

  // Summary.
  WriteCaptureJson(&json, p, resolver->warnings());  // as every command's --json
  WriteTotalsJson(&json, p);                         // as `memlens summary --json`
  WriteRuntimeJson(&json, p);                        // as `memlens summary --json`

  // Flame trees, top-down.
  json.Key("trees");
  json.BeginObject();
  WriteTree(&json, p, resolver, SortBy::kPeak, "peak", limits.tree_nodes, &tables);
  WriteTree(&json, p, resolver, SortBy::kLeaked, "in_use", limits.tree_nodes, &tables);
  WriteTree(&json, p, resolver, SortBy::kAllocated, "allocated", limits.tree_nodes, &tables);
  json.EndObject();

  // Sites by line: the TopX rows, the checkpoints and the address map refer to them.
  LineSites index(p, resolver);
  // Per site: bytes and their variance (a sampled capture's).
  using SiteLive = std::vector<std::pair<size_t, std::pair<uint64_t, uint64_t>>>;
  std::vector<SiteLive> checkpoint_live;
  std::vector<uint64_t> max_live;
  for (const Checkpoint& c : p.checkpoints) {
    std::unordered_map<size_t, std::pair<uint64_t, uint64_t>> by_site;
    for (const auto& [stack, live] : c.live) {
      auto& [bytes, var] = by_site[index.Of(stack)];
      bytes += live.bytes;
      var += live.bytes_var;
    }
    checkpoint_live.emplace_back(by_site.begin(), by_site.end());
  }
  const std::vector<LineSite>& sites = index.sites();
  max_live.assign(sites.size(), 0);
  for (const auto& live : checkpoint_live) {
    for (const auto& [site, figures] : live) {
      max_live[site] = std::max(max_live[site], figures.first);
    }
  }
  for (size_t s = 0; s < sites.size(); ++s) {
    max_live[s] = std::max(max_live[s], sites[s].stats.in_use_bytes);
  }
  // Which sites are written: the top rows by each key, and those most live at a checkpoint.
  std::vector<bool> listed(sites.size(), false);
  std::vector<size_t> order(sites.size());
  auto mark_top = [&](auto value, size_t n) {
    for (size_t s = 0; s < sites.size(); ++s) order[s] = s;
    n = std::min(n, sites.size());
    std::partial_sort(order.begin(), order.begin() + n, order.end(),
                      [&](size_t a, size_t b) { return value(a) > value(b); });
    for (size_t k = 0; k < n; ++k) {
      if (value(order[k]) > 0) listed[order[k]] = true;
    }
  };
  auto stats = [&](size_t s) -> const StackStats& { return sites[s].stats; };
  mark_top([&](size_t s) { return stats(s).peak_bytes; }, limits.top_rows);
  mark_top([&](size_t s) { return stats(s).in_use_bytes; }, limits.top_rows);
  mark_top([&](size_t s) { return stats(s).allocated_bytes; }, limits.top_rows);
  mark_top([&](size_t s) { return stats(s).allocations; }, limits.top_rows);
  mark_top([&](size_t s) { return stats(s).temporary_bytes; }, limits.top_rows);
  std::vector<bool> in_checkpoints(sites.size(), false);
  {
    for (size_t s = 0; s < sites.size(); ++s) order[s] = s;
    size_t n = std::min(limits.checkpoint_sites, sites.size());
    std::partial_sort(order.begin(), order.begin() + n, order.end(),
                      [&](size_t a, size_t b) { return max_live[a] > max_live[b]; });
    for (size_t k = 0; k < n; ++k) {
      if (max_live[order[k]] > 0) in_checkpoints[order[k]] = listed[order[k]] = true;
    }
  }
  std::vector<int64_t> site_number(sites.size(), -1);
  json.Key("sites");  // frame index of each site
  json.BeginArray();
  int64_t written = 0;
  for (size_t s = 0; s < sites.size(); ++s) {
    if (!listed[s]) continue;
    site_number[s] = written++;
    json.Int(tables.Frame(sites[s].frame));
  }
  json.EndArray();
  json.Field("site_count", static_cast<uint64_t>(sites.size()));
  json.Key("top_columns");
  json.BeginArray();
  for (const char* c : {"site", "allocations", "allocated_bytes", "peak_bytes", "peak_blocks",
                        "in_use_bytes", "in_use_blocks", "python_allocated_bytes", "temporary",
                        "temporary_bytes"}) {
    json.String(c);
  }
  // A sampled capture: the standard errors of those figures follow, in the same order.
  const ErrorScale errors{p.sample_rate};
  if (errors.sampled()) {
    for (const char* c : {"allocations_error", "allocated_bytes_error", "peak_bytes_error",
                          "peak_blocks_error", "in_use_bytes_error", "in_use_blocks_error",
                          "python_allocated_bytes_error", "temporary_error",
                          "temporary_bytes_error"}) {
      json.String(c);
    }
  }
  json.EndArray();
  json.Key("top");
  json.BeginArray();
  for (size_t s = 0; s < sites.size(); ++s) {
    if (site_number[s] < 0) continue;
    const StackStats& st = sites[s].stats;
    if (st.allocations == 0 && st.in_use_blocks == 0) continue;
    json.BeginArray();
    json.Int(site_number[s]);
    for (uint64_t v : {st.allocations, st.allocated_bytes, st.peak_bytes, st.peak_blocks,
                       st.in_use_bytes, st.in_use_blocks, st.python_allocated_bytes, st.temporary,
                       st.temporary_bytes}) {
      json.Uint(v);
    }
    if (errors.sampled()) {
      for (double e : {errors.Blocks(st.allocations_var), errors.Bytes(st.allocated_bytes_var),
                       errors.Bytes(st.peak_bytes_var), errors.Blocks(st.peak_blocks_var),
                       errors.Bytes(st.in_use_bytes_var), errors.Blocks(st.in_use_blocks_var),
                       errors.Bytes(st.python_allocated_bytes_var),
                       errors.Blocks(st.temporary_var), errors.Bytes(st.temporary_bytes_var)}) {
        json.Double(e);
      }
    }
    json.EndArray();
  }
  json.EndArray();

  // Checkpoints: live bytes per site at moments spread over the capture, then the snapshot.
  json.Key("checkpoints");
  json.BeginArray();
  // A sampled capture: heap_bytes_error, and live_error: [site, error, ...] in live's order.
  auto write_checkpoint = [&](double seconds, uint64_t heap, uint64_t heap_var,
                              const SiteLive& live) {
    json.BeginObject();
    json.Field("time_s", seconds);
    json.Field("heap_bytes", heap);
    WriteError(&json, "heap_bytes", heap_var, false, errors);
    std::vector<std::pair<int64_t, std::pair<uint64_t, uint64_t>>> rows;
    std::pair<uint64_t, uint64_t> other{0, 0};
    for (const auto& [site, figures] : live) {
      if (!figures.first) continue;
      if (in_checkpoints[site]) {
        rows.push_back({site_number[site], figures});
      } else {
        other.first += figures.first;
        other.second += figures.second;
      }
    }
    if (other.first) rows.push_back({-1, other});
    json.Key("live");  // [site, bytes, site, bytes, ...]; site -1 gathers the unlisted ones
    json.BeginArray();
    for (const auto& [site, figures] : rows) {
      json.Int(site);
      json.Uint(figures.first);
    }
    json.EndArray();
    if (errors.sampled()) {
      json.Key("live_error");
      json.BeginArray();
      for (const auto& [site, figures] : rows) {
        json.Int(site);
        json.Double(errors.Bytes(figures.second));
      }
      json.EndArray();
    }
    json.EndObject();
  };
  for (size_t k = 0; k < p.checkpoints.size(); ++k) {
    const Checkpoint& c = p.checkpoints[k];
    write_checkpoint(c.at_seconds, c.heap_bytes, c.heap_bytes_var, checkpoint_live[k]);
  }
  {  // memory in use, as at the other checkpoints: the runtime's blocks included
    std::vector<std::pair<uint64_t, uint64_t>> figures(sites.size());
    for (size_t s = 0; s < sites.size(); ++s) {
      figures[s] = {sites[s].stats.in_use_bytes, sites[s].stats.in_use_bytes_var};
    }
    // Each runtime stack is one of p.stacks (SetRuntimeApart): Of() finds its site, adds none.
    for (const auto& [stack, live] : p.runtime_stacks) {
      figures[index.Of(stack)].first += live.bytes;
      figures[index.Of(stack)].second += live.bytes_var;
    }
    SiteLive live;
    for (size_t s = 0; s < sites.size(); ++s) {
      if (figures[s].first) live.push_back({s, figures[s]});
    }
    write_checkpoint(p.snapshot_seconds, p.totals.in_use_bytes + p.totals.runtime_bytes,
                     p.totals.in_use_bytes_var + p.totals.runtime_bytes_var, live);
  }
  json.EndArray();

  // Timeline.
  double duration = p.DurationSeconds();
  std::vector<Point> heap, resident;
  for (const auto& point : p.timeline) heap.push_back({point.seconds, point.heap_bytes});
  for (const auto& sample : p.resident) resident.push_back({sample.monotonic_ns / 1e9, sample.bytes});
  json.Key("timeline");
  json.BeginObject();
  WriteSeries(&json, "heap", Reduce(heap, duration, limits.timeline_points));
  WriteSeries(&json, "resident", Reduce(resident, duration, limits.timeline_points));
  json.Key("peak");
  json.BeginObject();
  json.Field("time_s", p.SecondsAt(p.totals.peak_seq));
  json.Field("bytes", p.totals.peak_bytes);
  WriteError(&json, "bytes", p.totals.peak_bytes_var, false, errors);
  json.EndObject();
  // The program's markers and snapshot requests: [seconds, label, snapshot (0/1)], every k-th
  // when there are more than the limit (a marker per frame of a long run).
  json.Field("markers_total", static_cast<uint64_t>(p.markers.size()));
  json.Key("markers");
  json.BeginArray();
  size_t step = (p.markers.size() + limits.timeline_markers - 1) / std::max<size_t>(limits.timeline_markers, 1);
  for (size_t i = 0; i < p.markers.size(); i += std::max<size_t>(step, 1)) {
    const Marker& m = p.markers[i];
    json.BeginArray();
    json.Double(p.SecondsAt(m.seq));
    json.String(m.category.empty() ? m.name : m.name + " (" + m.category + ")");
    json.Uint(m.snapshot ? 1 : 0);
    json.EndArray();
  }
  json.EndArray();
  json.EndObject();

  // Resident memory explained (docs/rss.md), when the capture has mapping samples: the parts,
  // and at each sample (every k-th past the limit) [seconds, resident of each part...].
  if (!p.resident_samples.empty()) {
    json.Key("resident_parts");
    json.BeginObject();
    json.Key("parts");
    json.BeginArray();
    for (size_t i = 0; i < kResidentParts; ++i) {
      json.BeginObject();
      WritePartInfo(&json, PartAt(i));
      json.EndObject();
    }
    json.EndArray();
    json.Key("samples");
    json.BeginArray();
    const std::vector<ResidentSample>& samples = p.resident_samples;
    const size_t step = samples.size() / std::max<size_t>(limits.timeline_points, 1) + 1;
    for (size_t i = 0; i < samples.size(); i += step) {
      const ResidentSample& s = i + step >= samples.size() ? samples.back() : samples[i];
      json.BeginArray();
      json.Double(s.seconds);
      for (uint64_t bytes : s.resident) json.Uint(bytes);
      json.EndArray();
      if (&s == &samples.back()) break;
    }
    json.EndArray();
    json.Key("last_virtual");  // the last sample's virtual bytes, part by part
    json.BeginArray();
    for (uint64_t bytes : samples.back().virtual_) json.Uint(bytes);
    json.EndArray();
    json.EndObject();
  }

  // Size histogram: [count, bytes] per log2 bucket, up to the last used one.
  size_t used = 0;
  for (size_t b = 0; b < p.size_histogram.size(); ++b) {
    if (p.size_histogram[b].count) used = b + 1;
  }
  json.Key("size_histogram");  // a sampled capture: [count, bytes, count_error, bytes_error]
  json.BeginArray();
  for (size_t b = 0; b < used; ++b) {
    const SizeBucket& bucket = p.size_histogram[b];
    json.BeginArray();
    json.Uint(bucket.count);
    json.Uint(bucket.bytes);
    if (errors.sampled()) {
      json.Double(errors.Blocks(bucket.count_var));
      json.Double(errors.Bytes(bucket.bytes_var));
    }
    json.EndArray();
  }
  json.EndArray();

  // Address map: the largest regions, by address, at the snapshot and in each frame of the
  // playback. A region: [begin, end, in_use_bytes, blocks, largest_gap, kind, site frame], a
  // frame's with its cells (base64) after them, and in a sampled capture in_use_bytes_error,
  // blocks_error last.
  auto write_regions = [&](const std::vector<AddressRegion>& all, size_t limit, bool cells) {
    std::vector<const AddressRegion*> regions;
    for (const auto& r : all) regions.push_back(&r);
    if (regions.size() > limit) {
      std::partial_sort(regions.begin(), regions.begin() + limit, regions.end(),
                        [](auto* a, auto* b) { return a->in_use_bytes > b->in_use_bytes; });
      regions.resize(limit);
      std::sort(regions.begin(), regions.end(),
                [](auto* a, auto* b) { return a->begin < b->begin; });
    }
    json.Key("regions");
    json.BeginArray();
    for (const AddressRegion* r : regions) {
      json.BeginArray();
      json.Uint(r->begin);
      json.Uint(r->end);
      json.Uint(r->in_use_bytes);
      json.Uint(r->blocks);
      json.Uint(r->largest_gap);
      json.String(RegionKindName(r->kind));
      json.Int(tables.Frame(sites[index.Of(r->top_stack)].frame));
      if (cells) json.String(Base64(r->cells));
      if (errors.sampled()) {
        json.Double(errors.Bytes(r->in_use_bytes_var));
        json.Double(errors.Blocks(r->blocks_var));
      }
      json.EndArray();
    }
    json.EndArray();
  };
  json.Key("address_map");
  json.BeginObject();
  json.Field("regions_total", static_cast<uint64_t>(p.address_map.size()));
  write_regions(p.address_map, limits.address_regions, false);
  // The playback: each frame's figures over all its regions (as `memlens map` sums them), and
  // its largest regions.
  json.Field("frames_left_out", p.map_frames_left_out);
  json.Key("frames");
  json.BeginArray();
  for (const MapFrame& f : p.map_frames) {
    const MapView figures = SumRegions(f.regions);
    json.BeginObject();
    json.Field("seconds", f.at_seconds);
    json.Field("in_use_bytes", figures.in_use_bytes);
    if (errors.sampled()) json.Field("in_use_bytes_error", errors.Bytes(figures.in_use_bytes_var));
    json.Field("span_bytes", figures.span_bytes);
    json.Field("largest_gap", figures.largest_gap);
    json.Field("reserved_bytes", figures.reserved_bytes);
    json.Field("regions_total", static_cast<uint64_t>(f.regions.size()));
    write_regions(f.regions, limits.map_frame_regions, true);
    json.EndObject();
  }
  json.EndArray();
  json.EndObject();

  if (!processes.empty()) {  // a run: its process tree, each one's heap over the run's time
    json.Key("processes");
    json.BeginArray();
    for (const ReportProcess& r : processes) {
      json.BeginObject();
      json.Field("pid", r.pid);
      json.Field("parent", r.parent);
      json.Field("depth", static_cast<int64_t>(r.depth));
      json.Field("forked", r.forked);
      json.Field("command", r.command);
      json.Field("capture", r.capture);
      json.Field("peak_bytes", r.peak_bytes);
      json.Field("in_use_bytes", r.in_use_bytes);
      json.Field("start_s", r.start_s);
      json.Field("end_s", r.end_s);
      json.Key("timeline");  // [seconds, bytes, seconds, bytes, ...], at most timeline_points
      json.BeginArray();
      const size_t step = r.timeline.size() / limits.timeline_points + 1;
      for (size_t i = 0; i < r.timeline.size(); i += step) {
        json.Double(r.timeline[i].first);
        json.Uint(r.timeline[i].second);
      }
      json.EndArray();
      json.EndObject();
    }
    json.EndArray();
  }

  tables.Write(&json);
  json.EndObject();
  return stream.str();
}

bool LoadCaptureReport(const std::string& path, const SnapshotSpec& snapshot,
                       const ReplayOptions& replay, size_t checkpoints, StackOptions stacks,
                       const ReportLimits& limits, CaptureReport* report, std::string* error) {
  double duration = 0;
  Capture capture(path);  // opened once: the duration from its index when it has one
  if (!capture.DurationSeconds(&duration, error)) return false;
  ReplayOptions options = replay;
  options.checkpoint_seconds = ReportCheckpointTimes(duration, checkpoints);
  options.address_map = true;
  options.map_frame_seconds = ReportCheckpointTimes(duration, limits.map_frames);
  options.resident_parts = true;  // the parts at each mapping sample (docs/rss.md)
  if (!LoadProfile(&capture, snapshot, options, &report->profile, error)) return false;
  BuildCaptureReport(stacks, limits, {}, report);
  return true;
}

void BuildCaptureReport(StackOptions stacks, const ReportLimits& limits,
                        const std::vector<ReportProcess>& processes, CaptureReport* report) {
  report->resolver = std::make_unique<StackResolver>(report->profile, stacks);
  SetRuntimeApart(report->resolver.get(), &report->profile);
  report->data = BuildReportData(report->profile, report->resolver.get(), limits, processes);
}

}  // namespace memlens::analyzer
