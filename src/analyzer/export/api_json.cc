// src/analyzer/export/api_json.cc: see api_json.h.
#include "analyzer/export/api_json.h"

namespace memlens::analyzer {

void WriteCustomHeapsJson(JsonWriter* json, const Profile& p, StackResolver* resolver) {
  json->Key("custom_heaps");
  json->BeginArray();
  for (const HeapFigures& h : p.heaps) {
    json->BeginObject();
    json->Field("name", h.name);
    json->Field("allocations", h.allocations);
    json->Field("allocated_bytes", h.allocated_bytes);
    json->Field("frees", h.frees);
    json->Field("resets", h.resets);
    json->Field("reset_blocks", h.reset_blocks);
    json->Field("peak_bytes", h.peak_bytes);
    json->Field("peak_blocks", h.peak_blocks);
    json->Field("peak_time_s", p.SecondsAt(h.peak_seq));
    json->Field("in_use_bytes", h.in_use_bytes);
    json->Field("in_use_blocks", h.in_use_blocks);
    // The custom heaps are recorded in full; their backing memory is the system heap's, an
    // estimate in a sampled capture.
    json->Field("backing_bytes", h.backing_bytes);
    WriteError(json, "backing_bytes", h.backing_bytes_var, false, ErrorScale{p.sample_rate});
    json->Field("backing_blocks", h.backing_blocks);
    WriteError(json, "backing_blocks", h.backing_blocks_var, true, ErrorScale{p.sample_rate});
    json->Field("destroyed", h.destroyed);
    WriteStack(json, "created_at", resolver->Frames(h.create_stack));
    json->EndObject();
  }
  json->EndArray();
  json->Key("anomalies");
  json->BeginObject();
  static const char* const kKeys[Anomaly::kKinds] = {
      "unknown_free", "double_free", "free_after_reset", "free_after_destroy", "name_reused"};
  uint64_t total = 0;
  for (int k = 0; k < Anomaly::kKinds; ++k) {
    json->Field(kKeys[k], p.anomaly_counts[k]);
    total += p.anomaly_counts[k];
  }
  json->Field("total", total);
  json->Key("list");  // the first ones (CustomHeaps::kMaxAnomaliesKept)
  json->BeginArray();
  for (const Anomaly& a : p.anomalies) {
    json->BeginObject();
    json->Field("kind", kKeys[a.kind]);
    json->Field("what", AnomalyName(a.kind));
    json->Field("heap", a.heap);
    json->Field("address", a.address);
    json->Field("time_s", p.SecondsAt(a.seq));
    Stack stack = resolver->Frames(a.stack);
    json->Key("site");  // where it happened: the first frame past memlens's own
    WriteFrame(json, stack.empty() ? SourceFrame{} : *stack[resolver->SiteIndex(stack)]);
    WriteStack(json, "stack", stack);
    json->EndObject();
  }
  json->EndArray();
  json->EndObject();
}

void WriteMarkersJson(JsonWriter* json, const Profile& p) {
  json->Key("markers");
  json->BeginArray();
  for (const Marker& m : p.markers) {
    json->BeginObject();
    json->Field("name", m.name);
    json->Field("category", m.category);
    json->Field("snapshot", m.snapshot);
    json->Field("time_s", p.SecondsAt(m.seq));
    json->Field("seq", m.seq);
    json->EndObject();
  }
  json->EndArray();
}

}  // namespace memlens::analyzer
