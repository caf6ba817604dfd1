// src/analyzer/export/pprof.cc: see pprof.h. Field numbers are profile.proto's
// (github.com/google/pprof/blob/main/proto/profile.proto), named below.
#include "analyzer/export/pprof.h"

#include <zlib.h>

#include <algorithm>
#include <map>
#include <protozero/pbf_writer.hpp>
#include <unordered_map>

#include "analyzer/export/format_units.h"

namespace memlens::analyzer {
namespace {

// profile.proto's messages and fields.
namespace pb {
enum Profile : protozero::pbf_tag_type {
  kSampleType = 1,
  kSample = 2,
  kMapping = 3,
  kLocation = 4,
  kFunction = 5,
  kStringTable = 6,
  kTimeNanos = 9,
  kDurationNanos = 10,
  kPeriodType = 11,
  kPeriod = 12,
  kComment = 13,
  kDefaultSampleType = 14,
};
enum ValueType : protozero::pbf_tag_type { kType = 1, kUnit = 2 };
enum Sample : protozero::pbf_tag_type { kLocationId = 1, kValue = 2 };
enum Mapping : protozero::pbf_tag_type {
  kMappingId = 1,
  kMemoryStart = 2,
  kMemoryLimit = 3,
  kFileOffset = 4,
  kFilename = 5,
  kBuildId = 6,
  kHasFunctions = 7,
  kHasFilenames = 8,
  kHasLineNumbers = 9,
  kHasInlineFrames = 10,
};
enum Location : protozero::pbf_tag_type {
  kLocationIdField = 1,
  kMappingIdField = 2,
  kAddress = 3,
  kLine = 4,
};
enum Line : protozero::pbf_tag_type { kFunctionId = 1, kLineNumber = 2 };
enum Function : protozero::pbf_tag_type {
  kFunctionIdField = 1,
  kName = 2,
  kSystemName = 3,
  kFunctionFilename = 4,
};
}  // namespace pb

// Go's heap profile's sample types, in the order of the values of each sample.
constexpr const char* kSampleTypes[][2] = {{"alloc_objects", "count"},
                                           {"alloc_space", "bytes"},
                                           {"inuse_objects", "count"},
                                           {"inuse_space", "bytes"}};

std::string Hex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

// Gathers the tables (strings, mappings, locations, functions) while the samples are written:
// a location is one return address (its inlined frames are its lines, innermost first, as
// profile.proto orders them) or one Python frame; a mapping is one module, by path.
class Tables {
 public:
  explicit Tables(const Profile& profile) {
    for (const auto& [id, module] : profile.modules) {
      auto [it, added] = modules_.emplace(module.path, &module);
      if (!added && module.id < it->second->id) it->second = &module;  // the first loaded
    }
    // pprof takes the first mapping for the program's main binary.
    if (modules_.count(profile.process.executable)) MappingOf(profile.process.executable);
  }

  int64_t String(const std::string& text) {
    auto [it, added] = string_ids_.emplace(text, strings_.size());
    if (added) strings_.push_back(text);
    return static_cast<int64_t>(it->second);
  }

  // Frames innermost first; returns the location ids, leaf first, as Sample.location_id is.
  std::vector<uint64_t> Locations(const Stack& frames) {
    std::vector<uint64_t> ids;
    std::vector<const SourceFrame*> group;
    for (size_t i = 0; i < frames.size(); ++i) {
      const SourceFrame* frame = frames[i];
      group.push_back(frame);
      // An inlined frame's caller, at the same address, comes next, unless the resolver
      // folded it away (the interpreter's frames in a Python stack).
      const SourceFrame* next = i + 1 < frames.size() ? frames[i + 1] : nullptr;
      if (frame->inlined && next && !next->python && next->module == frame->module &&
          next->module_offset == frame->module_offset) {
        continue;
      }
      ids.push_back(LocationOf(group));
      group.clear();
    }
    return ids;
  }

