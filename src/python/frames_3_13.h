// src/python/frames_3_13.h: the frame and code-object layout of CPython 3.13, with the GIL or
// free-threaded (Py_GIL_DISABLED, from the interpreter's pyconfig.h); included by
// interpreter_frames.h, which says what each function means. What changed since 3.11:
// - the thread state holds current_frame itself (no cframe);
// - a frame's f_executable is any object: the eval loop pushes an entry frame of its own (owned
//   by FRAME_OWNED_BY_CSTACK, f_executable None) below the first frame each call of it runs,
//   instead of marking that frame is_entry;
// - instr_ptr (the instruction running or about to run) replaces prev_instr (the last one run):
//   a frame starts at its code's first instruction, not one before it.
//
// Runs on: any thread, inside an allocation hook. Must not allocate or take locks.
#pragma once

#include <Python.h>

#define Py_BUILD_CORE 1
#include <internal/pycore_frame.h>
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

// The eval loop's entry frames run no code (f_executable is None); every other frame's
// f_executable is a code object (the __init__ shim's included, which IsAtSetUp then skips):
// CPython's own walks (_PyFrame_IsIncomplete, then _PyFrame_GetCode, which asserts
// PyCode_Check) rely on the owner alone, and so does this test, one load per frame.
inline bool IsCodeFrame(InterpreterFrame* frame) { return frame->owner != FRAME_OWNED_BY_CSTACK; }

// The address of the frame's current instruction, inside its code object: while the code object
// lives, it stands for (code, instruction) and for IsAtSetUp.
inline uintptr_t FramePosition(InterpreterFrame* frame) {
  return reinterpret_cast<uintptr_t>(frame->instr_ptr);
}

inline PyCodeObject* FrameCode(InterpreterFrame* frame) { return _PyFrame_GetCode(frame); }

// _PyFrame_IsIncomplete's rule, less its owner tests (IsCodeFrame and IsGeneratorFrame make
// them): before the first traceable instruction.
inline bool IsAtSetUp(InterpreterFrame* frame) {
  PyCodeObject* code = FrameCode(frame);
  return frame->instr_ptr < _PyCode_CODE(code) + code->_co_firsttraceable;
}

// The first frame of a call of the eval loop sits just inside that call's entry frame (as
// CPython's own _PyFrame_IsEntryFrame tells).
inline bool IsEntryFrame(InterpreterFrame* frame) {
  return frame->previous && frame->previous->owner == FRAME_OWNED_BY_CSTACK;
}

constexpr size_t kPymallocLargest = SMALL_REQUEST_THRESHOLD;  // internal/pycore_obmalloc.h

}  // namespace memlens::python
