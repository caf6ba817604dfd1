// src/python/frames_3_11.h: the frame and code-object layout of CPython 3.11 (included by
// interpreter_frames.h, which says what each function means). Only the GIL build exists.
//
// Runs on: any thread, inside an allocation hook. Must not allocate or take locks.
#pragma once

#include <Python.h>

#define Py_BUILD_CORE 1
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE

namespace memlens::python {

using InterpreterFrame = _PyInterpreterFrame;

// The innermost frame of the calling thread, or nullptr (no Python running on this thread).
// Reads the thread's own state through its thread-local key: valid without holding the GIL,
// because only this thread changes its own frame chain.
inline InterpreterFrame* InnermostFrame() {
  PyThreadState* state = PyGILState_GetThisThreadState();
  if (!state || !state->cframe) return nullptr;
  return state->cframe->current_frame;
}

// Every 3.11 frame runs a code object: the eval loop marks its first frame (is_entry) instead
// of pushing one of its own.
inline bool IsCodeFrame(InterpreterFrame*) { return true; }

// The address of the frame's last instruction, which lies inside the code object (its
// bytecode, or just before it while the frame is set up). While the code object lives, the
// address stands for the pair (code, instruction) and for IsAtSetUp: one load, no look at the
// code object.
inline uintptr_t FramePosition(InterpreterFrame* frame) {
  return reinterpret_cast<uintptr_t>(frame->prev_instr);
}

// The frame is before its first traceable instruction (copying free variables and the like):
// such a frame has no meaningful line and is skipped, unless it is a generator's, which
// CPython's _PyFrame_IsIncomplete never counts as being set up.
inline bool IsAtSetUp(InterpreterFrame* frame) {
  return frame->prev_instr < _PyCode_CODE(frame->f_code) + frame->f_code->_co_firsttraceable;
}

inline PyCodeObject* FrameCode(InterpreterFrame* frame) { return frame->f_code; }

inline bool IsEntryFrame(InterpreterFrame* frame) { return frame->is_entry; }

// pymalloc serves requests of 1 to this many bytes from its pools (SMALL_REQUEST_THRESHOLD in
// Objects/obmalloc.c, not in a header in 3.11).
constexpr size_t kPymallocLargest = 512;

}  // namespace memlens::python