  void Write(protozero::pbf_writer* out) {
    for (const auto& [path, id] : mapping_order_) {
      const format::ModuleRecord& module = *modules_.at(path);
      uint64_t start = UINT64_MAX, limit = 0;
      for (const format::Segment& s : module.segments) {
        start = std::min(start, s.start);
        limit = std::max(limit, s.start + s.size);
      }
      if (module.segments.empty()) start = limit = module.load_bias;
      protozero::pbf_writer m(*out, pb::kMapping);
      m.add_uint64(pb::kMappingId, id);
      m.add_uint64(pb::kMemoryStart, start);
      m.add_uint64(pb::kMemoryLimit, limit);
      m.add_int64(pb::kFilename, String(path));
      if (!module.build_id.empty()) m.add_int64(pb::kBuildId, String(Hex(module.build_id)));
      // Resolved here already: pprof must not look the addresses up again.
      for (auto field :
           {pb::kHasFunctions, pb::kHasFilenames, pb::kHasLineNumbers, pb::kHasInlineFrames}) {
        m.add_bool(field, true);
      }
    }
    for (const LocationData& l : locations_) {
      protozero::pbf_writer m(*out, pb::kLocation);
      m.add_uint64(pb::kLocationIdField, l.id);
      if (l.mapping) m.add_uint64(pb::kMappingIdField, l.mapping);
      if (l.address) m.add_uint64(pb::kAddress, l.address);
      for (const auto& [function, line] : l.lines) {
        protozero::pbf_writer lm(m, pb::kLine);
        lm.add_uint64(pb::kFunctionId, function);
        if (line) lm.add_int64(pb::kLineNumber, line);
      }
    }
    for (const FunctionData& f : functions_) {
      protozero::pbf_writer m(*out, pb::kFunction);
      m.add_uint64(pb::kFunctionIdField, f.id);
      m.add_int64(pb::kName, f.name);
      if (f.system_name) m.add_int64(pb::kSystemName, f.system_name);
      if (f.file) m.add_int64(pb::kFunctionFilename, f.file);
    }
    for (const std::string& s : strings_) out->add_string(pb::kStringTable, s);
  }

 private:
  struct LocationData {
    uint64_t id, mapping, address;
    std::vector<std::pair<uint64_t, int64_t>> lines;  // function id, line
  };
  struct FunctionData {
    uint64_t id;
    int64_t name, system_name, file;  // string ids
  };

  uint64_t MappingOf(const std::string& path) {
    if (!modules_.count(path)) return 0;  // Python frames, annotations, unknown modules
    auto [it, added] = mapping_ids_.emplace(path, mapping_order_.size() + 1);
    if (added) mapping_order_.emplace_back(path, it->second);
    return it->second;
  }

  uint64_t FunctionOf(const SourceFrame& frame) {
    std::string name = FunctionName(frame);
    auto [it, added] =
        function_ids_.emplace(std::make_pair(name, frame.file), functions_.size() + 1);
    if (added) {
      // A system name is what pprof would demangle and simplify, cutting "<...>": Python's
      // "<module>" would be left empty. Native names are demangled already, as it expects.
      functions_.push_back({it->second, String(name), frame.python ? 0 : String(name),
                            frame.file.empty() ? 0 : String(frame.file)});
    }
    return it->second;
  }

  // The frames of one address, innermost first (the last one the real function).
  uint64_t LocationOf(const std::vector<const SourceFrame*>& group) {
    auto [it, added] = location_ids_.emplace(group, locations_.size() + 1);
    if (!added) return it->second;
    const SourceFrame& outer = *group.back();
    LocationData l{it->second, 0, 0, {}};
    if (!outer.python && !outer.annotation) {
      l.mapping = MappingOf(outer.module);
      if (l.mapping) l.address = modules_.at(outer.module)->load_bias + outer.module_offset;
    }
    for (const SourceFrame* frame : group) l.lines.emplace_back(FunctionOf(*frame), frame->line);
    locations_.push_back(std::move(l));
    return it->second;
  }

