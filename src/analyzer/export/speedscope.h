// src/analyzer/export/speedscope.h
//
// speedscope's own file format (https://www.speedscope.app/file-format-schema.json): one
// "sampled" profile in bytes whose samples are the stacks (frame indices, root first) and whose
// weights are their bytes of the chosen metric; frames carry name, file and line.
//
// Runs on: the analyzer's main thread.
#pragma once

#include <string>

#include "analyzer/export/export_formats.h"

namespace memlens::analyzer {

bool WriteSpeedscope(const Profile& profile, StackResolver* resolver, const ExportOptions& options,
                     std::string* out, std::string* error);

}  // namespace memlens::analyzer
