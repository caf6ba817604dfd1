// src/base/raw_mapping.h
//
// Anonymous private memory straight from the mmap system call: never through an allocator,
// nor through the agent's own mmap hook (the agent maps its buffers and tables with it from
// inside allocation hooks), and zero-filled by the kernel page by page, on first touch. A table
// that must start all zero costs nothing until a slot on a page is used, where a zero-filled
// std::vector writes every page up front.
//
// Runs on: any thread; a system call each, no locks of ours.
#pragma once

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>

namespace memlens {

// Zero-filled, readable and writable, never reserved against the commit limit; nullptr when
// the kernel refuses.
inline void* MapZeroed(size_t bytes) {
  void* mem = reinterpret_cast<void*>(syscall(SYS_mmap, nullptr, bytes, PROT_READ | PROT_WRITE,
                                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
  return mem == MAP_FAILED ? nullptr : mem;
}

inline void Unmap(void* mem, size_t bytes) { syscall(SYS_munmap, mem, bytes); }

// Makes a mapping from MapZeroed all zero again by handing its pages back: the next touch of
// each gets a fresh zero page. Returns false when the kernel refuses.
inline bool RezeroMapping(void* mem, size_t bytes) {
  return syscall(SYS_madvise, mem, bytes, MADV_DONTNEED) == 0;
}

}  // namespace memlens
