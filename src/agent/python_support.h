// src/agent/python_support.h
//
// The agent's side of Python support (the bridge in python_bridge.h): finds an interpreter in
// the process, loads the matching hooks library, and keeps what the writer needs to turn
// Python frames into capture records (the code objects' names, the eval loop's address range).
//
// Runs on: the thread running the agent's constructor (AttachPython); application threads
// (through the bridge); the writer thread (PythonCodeInfo, the eval loop's range).
#pragma once

#include <cstddef>
#include <cstdint>

#include "agent/python_bridge.h"

namespace memlens::agent {

// Every Python code id is below this (the writer bounds the ids it reads from another
// process's rings).
inline constexpr uint64_t kMaxPythonCodes = uint64_t{1} << 20;

struct PythonCodeInfo {
  const char* filename;
  const char* name;
  uint64_t first_line;
};

// Loads libmemlens_python<tag>.so (3.13, 3.13t...: version and build) next to the agent when
// the process runs Python, and puts its allocator wrappers on: under memlens run before the
// interpreter initializes, for a span in the running interpreter (the hooks library takes the
// GIL). A later call puts the wrappers back on after DetachPython.
void AttachPython();
// A span ended: the wrappers come off where they are still on top (python_hooks.cc).
void DetachPython();
// The most Python frames kept per allocation: frames, or MEMLENS_PYTHON_FRAMES when 0.
void SetPythonFrames(uint64_t frames);
// Python-lines-only mode (memlens run --python-stacks, MEMLENS_PYTHON_STACKS=1, a span's
// python_stacks=1): no native unwinding; an allocation's stack is its thread's Python frames,
// or, in a thread running no Python code, the interposed function's caller alone. Set before
// recording starts, fixed for the capture (the writer says so in it).
extern bool g_python_stacks;
// MEMLENS_PYTHON_STACKS when `option` is -1 (unset), else the option (0 or 1). False when
// the variable is neither unset, empty, 0 nor 1 (the mode is then off).
bool SetPythonStacks(int option);
// The code object registered under id, or nullptr (unknown id).
const PythonCodeInfo* FindPythonCode(uint64_t id);
// The interpreter's eval loop (_PyEval_EvalFrameDefault), [begin, end); empty without Python.
// Written once by AttachPython, before the first Python frame is recorded; the writer merges
// Python frames into native stacks at the frames in it (writer/python_merger.h).
extern uintptr_t g_eval_begin, g_eval_end;
// Reads the calling thread's Python frames (innermost first) when a hooks library is attached,
// at most max, and at most SetPythonFrames's (default and ceiling kMaxPythonFrames): the
// innermost frames are kept, the outer ones cut. cache, thread: the thread's ring's cache of
// frames for the hooks (ThreadBuffer::python_frame_cache) and its thread_index.
int ReadPythonFrames(uint64_t* frames, int max, MemlensFrameCache* cache, uint32_t thread);
// Set by the hooks library while mimalloc runs under its wrappers (python_bridge.h:
// mimalloc_offset); the mmap and munmap interposers then record what mimalloc maps.
extern thread_local constinit bool t_in_mimalloc;

}  // namespace memlens::agent
