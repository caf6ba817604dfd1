// src/analyzer/export/json_writer.h
//
// JsonWriter: a small streaming JSON writer (pretty-printed, UTF-8 passed through, control
// characters escaped), plus the JSON forms of the model's frames and statistics shared by every
// command's --json output. The shapes are documented in docs/json-output.md and kept stable.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/model/replay.h"
#include "analyzer/symbolize/symbolizer.h"

namespace memlens::analyzer {

class JsonWriter {
 public:
  // kPretty for the terminal; kCompactScriptSafe for data embedded in the HTML report: no
  // spaces, and <, >, &, U+2028/2029 escaped, invalid UTF-8 as U+FFFD (docs/report.md).
  enum class Style { kPretty, kCompactScriptSafe };
  explicit JsonWriter(std::ostream& out, Style style = Style::kPretty) : out_(out), style_(style) {}
  ~JsonWriter() {
    if (style_ == Style::kPretty) out_ << '\n';
  }

  void BeginObject() { Open('{'); }
  void EndObject() { Close('}'); }
  void BeginArray() { Open('['); }
  void EndArray() { Close(']'); }
  void Key(std::string_view key);
  void String(std::string_view value);
  void Uint(uint64_t value);
  void Int(int64_t value);
  void Double(double value);
  void Bool(bool value);
  void Null();

  template <typename T>
  void Field(std::string_view key, const T& value) {
    Key(key);
    Value(value);
  }

 private:
  void Value(std::string_view v) { String(v); }
  void Value(const char* v) { String(v); }
  void Value(const std::string& v) { String(v); }
  void Value(bool v) { Bool(v); }
  void Value(double v) { Double(v); }
  void Value(uint64_t v) { Uint(v); }
  void Value(uint32_t v) { Uint(v); }
  void Value(int64_t v) { Int(v); }
  void Value(int v) { Int(v); }
  void Open(char c);
  void Close(char c);
  void BeforeValue();
  void Newline();
  void Quote(std::string_view text);

  std::ostream& out_;
  Style style_;
  std::vector<bool> has_items_;  // per open container
  bool after_key_ = false;
};

// The "capture" and "process" members every JSON output starts with (docs/json-output.md).
// warnings: the symbolizer's, after the profile's own.
void WriteCaptureJson(JsonWriter* json, const Profile& profile,
                      const std::vector<std::string>& warnings);
// The "totals" member of `memlens summary --json` and of the HTML report's data.
void WriteTotalsJson(JsonWriter* json, const Profile& profile);
// The "runtime" member of `summary`, `leaks` and the report's data: the blocks in use at the
// snapshot that the C/C++ runtime keeps for itself (model/runtime_allocations.h), by rule.
void WriteRuntimeJson(JsonWriter* json, const Profile& profile);
void WriteFrame(JsonWriter* json, const SourceFrame& frame);
// A part of resident memory's id, title and explanation (docs/rss.md), as `memlens rss --json`
// and the report's data give each, inside the object the caller opened.
void WritePartInfo(JsonWriter* json, ResidentPart part);
// `key`: [{seconds, read_ms, resident_bytes, virtual_bytes, parts: {id: resident bytes}}...], the
// parts at each of the writer's mapping samples (`memlens rss --json`'s over_time, `memlens
// timeline --parts --json`'s resident_parts).
void WriteResidentSamples(JsonWriter* json, const char* key,
                          const std::vector<ResidentSample>& samples);
// Appends `text` as a JSON string literal that is safe inside an HTML <script> element.
void AppendScriptSafeJsonString(std::string* out, std::string_view text);
// A row's figures; in a sampled capture (errors.sampled()) each sampled FIELD is followed by
// FIELD_error, its standard error (docs/json-output.md).
void WriteStats(JsonWriter* json, const StackStats& stats, ErrorScale errors = {});
// FIELD_error: the standard error of the figure `key` whose variance is given, when sampled.
void WriteError(JsonWriter* json, std::string_view key, uint64_t variance, bool blocks,
                ErrorScale errors);
void WriteStack(JsonWriter* json, std::string_view key,
                const std::vector<const SourceFrame*>& frames);

}  // namespace memlens::analyzer
