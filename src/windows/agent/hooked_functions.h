// src/windows/agent/hooked_functions.h
//
// The one list of what the Windows agent hooks, by the name a module imports it under. Each
// X(name) expands once per use (the patcher's name table, the hooks' declarations, the real
// functions' table); nothing else lists them.
//
// The C runtime's allocation functions, per C runtime: a module may import them from
// msvcrt.dll (mingw-w64's default), ucrtbase.dll or its api-ms-win-crt-heap-l1-1-0.dll
// forwarder (MSVC and UCRT builds), or an older msvcr100.dll to msvcr120.dll. operator new and
// delete reach them through the program's own import table (libstdc++ and MSVC's vcruntime both
// call malloc and free).
#pragma once

#define MEMLENS_WINDOWS_CRT_HOOKS(X) \
  X(malloc)                          \
  X(calloc)                          \
  X(realloc)                         \
  X(free)                            \
  X(_aligned_malloc)                 \
  X(_aligned_realloc)                \
  X(_aligned_free)

// kernel32's (or kernelbase's, or an api-ms-win-core-* forwarder's): the heap and virtual
// memory APIs every allocator ends in, the process's end, and the program's own crash filter
// (kept behind the agent's, which ends the capture: agent_dll.cc). A module importing ntdll's
// RtlAllocateHeap, RtlReAllocateHeap or RtlFreeHeap gets the HeapAlloc family's hooks
// (import_patcher.cc). Libraries loaded later are seen
// by the loader's own notifications (agent_dll.cc), not by hooking LoadLibrary: those cover
// the libraries a library brings in, and come before the library's DllMain runs.
#define MEMLENS_WINDOWS_KERNEL_HOOKS(X) \
  X(HeapCreate)                         \
  X(HeapDestroy)                        \
  X(HeapAlloc)                          \
  X(HeapReAlloc)                        \
  X(HeapFree)                           \
  X(VirtualAlloc)                       \
  X(VirtualFree)                        \
  X(ExitProcess)                        \
  X(SetUnhandledExceptionFilter)

namespace memlens::windows {

#define MEMLENS_ENUM_ENTRY(name) k_##name,
enum CrtFunction { MEMLENS_WINDOWS_CRT_HOOKS(MEMLENS_ENUM_ENTRY) kCrtFunctionCount };
enum KernelFunction { MEMLENS_WINDOWS_KERNEL_HOOKS(MEMLENS_ENUM_ENTRY) kKernelFunctionCount };
#undef MEMLENS_ENUM_ENTRY

// The C runtimes told apart: each has its own heap, so each hook calls the function of the
// runtime its caller imported. kOtherCrt is the first of msvcr100 to msvcr120 seen; a second one's
// imports are left unhooked.
enum CrtFamily { kMsvcrt, kUcrt, kOtherCrt, kCrtFamilyCount };

}  // namespace memlens::windows
