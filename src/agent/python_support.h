// src/agent/python_support.h
//
// The agent's side of Python support (the bridge in python_bridge.h): finds an interpreter in
// the process, loads the matching hooks library, and keeps what the writer needs to turn
// Python frames into capture records (the code objects' names, the eval loop's address range).
//
// Runs on: the thread running the agent's constructor (AttachPython); application threads
// (through the bridge); the writer thread (PythonCodeInfo, EvalLoopContains).
#pragma once

#include <cstddef>
#include <cstdint>

namespace memlens::agent {

struct PythonCodeInfo {
  const char* filename;
  const char* name;
  uint64_t first_line;
};

// Loads libmemlens_python<major>.<minor>.so next to the agent when the process runs Python.
void AttachPython();
// The code object registered under id, or nullptr (unknown id).
const PythonCodeInfo* FindPythonCode(uint64_t id);
// The interpreter's eval loop (_PyEval_EvalFrameDefault), [begin, end); empty without Python.
// Written once by AttachPython, before the first Python frame is recorded.
extern uintptr_t g_eval_begin, g_eval_end;
// True when ip lies in the eval loop. Inline: the writer asks it of every native frame of a
// stack with Python frames.
inline bool EvalLoopContains(uint64_t ip) { return ip - g_eval_begin < g_eval_end - g_eval_begin; }
// Reads the calling thread's Python frames (innermost first) when a hooks library is attached,
// at most max, and at most MEMLENS_PYTHON_FRAMES (read once by AttachPython; default and
// ceiling kMaxPythonFrames): the innermost frames are kept, the outer ones cut.
int ReadPythonFrames(uint64_t* frames, int max);

}  // namespace memlens::agent
