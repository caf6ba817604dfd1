// tests/fuzz/fuzz_index.cc: libFuzzer target for the snapshot index reader (CAPTURE.index,
// analyzer/model/snapshot_index.h) and the replay that resumes from its saved states. An input
// is a capture and its index: a 4-byte little-endian length, the capture's bytes, the index's.
//
// An index is used only when its header names the capture's size and modification time, which
// a mutation cannot know: the target writes them into the header (bytes 16-31,
// docs/snapshot-index.md) so that every input reaches the table and the states behind it.
#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "analyzer/model/replay.h"
#include "analyzer/model/snapshot_index.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  unsetenv("XDG_CACHE_HOME");  // only CAPTURE.index, never a cached index elsewhere
  unsetenv("HOME");
  unsetenv("MEMLENS_INDEX");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace memlens::analyzer;
  namespace fuzz = memlens::fuzz;
  static const std::string path = fuzz::ScratchPath("capture.mlens");
  uint32_t capture_size = 0;
  if (size < 4) return 0;
  std::memcpy(&capture_size, data, 4);
  std::string_view rest(reinterpret_cast<const char*>(data) + 4, size - 4);
  if (capture_size > rest.size()) return 0;
  std::string index(rest.substr(capture_size));
  if (!fuzz::WriteFile(path, rest.substr(0, capture_size))) std::abort();
  struct stat st;
  if (stat(path.c_str(), &st) != 0) std::abort();
  if (index.size() >= 32) {
    uint64_t mtime_ns = uint64_t(st.st_mtim.tv_sec) * 1000000000ull + st.st_mtim.tv_nsec;
    for (int i = 0; i < 8; ++i) {
      index[16 + i] = static_cast<char>(uint64_t(st.st_size) >> (8 * i));
      index[24 + i] = static_cast<char>(mtime_ns >> (8 * i));
    }
  }
  if (!fuzz::WriteFile(path + ".index", index)) std::abort();

  SnapshotIndex loaded;
  if (!LoadSnapshotIndex(path, &loaded)) return 0;
  std::string state;
  for (const IndexCheckpoint& c : loaded.checkpoints) ReadCheckpointState(loaded, c, &state);
  std::vector<std::string> metadata;
  ReadIndexMetadata(loaded, &metadata);
  // Every way a view resumes from the index: the whole capture from its end state, the peak,
  // a time between two checkpoints, a marker.
  std::string error;
  std::vector<SnapshotSpec> specs(3);
  specs[1].kind = SnapshotSpec::kPeak;
  specs[2].kind = SnapshotSpec::kTime;
  if (!loaded.timeline.empty()) specs[2].seconds = loaded.timeline.back().seconds / 2;
  if (!loaded.markers.empty()) {
    specs.emplace_back();
    specs.back().kind = SnapshotSpec::kMarker;
    specs.back().name = loaded.markers.back().name;
  }
  for (const SnapshotSpec& spec : specs) {
    Profile profile;
    if (!LoadProfile(path, spec, &profile, &error) && error.empty()) std::abort();
  }
  return 0;
}
