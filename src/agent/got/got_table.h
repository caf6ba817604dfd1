// src/agent/got/got_table.h
//
// GotTable: points the GOT/PLT slots through which loaded objects call named functions
// (malloc, free, ...) at hooks, and puts them back. This is how the agent records a process it
// was not preloaded into (got_patcher.h uses it; docs/agent.md, "GOT patching").
//
// What a slot is (x86-64 psABI §4.4; gABI "Dynamic Section"): an object calls a function it
// does not define through an 8-byte word the dynamic loader fills in, named by a relocation of
// its DT_JMPREL table (R_X86_64_JUMP_SLOT: PLT calls) or its DT_RELA table (R_X86_64_GLOB_DAT:
// -fno-plt calls and the C library's own; R_X86_64_64 with addend 0: a function pointer in
// its data). A slot is patched when its symbol is named by a hook, whether the object defines
// it or not (a preemptible definition: the C library's own calls of malloc and free go through
// such slots), as the loader would have bound it to a preloaded definition.
//
// Safety, the reasons in got_table.cc:
// - A slot is written with one aligned 8-byte atomic store: a thread calling through it sees
//   the old function or the hook, both of which work.
// - A slot in a read-only page (RELRO, with -z now the PLT's too) is written with its page
//   made writable for the store and given back exactly the protection /proc/self/maps showed.
// - An object whose RELRO is still writable is being relocated by a dlopen on another thread:
//   it is left for a later Patch (the loader would add its base to a lazy slot we wrote).
// - A slot the loader owns (JUMP_SLOT, GLOB_DAT) that lost its hook (lazy binding on another
//   thread resolved it over our store) gets it back on every Patch, the value it held becoming
//   the one to restore. A data pointer (R_X86_64_64) the program changed is left to it.
// - Unpatch restores only slots that still hold their hook.
// - Objects unloaded since the last call are forgotten (their slots are never touched again).
//
// Runs on: any thread, off the allocation path (start, stop, after dlopen). It allocates and
// reads /proc/self/maps; calls are serialized by one mutex, and each object is handled inside
// dl_iterate_phdr's callback, under the loader's lock, so that no object is unloaded meanwhile.
#pragma once

#include <link.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace memlens::agent::got {

struct Hook {
  std::string name;   // the symbol a slot must import
  uintptr_t address;  // what the slot is pointed at
};

// The slot kinds (architecture-neutral names for the relocation types).
enum class SlotKind : uint8_t { kJumpSlot, kGlobDat, kDataPointer };

struct Slot {
  uintptr_t* address;
  uintptr_t saved;  // what it held before the hook: what Unpatch writes back
  uintptr_t hook;
  SlotKind kind;
  bool ours;  // we wrote the hook (false: it held the hook already, e.g. the agent is linked)
};

class GotTable {
 public:
  // Which objects to patch (the agent leaves out the loader, the vdso and itself).
  using Filter = bool (*)(const dl_phdr_info& object);

  GotTable(std::vector<Hook> hooks, Filter filter);
  GotTable(const GotTable&) = delete;
  GotTable& operator=(const GotTable&) = delete;

  struct Result {
    size_t written = 0;  // slots given their hook in this call
    size_t covered = 0;  // slots holding a hook after it
    std::string error;   // set when nothing could be patched for a reason worth telling
  };
  // Every loaded object the filter accepts: slots not yet seen are patched, loader-owned slots
  // that lost their hook get it back, objects unloaded since are forgotten. Idempotent.
  Result Patch();
  // Patch, only between a Patch and an Unpatch (after a dlopen, which may come at any time).
  Result Refresh();
  // Every slot still holding its hook gets back what it held; the table is emptied. Returns
  // the number of slots restored.
  size_t Unpatch();

  // A copy of the table, for tests.
  std::vector<Slot> Slots();

 private:
  struct Object {  // a patchable loaded object, known by its load address, headers and name
    uintptr_t base;
    const ElfW(Phdr)* phdr;
    std::string name;
    std::vector<Slot> slots;  // sorted by address
  };
  struct Walk;
  static int Visit(dl_phdr_info* info, size_t size, void* walk);
  void VisitObject(const dl_phdr_info& info, Walk& walk);
  Result PatchLocked();

  std::mutex mutex_;
  std::vector<Hook> hooks_;  // sorted by name
  Filter filter_;
  std::vector<Object> objects_;
  bool patched_ = false;  // between Patch and Unpatch
  unsigned long long subs_ = 0;  // dlpi_subs at the last walk: unchanged, nothing was unloaded
};

// Helpers, exposed for the agent's filter and hook table and for tests.

// The dynamic loader or the vdso: never patched.
bool IsLoaderOrVdso(const dl_phdr_info& object);
// True when `address` lies in one of the object's loaded segments.
bool ObjectContains(const dl_phdr_info& object, uintptr_t address);
// The functions an object defines and exports (its dynamic symbol table), with their loaded
// addresses, but those whose name starts with `skip_prefix`.
std::vector<Hook> ExportedFunctions(const dl_phdr_info& object, const char* skip_prefix);

}  // namespace memlens::agent::got
