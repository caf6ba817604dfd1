// src/cli/cmd_index.cc
//
// `memlens index CAPTURE`: builds (or rebuilds) the snapshot index of a capture now, so that
// the first snapshot asked of a big capture (FILE@t=..., @peak) does not pay for it. Every
// snapshot builds the index on demand anyway; this command says what it holds.
#include <sys/stat.h>

#include <iostream>
#include <memory>

#include "analyzer/export/format_units.h"
#include "analyzer/model/snapshot_index.h"
#include "cli/analysis_options.h"
#include "cli/commands.h"

namespace memlens::cli {
namespace {

using namespace analyzer;

uint64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

int Index(const AnalysisOptions& o) {
  std::string path = o.capture, error;
  SnapshotSpec spec;
  if (!ParseCaptureArgument(o.capture, &path, &spec, &error)) return Complain(error);
  if (!spec.text.empty()) return Complain("index: give the capture alone, without @" + spec.text);
  SnapshotIndex index;
  if (!BuildSnapshotIndex(path, &index, &error)) return Complain(error);
  uint64_t index_bytes = FileSize(index.path), capture_bytes = FileSize(path);
  uint64_t events = 0;  // sequence numbers are dense: the largest one, plus one
  for (const IndexChunk& c : index.chunks) events = std::max(events, c.max_seq + 1);
  if (o.json) {
    JsonWriter json(std::cout);
    json.BeginObject();
    json.Field("index", index.path);
    json.Field("index_bytes", index_bytes);
    json.Field("capture_bytes", capture_bytes);
    json.Field("checkpoints", static_cast<uint64_t>(index.checkpoints.size()));
    json.Field("chunks", static_cast<uint64_t>(index.chunks.size()));
    json.Field("events", events);
    json.EndObject();
    return 0;
  }
  std::cout << "index of " << path << " written to " << index.path << "\n"
            << "  " << FormatCount(index.checkpoints.size()) << " checkpoints over "
            << FormatCount(events) << " events; "
            << FormatBytes(index_bytes) << " (" << FormatPercent(index_bytes, capture_bytes)
            << " of the capture's " << FormatBytes(capture_bytes) << ")\n";
  return 0;
}

}  // namespace

CommandRunner AddIndexCommand(CLI::App* cmd) {
  auto o = std::make_shared<AnalysisOptions>();
  AddAnalysisOptions(cmd, o.get());
  cmd->footer(
      "The index holds the replay's state every so many events, in CAPTURE.index (or in\n"
      "~/.cache/memlens when the capture's folder is read-only), so that FILE@t=SECONDS and\n"
      "FILE@peak replay only from the nearest checkpoint. It is rebuilt when the capture changes.");
  return [o] { return Index(*o); };
}

}  // namespace memlens::cli
