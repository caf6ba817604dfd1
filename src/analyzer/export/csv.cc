// src/analyzer/export/csv.cc: see csv.h.
#include "analyzer/export/csv.h"

#include <algorithm>

#include "analyzer/export/folded.h"

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
  *out = "function,file,line,module,in_use_bytes,in_use_blocks,allocated_bytes,allocations,"
         "peak_bytes,peak_blocks";
  *out += stacks ? ",stack\r\n" : "\r\n";
  for (const SiteRow& r : rows) {
    const StackStats& s = r.stats;
    *out += CsvField(r.site.function) + "," + CsvField(r.site.file) + "," +
            (r.site.line ? std::to_string(r.site.line) : "") + "," + CsvField(r.site.module);
    for (uint64_t v : {s.in_use_bytes, s.in_use_blocks, s.allocated_bytes, s.allocations,
                       s.peak_bytes, s.peak_blocks}) {
      *out += "," + std::to_string(v);
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
