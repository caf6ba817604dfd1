// src/python/interpreter_frames.h
//
// Everything that depends on the layout of one CPython version's internals: walking the calling
// thread's interpreter frames and reading a frame's code and line. One header per version
// (frames_3_11.h, frames_3_13.h, frames_3_14.h), each written against that interpreter's own
// internal headers (Py_BUILD_CORE), so a build for an interpreter checks the layout it reads
// against that interpreter's definitions; this one picks the header by PY_VERSION_HEX. The rest
// of the hooks library uses only the public C API and what these headers give it.
//
// Each header defines, in memlens::python (what reads the same in every version is below):
//   InterpreterFrame, InnermostFrame()  the calling thread's frame chain
//   IsCodeFrame(f)        false for the interpreter's own frames that run no code object
//                         (3.13's and 3.14's entry frames): never reported
//   FramePosition(f)      a word that stands for (code, instruction) while the code object lives
//   IsAtSetUp(f)          before its first traceable instruction (the interpreter's own rule)
//   FrameCode(f)
//   IsEntryFrame(f)       the first frame run by one call of the eval loop
//   kPymallocLargest
//
// Runs on: any thread, inside an allocation hook. Must not allocate or take locks.
#pragma once

#include <Python.h>

// The versions there is a header for, frames_<major>_<minor>.h each: the build takes its list of
// supported versions from those files (cmake/memlens_pythons.cmake), so a new one is a header
// and its line here.
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#include "python/frames_3_11.h"
#elif PY_VERSION_HEX >= 0x030D0000 && PY_VERSION_HEX < 0x030E0000
#include "python/frames_3_13.h"
#elif PY_VERSION_HEX >= 0x030E0000 && PY_VERSION_HEX < 0x030F0000
#include "python/frames_3_14.h"
#else
#error "memlens's Python hooks have no frame layout header for this CPython (src/python/frames_*.h)"
#endif

// What reads the same in every supported version (compiled against each one's headers all the
// same).
namespace memlens::python {

inline InterpreterFrame* OuterFrame(InterpreterFrame* frame) { return frame->previous; }

inline bool IsGeneratorFrame(InterpreterFrame* frame) {
  return frame->owner == FRAME_OWNED_BY_GENERATOR;
}

// The index of the frame's current instruction in its code (in 3.14's free-threaded build, in
// the thread's own copy of the bytecode).
inline int FrameInstruction(InterpreterFrame* frame) { return _PyInterpreterFrame_LASTI(frame); }

// The source line of an instruction (CPython walks the line table: cache the answer).
inline int InstructionLine(PyCodeObject* code, int instruction) {
  return PyCode_Addr2Line(code, instruction * static_cast<int>(sizeof(_Py_CODEUNIT)));
}

inline PyObject* CodeName(PyCodeObject* code) { return code->co_qualname; }

// "pymalloc", "mimalloc" (a free-threaded build's only allocator), "malloc"... or nullptr once
// the allocators are not the interpreter's own.
inline const char* CurrentAllocatorName() { return _PyMem_GetCurrentAllocatorName(); }

}  // namespace memlens::python
