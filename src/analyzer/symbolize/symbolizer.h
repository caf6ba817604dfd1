// src/analyzer/symbolize/symbolizer.h
//
// Symbolizer: turns the absolute return addresses of a capture's stacks into source frames
// (function, file, line), offline and after the fact, from the module-map records the agent
// wrote (path, build-id, load bias). Uses elfutils (libdwfl/libdw): DWARF when the object or
// its separate debug file (/usr/lib/debug/.build-id/...) has it, else the ELF symbol table.
//
// Called by: the analyzer's model and export stages (through the CLI), on one thread.
// Thread safety: none; one Symbolizer per thread. References returned by Resolve stay valid
// until the Symbolizer is destroyed, except that re-adding a module id drops that id's.
// Never throws or aborts on bad input: what cannot be resolved becomes a module+offset frame
// and, where the user can act on it, one line in warnings().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "format/records.h"

namespace memlens::analyzer {

// The function name of a frame in a static initializer (a function of the object's
// .init_array or .preinit_array, run before main) that no symbol or debug info names.
inline constexpr char kStaticInitializer[] = "<static initializer>";

struct SourceFrame {
  std::string function;  // demangled C++ name or C name, kStaticInitializer; "" when unknown
  std::string file;      // source path from DWARF (absolute when the CU has a comp_dir); ""
  uint32_t line = 0;     // 0 when unknown
  std::string module;    // path of the ELF object ("" for an unknown module id)
  uint64_t module_offset = 0;  // ip - load_bias: lets a user symbolize by hand later
  bool inlined = false;  // true: inlined into the next (outer) frame of the same ip
  bool python = false;   // a Python frame (module is "[python]"), not a native one
  // An annotation of a custom heap's block (module "[memlens]"): "[heap NAME]", "[type NAME]".
  bool annotation = false;
};

class Symbolizer {
 public:
  Symbolizer();
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // Cheap: files are opened on the first Resolve that needs them. The same path may come
  // again under another id at another bias (dlclose + dlopen); its ELF/DWARF is read once.
  // Re-adding an id replaces the earlier record.
  void AddModule(const format::ModuleRecord& module);

  // `ip` is an absolute return address inside module `module_id`; ip-1 (the call) is looked
  // up. Returns frames innermost first: inlined functions expanded (the innermost with the
  // source line of ip, each outer one with the call site of the inlined call), ending with
  // the real function. Never empty. Cached per (module_id, ip).
  const std::vector<SourceFrame>& Resolve(uint64_t module_id, uint64_t ip);

  // How module `module_id`'s dynamic symbol table (.dynsym) knows the symbol `name`: it
  // defines it, only refers to it (a symbol it takes from another object), or not at all;
  // kUnreadable when the module's file cannot be read as recorded (missing, changed since the
  // capture, in memory only).
  enum class SymbolUse { kUnreadable, kNone, kImports, kDefines };
  SymbolUse DynamicSymbol(uint64_t module_id, const std::string& name);

  // One line per problem seen so far (missing file, build-id mismatch, no symbols), each
  // said once. Files are examined lazily, so a module no stack touched is never reported.
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  struct ElfFile;  // one opened object, shared by every record with its path
  struct Module {
    format::ModuleRecord record;
    bool examined = false;
    ElfFile* file = nullptr;  // null: frames stay module+offset
  };
  struct Key {
    uint64_t module_id;
    uint64_t ip;
    bool operator==(const Key& o) const { return module_id == o.module_id && ip == o.ip; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };

  void Examine(Module* module);
  ElfFile* OpenFile(const std::string& path);
  std::vector<SourceFrame> Lookup(const Module& module, uint64_t ip);
  void Warn(std::string line);

  std::unordered_map<uint64_t, Module> modules_;
  std::unordered_map<std::string, std::unique_ptr<ElfFile>> files_;
  // Node-based map: references handed out by Resolve survive rehashing.
  std::unordered_map<Key, std::vector<SourceFrame>, KeyHash> cache_;
  std::vector<std::string> warnings_;
  std::unordered_set<std::string> warned_;
};

}  // namespace memlens::analyzer
