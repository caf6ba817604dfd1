// src/agent/got/caller_dlopen.cc: see caller_dlopen.h.
#include "agent/got/caller_dlopen.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

namespace memlens::agent::got {
namespace {

// Only a caller with a search path of its own finds what the agent would not.
bool HasSearchPath(const link_map& map) {
  for (const ElfW(Dyn)* entry = map.l_ld; entry && entry->d_tag != DT_NULL; ++entry) {
    if (entry->d_tag == DT_RUNPATH || entry->d_tag == DT_RPATH) return true;
  }
  return false;
}

// The directories `map` searches, in its order; empty if the loader does not say.
std::vector<std::string> SearchPath(link_map* map) {
  std::vector<std::string> directories;
  Dl_serinfo size;
  if (dlinfo(map, RTLD_DI_SERINFOSIZE, &size) != 0) return directories;
  std::vector<std::max_align_t> buffer(size.dls_size / sizeof(std::max_align_t) + 1);
  auto* paths = reinterpret_cast<Dl_serinfo*>(buffer.data());
  *paths = size;  // dls_size and dls_cnt tell dlinfo the room it has
  if (dlinfo(map, RTLD_DI_SERINFOSIZE, paths) != 0 || dlinfo(map, RTLD_DI_SERINFO, paths) != 0) {
    return directories;
  }
  for (unsigned i = 0; i < paths->dls_cnt; ++i) {
    directories.push_back(paths->dls_serpath[i].dls_name);
  }
  return directories;
}

}  // namespace

void* DlopenAsCaller(const void* caller, const char* file, int mode, DlopenFunction dlopen) {
  if (!file || !*file || std::strchr(file, '/')) return dlopen(file, mode);
  Dl_info info;
  link_map* map = nullptr;
  if (!dladdr1(caller, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) || !map ||
      !HasSearchPath(*map)) {
    return dlopen(file, mode);
  }
  // Loaded already under that name (or soname): the name finds it whoever asks, and this
  // counts the reference and applies the mode as a plain dlopen would.
  if (void* handle = dlopen(file, mode | RTLD_NOLOAD)) return handle;
  for (const std::string& directory : SearchPath(map)) {
    std::string path = directory + "/" + file;
    if (access(path.c_str(), F_OK) == 0) return dlopen(path.c_str(), mode);
  }
  return dlopen(file, mode);  // the loader's cache, or its message that nothing was found
}

}  // namespace memlens::agent::got
