// src/analyzer/model/sites.cc: see sites.h.
#include "analyzer/model/sites.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace memlens::analyzer {
namespace {

constexpr uint64_t kTruncatedMarkerIp = 1;  // see the agent's writer

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Frames that belong to the allocator or the standard library's templates rather than to the
// code that asked for memory: operator new itself, and code instantiated from system headers
// (std::allocator, std::vector growth, std::map nodes...). The site is the first frame past them.
// The annotation frames of a custom heap's blocks and memlens's own header (its C++ helpers,
// inlined into the program) are plumbing too.
bool IsAllocatorFrame(const SourceFrame& f) {
  const std::string& fn = f.function;
  return fn.rfind("operator new", 0) == 0 || fn.rfind("operator delete", 0) == 0 ||
         f.file.rfind("/usr/include/", 0) == 0 || f.file.rfind("/usr/lib/gcc/", 0) == 0 ||
         f.annotation || EndsWith(f.file, "/memlens/memlens.h");
}

// Python's own library, installed packages and frozen modules, as opposed to the program's code.
bool IsPythonLibraryFile(const std::string& file) {
  if (file.rfind("<frozen ", 0) == 0) return true;
  if (EndsWith(file, "/memlens/api.py")) return true;  // memlens.Heap and friends
  if (file.find("/site-packages/") != std::string::npos ||
      file.find("/dist-packages/") != std::string::npos) {
    return true;
  }
  size_t lib = file.find("/lib/python3.");  // the standard library: .../lib/python3.11/x.py
  return lib != std::string::npos && file.find('/', lib + 13) != std::string::npos;
}

// memlens's own libraries: the agent and the Python hooks it loads (src/cli/cmd_run.cc names
// them). Their frames are how memlens saw an allocation, never where the program made it: the
// agent's interposers that call on into the C library (dlopen running a library's constructors,
// pthread_create, fork...) sit between the program's frames and the library's.
bool IsMemlensModule(const std::string& path) {
  std::string name = path.substr(path.rfind('/') + 1);
  return name == "libmemlens.so" || name.rfind("libmemlens_python", 0) == 0;
}

}  // namespace

StackResolver::StackResolver(const Profile& profile)
    : profile_(profile), python_sites_(profile.nodes.size()) {
  for (const auto& [id, module] : profile.modules) {
    symbolizer_.AddModule(module);
    if (IsMemlensModule(module.path)) memlens_modules_.push_back(id);
  }
}

const std::vector<SourceFrame>& StackResolver::NodeFrames(uint64_t node_id) {
  static const std::vector<SourceFrame> kHidden;
  const StackNode& node = profile_.nodes[node_id];
  if (node.module != 0) {
    if (std::find(memlens_modules_.begin(), memlens_modules_.end(), node.module) !=
        memlens_modules_.end()) {
      return kHidden;
    }
    return symbolizer_.Resolve(node.module, node.ip);
  }
  auto it = unknown_.find(node.ip);
  if (it != unknown_.end()) return it->second;
  SourceFrame f;
  if (format::IsPythonFrameIp(node.ip)) {
    auto code = profile_.python_codes.find(format::PythonFrameCode(node.ip));
    f.python = true;
    f.module = "[python]";
    f.line = static_cast<uint32_t>(format::PythonFrameLine(node.ip));
    if (code != profile_.python_codes.end()) {
      f.function = code->second.name;
      f.file = code->second.filename;
    } else {
      f.function = "<unknown Python code>";
    }
  } else if (format::IsAnnotationFrameIp(node.ip)) {
    uint32_t value = format::AnnotationValue(node.ip);
    f.annotation = true;
    f.module = "[memlens]";
    if (format::AnnotationKind(node.ip) == format::Annotation::kHeap) {
      auto name = profile_.heap_names.find(value);
      f.function = "[heap " + (name != profile_.heap_names.end() ? name->second
                                                                 : "#" + std::to_string(value)) + "]";
    } else {
      f.function = "[type " + profile_.StringOf(value) + "]";
    }
  } else if (node.ip == kTruncatedMarkerIp) {
    f.function = "[stack truncated]";
  } else {
    f.module = "[unknown]";
    f.module_offset = node.ip;
  }
  return unknown_[node.ip] = {f};
}

Stack StackResolver::Frames(uint64_t stack_id) {
  Stack frames;
  for (uint64_t id = stack_id; id != 0 && id < profile_.nodes.size(); id = profile_.nodes[id].parent) {
    for (const SourceFrame& f : NodeFrames(id)) frames.push_back(&f);
  }
  return frames;
}

size_t StackResolver::SiteIndex(const Stack& frames) {
  // In a Python program the answer is a Python line of the program's own code: the
  // interpreter's and extensions' native frames, and library code (numpy's ones() around the
  // malloc of np.ones), are how, not where. They all stay in the full stack.
  size_t first_python = frames.size();
  for (size_t i = 0; i < frames.size(); ++i) {
    if (!frames[i]->python) continue;
    if (first_python == frames.size()) first_python = i;
    if (!IsPythonLibraryFile(frames[i]->file)) return i;
  }
  if (first_python < frames.size()) return first_python;
  size_t i = 0;
  while (i + 1 < frames.size() && IsAllocatorFrame(*frames[i])) ++i;
  return i;
}

