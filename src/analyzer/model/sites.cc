// src/analyzer/model/sites.cc: see sites.h.
#include "analyzer/model/sites.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <tuple>
#include <unordered_set>

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

// memlens's own libraries: the agent and the Python hooks it loads (src/cli/cmd_run.cc names
// them). Their frames are how memlens saw an allocation, never where the program made it: the
// agent's interposers that call on into the C library (dlopen running a library's constructors,
// pthread_create, fork...) sit between the program's frames and the library's.
bool IsMemlensModule(const std::string& path) {
  std::string name = path.substr(path.rfind('/') + 1);
  return name == "libmemlens.so" || name.rfind("libmemlens_python", 0) == 0;
}
// The top-level package (or module) a file of Python's own library or of an installed package
// belongs to ("numpy" for .../site-packages/numpy/core/numeric.py, "json" for
// .../lib/python3.11/json/encoder.py), or "" for a file that is neither.
std::string LibraryPackageOf(const std::string& file) {
  size_t begin = std::string::npos;
  for (const char* dir : {"/site-packages/", "/dist-packages/"}) {
    size_t at = file.find(dir);
    if (at != std::string::npos) begin = at + std::strlen(dir);
  }
  if (begin == std::string::npos) {
    size_t lib = file.find("/lib/python3.");  // the standard library: .../lib/python3.11/x.py
    if (lib == std::string::npos) return "";
    begin = file.find('/', lib + 13);
    if (begin == std::string::npos) return "";
    ++begin;
  }
  std::string top = file.substr(begin, file.find('/', begin) - begin);
  return EndsWith(top, ".py") ? top.substr(0, top.size() - 3) : top;
}

// Python's own library, installed packages and frozen modules, as opposed to the program's code.
bool IsPythonLibraryFile(const std::string& file) {
  if (file.rfind("<frozen ", 0) == 0) return true;
  if (EndsWith(file, "/memlens/api.py")) return true;  // memlens.Heap and friends
  return !LibraryPackageOf(file).empty();
}

// The package a console-script launcher runs, from its text: pip, uv and setuptools write
// `from PACKAGE.module import function` and `sys.exit(function())` in a few lines. "" for any
// other script, or one that cannot be read.
std::string LauncherPackage(const std::string& path) {
  std::error_code error;
  if (std::filesystem::file_size(path, error) > 4096 || error) return "";  // launchers are short
  std::ifstream in(path);
  std::string line, package, function;
  bool exits = false;
  for (int n = 0; n < 30 && std::getline(in, line); ++n) {
    std::smatch m;
    static const std::regex kImport(R"(^from\s+([A-Za-z_][\w.]*)\s+import\s+(\w+)\s*$)");
    static const std::regex kExit(R"(^\s*sys\.exit\(\s*(\w+)[.(])");
    if (std::regex_search(line, m, kImport)) {
      if (!package.empty()) return "";  // a script importing more than one thing
      package = m[1].str().substr(0, m[1].str().find('.'));
      function = m[2];
    } else if (std::regex_search(line, m, kExit)) {
      exits = !function.empty() && m[1] == function;
    }
  }
  return in.eof() && exits ? package : "";
}

}  // namespace

std::string EntryPackage(const Profile& profile) {
  if (profile.python_codes.empty()) return "";  // not a Python program
  const std::vector<std::string>& argv = profile.process.argv;
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg == "-m" || arg.rfind("-m", 0) == 0) {  // python -m package.module
      std::string module = arg == "-m" ? (i + 1 < argv.size() ? argv[i + 1] : "") : arg.substr(2);
      return module.substr(0, module.find('.'));
    }
    if (arg == "-W" || arg == "-X") {  // options that take the next argument
      ++i;
      continue;
    }
    if (arg.rfind("-", 0) == 0) {
      if (arg == "-c" || arg == "-" || arg.rfind("-c", 0) == 0) return "";  // code, no file
      continue;
    }
    // The script: where the interpreter found it is the path of its <module> code (absolute
    // since Python 3.9, whatever the command line said).
    std::string path = arg;
    for (const auto& [id, code] : profile.python_codes) {
      if (code.name == "<module>" && (code.filename == arg || EndsWith(code.filename, "/" + arg))) {
        path = code.filename;
        break;
      }
    }
    return LauncherPackage(path);
  }
  return "";
}

