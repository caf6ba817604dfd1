// src/analyzer/model/sites.h
//
// From stack ids to what users read: symbolized stacks (inlined frames expanded), the
// allocation site of each stack (its innermost frame that is not allocator plumbing: operator
// new, code instantiated from system headers such as std::allocator), and what tells frames and
// stacks apart. The rows grouped from them are a view: analyzer/views/sites.h.
//
// Runs on: the analyzer's main thread.
#pragma once

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "analyzer/model/replay.h"
#include "analyzer/symbolize/symbolizer.h"

namespace memlens::analyzer {

using Stack = std::vector<const SourceFrame*>;

// How stacks are shown to the user.
struct StackOptions {
  // Keep the Python interpreter's own frames (its start-up, eval loop and call machinery),
  // which Frames() otherwise folds in a Python capture: `--interpreter-frames`.
  bool interpreter_frames = false;
};

class StackResolver {
 public:
  explicit StackResolver(const Profile& profile, StackOptions options = {});

  // Frames of a stack, innermost first, inlined frames expanded, the interpreter's own frames
  // folded (FoldInterpreterFrames) unless the options keep them. The frames belong to the
  // resolver's caches: valid as long as the resolver.
  Stack Frames(uint64_t stack_id);
  // Index in Frames(stack) of the allocation site.
  size_t SiteIndex(const Stack& frames) const;
  // The allocation site, Frames(stack)[SiteIndex(...)] (an empty frame for an empty stack),
  // resolving only the frames that decide it: a native stack from the innermost frame to the
  // first past the allocator, a Python stack its Python frames. The outer frames (main, the C
  // library's start-up) are never looked up, nor their modules' debug info loaded.
  SourceFrame Site(uint64_t stack_id);
  // Frames of one trie node (one return address); none for a frame of memlens's own code.
  const std::vector<SourceFrame>& NodeFrames(uint64_t node_id);
  const std::vector<std::string>& warnings() const { return symbolizer_.warnings(); }

 private:
  // Per trie node, the innermost Python node on its path to the root that is the program's
  // own code, and the innermost Python node at all (0: none; kUnknown: not worked out yet):
  // stacks share their outer parts, so each node is looked at once.
  struct PythonSites {
    static constexpr uint32_t kUnknown = UINT32_MAX;
    uint32_t app = 0, any = kUnknown;
  };
  PythonSites PythonSitesOf(uint64_t node);
  // The native code a module holds, for folding: the interpreter's own code (the module that
  // defines Py_Version, or the `python` launcher whose main calls Py_BytesMain), the C
  // library's, or anything else. Worked out once per module, on first need.
  enum class Code : uint8_t { kUnknown, kInterpreter, kCLibrary, kOther };
  Code CodeOf(uint64_t module_id);
  // Drops from `frames` (one per entry of `modules`, the module id of each frame's node, 0 for
  // none) the interpreter's frames other than the one that allocated and the allocation site,
  // and the C library's start-up frames outside the interpreter's outermost frame.
  void FoldInterpreterFrames(Stack* frames, const std::vector<uint64_t>& modules);
  // A Python file of the standard library or an installed package, but not the entry's.
  bool IsLibraryFile(const std::string& file) const;
  // A file (Python or extension module) of the entry package or of the distribution holding it.
  bool IsEntryFile(const std::string& path) const;

  const Profile& profile_;
  std::vector<PythonSites> python_sites_;        // by node id (the profile's nodes never change)
  std::string entry_package_;                    // EntryPackage(profile_)
  std::unordered_set<std::string> entry_files_;  // what its distribution installed (RECORD)
  std::vector<uint64_t> entry_modules_;          // ids of the modules that are entry files
  Symbolizer symbolizer_;
  std::unordered_map<uint64_t, std::vector<SourceFrame>> unknown_;  // frames outside modules
  std::vector<uint64_t> memlens_modules_;  // ids of the agent's modules: their frames are hidden
  bool fold_ = false;  // a Python capture shown without the interpreter's frames
  std::unordered_map<uint64_t, Code> code_;  // CodeOf, by module id
};

// The package a Python program's entry point runs, whose files are the program's own code
// although installed (docs/python.md): PACKAGE of `python -m PACKAGE[.module]`, or the package a
// console-script launcher (bin/black) imports its function from; "" otherwise.
std::string EntryPackage(const Profile& profile);

// The type name of a custom heap's block ("(untyped)" when it has none), and its heap's name
// (the profile's heap for a stack without a heap annotation), from a stack's annotation frames.
std::string TypeOf(const Stack& frames);
std::string HeapOf(const Profile& profile, const Stack& frames);
// What tells frames apart across captures: function, file, line and module (the offset only
// for a frame without a function name). StackKey is that of every frame of a stack, in order.
std::string FrameKey(const SourceFrame& frame);
std::string StackKey(const Stack& frames);

}  // namespace memlens::analyzer