StackResolver::PythonSites StackResolver::PythonSitesOf(uint64_t node) {
  const auto& nodes = profile_.nodes;
  std::vector<uint64_t> path;  // the nodes not worked out yet, innermost first
  uint64_t id = node;
  while (id != 0 && id < nodes.size() && python_sites_[id].any == PythonSites::kUnknown) {
    path.push_back(id);
    id = nodes[id].parent;
  }
  PythonSites sites = id != 0 && id < nodes.size() ? python_sites_[id] : PythonSites{0, 0};
  for (auto it = path.rbegin(); it != path.rend(); ++it) {  // from the outermost down
    if (nodes[*it].module == 0 && format::IsPythonFrameIp(nodes[*it].ip)) {
      sites.any = static_cast<uint32_t>(*it);
      if (!IsPythonLibraryFile(NodeFrames(*it).front().file)) sites.app = sites.any;
    }
    python_sites_[*it] = sites;
  }
  return sites;
}

SourceFrame StackResolver::Site(uint64_t stack_id) {
  // The rule of SiteIndex: the program's own innermost Python line, else the innermost Python
  // line, else (no Python at all) the first native frame past the allocator.
  PythonSites python = PythonSitesOf(stack_id);
  if (python.app) return NodeFrames(python.app).front();
  if (python.any) return NodeFrames(python.any).front();
  const auto& nodes = profile_.nodes;
  const SourceFrame* site = nullptr;
  for (uint64_t id = stack_id; id != 0 && id < nodes.size(); id = nodes[id].parent) {
    for (const SourceFrame& f : NodeFrames(id)) {
      site = &f;
      if (!IsAllocatorFrame(f)) return f;
    }
  }
  return site ? *site : SourceFrame{};  // all allocator frames: the outermost
}

std::string TypeOf(const Stack& frames) {
  for (const SourceFrame* f : frames) {
    if (!f->annotation) break;
    if (f->function.rfind("[type ", 0) == 0) return f->function.substr(6, f->function.size() - 7);
  }
  return "(untyped)";
}

std::string HeapOf(const Profile& profile, const Stack& frames) {
  for (const SourceFrame* f : frames) {
    if (!f->annotation) break;
    if (f->function.rfind("[heap ", 0) == 0) return f->function.substr(6, f->function.size() - 7);
  }
  return profile.HeapDisplayName();
}

std::vector<SiteRow> GroupSites(const Profile& profile, StackResolver* resolver, GroupBy by) {
  using Key = std::tuple<std::string, std::string, uint32_t, std::string, uint64_t>;
  std::map<Key, SiteRow> groups;
  for (const auto& [stack_id, stats] : profile.stacks) {
    SourceFrame site = resolver->Site(stack_id);
    // The whole stack only where the grouping reads it: a stack, or its annotation frames.
    Stack frames;
    if (by == GroupBy::kStack || by == GroupBy::kHeap || by == GroupBy::kType) {
      frames = resolver->Frames(stack_id);
    }
    Key key;
    switch (by) {
      case GroupBy::kFunction:  // a Python function is its file and name; a native one its symbol
        if (!site.python) site.file.clear();
        site.line = 0;
        key = {site.function, site.file, 0, site.module, site.function.empty() ? site.module_offset : 0};
        break;
      case GroupBy::kLine:
        key = {site.function, site.file, site.line, site.module,
               site.function.empty() ? site.module_offset : 0};
        break;
      case GroupBy::kModule:
        site = SourceFrame{"", "", 0, site.module, 0, false, site.python};
        key = {"", "", 0, site.module, 0};
        break;
      case GroupBy::kStack:
        key = {"", "", 0, "", stack_id};
        break;
      case GroupBy::kHeap:
      case GroupBy::kType: {
        std::string name = by == GroupBy::kHeap ? HeapOf(profile, frames) : TypeOf(frames);
        site = SourceFrame{};
        site.function = name;
        key = {name, "", 0, "", 0};
        break;
      }
    }
    SiteRow& row = groups[key];
    row.site = site;
    if (by == GroupBy::kStack) {
      row.stack = std::move(frames);
      row.stack_id = stack_id;
    }
    row.stats.Add(stats);
  }
  std::vector<SiteRow> rows;
  rows.reserve(groups.size());
  for (auto& [key, row] : groups) rows.push_back(std::move(row));
  return rows;
}

uint64_t SortValue(const StackStats& s, SortBy by) {
  switch (by) {
    case SortBy::kPeak: return s.peak_bytes;
    case SortBy::kAllocated: return s.allocated_bytes;
    case SortBy::kCount: return s.allocations;
    case SortBy::kLeaked: return s.leaked_bytes;
  }
  return 0;
}

void SortRows(std::vector<SiteRow>* rows, SortBy by) {
  std::stable_sort(rows->begin(), rows->end(), [by](const SiteRow& a, const SiteRow& b) {
    uint64_t va = SortValue(a.stats, by), vb = SortValue(b.stats, by);
    if (va != vb) return va > vb;
    return a.stats.allocated_bytes > b.stats.allocated_bytes;
  });
}

bool ParseGroupBy(const std::string& text, GroupBy* out) {
  static const std::map<std::string, GroupBy> kNames = {{"function", GroupBy::kFunction},
                                                        {"line", GroupBy::kLine},
                                                        {"module", GroupBy::kModule},
                                                        {"stack", GroupBy::kStack},
                                                        {"heap", GroupBy::kHeap},
                                                        {"type", GroupBy::kType}};
  auto it = kNames.find(text);
  if (it == kNames.end()) return false;
  *out = it->second;
  return true;
}

bool ParseSortBy(const std::string& text, SortBy* out) {
  static const std::map<std::string, SortBy> kNames = {{"peak", SortBy::kPeak},
                                                       {"allocated", SortBy::kAllocated},
                                                       {"count", SortBy::kCount},
                                                       {"leaked", SortBy::kLeaked}};
  auto it = kNames.find(text);
  if (it == kNames.end()) return false;
  *out = it->second;
  return true;
}

}  // namespace memlens::analyzer