namespace {

// The files (absolute paths) that the installed distribution holding `package` lists in its
// RECORD, next to the package in a site-packages directory the capture's Python files name: a
// compiled application (black, built with mypyc) runs code of extension modules at the top of
// site-packages and of sibling packages it ships (blib2to3). Empty when none can be read.
std::unordered_set<std::string> DistributionFiles(const Profile& profile,
                                                  const std::string& package) {
  std::unordered_set<std::string> files;
  if (package.empty()) return files;
  std::string site;
  for (const auto& [id, code] : profile.python_codes) {
    for (const char* dir : {"/site-packages/", "/dist-packages/"}) {
      size_t at = code.filename.find(std::string(dir) + package + "/");
      if (at != std::string::npos) site = code.filename.substr(0, at + std::strlen(dir));
    }
    if (!site.empty()) break;
  }
  if (site.empty()) return files;
  std::error_code error;
  for (std::filesystem::directory_iterator it(site, error), end; !error && it != end;
       it.increment(error)) {
    if (!EndsWith(it->path().filename().string(), ".dist-info")) continue;
    std::ifstream record(it->path() / "RECORD");
    std::vector<std::string> listed;
    bool holds_package = false;
    for (std::string line; std::getline(record, line);) {
      std::string path = line.substr(0, line.find(','));
      holds_package |= path.rfind(package + "/", 0) == 0;
      if (path.rfind("../", 0) != 0) listed.push_back(site + path);  // not bin/ scripts
    }
    if (holds_package) return {listed.begin(), listed.end()};
  }
  return files;
}

}  // namespace

StackResolver::StackResolver(const Profile& profile, StackOptions options)
    : profile_(profile),
      python_sites_(profile.nodes.size()),
      entry_package_(EntryPackage(profile)),
      entry_files_(DistributionFiles(profile, entry_package_)),
      fold_(!options.interpreter_frames && !profile.python_codes.empty()) {
  for (const auto& [id, module] : profile.modules) {
    symbolizer_.AddModule(module);
    if (IsMemlensModule(module.path)) memlens_modules_.push_back(id);
    if (IsEntryFile(module.path)) entry_modules_.push_back(id);
  }
}

bool StackResolver::IsEntryFile(const std::string& path) const {
  return !entry_package_.empty() &&
         (LibraryPackageOf(path) == entry_package_ || entry_files_.count(path) != 0);
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
  std::vector<uint64_t> modules;  // each frame's module id, for folding
  for (uint64_t id = stack_id; id != 0 && id < profile_.nodes.size(); id = profile_.nodes[id].parent) {
    for (const SourceFrame& f : NodeFrames(id)) {
      frames.push_back(&f);
      if (fold_) modules.push_back(profile_.nodes[id].module);
    }
  }
  if (fold_) FoldInterpreterFrames(&frames, modules);
  return frames;
}

StackResolver::Code StackResolver::CodeOf(uint64_t module_id) {
  auto [it, fresh] = code_.try_emplace(module_id, Code::kOther);
  if (!fresh || module_id == 0) return it->second;
  auto module = profile_.modules.find(module_id);
  if (module == profile_.modules.end()) return it->second;
  const std::string& path = module->second.path;
  std::string name = path.substr(path.rfind('/') + 1);
  // By name only when the file cannot be read where the capture is analyzed: python3.11,
  // python3.13t, python, libpython3.11.so.1.0, libpython3.14t.so...; libc.so.6, libc-2.31.so,
  // libpthread.so.0 (start_thread before glibc 2.34), musl's libc.musl-x86_64.so.1.
  static const std::regex kInterpreterName(R"(^(lib)?python(3(\.[0-9]+)?[a-z]*)?(\.so(\..*)?)?$)");
  static const std::regex kCLibraryName(
      R"(^((libc|libpthread)(-[0-9.]+)?\.so.*|libc\.musl.*|ld-musl.*)$)");
  using Use = Symbolizer::SymbolUse;
  Use version = symbolizer_.DynamicSymbol(module_id, "Py_Version");
  if (version == Use::kUnreadable) {
    it->second = std::regex_match(name, kInterpreterName) ? Code::kInterpreter : Code::kOther;
  } else if (version == Use::kDefines ||
             symbolizer_.DynamicSymbol(module_id, "_PyEval_EvalFrameDefault") == Use::kDefines ||
             symbolizer_.DynamicSymbol(module_id, "Py_BytesMain") == Use::kImports) {
    it->second = Code::kInterpreter;  // libpython, a static python, or the launcher of a shared one
  }
  if (it->second == Code::kOther && std::regex_match(name, kCLibraryName)) {
    it->second = Code::kCLibrary;
  }
  return it->second;
}

