/* src/agent/python_bridge.h
 *
 * The C ABI between the agent (libmemlens.so, which knows nothing of Python) and the Python
 * hooks library (src/python/, the only code that includes Python.h). When the agent finds a
 * Python interpreter in the process (the symbol Py_Version), it loads
 * libmemlens_python<major>.<minor>[t].so (t: free-threaded) from its own folder and calls its
 * memlens_python_attach(&bridge) before the interpreter initializes; the hooks library wraps
 * Python's allocator domains and answers the agent's requests for Python frames.
 *
 * Thread safety: every function may be called from any thread. Lifetime: the bridge and the
 * strings passed to register_code are only read during the call (the agent copies them). */
#ifndef MEMLENS_AGENT_PYTHON_BRIDGE_H_
#define MEMLENS_AGENT_PYTHON_BRIDGE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MEMLENS_PYTHON_BRIDGE_VERSION 6

/* Fills frames[0..max) with the calling thread's Python frames, innermost first, as
 * PythonFrameIp values (src/format/records.h); a frame that began a new run of the eval loop
 * (an "entry" frame) also has kPythonEntryBit set. Returns the count. Must not allocate.
 * cache: where the reader keeps its cache of frames, one per ring of the agent, handed on with
 * the ring to the next thread once its thread has exited: an exited thread leaves no memory of
 * the hooks behind (a program that starts a thread per request would otherwise grow by a cache
 * a request). thread: the ring's thread now, a number never given to another thread of the
 * process; the reader empties a cache filled for another thread before using it, since a
 * position may have come to mean other code meanwhile (3.14's free-threaded build frees an
 * exited thread's copies of bytecode). */
struct MemlensFrameCache {
  void* memory;    /* the reader's: null until it maps one (map_memory), never unmapped */
  uint32_t thread; /* the thread it was filled for */
};
typedef int (*MemlensPythonFrameReader)(uint64_t* frames, int max,
                                        struct MemlensFrameCache* cache, uint32_t thread);

#define MEMLENS_PYTHON_ENTRY_BIT (UINT64_C(1) << 62)

/* A symbol that only a free-threaded interpreter (3.13t, 3.14t: built --disable-gil) exports,
 * there from before Py_Initialize: how the agent and the hooks library tell it from the GIL
 * build of the same version. Checked in both builds of 3.13 and 3.14 (docs/python.md). */
#define MEMLENS_FREE_THREADED_SYMBOL "_Py_DecRefShared"

struct MemlensAgentBridge {
  int version; /* MEMLENS_PYTHON_BRIDGE_VERSION */
  /* Returns nonzero when this call should be recorded, and then marks the thread as inside
   * the agent until leave(): nested allocations (pymalloc falling through to malloc) are not
   * recorded twice. caller: the return address of the allocator function. */
  int (*enter)(const void* caller);
  void (*leave)(void);
  /* Nonzero while this process records, whether or not the thread is inside the agent. */
  int (*recording)(void);
  /* kind: a format::EventKind. Python frames are read through the registered reader. */
  void (*record_alloc)(uint8_t kind, const void* address, size_t size);
  void (*record_release)(uint8_t kind, const void* address, size_t size);
  /* A new code object: returns its id (>= 1), or 0 when the table is full. */
  uint64_t (*register_code)(const char* filename, const char* name, uint64_t first_line);
  /* The hooks library tells the agent where its own code and the eval loop are. */
  void (*set_python_ranges)(uintptr_t hooks_begin, uintptr_t hooks_end, uintptr_t eval_begin,
                            uintptr_t eval_end);
  void (*set_frame_reader)(MemlensPythonFrameReader reader);
  /* One line for the user (prefixed "memlens: ") on stderr. */
  void (*say)(const char* message);
  /* Nonzero when the process samples (docs/sampling.md); fixed before the bridge is handed
   * over. Then each wrapper first tries sampling's short path, inline: when the call needs
   * nothing recorded (an allocation that holds no sample point, the free or realloc of a block
   * that was not sampled, any call from inside the agent), it runs the real call with the
   * thread marked as inside the agent (nothing it causes is recorded: pymalloc hands large
   * blocks to PyMem_RawMalloc, whose wrapper must not count them again) and returns. The
   * thread's countdown (uint64_t, memlens::agent::CountsDownUnsampled) and its "inside the
   * agent" flag (bool) are the agent's thread-locals, given as byte offsets from the thread
   * pointer (__builtin_thread_pointer()): the agent's thread-local storage is static
   * (initial-exec), so one offset holds in every thread, and the wrappers make no call. */
  int sampling;
  ptrdiff_t countdown_offset;
  ptrdiff_t in_hook_offset;
  /* The agent's set of sampled blocks (a memlens::agent::SampledPointers), for its filter. */
  const void* sampled_blocks;
  /* Zero-filled memory for the hooks library's own tables, never given back, listed as
   * memlens's own where memlens rss looks (agent/own_mappings.h); nullptr when the kernel
   * refuses. Not malloc: the hooks' tables are used from inside allocation hooks. */
  void* (*map_memory)(size_t bytes);
  /* A bool thread-local of the agent (an offset like the ones above) that the hooks set while
   * mimalloc, a free-threaded build's allocator, serves a call under one of their wrappers: the
   * anonymous mappings it makes or removes meanwhile (its arenas) are recorded as mimalloc's
   * (format::EventKind::kMimallocMap), a figure of their own, although the thread is inside
   * the agent. The hooks clear it before recording anything. */
  ptrdiff_t mimalloc_offset;
  /* The program's own code ended (python_hooks.cc says when and how it knows): records one
   * kProgramEnd event when this process records, and nothing otherwise (a forked child). Called
   * by a thread holding the GIL; not on any hot path. */
  void (*program_end)(void);
};

/* Exported by the hooks library. Returns 0 on success; otherwise it has said why. */
typedef int (*MemlensPythonAttach)(const struct MemlensAgentBridge* bridge);

#ifdef __cplusplus
}
#endif

#endif /* MEMLENS_AGENT_PYTHON_BRIDGE_H_ */
