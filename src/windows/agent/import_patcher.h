// src/windows/agent/import_patcher.h
//
// Import-table patching: every module's import address table entries for the functions of
// hooked_functions.h are pointed at the agent's hooks, at start and then each library as the
// loader maps it (agent_dll.cc's notification, before the library's DllMain runs). The agent's own
// module is never patched: its calls reach the real functions, so its own memory is never recorded.
//
// Runs on: the thread that loads the agent (PatchLoadedModules at start) and any thread that
// loads or unloads a library (the loader's notifications, under its lock). Thread safety: one lock
// around the patching; not on the allocation hot path.
#pragma once

#include <windows.h>

#include "windows/agent/hooked_functions.h"

namespace memlens::windows {

// Set by hooks.cc: the hooks, and the real functions they call.
struct HookTables {
  void* crt_hooks[kCrtFamilyCount][kCrtFunctionCount];
  void* kernel_hooks[kKernelFunctionCount];
  // Filled by the patcher from the first import table entry of each runtime's function.
  void* crt_real[kCrtFamilyCount][kCrtFunctionCount];
  // Filled at start from kernel32's exports.
  void* kernel_real[kKernelFunctionCount];
};
HookTables& Hooks();

// Resolves kernel_real; false when one of them is missing (the agent then stays off).
bool ResolveKernelFunctions();
// Patches every loaded module not patched yet (all but `self`).
void PatchLoadedModules(HMODULE self);
// Patches one module just loaded (unless it is `self`).
void PatchNewModule(HMODULE self, HMODULE module);
// Forgets a module being unloaded: one loaded later at the same address is patched anew.
void ForgetModule(HMODULE module);

}  // namespace memlens::windows