void StackResolver::FoldInterpreterFrames(Stack* frames, const std::vector<uint64_t>& modules) {
  const size_t n = frames->size();
  if (n == 0) return;
  std::vector<Code> code(n);
  for (size_t i = 0; i < n; ++i) code[i] = CodeOf(modules[i]);  // Python frames: module 0
  // What stays whatever its code: the frame that allocated (the innermost past a custom heap's
  // annotations) and the allocation site, so that sites and leaves read as before.
  size_t allocated = 0;
  while (allocated + 1 < n && (*frames)[allocated]->annotation) ++allocated;
  const size_t site = SiteIndex(*frames);
  // The process's or a thread's start-up: the outermost run of the interpreter's and the C
  // library's frames (_start, __libc_start_main, Py_BytesMain...; clone3, start_thread,
  // pythread_wrapper...). The C library's fold only outside an interpreter frame of that run,
  // so a thread an extension started (start_thread, then its own function) keeps them.
  size_t run = n;
  while (run > 0 && (code[run - 1] == Code::kInterpreter || code[run - 1] == Code::kCLibrary)) {
    --run;
  }
  size_t startup_end = n;  // the innermost interpreter frame of that run
  for (size_t i = run; i < n && startup_end == n; ++i) {
    if (code[i] == Code::kInterpreter) startup_end = i;
  }
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    bool fold = code[i] == Code::kInterpreter || (code[i] == Code::kCLibrary && i > startup_end);
    if (!fold || i == allocated || i == site) (*frames)[kept++] = (*frames)[i];
  }
  frames->resize(kept);
}

bool StackResolver::IsLibraryFile(const std::string& file) const {
  return IsPythonLibraryFile(file) && !IsEntryFile(file);
}

size_t StackResolver::SiteIndex(const Stack& frames) const {
  // In a Python program the answer is a Python line of the program's own code: the
  // interpreter's and extensions' native frames, and library code (numpy's ones() around the
  // malloc of np.ones), are how, not where. They all stay in the full stack.
  size_t first_python = frames.size();
  for (size_t i = 0; i < frames.size(); ++i) {
    if (!frames[i]->python) {
      if (!entry_modules_.empty() && IsEntryFile(frames[i]->module)) return i;  // compiled
      continue;
    }
    if (first_python == frames.size()) first_python = i;
    if (!IsLibraryFile(frames[i]->file)) return i;
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
    const StackNode& node = nodes[*it];
    if (node.module == 0 && format::IsPythonFrameIp(node.ip)) {
      sites.any = static_cast<uint32_t>(*it);
      if (!IsLibraryFile(NodeFrames(*it).front().file)) sites.app = sites.any;
    } else if (node.module != 0 &&
               std::find(entry_modules_.begin(), entry_modules_.end(), node.module) !=
                   entry_modules_.end() &&
               !NodeFrames(*it).empty()) {
      sites.app = static_cast<uint32_t>(*it);  // the entry package's compiled code
    }
    python_sites_[*it] = sites;
  }
  return sites;
}

SourceFrame StackResolver::Site(uint64_t stack_id) {
  // The rule of SiteIndex: the program's own innermost Python line (or compiled frame of the
  // entry package), else the innermost Python line, else (no Python at all) the first native
  // frame past the allocator.
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

std::string FrameKey(const SourceFrame& f) {
  return f.function + '\x1f' + f.file + '\x1f' + std::to_string(f.line) + '\x1f' + f.module +
         '\x1f' + (f.function.empty() ? std::to_string(f.module_offset) : "");
}

std::string StackKey(const Stack& frames) {
  std::string key;
  for (const SourceFrame* f : frames) key += FrameKey(*f) + '\x1e';
  return key;
}

}  // namespace memlens::analyzer
