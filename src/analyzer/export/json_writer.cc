// src/analyzer/export/json_writer.cc: see json_writer.h.
#include "analyzer/export/json_writer.h"

#include <cmath>
#include <cstdio>

namespace memlens::analyzer {

void JsonWriter::Newline() {
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
  out_ << ": ";
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

void WriteStats(JsonWriter* json, const StackStats& s) {
  json->Field("allocations", s.allocations);
  json->Field("allocated_bytes", s.allocated_bytes);
  json->Field("peak_bytes", s.peak_bytes);
  json->Field("peak_blocks", s.peak_blocks);
  json->Field("leaked_bytes", s.leaked_bytes);
  json->Field("leaked_blocks", s.leaked_blocks);
  json->Field("python_allocated_bytes", s.python_allocated_bytes);
  json->Field("python_peak_bytes", s.python_peak_bytes);
  json->Field("python_leaked_bytes", s.python_leaked_bytes);
}

void WriteStack(JsonWriter* json, std::string_view key,
                const std::vector<const SourceFrame*>& frames) {
  json->Key(key);
  json->BeginArray();
  for (const SourceFrame* f : frames) WriteFrame(json, *f);
  json->EndArray();
}

}  // namespace memlens::analyzer
