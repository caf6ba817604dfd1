// src/analyzer/export/json_writer.cc: see json_writer.h.
#include "analyzer/export/json_writer.h"

#include <cmath>
#include <cstdio>

#include "analyzer/model/runtime_allocations.h"
#include "analyzer/model/stats.h"

namespace memlens::analyzer {

void AppendScriptSafeJsonString(std::string* out, std::string_view text) {
  static const char kHex[] = "0123456789abcdef";
  auto escape = [out](uint32_t code) {
    *out += "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) *out += kHex[(code >> shift) & 0xf];
  };
  *out += '"';
  size_t i = 0;
  while (i < text.size()) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      switch (c) {
        case '"': *out += "\\\""; break;
        case '\\': *out += "\\\\"; break;
        case '\n': *out += "\\n"; break;
        case '\t': *out += "\\t"; break;
        case '<': case '>': case '&': escape(c); break;
        default:
          if (c < 0x20 || c == 0x7f) {
            escape(c);
          } else {
            *out += static_cast<char>(c);
          }
      }
      ++i;
      continue;
    }
    // A UTF-8 sequence: copied when well-formed, else one U+FFFD per bad byte.
    int length = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
    if (c >= 0xf5) length = 0;
    uint32_t code = length == 2 ? c & 0x1f : length == 3 ? c & 0x0f : c & 0x07;
    bool ok = length > 0 && i + length <= text.size();
    for (int k = 1; ok && k < length; ++k) {
      auto next = static_cast<unsigned char>(text[i + k]);
      ok = (next & 0xc0) == 0x80;
      code = (code << 6) | (next & 0x3f);
    }
    if (ok) {
      ok = !(length == 3 && (code < 0x800 || (code >= 0xd800 && code <= 0xdfff))) &&
           !(length == 4 && (code < 0x10000 || code > 0x10ffff));
    }
    if (!ok) {
      escape(0xfffd);
      ++i;
    } else if (code == 0x2028 || code == 0x2029) {
      escape(code);
      i += length;
    } else {
      out->append(text.substr(i, length));
      i += length;
    }
  }
  *out += '"';
}


void JsonWriter::Newline() {
  if (style_ != Style::kPretty) return;
  out_ << '\n';
  for (size_t i = 0; i < has_items_.size(); ++i) out_ << "  ";
}

void JsonWriter::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!has_items_.empty()) {
    if (has_items_.back()) out_ << ',';
    has_items_.back() = true;
    Newline();
  }
}

void JsonWriter::Open(char c) {
  BeforeValue();
  out_ << c;
  has_items_.push_back(false);
}

void JsonWriter::Close(char c) {
  bool had = has_items_.back();
  has_items_.pop_back();
  if (had) Newline();
  out_ << c;
}

void JsonWriter::Quote(std::string_view text) {
  if (style_ == Style::kCompactScriptSafe) {
    std::string safe;
    AppendScriptSafeJsonString(&safe, text);
    out_ << safe;
    return;
  }
  out_ << '"';
  for (unsigned char c : text) {
    switch (c) {
      case '"': out_ << "\\\""; break;
      case '\\': out_ << "\\\\"; break;
      case '\n': out_ << "\\n"; break;
      case '\r': out_ << "\\r"; break;
      case '\t': out_ << "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out_ << buf;
        } else {
          out_ << c;
        }
    }
  }
  out_ << '"';
}

void JsonWriter::Key(std::string_view key) {
  BeforeValue();
  Quote(key);
  out_ << (style_ == Style::kPretty ? ": " : ":");
  after_key_ = true;
}

void JsonWriter::String(std::string_view value) {
  BeforeValue();
  Quote(value);
}

void JsonWriter::Uint(uint64_t value) {
  BeforeValue();
  out_ << value;
}

void JsonWriter::Int(int64_t value) {
  BeforeValue();
  out_ << value;
}

