// src/analyzer/export/speedscope.cc: see speedscope.h.
#include "analyzer/export/speedscope.h"

#include <map>
#include <sstream>
#include <tuple>

#include "analyzer/export/format_units.h"
#include "analyzer/export/json_writer.h"

namespace memlens::analyzer {

bool WriteSpeedscope(const Profile& profile, StackResolver* resolver, const ExportOptions& options,
                     std::string* out, std::string*) {
  std::vector<WeightedStack> stacks = WeightedStacks(profile, resolver, options.metric);
  // Frames by what tells them apart on screen: name, file, line.
  std::map<std::tuple<std::string, std::string, uint32_t>, uint64_t> index;
  std::vector<const SourceFrame*> frames;
  std::vector<std::vector<uint64_t>> samples;
  uint64_t total = 0;
  for (const WeightedStack& stack : stacks) {
    samples.emplace_back();
    for (const SourceFrame* f : stack.frames) {
      auto [it, added] = index.emplace(std::make_tuple(FunctionName(*f), f->file, f->line), frames.size());
      if (added) frames.push_back(f);
      samples.back().push_back(it->second);
    }
    total += stack.bytes;
  }
  std::ostringstream text;
  {
    JsonWriter json(text, JsonWriter::Style::kCompactScriptSafe);
    json.BeginObject();
    json.Field("$schema", "https://www.speedscope.app/file-format-schema.json");
    json.Field("exporter", options.exporter);
    std::string name = profile.path + ": " + MetricName(options.metric) + " bytes";
    if (options.metric == Metric::kInUse) name += " at " + profile.SnapshotLabel();
    json.Field("name", name);
    json.Field("activeProfileIndex", 0);
    json.Key("shared");
    json.BeginObject();
    json.Key("frames");
    json.BeginArray();
    for (const SourceFrame* f : frames) {
      json.BeginObject();
      json.Field("name", FunctionName(*f));
      if (!f->file.empty()) json.Field("file", f->file);
      if (f->line) json.Field("line", f->line);
      json.EndObject();
    }
    json.EndArray();
    json.EndObject();
    json.Key("profiles");
    json.BeginArray();
    json.BeginObject();
    json.Field("type", "sampled");
    json.Field("name", name);
    json.Field("unit", "bytes");
    json.Field("startValue", 0);
    json.Field("endValue", total);
    json.Key("samples");
    json.BeginArray();
    for (const auto& sample : samples) {
      json.BeginArray();
      for (uint64_t i : sample) json.Uint(i);
      json.EndArray();
    }
    json.EndArray();
    json.Key("weights");
    json.BeginArray();
    for (const WeightedStack& stack : stacks) json.Uint(stack.bytes);
    json.EndArray();
    json.EndObject();
    json.EndArray();
    json.EndObject();
  }
  *out = text.str();
  return true;
}

}  // namespace memlens::analyzer
