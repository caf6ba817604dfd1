// src/analyzer/export/folded.h
//
// Folded stacks, as flamegraph.pl and inferno read them: one line per distinct stack,
// "root;caller;...;site BYTES", root first, sorted, a frame being "function (file:line)" or the
// function alone when its line is unknown. A ';' inside a frame becomes ':' and a line break a
// space: neither tool has an escape for them.
//
// Runs on: the analyzer's main thread.
#pragma once

#include <string>

#include "analyzer/export/export_formats.h"

namespace memlens::analyzer {

bool WriteFolded(const Profile& profile, StackResolver* resolver, const ExportOptions& options,
                 std::string* out, std::string* error);
// One frame as the folded format writes it.
std::string FoldedFrame(const SourceFrame& frame);

}  // namespace memlens::analyzer
