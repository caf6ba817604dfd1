// src/cli/cmd_rss.cc
//
// `memlens rss FILE[@SNAPSHOT]`: why the process is bigger than its heap. Its resident and
// virtual memory at the last mapping sample at or before the snapshot (the writer's reading of
// /proc/PID/smaps, docs/rss.md), split into parts that add up to what the kernel reported: heap
// blocks in use, malloc's overhead and the free memory it keeps, free space in Python's
// allocator, the program's own mappings, stacks, code and data, mapped files, shared memory,
// and what is left unexplained; then malloc's and Python's arenas one by one, and the sites
// holding the heap and the mappings. --json adds every piece of every mapping and the parts at
// each sample up to the moment.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>

#include "analyzer/export/format_units.h"
#include "analyzer/export/text_table.h"
#include "analyzer/model/capture.h"
#include "analyzer/views/rss.h"
#include "cli/analysis_options.h"
#include "cli/commands.h"

namespace memlens::cli {
namespace {

using namespace analyzer;

std::string Hex(uint64_t v) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(v));
  return text;
}

std::string Perms(const format::Mapping& m) {
  std::string p = "----";
  if (m.flags & format::Mapping::kRead) p[0] = 'r';
  if (m.flags & format::Mapping::kWrite) p[1] = 'w';
  if (m.flags & format::Mapping::kExec) p[2] = 'x';
  p[3] = (m.flags & format::Mapping::kShared) ? 's' : 'p';
  return p;
}

std::string Seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f s", s);
  return text;
}

const char* AllocatorOf(Owner o) {
  return IsMalloc(o) ? "glibc" : o == Owner::kPymalloc ? "pymalloc" : "mimalloc";
}
const char* ArenaKindOf(Owner o) {
  switch (o) {
    case Owner::kMallocMain: return "main";
    case Owner::kMallocArena: return "thread";
    case Owner::kMallocMapped: return "mapped";
    default: return "arena";
  }
}

// Which part a piece's bytes belong to, for the pieces' listing: malloc's and Python's pieces
// hold several parts (blocks, overhead, free), named after their allocator instead.
const char* PieceLabel(Owner o) {
  if (std::optional<ResidentPart> part = PartOf(o)) return PartInfo(*part).id;
  return IsMalloc(o) ? "malloc" : "python_allocator";
}

void WriteSites(JsonWriter* json, const char* key, const std::vector<RssSite>& sites) {
  json->Key(key);
  json->BeginArray();
  for (const RssSite& s : sites) {
    json->BeginObject();
    json->Field("bytes", s.bytes);
    json->Field("blocks", s.blocks);
    json->Key("site");
    WriteFrame(json, s.site);
    json->EndObject();
  }
  json->EndArray();
}

