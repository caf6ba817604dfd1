// src/cli/cmd_tree.cc
//
// `memlens tree FILE [--bottom-up] [--metric peak|allocated|count|leaked] [--min-percent P]`:
// the call tree with self and inclusive values.
#include <iostream>
#include <memory>

#include "analyzer/export/format_units.h"
#include "analyzer/views/call_tree.h"
#include "cli/analysis_options.h"
#include "cli/commands.h"

namespace memlens::cli {
namespace {

using namespace analyzer;

struct TreeOptions {
  AnalysisOptions common;
  bool bottom_up = false;
  std::string metric = "peak";
  double min_percent = 1.0;
};

// A sampled capture's values carry their standard errors (one ± each: the columns, wider, still
// line up under printf's byte counts).
std::string FormatValue(uint64_t v, uint64_t var, SortBy metric, ErrorScale errors) {
  return metric == SortBy::kCount ? FormatCountEstimate(v, var, errors)
                                  : FormatBytesEstimate(v, var, errors);
}

void PrintNode(const TreeNode& n, uint64_t whole, SortBy metric, int depth, ErrorScale errors) {
  std::string indent(depth * 2, ' ');
  std::string location = SourceLocation(n.frame);
  const int width = errors.sampled() ? 24 : 11;
  std::printf("%7s %*s %*s  %s%s%s%s\n", FormatPercent(n.total, whole).c_str(), width,
              FormatValue(n.total, n.total_var, metric, errors).c_str(), width,
              FormatValue(n.self, n.self_var, metric, errors).c_str(), indent.c_str(),
              depth == 0 ? "[all]" : FunctionName(n.frame).c_str(),
              location.empty() ? "" : ("  " + location).c_str(),
              n.frame.inlined ? "  (inlined)" : "");
  for (const auto& child : n.children) PrintNode(*child, whole, metric, depth + 1, errors);
  if (n.pruned_children) {
    std::printf("%7s %*s %*s  %s  (%zu smaller entries)\n",
                FormatPercent(n.pruned_total, whole).c_str(), width,
                FormatValue(n.pruned_total, n.pruned_total_var, metric, errors).c_str(), width,
                "", indent.c_str(), n.pruned_children);
  }
}

void WriteNode(JsonWriter* json, const TreeNode& n, bool root, SortBy metric, ErrorScale errors) {
  const bool blocks = metric == SortBy::kCount;
  json->BeginObject();
  if (!root) {
    json->Key("frame");
    WriteFrame(json, n.frame);
  }
  json->Field("self", n.self);
  WriteError(json, "self", n.self_var, blocks, errors);
  json->Field("total", n.total);
  WriteError(json, "total", n.total_var, blocks, errors);
  json->Field("pruned_total", n.pruned_total);
  WriteError(json, "pruned_total", n.pruned_total_var, blocks, errors);
  json->Field("pruned_children", static_cast<uint64_t>(n.pruned_children));
  json->Key("children");
  json->BeginArray();
  for (const auto& child : n.children) WriteNode(json, *child, false, metric, errors);
  json->EndArray();
  json->EndObject();
}

int Tree(const TreeOptions& o) {
  SortBy metric;
  if (!ParseSortBy(o.metric, &metric)) return Complain("tree: --metric must be peak, allocated, count or leaked");
  if (o.min_percent < 0 || o.min_percent > 100) return Complain("tree: --min-percent must be between 0 and 100");
  Profile p;
  if (!LoadOrComplain(o.common, &p)) return kExitBadInput;
  StackResolver resolver(p, StackOptionsOf(o.common.filters));
  ApplyFilters(o.common.filters, &resolver, &p);
  auto root = BuildPrunedTree(p, &resolver, metric, o.bottom_up, o.min_percent);
  if (o.common.json) {
    JsonWriter json(std::cout);
    json.BeginObject();
    WriteCaptureJson(&json, p, resolver);
    json.Field("metric", o.metric);
    json.Field("bottom_up", o.bottom_up);
    json.Field("min_percent", o.min_percent);
    json.Key("root");
    WriteNode(&json, *root, true, metric, ErrorScale{p.sample_rate});
    json.EndObject();
  } else {
    PrintEstimateNote(p);
    PrintProgramEndNote(p);
    std::printf("Call tree (%s), %s; nodes under %.2f%% are folded\n", o.metric.c_str(),
                o.bottom_up ? "bottom-up" : "top-down", o.min_percent);
    const ErrorScale errors{p.sample_rate};
    const int width = errors.sampled() ? 23 : 11;  // the titles have no ±
    std::printf("%7s %*s %*s  %s\n", "TOTAL%", width, "TOTAL", width, "SELF", "FUNCTION");
    PrintNode(*root, root->total, metric, 0, errors);
    std::fflush(stdout);
  }
  PrintWarnings(p, resolver);
  return 0;
}

}  // namespace

CommandRunner AddTreeCommand(CLI::App* cmd) {
  auto o = std::make_shared<TreeOptions>();
  AddAnalysisOptions(cmd, &o->common, /*filters=*/true);
  cmd->add_flag("--bottom-up", o->bottom_up, "start from allocation sites and go to callers");
  cmd->add_option("--metric", o->metric, "peak, allocated, count or leaked")->capture_default_str();
  cmd->add_option("--min-percent", o->min_percent, "fold nodes below this share of the total")
      ->capture_default_str();
  return [o] { return Tree(*o); };
}

}  // namespace memlens::cli