  std::vector<std::string> strings_{""};  // string_table[0] is always ""
  std::unordered_map<std::string, size_t> string_ids_{{"", 0}};
  std::unordered_map<std::string, const format::ModuleRecord*> modules_;  // by path
  std::unordered_map<std::string, uint64_t> mapping_ids_;
  std::vector<std::pair<std::string, uint64_t>> mapping_order_;
  std::map<std::vector<const SourceFrame*>, uint64_t> location_ids_;
  std::vector<LocationData> locations_;
  std::map<std::pair<std::string, std::string>, uint64_t> function_ids_;  // by name, file
  std::vector<FunctionData> functions_;
};

bool Gzip(const std::string& data, std::string* out, std::string* error) {
  z_stream z{};
  // 15 + 16: a 32 KiB window with a gzip header, which pprof expects.
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    *error = "pprof: zlib could not start compressing";
    return false;
  }
  out->resize(deflateBound(&z, data.size()));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out->data());
  z.avail_out = static_cast<uInt>(out->size());
  int status = deflate(&z, Z_FINISH);
  out->resize(z.total_out);
  deflateEnd(&z);
  if (status != Z_STREAM_END) {
    *error = "pprof: zlib could not compress the profile";
    return false;
  }
  return true;
}

}  // namespace

PprofOptions PprofTimesOf(const Profile& profile) {
  PprofOptions options;
  options.duration_nanos = static_cast<int64_t>(profile.snapshot_seconds * 1e9);
  if (profile.has_process && profile.process.start_realtime_ns) {
    options.time_nanos =
        static_cast<int64_t>(profile.process.start_realtime_ns) + options.duration_nanos;
  }
  return options;
}

bool WritePprof(const Profile& profile, StackResolver* resolver, const PprofOptions& options,
                std::string* gzipped, std::string* error) {
  auto known = std::find_if(std::begin(kSampleTypes), std::end(kSampleTypes),
                            [&](const auto& t) { return options.default_sample_type == t[0]; });
  if (known == std::end(kSampleTypes)) {
    *error = "pprof: no sample type '" + options.default_sample_type +
             "' (alloc_objects, alloc_space, inuse_objects, inuse_space)";
    return false;
  }
  std::string data;
  protozero::pbf_writer out(data);
  Tables tables(profile);
  for (const auto& [type, unit] : kSampleTypes) {
    protozero::pbf_writer m(out, pb::kSampleType);
    m.add_int64(pb::kType, tables.String(type));
    m.add_int64(pb::kUnit, tables.String(unit));
  }
  std::vector<uint64_t> ids;
  ids.reserve(profile.stacks.size());
  for (const auto& [id, stats] : profile.stacks) {
    if (stats.allocations || stats.in_use_blocks) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());  // the same bytes for the same capture
  for (uint64_t id : ids) {
    const StackStats& s = profile.stacks.at(id);
    std::vector<uint64_t> locations = tables.Locations(resolver->Frames(id));
    int64_t values[] = {
        static_cast<int64_t>(s.allocations), static_cast<int64_t>(s.allocated_bytes),
        static_cast<int64_t>(s.in_use_blocks), static_cast<int64_t>(s.in_use_bytes)};
    protozero::pbf_writer m(out, pb::kSample);
    m.add_packed_uint64(pb::kLocationId, locations.begin(), locations.end());
    m.add_packed_int64(pb::kValue, std::begin(values), std::end(values));
  }
  if (profile.sample_rate) {  // each sampled byte stood for sample_rate bytes on average
    protozero::pbf_writer m(out, pb::kPeriodType);
    m.add_int64(pb::kType, tables.String("space"));
    m.add_int64(pb::kUnit, tables.String("bytes"));
  }
  int64_t comment = tables.String("memlens: in use at " + profile.SnapshotLabel() +
                                  (profile.heap.empty() ? "" : ", heap " + profile.heap) +
                                  (profile.sample_rate ? ", estimated from samples" : ""));
  int64_t default_type = tables.String(options.default_sample_type);
  tables.Write(&out);
  if (options.time_nanos) out.add_int64(pb::kTimeNanos, options.time_nanos);
  if (options.duration_nanos) out.add_int64(pb::kDurationNanos, options.duration_nanos);
  if (profile.sample_rate) out.add_int64(pb::kPeriod, static_cast<int64_t>(profile.sample_rate));
  out.add_packed_int64(pb::kComment, &comment, &comment + 1);
  out.add_int64(pb::kDefaultSampleType, default_type);
  return Gzip(data, gzipped, error);
}

}  // namespace memlens::analyzer
