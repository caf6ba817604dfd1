// src/analyzer/export/folded.cc: see folded.h.
#include "analyzer/export/folded.h"

#include <map>

#include "analyzer/export/format_units.h"

namespace memlens::analyzer {

std::string FoldedFrame(const SourceFrame& frame) {
  std::string text = FunctionName(frame);
  if (frame.line) {
    text += " (" + frame.file.substr(frame.file.rfind('/') + 1) + ":" +
            std::to_string(frame.line) + ")";
  }
  for (char& c : text) {
    if (c == ';') c = ':';
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

bool WriteFolded(const Profile& profile, StackResolver* resolver, const ExportOptions& options,
                 std::string* out, std::string*) {
  // Stacks that read the same once folded (frames the resolver hides) are one line.
  std::map<std::string, uint64_t> lines;
  for (const WeightedStack& stack : WeightedStacks(profile, resolver, options.metric)) {
    std::string text;
    for (const SourceFrame* frame : stack.frames) {
      if (!text.empty()) text += ';';
      text += FoldedFrame(*frame);
    }
    lines[text.empty() ? "[unknown]" : text] += stack.bytes;
  }
  out->clear();
  for (const auto& [text, bytes] : lines) *out += text + " " + std::to_string(bytes) + "\n";
  return true;
}

}  // namespace memlens::analyzer
