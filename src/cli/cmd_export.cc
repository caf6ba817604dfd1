// src/cli/cmd_export.cc
//
// `memlens export FORMAT CAPTURE[@moment] [-o FILE] [--metric in-use|allocated|peak]`: the
// capture in a format other tools read (analyzer/export/export_formats.h lists them;
// docs/exports.md), with the filters and --heap the views take.
#include <fstream>
#include <iostream>
#include <memory>

#include "analyzer/export/export_formats.h"
#include "analyzer/export/format_units.h"
#include "cli/analysis_options.h"
#include "cli/commands.h"

namespace memlens::cli {
namespace {

using namespace analyzer;

struct ExportCommandOptions {
  std::string format;
  std::string capture;
  std::string output;
  std::string metric = "in-use";
  std::string by = "line";
  size_t limit = 0;
  FilterOptions filters;
};

std::string FormatNames() {
  std::string names;
  for (const ExportFormat& f : ExportFormats())
    names += (names.empty() ? "" : ", ") + std::string(f.name);
  return names;
}

// The capture's base name, less .mlens, with the format's extension, here.
std::string DefaultOutput(const std::string& argument, const ExportFormat& format) {
  std::string path, error;
  SnapshotSpec moment;
  ParseCaptureArgument(argument, &path, &moment, &error);  // read once already: it parses
  std::string base = path.substr(path.find_last_of('/') + 1);
  if (base.size() > 6 && base.compare(base.size() - 6, 6, ".mlens") == 0)
    base.resize(base.size() - 6);
  return (base.empty() ? std::string("memlens") : base) + format.extension;
}

int Export(const ExportCommandOptions& o) {
  const ExportFormat* format = FindExportFormat(o.format);
  if (!format)
    return Complain("export: unknown format '" + o.format + "' (formats: " + FormatNames() + ")");
  ExportOptions options;
  if (!ParseMetric(o.metric, &options.metric)) {
    return Complain("export: --metric must be in-use, allocated or peak");
  }
  if (!ParseGroupBy(o.by, &options.by) || options.by == GroupBy::kHeap ||
      options.by == GroupBy::kType) {
    return Complain("export: --by must be function, line, module or stack");
  }
  options.limit = o.limit;
  options.thread = o.filters.thread;
  options.exporter = std::string("memlens ") + MEMLENS_VERSION;
  Profile p;
  if (!LoadOrComplain(o.capture, o.filters, ReplayOptions{}, &p)) return kExitBadInput;
  StackResolver resolver(p, StackOptionsOf(o.filters));
  ApplyFilters(o.filters, &resolver, &p);
  std::string data, error;
  if (!format->write(p, &resolver, options, &data, &error)) return Complain("export: " + error);
  std::string output = o.output.empty() ? DefaultOutput(o.capture, *format) : o.output;
  if (output == "-") {
    std::cout << data << std::flush;
  } else {
    std::ofstream out(output, std::ios::binary | std::ios::trunc);
    out << data;
    out.close();
    if (!out) return Complain("export: cannot write '" + output + "'");
  }
  PrintWarnings(p, resolver);
  if (output != "-") {
    std::cerr << "memlens: wrote " << output << " (" << format->name << ", "
              << FormatBytes(data.size()) << ")\n";
  }
  uint64_t total = 0;
  for (const auto& [id, stats] : p.stacks) total += MetricBytes(stats, options.metric);
  if (format->by_metric && total == 0) {  // an empty flame graph, said before it is opened
    std::cerr << "memlens: note: no stack has " << MetricName(options.metric) << " bytes ("
              << p.SnapshotLabel() << "); --metric allocated weighs each by what it allocated"
              << (options.metric == Metric::kInUse ? ", CAPTURE@peak shows the peak" : "")
              << "\n";
  }
  return 0;
}

}  // namespace

CommandRunner AddExportCommand(CLI::App* cmd) {
  auto o = std::make_shared<ExportCommandOptions>();
  std::string formats = "Formats (docs/exports.md):\n";
  for (const ExportFormat& f : ExportFormats()) {
    formats += "  " + std::string(f.name) + std::string(14 - std::string(f.name).size(), ' ') +
               f.description + " (" + f.extension + ")\n";
  }
  cmd->footer(
      formats +
      "Example: memlens export pprof CAPTURE -o heap.pb.gz && go tool pprof -http=: heap.pb.gz");
  cmd->add_option("format", o->format, "one of: " + FormatNames())->required();
  cmd->add_option("capture", o->capture,
                  "capture file written by `memlens run`, optionally with the moment the\n"
                  "in-use figures describe: FILE@end, FILE@peak, FILE@t=2.5s,\n"
                  "FILE@marker:NAME[#K], FILE@snapshot:NAME[#K] (default: exit)")
      ->required();
  cmd->add_option("-o,--output", o->output,
                  "the file to write, - for stdout (default: the capture's name with the\n"
                  "format's extension, here)");
  cmd->add_option("--metric", o->metric,
                  "the figure the stacks weigh (pprof, speedscope, folded) and the CSV\n"
                  "rows are sorted by: in-use (bytes live at the capture's moment),\n"
                  "allocated (bytes allocated up to it) or peak (bytes live at the peak);\n"
                  "pprof holds in-use and allocated both: this picks its default")
      ->capture_default_str();
  cmd->add_option("--by", o->by, "csv: group rows by function, line, module or stack")
      ->capture_default_str();
  cmd->add_option("--limit", o->limit, "csv: rows to write, 0 for all")->capture_default_str();
  AddFilterOptions(cmd, &o->filters);
  return [o] { return Export(*o); };
}

}  // namespace memlens::cli
