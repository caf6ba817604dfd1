// src/python/frames_3_14.h: the frame and code-object layout of CPython 3.14, with the GIL or
// free-threaded (Py_GIL_DISABLED, from the interpreter's pyconfig.h); included by
// interpreter_frames.h, which says what each function means. What changed since 3.13:
// - f_executable is a _PyStackRef, a tagged reference: read through the interpreter's own
//   _PyFrame_GetCode (PyStackRef_AsPyObjectBorrow: the tag bits cleared);
// - the eval loop's entry frame is owned by FRAME_OWNED_BY_INTERPRETER (FRAME_OWNED_BY_CSTACK,
//   renumbered, is another frame of the interpreter's own): every owner from
//   FRAME_OWNED_BY_INTERPRETER on is a frame that runs no code of the program;
// - the free-threaded build runs each thread on its own copy of a code object's bytecode
//   (thread-local bytecode, tlbc_index): instr_ptr lies in that copy, which lives as long as
//   the code object, so it still stands for (code, instruction) in the thread that reads it,
//   and the instruction's index is taken from the copy's start (_PyFrame_GetBytecode).
//
// Runs on: any thread, inside an allocation hook. Must not allocate or take locks.
#pragma once

#include <Python.h>

#define Py_BUILD_CORE 1
#include <internal/pycore_interpframe.h>
#include <internal/pycore_obmalloc.h>  // SMALL_REQUEST_THRESHOLD
#include <internal/pycore_pymem.h>
#undef Py_BUILD_CORE

namespace memlens::python {

using InterpreterFrame = _PyInterpreterFrame;

// The innermost frame of the calling thread, or nullptr. Read through the thread's own state
// (its thread-local key; set whether or not the thread is attached): only this thread changes
// its frame chain, so no lock is needed, with or without a GIL.
inline InterpreterFrame* InnermostFrame() {
  PyThreadState* state = PyGILState_GetThisThreadState();
  return state ? state->current_frame : nullptr;
}

// As in 3.13, by the owner alone (as _PyFrame_IsIncomplete): the interpreter's own frames are
// FRAME_OWNED_BY_INTERPRETER and FRAME_OWNED_BY_CSTACK; every other frame runs a code object.
inline bool IsCodeFrame(InterpreterFrame* frame) {
  return frame->owner < FRAME_OWNED_BY_INTERPRETER;
}

inline uintptr_t FramePosition(InterpreterFrame* frame) {
  return reinterpret_cast<uintptr_t>(frame->instr_ptr);
}

inline PyCodeObject* FrameCode(InterpreterFrame* frame) { return _PyFrame_GetCode(frame); }

// _PyFrame_IsIncomplete's rule, less its owner tests.
inline bool IsAtSetUp(InterpreterFrame* frame) {
  return frame->instr_ptr < _PyFrame_GetBytecode(frame) + FrameCode(frame)->_co_firsttraceable;
}

// As CPython's own _PyFrame_IsEntryFrame.
inline bool IsEntryFrame(InterpreterFrame* frame) {
  return frame->previous && frame->previous->owner == FRAME_OWNED_BY_INTERPRETER;
}

constexpr size_t kPymallocLargest = SMALL_REQUEST_THRESHOLD;  // internal/pycore_obmalloc.h

}  // namespace memlens::python
