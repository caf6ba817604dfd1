// src/analyzer/export/chrome_trace.cc: see chrome_trace.h.
#include "analyzer/export/chrome_trace.h"

#include <sstream>

#include "analyzer/export/json_writer.h"

namespace memlens::analyzer {
namespace {

void Begin(JsonWriter* json, const char* phase, const std::string& name, uint64_t pid,
           uint64_t tid) {
  json->BeginObject();
  json->Field("ph", phase);
  json->Field("name", name);
  json->Field("pid", pid);
  json->Field("tid", tid);
}

void Counter(JsonWriter* json, const std::string& name, uint64_t pid, uint64_t tid, double seconds,
             uint64_t bytes) {
  Begin(json, "C", name, pid, tid);
  json->Field("ts", seconds * 1e6);  // microseconds
  json->Key("args");
  json->BeginObject();
  json->Field("bytes", bytes);
  json->EndObject();
  json->EndObject();
}

void Instant(JsonWriter* json, const std::string& name, const std::string& category, uint64_t pid,
             double seconds) {
  Begin(json, "i", name, pid, 0);
  json->Field("cat", category);
  json->Field("s", "p");  // drawn across the process
  json->Field("ts", seconds * 1e6);
  json->EndObject();
}

}  // namespace

bool WriteChromeTrace(const Profile& profile, StackResolver*, const ExportOptions& options,
                      std::string* out, std::string*) {
  uint64_t pid = profile.process.pid;
  uint64_t tid = options.thread;  // 0: the whole process
  std::string program = profile.process.executable.substr(profile.process.executable.rfind('/') + 1);
  std::string heap = "heap in use" + (profile.heap.empty() ? "" : " (" + profile.heap + ")");
  if (tid) heap += " by thread " + std::to_string(tid);
  std::ostringstream text;
  {
    JsonWriter json(text, JsonWriter::Style::kCompactScriptSafe);
    json.BeginObject();
    json.Field("displayTimeUnit", "ms");
    json.Key("otherData");
    json.BeginObject();
    json.Field("capture", profile.path);
    json.Field("exporter", options.exporter);
    json.Field("moment", profile.SnapshotLabel());
    json.EndObject();
    json.Key("traceEvents");
    json.BeginArray();
    Begin(&json, "M", "process_name", pid, 0);
    json.Key("args");
    json.BeginObject();
    json.Field("name", program.empty() ? "memlens capture" : program);
    json.EndObject();
    json.EndObject();
    if (tid) {
      Begin(&json, "M", "thread_name", pid, tid);
      json.Key("args");
      json.BeginObject();
      json.Field("name", "thread " + std::to_string(tid));
      json.EndObject();
      json.EndObject();
    }
    for (const TimelinePoint& point : profile.timeline) {
      Counter(&json, heap, pid, tid, point.seconds, point.heap_bytes);
    }
    for (const format::ResidentRecord& r : profile.resident) {
      Counter(&json, "resident", pid, 0, r.monotonic_ns / 1e9, r.bytes);
    }
    for (const Marker& m : profile.markers) {
      std::string category = !m.category.empty() ? m.category : m.snapshot ? "snapshot" : "marker";
      Instant(&json, m.name, category, pid, profile.SecondsAt(m.seq));
    }
    if (profile.totals.peak_seq) {
      Instant(&json, "peak", "memlens", pid, profile.SecondsAt(profile.totals.peak_seq));
    }
    json.EndArray();
    json.EndObject();
  }
  *out = text.str();
  return true;
}

}  // namespace memlens::analyzer
