// src/base/raw_mapping.h
//
// Anonymous private memory straight from the mmap system call: never through an allocator,
// nor through the agent's own mmap hook (the agent maps its buffers and tables with it from
// inside allocation hooks), and zero-filled by the kernel page by page, on first touch. A table
// that must start all zero costs nothing until a slot on a page is used, where a zero-filled
// std::vector writes every page up front.
//
// Runs on: any thread; a system call each, no locks of ours. RawMappedBytes() counts what is
// mapped (one relaxed add beside each system call), so the agent can say how much memory it holds
// for its own buffers and tables (memlens_get_agent_memory, src/agent/api/api.cc).
// On Windows (the agent DLL, src/windows/agent) the same through VirtualAlloc, called from the
// agent's own module, whose import table the agent never patches.
#pragma once

#ifdef _WIN32
#include <windows.h>
#else
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <atomic>
#include <cstddef>

namespace memlens {

// Bytes mapped by MapZeroed and not yet unmapped, in this binary (each has its own counter).
inline std::atomic<size_t> g_raw_mapped_bytes{0};

inline size_t RawMappedBytes() { return g_raw_mapped_bytes.load(std::memory_order_relaxed); }

// Told of each mapping MapZeroed makes (mapped) and Unmap removes: the agent lists its own
// memory for `memlens rss` (agent/own_mappings.h). Null: nobody is told.
inline void (*g_raw_mapping_observer)(void* mem, size_t bytes, bool mapped) = nullptr;

// Zero-filled, readable and writable, never reserved against the commit limit; nullptr when
// the kernel refuses.
inline void* MapZeroed(size_t bytes) {
#ifdef _WIN32
  void* mem = VirtualAlloc(nullptr, bytes, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
  if (mem == nullptr) return nullptr;
#else
  void* mem = reinterpret_cast<void*>(syscall(SYS_mmap, nullptr, bytes, PROT_READ | PROT_WRITE,
                                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
  if (mem == MAP_FAILED) return nullptr;
#endif
  g_raw_mapped_bytes.fetch_add(bytes, std::memory_order_relaxed);
  if (g_raw_mapping_observer) g_raw_mapping_observer(mem, bytes, true);
  return mem;
}

inline void Unmap(void* mem, size_t bytes) {
  if (g_raw_mapping_observer) g_raw_mapping_observer(mem, bytes, false);
#ifdef _WIN32
  const bool unmapped = VirtualFree(mem, 0, MEM_RELEASE);
#else
  const bool unmapped = syscall(SYS_munmap, mem, bytes) == 0;
#endif
  if (unmapped) {
    g_raw_mapped_bytes.fetch_sub(bytes, std::memory_order_relaxed);
  }
}

// Makes a mapping from MapZeroed all zero again by handing its pages back: the next touch of
// each gets a fresh zero page. Returns false when the kernel refuses.
inline bool RezeroMapping(void* mem, size_t bytes) {
#ifdef _WIN32  // decommitted pages come back zero when committed again
  return VirtualFree(mem, bytes, MEM_DECOMMIT) &&
         VirtualAlloc(mem, bytes, MEM_COMMIT, PAGE_READWRITE) != nullptr;
#else
  return syscall(SYS_madvise, mem, bytes, MADV_DONTNEED) == 0;
#endif
}

}  // namespace memlens
