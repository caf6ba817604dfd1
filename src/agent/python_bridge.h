/* src/agent/python_bridge.h
 *
 * The C ABI between the agent (libmemlens.so, which knows nothing of Python) and the Python
 * hooks library (src/python/, the only code that includes Python.h). When the agent finds a
 * Python interpreter in the process (the symbol Py_Version), it loads
 * libmemlens_python<major>.<minor>.so from its own folder and calls its
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

#define MEMLENS_PYTHON_BRIDGE_VERSION 2

/* Fills frames[0..max) with the calling thread's Python frames, innermost first, as
 * PythonFrameIp values (src/format/records.h); a frame that began a new run of the eval loop
 * (an "entry" frame) also has kPythonEntryBit set. Returns the count. Must not allocate. */
typedef int (*MemlensPythonFrameReader)(uint64_t* frames, int max);

#define MEMLENS_PYTHON_ENTRY_BIT (UINT64_C(1) << 62)

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
   * over. Then each wrapper tries the short path first: when the call needs nothing recorded
   * (an allocation that holds no sample point, the free or realloc of a block that was not
   * sampled), the agent runs fn(ctx, ...) itself, as inside the agent (nothing it causes is
   * recorded), and returns 1 with the result in *out; 0 means: take the full path. */
  int sampling;
  int (*malloc_unsampled)(void* (*fn)(void*, size_t), void* ctx, size_t size, void** out);
  int (*calloc_unsampled)(void* (*fn)(void*, size_t, size_t), void* ctx, size_t count,
                          size_t size, void** out);
  int (*realloc_unsampled)(void* (*fn)(void*, void*, size_t), void* ctx, void* ptr, size_t size,
                           void** out);
  int (*free_unsampled)(void (*fn)(void*, void*), void* ctx, void* ptr);
};

/* Exported by the hooks library. Returns 0 on success; otherwise it has said why. */
typedef int (*MemlensPythonAttach)(const struct MemlensAgentBridge* bridge);

#ifdef __cplusplus
}
#endif

#endif /* MEMLENS_AGENT_PYTHON_BRIDGE_H_ */
