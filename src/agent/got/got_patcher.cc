// src/agent/got/got_patcher.cc: see got_patcher.h.
#include "agent/got/got_patcher.h"

#include <link.h>

#include <atomic>
#include <cstring>

#include "agent/got/got_table.h"

namespace memlens::agent::got {
namespace {

// Which objects are patched: not the loader (its own malloc pointer was taken at start and it
// frees through it), not the vdso, not the agent itself or its Python hooks libraries, whose
// calls must reach the real functions.
bool Patchable(const dl_phdr_info& object) {
  if (IsLoaderOrVdso(object)) return false;
  if (ObjectContains(object, reinterpret_cast<uintptr_t>(&Patchable))) return false;
  const char* name = object.dlpi_name ? object.dlpi_name : "";
  const char* slash = std::strrchr(name, '/');
  return std::strncmp(slash ? slash + 1 : name, "libmemlens_python", 17) != 0;
}

int FindSelf(dl_phdr_info* info, size_t, void* out) {
  if (!ObjectContains(*info, reinterpret_cast<uintptr_t>(&FindSelf))) return 0;
  *static_cast<std::vector<Hook>*>(out) = ExportedFunctions(*info, "memlens_");
  return 1;
}

// Made once and never freed: the agent is never unloaded.
GotTable& Table() {
  static GotTable* table = [] {
    std::vector<Hook> hooks;
    dl_iterate_phdr(FindSelf, &hooks);
    return new GotTable(std::move(hooks), Patchable);
  }();
  return *table;
}

// Set between PatchLoadedObjects and UnpatchAll: a dlopen outside that time takes no lock.
std::atomic<bool> g_patched{false};

}  // namespace

bool PatchLoadedObjects(std::string* error) {
  GotTable::Result result = Table().Patch();
  if (result.covered == 0) {
    Table().Unpatch();
    *error = !result.error.empty() ? result.error
                                   : "no loaded object calls the allocation functions through a "
                                     "GOT or PLT slot (a static executable?)";
    return false;
  }
  g_patched.store(true, std::memory_order_release);
  return true;
}

void PatchNewObjects() {
  if (g_patched.load(std::memory_order_acquire)) Table().Refresh();
}

void UnpatchAll() {
  g_patched.store(false, std::memory_order_release);
  Table().Unpatch();
}

}  // namespace memlens::agent::got
