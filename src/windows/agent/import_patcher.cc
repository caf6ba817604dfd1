// src/windows/agent/import_patcher.cc
#include "windows/agent/import_patcher.h"

#include <psapi.h>

#include <algorithm>
#include <cstring>
#include <iterator>

#include "windows/agent/module_list.h"

namespace memlens::windows {
namespace {

SRWLOCK g_lock = SRWLOCK_INIT;
constexpr int kMaxModules = 4096;
HMODULE g_patched[kMaxModules];
int g_patched_count = 0;

const char* const kCrtNames[] = {
#define MEMLENS_NAME(name) #name,
    MEMLENS_WINDOWS_CRT_HOOKS(MEMLENS_NAME)
#undef MEMLENS_NAME
};
const char* const kKernelNames[] = {
#define MEMLENS_NAME(name) #name,
    MEMLENS_WINDOWS_KERNEL_HOOKS(MEMLENS_NAME)
#undef MEMLENS_NAME
};

// ntdll's own names for kernel32's heap functions (kernel32 forwards HeapAlloc, HeapReAlloc and
// HeapFree to them, with the same parameters): a module that imports them from ntdll, as
// Windows' and Wine's own DLLs do, is hooked the same way.
struct NtdllName {
  const char* name;
  KernelFunction function;
};
constexpr NtdllName kNtdllNames[] = {
    {"RtlAllocateHeap", k_HeapAlloc},
    {"RtlReAllocateHeap", k_HeapReAlloc},
    {"RtlFreeHeap", k_HeapFree},
};

bool StartsWith(const char* s, const char* prefix) {
  return _strnicmp(s, prefix, std::strlen(prefix)) == 0;
}

// What an imported DLL is to the agent: a C runtime (its family), kernel32's APIs, ntdll, or
// none of them.
enum class Provider { kNone, kCrt, kKernel, kNtdll };
Provider Classify(const char* dll, CrtFamily* family) {
  if (_stricmp(dll, "msvcrt.dll") == 0) {
    *family = kMsvcrt;
    return Provider::kCrt;
  }
  if (_stricmp(dll, "ucrtbase.dll") == 0 || _stricmp(dll, "ucrtbased.dll") == 0 ||
      StartsWith(dll, "api-ms-win-crt-")) {
    *family = kUcrt;
    return Provider::kCrt;
  }
  if (StartsWith(dll, "msvcr")) {
    *family = kOtherCrt;
    return Provider::kCrt;
  }
  if (_stricmp(dll, "kernel32.dll") == 0 || _stricmp(dll, "kernelbase.dll") == 0 ||
      StartsWith(dll, "api-ms-win-core-")) {
    return Provider::kKernel;
  }
  if (_stricmp(dll, "ntdll.dll") == 0) return Provider::kNtdll;
  return Provider::kNone;
}

int Find(const char* const* names, int count, const char* name) {
  for (int i = 0; i < count; ++i) {
    if (std::strcmp(names[i], name) == 0) return i;
  }
  return -1;
}

void WriteEntry(ULONG_PTR* slot, void* value) {
  DWORD old = 0;
  if (!VirtualProtect(slot, sizeof *slot, PAGE_READWRITE, &old)) return;
  *slot = reinterpret_cast<ULONG_PTR>(value);
  VirtualProtect(slot, sizeof *slot, old, &old);
}

void PatchModule(HMODULE module) {
  const IMAGE_NT_HEADERS64* nt = ImageHeaders(module);
  if (nt == nullptr) return;
  const IMAGE_DATA_DIRECTORY& dir = nt->OptionalHeader.DataDirectory[IMAGE_DIRECTORY_ENTRY_IMPORT];
  const DWORD image_size = nt->OptionalHeader.SizeOfImage;
  if (dir.VirtualAddress == 0 || dir.VirtualAddress >= image_size) return;
  auto* base = reinterpret_cast<char*>(module);
  HookTables& t = Hooks();
  for (auto* d = reinterpret_cast<IMAGE_IMPORT_DESCRIPTOR*>(base + dir.VirtualAddress);
       d->Name != 0 && d->Name < image_size; ++d) {
    CrtFamily family = kMsvcrt;
    const Provider provider = Classify(base + d->Name, &family);
    // Names come from the lookup table; without one (an old bound import) nothing is known.
    if (provider == Provider::kNone || d->OriginalFirstThunk == 0 ||
        d->OriginalFirstThunk >= image_size || d->FirstThunk >= image_size) {
      continue;
    }
    auto* names = reinterpret_cast<IMAGE_THUNK_DATA*>(base + d->OriginalFirstThunk);
    auto* slots = reinterpret_cast<ULONG_PTR*>(base + d->FirstThunk);
    for (; names->u1.AddressOfData != 0; ++names, ++slots) {
      if (IMAGE_SNAP_BY_ORDINAL(names->u1.Ordinal) || names->u1.AddressOfData >= image_size) {
        continue;
      }
      const char* name =
          reinterpret_cast<IMAGE_IMPORT_BY_NAME*>(base + names->u1.AddressOfData)->Name;
      void* current = reinterpret_cast<void*>(*slots);
      if (provider == Provider::kKernel || provider == Provider::kNtdll) {
        int i = -1;
        if (provider == Provider::kKernel) {
          i = Find(kKernelNames, kKernelFunctionCount, name);
        } else {
          for (const NtdllName& n : kNtdllNames) {
            if (std::strcmp(n.name, name) == 0) i = n.function;
          }
        }
        if (i >= 0 && current != t.kernel_hooks[i]) WriteEntry(slots, t.kernel_hooks[i]);
        continue;
      }
      const int i = Find(kCrtNames, kCrtFunctionCount, name);
      if (i < 0 || current == t.crt_hooks[family][i]) continue;
      void*& real = t.crt_real[family][i];
      if (real == nullptr) real = current;
      if (real == current) WriteEntry(slots, t.crt_hooks[family][i]);
    }
  }
}

bool Patched(HMODULE module) {
  for (int i = 0; i < g_patched_count; ++i) {
    if (g_patched[i] == module) return true;
  }
  return false;
}

int LoadedModules(HMODULE* modules, int capacity) {
  DWORD bytes = 0;
  if (!K32EnumProcessModules(GetCurrentProcess(), modules, capacity * sizeof(HMODULE), &bytes)) {
    return 0;
  }
  const int n = static_cast<int>(bytes / sizeof(HMODULE));
  return n < capacity ? n : capacity;
}

// The providers themselves are left alone: kernel32's HeapAlloc, the real function the hooks
// call, reaches kernelbase and ntdll through kernel32's own import table.
bool Patchable(HMODULE self, HMODULE module) {
  const HMODULE providers[] = {self, GetModuleHandleW(L"kernel32.dll"),
                               GetModuleHandleW(L"kernelbase.dll"), GetModuleHandleW(L"ntdll.dll")};
  return std::find(std::begin(providers), std::end(providers), module) == std::end(providers) &&
         !Patched(module) && g_patched_count < kMaxModules;
}

}  // namespace

bool ResolveKernelFunctions() {
  HMODULE kernel32 = GetModuleHandleW(L"kernel32.dll");
  if (kernel32 == nullptr) return false;
  HookTables& t = Hooks();
  for (int i = 0; i < kKernelFunctionCount; ++i) {
    t.kernel_real[i] = reinterpret_cast<void*>(GetProcAddress(kernel32, kKernelNames[i]));
    if (t.kernel_real[i] == nullptr) return false;
  }
  return true;
}

void PatchLoadedModules(HMODULE self) {
  static HMODULE modules[kMaxModules];  // under the lock
  AcquireSRWLockExclusive(&g_lock);
  const int n = LoadedModules(modules, kMaxModules);
  for (int i = 0; i < n; ++i) {
    if (!Patchable(self, modules[i])) continue;
    PatchModule(modules[i]);
    g_patched[g_patched_count++] = modules[i];
  }
  ReleaseSRWLockExclusive(&g_lock);
}

void PatchNewModule(HMODULE self, HMODULE module) {
  AcquireSRWLockExclusive(&g_lock);
  if (Patchable(self, module)) {
    PatchModule(module);
    g_patched[g_patched_count++] = module;
  }
  ReleaseSRWLockExclusive(&g_lock);
}

void ForgetModule(HMODULE module) {
  AcquireSRWLockExclusive(&g_lock);
  int kept = 0;
  for (int i = 0; i < g_patched_count; ++i) {
    if (g_patched[i] != module) g_patched[kept++] = g_patched[i];
  }
  g_patched_count = kept;
  ReleaseSRWLockExclusive(&g_lock);
}

}  // namespace memlens::windows