void JsonWriter::Double(double value) {
  BeforeValue();
  if (!std::isfinite(value)) {
    out_ << "null";
    return;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", value);
  out_ << buf;
}

void JsonWriter::Bool(bool value) {
  BeforeValue();
  out_ << (value ? "true" : "false");
}

void JsonWriter::Null() {
  BeforeValue();
  out_ << "null";
}

void WriteCaptureJson(JsonWriter* json, const Profile& p, const std::vector<std::string>& warnings) {
  json->Key("capture");
  json->BeginObject();
  json->Field("path", p.path);
  json->Field("format_version",
              std::to_string(p.read.format_major) + "." + std::to_string(p.read.format_minor));
  json->Field("complete", p.end.has_value() && p.read.damage.empty());
  json->Key("end_reason");
  if (p.end) {
    json->String(format::EndReasonName(p.end->reason));
  } else {
    json->Null();
  }
  json->Field("duration_s", p.DurationSeconds());
  // A run's processes merged (memlens run --follow-children's directory); absent for one.
  if (p.merged_processes) json->Field("processes", p.merged_processes);
  // A sampled capture: every byte and block figure is an estimate (docs/sampling.md).
  json->Field("estimates", p.sample_rate != 0);
  json->Key("sample_rate");
  if (p.sample_rate) {
    json->Uint(p.sample_rate);
  } else {
    json->Null();
  }
  // Only in a sampled capture that records large blocks whole (a full capture's JSON is as
  // it was before figures had errors).
  if (p.sample_rate && p.sample_exact_from != format::kNoExactThreshold) {
    json->Field("sample_exact_from", p.sample_exact_from);
  }
  // Recorded with --python-stacks: no native frames, on purpose (docs/python.md); absent
  // otherwise, so other captures' JSON is unchanged.
  if (format::PythonStacksOnly(p.process)) json->Field("python_stacks_only", true);
  json->Field("start_realtime_ns", p.process.start_realtime_ns);
  json->Key("snapshot");  // the moment the in-use (in_use_*) figures describe
  json->BeginObject();
  std::string spec = p.snapshot.text;  // empty without a specifier: "exit"
  if (spec.empty()) spec = p.AtProgramEndByDefault() ? "program-end" : "end";
  json->Field("spec", spec);
  json->Field("label", p.SnapshotLabel());
  // A Python program's own end (docs/python.md), the default "exit" of its capture, or null.
  json->Key("program_end_s");
  if (p.program_end_seq) {
    json->Double(p.SecondsAt(p.program_end_seq));
  } else {
    json->Null();
  }
  json->Field("time_s", p.snapshot_seconds);
  json->Field("from_checkpoint_seq", p.from_checkpoint_seq);
  json->EndObject();
  json->Field("heap", p.HeapDisplayName());  // the heap the figures describe (--heap)
  json->Key("warnings");
  json->BeginArray();
  for (const auto& w : p.warnings) json->String(w);
  for (const auto& w : warnings) json->String(w);
  json->EndArray();
  json->EndObject();
  json->Key("process");
  json->BeginObject();
  json->Field("pid", p.process.pid);
  json->Field("executable", p.process.executable);
  json->Key("argv");
  json->BeginArray();
  for (const auto& a : p.process.argv) json->String(a);
  json->EndArray();
  json->Field("threads", p.thread_count);
  json->Field("unrecorded_children", p.UnrecordedChildren());
  json->Key("earlier_images");  // command lines this image replaced by exec, first first
  json->BeginArray();
  for (const auto& image : p.earlier_images) {
    json->BeginArray();
    for (const auto& a : image) json->String(a);
    json->EndArray();
  }
  json->EndArray();
  json->EndObject();
}

void WriteError(JsonWriter* json, std::string_view key, uint64_t variance, bool blocks,
                ErrorScale errors) {
  if (errors.sampled()) json->Field(std::string(key) + "_error", errors.Of(variance, blocks));
}

void WriteTotalsJson(JsonWriter* json, const Profile& p) {
  const Totals& t = p.totals;
  ErrorScale errors{p.sample_rate};
  json->Key("totals");
  json->BeginObject();
  for (const TotalsField& f : kTotalsFields) {  // the moment of the peak in seconds, not seq
    if (f.member == &Totals::peak_seq) json->Field("peak_time_s", p.SecondsAt(t.peak_seq));
    if (!*f.json_key) continue;
    json->Field(f.json_key, t.*f.member);
    if (f.variance) WriteError(json, f.json_key, t.*f.variance, f.blocks, errors);
  }
  json->Field("stacks", static_cast<uint64_t>(p.stacks.size()));
  // The heap and the mappings apart: each one's own peak, its part of peak_bytes, of the bytes
  // in use at the snapshot and of the allocated bytes (each pair adds up to the total).
  // The mappings are recorded in full even in a sampled capture: exact, no error; the heap's
  // part of a figure has the whole figure's error.
  json->Key("heap");
  json->BeginObject();
  json->Field("peak_bytes", t.heap_peak_bytes);
  WriteError(json, "peak_bytes", t.heap_peak_bytes_var, false, errors);
  json->Field("at_peak_bytes", t.peak_bytes - t.mapping_at_peak_bytes);
  WriteError(json, "at_peak_bytes", t.peak_bytes_var, false, errors);
  json->Field("in_use_bytes", t.in_use_bytes - t.mapping_in_use_bytes);
  WriteError(json, "in_use_bytes", t.in_use_bytes_var, false, errors);
  json->Field("allocated_bytes", t.allocated_bytes - t.mapping_allocated_bytes);
  WriteError(json, "allocated_bytes", t.allocated_bytes_var, false, errors);
  json->EndObject();
  json->Key("mappings");
  json->BeginObject();
  json->Field("peak_bytes", t.mapping_peak_bytes);
  json->Field("at_peak_bytes", t.mapping_at_peak_bytes);
  json->Field("in_use_bytes", t.mapping_in_use_bytes);
  json->Field("allocated_bytes", t.mapping_allocated_bytes);
  json->Field("reserved_bytes", t.reserved_bytes);
  json->EndObject();
  json->EndObject();
}

void WriteRuntimeJson(JsonWriter* json, const Profile& p) {
  const ErrorScale errors{p.sample_rate};
  json->Key("runtime");
  json->BeginObject();
  json->Field("bytes", p.totals.runtime_bytes);
  WriteError(json, "bytes", p.totals.runtime_bytes_var, false, errors);
  json->Field("blocks", p.totals.runtime_blocks);
  WriteError(json, "blocks", p.totals.runtime_blocks_var, true, errors);
  json->Field("stacks", static_cast<uint64_t>(p.runtime_stacks.size()));
  json->Key("rules");
  json->BeginArray();
  for (const RuntimeShare& share : p.runtime) {
    json->BeginObject();
    json->Field("rule", share.rule->name);
    json->Field("what", share.rule->what);
    json->Field("bytes", share.bytes);
    WriteError(json, "bytes", share.bytes_var, false, errors);
    json->Field("blocks", share.blocks);
    WriteError(json, "blocks", share.blocks_var, true, errors);
    json->Field("stacks", share.stacks);
    json->EndObject();
  }
  json->EndArray();
  json->EndObject();
}

void WritePartInfo(JsonWriter* json, ResidentPart part) {
  const ResidentPartInfo& info = PartInfo(part);
  json->Field("part", info.id);
  json->Field("title", info.title);
  json->Field("explanation", info.explanation);
}

void WriteResidentSamples(JsonWriter* json, const char* key,
                          const std::vector<ResidentSample>& samples) {
  json->Key(key);
  json->BeginArray();
  for (const ResidentSample& s : samples) {
    json->BeginObject();
    json->Field("seconds", s.seconds);
    json->Field("read_ms", static_cast<double>(s.read_ns) / 1e6);
    json->Field("resident_bytes", s.resident_bytes);
    json->Field("virtual_bytes", s.virtual_bytes);
    json->Key("parts");
    json->BeginObject();
    for (size_t i = 0; i < kResidentParts; ++i) json->Field(PartInfo(PartAt(i)).id, s.resident[i]);
    json->EndObject();
    json->EndObject();
  }
  json->EndArray();
}

void WriteFrame(JsonWriter* json, const SourceFrame& f) {
  json->BeginObject();
  json->Field("function", f.function);
  json->Field("file", f.file);
  json->Field("line", f.line);
  json->Field("module", f.module);
  json->Field("module_offset", f.module_offset);
  json->Field("inlined", f.inlined);
  json->Field("python", f.python);
  json->EndObject();
}

void WriteStats(JsonWriter* json, const StackStats& s, ErrorScale errors) {
  for (const StackStatField& f : kStackStatFields) {
    if (!*f.json_key) continue;
    json->Field(f.json_key, s.*f.member);
    if (f.variance) WriteError(json, f.json_key, s.*f.variance, f.blocks, errors);
  }
}

void WriteStack(JsonWriter* json, std::string_view key,
                const std::vector<const SourceFrame*>& frames) {
  json->Key(key);
  json->BeginArray();
  for (const SourceFrame* f : frames) WriteFrame(json, *f);
  json->EndArray();
}

}  // namespace memlens::analyzer
