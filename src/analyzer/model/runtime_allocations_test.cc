// The runtime's allocations: which stacks the rules class as the C/C++ runtime's (its own
// jobs, through its own frames only) and which stay the program's (callbacks, results handed
// to the program), with and without the runtime's debug symbols.
#include "analyzer/model/runtime_allocations.h"

#include <gtest/gtest.h>

#include <set>

namespace memlens::analyzer {
namespace {

constexpr char kLibc[] = "/lib/x86_64-linux-gnu/libc.so.6";
constexpr char kLibstdcxx[] = "/lib/x86_64-linux-gnu/libstdc++.so.6";
constexpr char kLoader[] = "/lib64/ld-linux-x86-64.so.2";
constexpr char kProgram[] = "/home/me/prog";

SourceFrame Frame(const char* function, const char* module) {
  SourceFrame f;
  f.function = function;
  f.module = module;
  return f;
}

std::string RuleOf(std::vector<SourceFrame> frames) {
  Stack stack;
  for (const auto& f : frames) stack.push_back(&f);
  const RuntimeRule* rule = RuntimeClassifier::RuleOf(stack);
  return rule ? rule->name : "program";
}

TEST(RuntimeAllocations, TheRuntimesOwnJobs) {
  // libstdc++'s emergency pool, named by the symbolizer without debug symbols, then with them.
  EXPECT_EQ(RuleOf({Frame("<static initializer>", kLibstdcxx), Frame("call_init", kLoader),
                    Frame("_dl_start_user", kLoader)}),
            "libstdc++-init");
  EXPECT_EQ(RuleOf({Frame("(anonymous namespace)::pool::pool()", kLibstdcxx),
                    Frame("_GLOBAL__sub_I_eh_alloc.cc", kLibstdcxx), Frame("call_init", kLoader)}),
            "libstdc++-init");
  // stdout's buffer, with libc's debug symbols and without.
  EXPECT_EQ(RuleOf({Frame("__GI__IO_file_doallocate", kLibc),
                    Frame("_IO_new_file_overflow", kLibc), Frame("__printf", kLibc),
                    Frame("main", kProgram)}),
            "stdio-buffers");
  EXPECT_EQ(
      RuleOf({Frame("_IO_file_doallocate", kLibc), Frame("", kLibc), Frame("main", kProgram)}),
      "stdio-buffers");
  // A thread's dtv: loader frames with no name at all still count.
  EXPECT_EQ(RuleOf({Frame("", kLoader), Frame("_dl_allocate_tls", kLoader),
                    Frame("pthread_create", kLibc), Frame("main", kProgram)}),
            "loader");
  // Locale data: unnamed libc frames up to the public entry point.
  EXPECT_EQ(RuleOf({Frame("", kLibc), Frame("", kLibc), Frame("setlocale", kLibc),
                    Frame("main", kProgram)}),
            "locale");
  EXPECT_EQ(RuleOf({Frame("std::ios_base::sync_with_stdio(bool)", kLibstdcxx),
                    Frame("main", kProgram)}),
            "libstdc++-streams");
}

TEST(RuntimeAllocations, WhatTheProgramAskedForStaysTheProgramsLeak) {
  // strdup's copy, fopen's FILE: the runtime allocates them for the program.
  EXPECT_EQ(RuleOf({Frame("__strdup", kLibc), Frame("main", kProgram)}), "program");
  EXPECT_EQ(RuleOf({Frame("__fopen_internal", kLibc), Frame("fopen", kLibc),
                    Frame("main", kProgram)}),
            "program");
  // operator new from the program; a static constructor of the program, run by the loader;
  // an atexit handler, run by libc's exit.
  EXPECT_EQ(RuleOf({Frame("operator new(unsigned long)", kLibstdcxx), Frame("main", kProgram)}),
            "program");
  EXPECT_EQ(RuleOf({Frame("Registry::Registry()", kProgram), Frame("call_init", kLoader),
                    Frame("_dl_start_user", kLoader)}),
            "program");
  EXPECT_EQ(RuleOf({Frame("on_exit_handler", kProgram), Frame("__run_exit_handlers", kLibc),
                    Frame("exit", kLibc)}),
            "program");
  // A plugin's constructor under dlopen; a Python object (no runtime frame at all).
  EXPECT_EQ(RuleOf({Frame("plugin_init", "/opt/libplugin.so"), Frame("", kLoader),
                    Frame("dlopen", kLibc), Frame("main", kProgram)}),
            "program");
  EXPECT_EQ(RuleOf({Frame("PyObject_Malloc", "/usr/bin/python3.11")}), "program");
  EXPECT_EQ(RuleOf({}), "program");
}

TEST(RuntimeAllocations, RulesAreWellFormed) {
  std::set<std::string> names;
  for (const RuntimeRule& r : RuntimeRules()) {
    EXPECT_TRUE(names.insert(r.name).second) << r.name;
    EXPECT_FALSE(std::string(r.what).empty()) << r.name;
    // Every rule can be reached: its module is one the walk goes through, and no rule before
    // it takes its frames. (A glob's '*' stands for ".6" in the made-up names.)
    std::string module = r.module, function = r.functions.empty() ? "f" : r.functions.front();
    for (size_t star; (star = module.find('*')) != std::string::npos;) {
      module.replace(star, 1, ".6");
    }
    SourceFrame f = Frame(function.c_str(), ("/lib/" + module).c_str());
    EXPECT_EQ(RuleOf({f}), r.name) << f.module;
  }
}

}  // namespace
}  // namespace memlens::analyzer
