// src/analyzer/export/api_json.h
//
// The JSON forms of what programs report through the instrumentation API: the custom heaps'
// figures, the anomalies (misuse, each with the stack where it happened) and the markers.
// Shared by `summary --json`, `timeline --json` and the HTML report's data; shapes in
// docs/json-output.md.
//
// Runs on: the analyzer's main thread.
#pragma once

#include "analyzer/export/json_writer.h"
#include "analyzer/model/sites.h"

namespace memlens::analyzer {

// "custom_heaps": [...] and "anomalies": {...}.
void WriteCustomHeapsJson(JsonWriter* json, const Profile& profile, StackResolver* resolver);
// "markers": [{name, category, snapshot, time_s, seq}...]
void WriteMarkersJson(JsonWriter* json, const Profile& profile);

}  // namespace memlens::analyzer
