// src/analyzer/export/csv.h
//
// The top rows as CSV (RFC 4180: a header line, CRLF line ends, a field holding a comma, a
// quote or a line break quoted, its quotes doubled): rows grouped as `memlens top --by` groups
// them, sorted by the metric's bytes, largest first; every byte and block figure in its own
// column, in plain numbers. Grouped by stack, a "stack" column holds the frames root first,
// as the folded format writes them.
//
// Runs on: the analyzer's main thread.
#pragma once

#include <string>

#include "analyzer/export/export_formats.h"

namespace memlens::analyzer {

bool WriteCsv(const Profile& profile, StackResolver* resolver, const ExportOptions& options,
              std::string* out, std::string* error);
// A field as RFC 4180 writes it: quoted when it holds ',', '"', CR or LF.
std::string CsvField(const std::string& text);

}  // namespace memlens::analyzer
