// tests/fuzz/fuzz_capture.cc: libFuzzer target for a whole capture file read the way every view
// reads one: analyzer::LoadProfile, through ReadCapture (framing, decompression, the event
// orderer's reordering window) and the replay. Built with MEMLENS_FUZZ, whose chunk reader lets
// a wrong checksum through (chunk.cc), so mutations reach the records; the seeds store their
// chunks uncompressed for the same reason (make_seeds), a few compressed ones cover zstd.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "analyzer/model/replay.h"
#include "analyzer/model/sites.h"
#include "analyzer/views/rss.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("MEMLENS_INDEX", "0", 1);  // the index has a target of its own (fuzz_index)
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace memlens::analyzer;
  static const std::string path = memlens::fuzz::ScratchPath("capture.mlens");
  if (!memlens::fuzz::WriteFile(path, {reinterpret_cast<const char*>(data), size})) std::abort();
  std::string error;
  Profile whole;
  if (!LoadProfile(path, &whole, &error)) {
    if (error.empty()) std::abort();  // a refusal always says why
    return 0;
  }
  // The other ways a view replays: to the peak (two passes), at a time, per thread, with the
  // address map and the per-moment figures.
  SnapshotSpec peak;
  peak.kind = SnapshotSpec::kPeak;
  Profile at_peak;
  LoadProfile(path, peak, &at_peak, &error);
  ReplayOptions options;
  options.address_map = true;
  options.stack_size_histograms = true;
  options.thread = 1;
  double half = whole.DurationSeconds() / 2;
  options.checkpoint_seconds = {half};
  SnapshotSpec at_time;
  at_time.kind = SnapshotSpec::kTime;
  at_time.seconds = half;
  Profile detailed;
  LoadProfile(path, at_time, options, &detailed, &error);
  // memlens rss and the report: the mapping samples split by owner over the replay, one split
  // block by block (no sites: they would symbolize what the capture names), the map's frames.
  ReplayOptions resident;
  resident.resident_parts = true;
  resident.blocks = true;
  resident.map_frame_seconds = {half};
  Profile parts;
  if (LoadProfile(path, SnapshotSpec{}, resident, &parts, &error)) {
    StackResolver resolver(parts);
    BuildRss(parts, &resolver, 0);
  }
  return 0;
}
