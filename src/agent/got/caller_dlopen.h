// src/agent/got/caller_dlopen.h
//
// dlopen on behalf of the code that called the agent's dlopen interposer. glibc's dlopen looks
// at its own caller (its return address) to search for a bare file name ("libfoo.so", no
// slash): the caller's DT_RUNPATH, its DT_RPATH chain and $ORIGIN in them are the caller's. From
// the interposer the caller is the agent, whose search path is not the program's: a program
// (or a library) whose RUNPATH finds the library it dlopens got "cannot open shared object
// file" under memlens, preloaded or patched into its GOT.
//
// So a bare name that is not loaded yet is looked for in the directories the caller would
// search (dlinfo RTLD_DI_SERINFO on the caller's link map: its RPATHs, LD_LIBRARY_PATH, its
// RUNPATH, the system directories), and the first file found there is opened by its path.
// Not handled: a caller in another namespace (dlmopen) still loads into the agent's.
//
// Runs on: application threads, inside dlopen; allocates (unrecorded: the agent's own calls).
#pragma once

namespace memlens::agent::got {

using DlopenFunction = void* (*)(const char* file, int mode);

// `caller`: the return address of the interposed dlopen call; `dlopen`: the real one.
void* DlopenAsCaller(const void* caller, const char* file, int mode, DlopenFunction dlopen);

}  // namespace memlens::agent::got
