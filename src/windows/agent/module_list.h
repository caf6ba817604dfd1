// src/windows/agent/module_list.h
//
// The process's loaded modules as the capture describes them (format::ModuleRecord): the
// module's path (GetModuleFileNameW, UTF-8), its load bias (where it was loaded less the image
// base its file asks for: frames minus the bias are the addresses its DWARF or PDB uses), its
// CodeView identity (the RSDS record's GUID and age, 20 bytes, in build_id) and its image as
// one segment.
//
// Runs on: the writer thread.
#pragma once

#include <windows.h>

#include <string>
#include <vector>

#include "format/records.h"
#include "windows/text.h"

namespace memlens::windows {

struct LoadedModule {
  HMODULE handle = nullptr;
  uint64_t base = 0;
  uint64_t size = 0;
  format::ModuleRecord record;  // id left 0
};

// A loaded module's headers, when they are a 64-bit PE image's (else nullptr).
const IMAGE_NT_HEADERS64* ImageHeaders(HMODULE module);
// Every module loaded now, in the loader's order.
std::vector<LoadedModule> ListLoadedModules();
// One module, loaded from `path`: false when its headers are not a 64-bit PE image's.
bool DescribeModule(HMODULE handle, const wchar_t* path, LoadedModule* out);

}  // namespace memlens::windows
