// src/python/interpreter_frames.h
//
// Everything that depends on the layout of one CPython version's internals, in one place:
// walking the calling thread's interpreter frames and reading a frame's code and line. The
// rest of the hooks library uses only the public C API. Supported: 3.11. 3.12 keeps
// _PyInterpreterFrame but renames f_code (f_executable in 3.13), moves `is_entry` into
// `owner == FRAME_OWNED_BY_CSTACK` frames and the allocators into _PyRuntime (so they must be
// set after runtime initialization); 3.13 adds the free-threaded build, where the frame chain
// of another thread must never be read and reference counts are per-thread (docs/python.md).
//
// Runs on: any thread, inside an allocation hook. Must not allocate or take locks.
#pragma once

#include <Python.h>

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#define Py_BUILD_CORE 1
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE
#else
#error "memlens's Python hooks support CPython 3.11 (see interpreter_frames.h)"
#endif

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

inline InterpreterFrame* OuterFrame(InterpreterFrame* frame) { return frame->previous; }

// Where the frame is in its code: the address of its last instruction, which lies inside the
// code object (its bytecode, or just before it while the frame is set up). While the code
// object lives, the address stands for the pair (code, instruction) and for IsAtSetUp: one
// load, no look at the code object.
inline uintptr_t FramePosition(InterpreterFrame* frame) {
  return reinterpret_cast<uintptr_t>(frame->prev_instr);
}

// The frame is before its first traceable instruction (copying free variables and the like):
// such a frame has no meaningful line and is skipped, unless it is a generator's, which
// CPython's _PyFrame_IsIncomplete never counts as being set up.
inline bool IsAtSetUp(InterpreterFrame* frame) {
  return frame->prev_instr < _PyCode_CODE(frame->f_code) + frame->f_code->_co_firsttraceable;
}

inline bool IsGeneratorFrame(InterpreterFrame* frame) {
  return frame->owner == FRAME_OWNED_BY_GENERATOR;
}

inline PyCodeObject* FrameCode(InterpreterFrame* frame) { return frame->f_code; }

// The index of the frame's current instruction in its code.
inline int FrameInstruction(InterpreterFrame* frame) { return _PyInterpreterFrame_LASTI(frame); }

// The source line of an instruction (CPython walks the line table: cache the answer).
inline int InstructionLine(PyCodeObject* code, int instruction) {
  return PyCode_Addr2Line(code, instruction * static_cast<int>(sizeof(_Py_CODEUNIT)));
}

// True for the first frame run by one call of the eval loop (_PyEval_EvalFrameDefault).
inline bool IsEntryFrame(InterpreterFrame* frame) { return frame->is_entry; }

inline PyObject* CodeName(PyCodeObject* code) { return code->co_qualname; }

}  // namespace memlens::python
