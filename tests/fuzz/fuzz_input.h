// tests/fuzz/fuzz_input.h: what the fuzz targets share: splitting an input into parts, and
// files in a folder of the process's own for the readers that take a path.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace memlens::fuzz {

// Between two chunk payloads of a records input (make_seeds writes it).
inline constexpr std::string_view kChunkSeparator = "\xF0MLNEXT\xF0";

inline std::vector<std::string_view> SplitChunks(std::string_view data) {
  std::vector<std::string_view> parts;
  for (size_t at; (at = data.find(kChunkSeparator)) != std::string_view::npos;) {
    parts.push_back(data.substr(0, at));
    data.remove_prefix(at + kChunkSeparator.size());
  }
  parts.push_back(data);
  return parts;
}

// A path in a private folder made once per process (TMPDIR, else /tmp).
std::string ScratchPath(const char* name);
// Writes the bytes to the path; false on failure.
bool WriteFile(const std::string& path, std::string_view bytes);

}  // namespace memlens::fuzz
