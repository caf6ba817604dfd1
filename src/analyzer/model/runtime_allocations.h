// src/analyzer/model/runtime_allocations.h
//
// Blocks the C and C++ runtime allocates for itself and keeps for the life of the process:
// libstdc++'s exception emergency pool, the stdio buffers of stdout and stderr, the dynamic
// loader's bookkeeping, locale and time-zone data... They are still allocated at exit in every
// program, and they are not the program's leaks. The rules that recognise them are one list,
// kRuntimeRules in runtime_allocations.cc (docs/runtime-allocations.md says it in words).
//
// A rule names a module (glob on its file name) and, optionally, functions (globs, as
// FramePattern's). A stack is the runtime's when, walking it from the allocation outwards
// through frames of the runtime's modules only, a frame matches a rule: the runtime asked for
// the memory itself, while doing a job of the list. A frame of any other module (the program,
// a library, the interpreter) ends the walk first, so memory the runtime allocates on the
// program's behalf (strdup, fopen's FILE, getaddrinfo's results) and memory a program's callback
// allocates under a runtime function (a static constructor run by the loader, an atexit handler)
// stay the program's.
//
// Runs on: the analyzer's main thread.
#pragma once

#include <string>
#include <vector>

#include "analyzer/model/replay.h"
#include "analyzer/model/sites.h"

namespace memlens::analyzer {

struct RuntimeRule {
  const char* name;  // short, stable: the JSON outputs carry it ("stdio-buffers")
  const char* what;  // one phrase for the text views ("stdio buffers of stdout, stderr...")
  const char* module;  // glob on the module's path or file name
  std::vector<const char*> functions;  // globs on the function; none: any frame of the module
};

const std::vector<RuntimeRule>& RuntimeRules();

// Which stacks are the runtime's. Looks up only the frames it walks, and each node once.
class RuntimeClassifier {
 public:
  RuntimeClassifier(const Profile& profile, StackResolver* resolver);
  // The rule that makes a stack the runtime's, or nullptr when it is the program's.
  const RuntimeRule* RuleOf(uint64_t stack_id);
  // The same for frames already resolved, innermost first.
  static const RuntimeRule* RuleOf(const Stack& frames);

 private:
  // A frame's verdict: kProgram, kUnknown (a runtime frame no rule names: ask the next one
  // out), else the index of its rule in RuntimeRules().
  static constexpr int kUnknown = -2, kProgram = -1;
  static int FrameVerdict(const SourceFrame& frame);
  int VerdictOf(uint64_t node);

  const Profile& profile_;
  StackResolver* resolver_;
  std::vector<int> verdicts_;  // by node id: the verdict of the walk from that node outwards
};

// Takes the runtime's blocks in use at the snapshot out of every in-use figure of the profile
// (each stack's in_use_*, the totals' in_use_*) and records them in profile->runtime,
// profile->runtime_stacks and the totals' runtime_*. Peaks, allocations and checkpoints keep
// them: they were memory in use. Called once, after the filters (FilterProfile).
void SetRuntimeApart(StackResolver* resolver, Profile* profile);

}  // namespace memlens::analyzer
