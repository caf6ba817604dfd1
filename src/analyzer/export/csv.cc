// src/analyzer/export/csv.cc: see csv.h.
#include "analyzer/export/csv.h"

#include <algorithm>
#include <cstdio>

#include "analyzer/export/folded.h"
#include "analyzer/export/format_units.h"

namespace memlens::analyzer {

std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

bool WriteCsv(const Profile& profile, StackResolver* resolver, const ExportOptions& options,
              std::string* out, std::string* error) {
  if (options.by == GroupBy::kHeap || options.by == GroupBy::kType) {
    *error = "csv: rows are grouped by function, line, module or stack";
    return false;
  }
  std::vector<SiteRow> rows = GroupSites(profile, resolver, options.by);
  std::stable_sort(rows.begin(), rows.end(), [&](const SiteRow& a, const SiteRow& b) {
    return MetricBytes(a.stats, options.metric) > MetricBytes(b.stats, options.metric);
  });
  if (options.limit && rows.size() > options.limit) rows.resize(options.limit);
  bool stacks = options.by == GroupBy::kStack;
  *out =
      "function,file,line,module,in_use_bytes,in_use_blocks,allocated_bytes,allocations,"
      "peak_bytes,peak_blocks";
  // A sampled capture: each figure's standard error, in the same order (docs/exports.md).
  const ErrorScale errors{profile.sample_rate};
  if (errors.sampled()) {
    *out += ",in_use_bytes_error,in_use_blocks_error,allocated_bytes_error,allocations_error,"
            "peak_bytes_error,peak_blocks_error";
  }
  *out += stacks ? ",stack\r\n" : "\r\n";
  for (const SiteRow& r : rows) {
    const StackStats& s = r.stats;
    // An unknown function reads module+0xOFFSET, as in the views; a module row has none.
    std::string function = options.by == GroupBy::kModule ? "" : FunctionName(r.site);
    *out += CsvField(function) + "," + CsvField(r.site.file) + "," +
            (r.site.line ? std::to_string(r.site.line) : "") + "," + CsvField(r.site.module);
    for (uint64_t v : {s.in_use_bytes, s.in_use_blocks, s.allocated_bytes, s.allocations,
                       s.peak_bytes, s.peak_blocks}) {
      *out += "," + std::to_string(v);
    }
    if (errors.sampled()) {
      for (double e : {errors.Bytes(s.in_use_bytes_var), errors.Blocks(s.in_use_blocks_var),
                       errors.Bytes(s.allocated_bytes_var), errors.Blocks(s.allocations_var),
                       errors.Bytes(s.peak_bytes_var), errors.Blocks(s.peak_blocks_var)}) {
        char buf[32];
        std::snprintf(buf, sizeof buf, ",%.1f", e);
        *out += buf;
      }
    }
    if (stacks) {
      std::string frames;
      for (auto f = r.stack.rbegin(); f != r.stack.rend(); ++f) {
        frames += (frames.empty() ? "" : ";") + FoldedFrame(**f);
      }
      *out += "," + CsvField(frames);
    }
    *out += "\r\n";
  }
  return true;
}

}  // namespace memlens::analyzer