void WriteJson(const Profile& p, const StackResolver& resolver, const RssView& v,
               const std::string& moment) {
  JsonWriter json(std::cout);
  json.BeginObject();
  WriteCaptureJson(&json, p, resolver);
  json.Field("moment", moment);
  json.Key("sample");
  json.BeginObject();
  json.Field("seconds", v.parts.seconds);
  json.Field("read_ms", static_cast<double>(v.sample->read_ns) / 1e6);
  json.EndObject();
  json.Field("resident_bytes", v.parts.resident_bytes);
  json.Field("virtual_bytes", v.parts.virtual_bytes);
  json.Key("parts");
  json.BeginArray();
  for (size_t i = 0; i < kResidentParts; ++i) {
    json.BeginObject();
    WritePartInfo(&json, PartAt(i));
    json.Field("resident_bytes", v.parts.resident[i]);
    json.Field("virtual_bytes", v.parts.virtual_[i]);
    json.EndObject();
  }
  json.EndArray();
  json.Key("arenas");
  json.BeginArray();
  for (const RssArena& a : v.arenas) {
    json.BeginObject();
    json.Field("allocator", AllocatorOf(a.owner));
    json.Field("kind", ArenaKindOf(a.owner));
    json.Field("start", Hex(a.start));
    json.Field("end", Hex(a.end));
    json.Field("mappings", a.mappings);
    json.Field("virtual_bytes", a.virtual_bytes);
    json.Field("resident_bytes", a.resident_bytes);
    json.Field("in_use_bytes", a.in_use_bytes);
    json.Field("blocks", a.blocks);
    json.Field("overhead_bytes", a.overhead_bytes);
    json.Field("free_bytes", a.free_bytes);
    json.Field("free_resident_bytes", a.free_resident_bytes);
    json.EndObject();
  }
  json.EndArray();
  json.Key("mappings");
  json.BeginArray();
  for (const MappingPiece& piece : v.pieces) {
    const format::Mapping& m = v.sample->mappings[piece.mapping];
    json.BeginObject();
    json.Field("start", Hex(piece.start));
    json.Field("end", Hex(piece.end));
    json.Field("perms", Perms(m));
    json.Field("name", m.name);
    json.Field("owner", OwnerName(piece.owner));
    json.Field("part", PieceLabel(piece.owner));
    json.Field("resident_bytes", piece.resident);
    json.Field("virtual_bytes", piece.end - piece.start);
    json.EndObject();
  }
  json.EndArray();
  json.Key("top_sites");
  json.BeginObject();
  WriteSites(&json, "heap_in_use", v.heap_sites);
  WriteSites(&json, "program_mappings", v.mapping_sites);
  json.EndObject();
  WriteResidentSamples(&json, "over_time", p.resident_samples);
  json.EndObject();
}

void PrintText(const RssView& v, const std::string& moment) {
  const ResidentSample& s = v.parts;
  std::cout << "Resident memory at " << moment << ": " << FormatBytes(s.resident_bytes) << " of "
            << FormatBytes(s.virtual_bytes) << " mapped (the kernel's figures, /proc/PID/smaps; "
            << "read in " << std::fixed;
  std::cout.precision(2);
  std::cout << static_cast<double>(v.sample->read_ns) / 1e6 << " ms)\n\n";
  std::cout.unsetf(std::ios::fixed);
  TextTable parts;
  parts.AddColumn("PART", TextTable::kLeft);
  parts.AddColumn("RESIDENT", TextTable::kRight);
  parts.AddColumn("SHARE", TextTable::kRight);
  parts.AddColumn("VIRTUAL", TextTable::kRight);
  parts.AddColumn("WHAT IT IS", TextTable::kLeft);
  for (size_t i = 0; i < kResidentParts; ++i) {
    const ResidentPartInfo& info = PartInfo(PartAt(i));
    parts.AddRow({info.title, FormatBytes(s.resident[i]), FormatPercent(s.resident[i], s.resident_bytes),
                  FormatBytes(s.virtual_[i]), info.explanation});
  }
  parts.AddRow({"Total", FormatBytes(s.resident_bytes), FormatPercent(s.resident_bytes, s.resident_bytes),
                FormatBytes(s.virtual_bytes), "what the kernel counts for the process"});
  parts.Print(std::cout);
  if (!v.arenas.empty()) {
    std::cout << "\nArenas (malloc's, Python's): FREE is room not holding a block; FREE RESIDENT "
                 "is the part of it on resident pages (malloc_trim(0) gives malloc's back)\n";
    TextTable arenas;
    for (const char* title : {"ALLOCATOR", "ARENA", "START", "END"}) {
      arenas.AddColumn(title, TextTable::kLeft);
    }
    for (const char* title :
         {"MAPPED", "RESIDENT", "IN USE", "BLOCKS", "OVERHEAD", "FREE", "FREE RESIDENT"}) {
      arenas.AddColumn(title, TextTable::kRight);
    }
    auto add_row = [&](const RssArena& a, std::string kind) {
      arenas.AddRow({AllocatorOf(a.owner), kind, Hex(a.start), Hex(a.end),
                     FormatBytes(a.virtual_bytes), FormatBytes(a.resident_bytes),
                     FormatBytes(a.in_use_bytes), std::to_string(a.blocks),
                     FormatBytes(a.overhead_bytes), FormatBytes(a.free_bytes),
                     FormatBytes(a.free_resident_bytes)});
    };
    // Python's arenas, a MiB each, are many: past kPythonArenaRows, one row for them all (the
    // JSON lists each).
    constexpr size_t kPythonArenaRows = 8;
    const size_t python_arenas = std::count_if(v.arenas.begin(), v.arenas.end(),
                                               [](const RssArena& a) { return IsPythonAllocator(a.owner); });
    RssArena python;
    python.mappings = 0;
    for (const RssArena& a : v.arenas) {
      if (IsPythonAllocator(a.owner) && python_arenas > kPythonArenaRows) {
        python.owner = a.owner;
        AddArenaRow(a, &python);
        continue;
      }
      std::string kind = ArenaKindOf(a.owner);
      if (a.owner == Owner::kMallocMapped) kind += " (" + std::to_string(a.mappings) + ")";
      add_row(a, kind);
    }
    if (python.mappings) add_row(python, "arenas (" + std::to_string(python.mappings) + ")");
    arenas.Print(std::cout);
  }
  for (const auto& [title, sites] :
       {std::pair{"Sites holding the heap blocks in use", &v.heap_sites},
        std::pair{"Sites of the mappings the program made", &v.mapping_sites}}) {
    if (sites->empty()) continue;
    std::cout << "\n" << title << "\n";
    TextTable table;
    table.AddColumn("BYTES", TextTable::kRight);
    table.AddColumn("BLOCKS", TextTable::kRight);
    table.AddColumn("SITE", TextTable::kLeft);
    for (const RssSite& site : *sites) {
      std::string location = SourceLocation(site.site);
      table.AddRow({FormatBytes(site.bytes), std::to_string(site.blocks),
                    FunctionName(site.site) + (location.empty() ? "" : "  " + location)});
    }
    table.Print(std::cout);
  }
}

