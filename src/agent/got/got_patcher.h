// src/agent/got/got_patcher.h
//
// The agent's GOT patching: how a process records when the agent was not preloaded (it was
// dlopen'ed, or the program calls memlens_start). The agent's interposers (hooks/) are pointed
// at from the GOT/PLT slots of every loaded object but the loader, the vdso, the agent itself
// and its Python hooks libraries (got_table.h says how, docs/agent.md "GOT patching" what is
// caught and what is missed).
//
// The hooks are every function the agent exports but its API (memlens_*): the version script
// (exports.map.in) is made from hooks/hooked_functions.h and hooks/cxx_forms.h (with
// interposers.cc's mmap64 and execl forms), so a patched process goes through exactly the
// interposers a preloaded one does, and no third list is kept here.
//
// The interposers must pass through when the process is not recording: a function pointer
// copied out of a patched slot (a GLOB_DAT or data pointer) keeps calling them after
// UnpatchAll, which is also why the agent is never unloaded.
//
// Runs on: the thread that starts or stops a span, and any thread right after its dlopen.
// Never on the allocation path. Calls are serialized (one mutex, got_table.h).
#pragma once

#include <string>

namespace memlens::agent::got {

// Points the slots of every loaded object at the agent's interposers. False, with a one-line
// reason in *error, when no slot could be patched (then nothing is left patched).
bool PatchLoadedObjects(std::string* error);
// Between PatchLoadedObjects and UnpatchAll: patches the objects loaded since, and gives back
// their hook to slots that lazy binding resolved over it; otherwise returns at once. The dlopen
// interposer calls it after every successful dlopen; calling it at other times is harmless.
void PatchNewObjects();
// Restores every slot that still holds the agent's interposer (one the program changed since
// keeps the program's value).
void UnpatchAll();

}  // namespace memlens::agent::got