int Rss(const AnalysisOptions& o) {
  if (RefusedRun(o.capture, "rss (one process's memory)")) return kExitBadInput;
  std::string path;
  SnapshotSpec snapshot;
  if (!ParseOrComplain(o.capture, o.filters, &path, &snapshot)) return kExitBadInput;
  Capture capture(path);
  Profile p;
  std::string asked, error;
  if (!LoadAtMappingSample(&capture, snapshot, &p, &asked, &error)) {
    std::cerr << "memlens: " << error << "\n";
    return kExitBadInput;
  }
  if (!p.mappings_sample && format::WindowsAgent(p.process)) {
    std::cerr << "memlens: '" << path << "' was recorded on Windows, whose agent does not sample "
              << "the process's mappings: memlens rss is for Linux captures (docs/windows.md)\n";
    return kExitBadInput;
  }
  if (!p.mappings_sample) {
    std::cerr << "memlens: '" << path << "' has no mapping samples at or before " << asked
              << " (captures before format 10.0 have none; memlens samples the process's "
              << "mappings when recording starts, then every 100 ms or more)\n";
    return kExitBadInput;
  }
  const double sample_seconds = static_cast<double>(p.mappings_sample->monotonic_ns) / 1e9;
  std::string moment;
  moment = "the sample at " + Seconds(sample_seconds) + " (the last at or before " + asked + ")";
  StackResolver resolver(p);
  RssView view = BuildRss(p, &resolver);
  if (o.json) {
    WriteJson(p, resolver, view, moment);
  } else {
    PrintEstimateNote(p);
    PrintText(view, moment);
  }
  PrintWarnings(p, resolver);
  return 0;
}

}  // namespace

CommandRunner AddRssCommand(CLI::App* cmd) {
  auto o = std::make_shared<AnalysisOptions>();
  AddAnalysisOptions(cmd, o.get());
  return [o] { return Rss(*o); };
}

}  // namespace memlens::cli
