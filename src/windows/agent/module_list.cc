// src/windows/agent/module_list.cc
#include "windows/agent/module_list.h"

#include <psapi.h>

#include <cstring>

namespace memlens::windows {
namespace {

// The 64-bit PE headers in the `available` bytes at `base` (a file's first page, or a loaded
// image's), or nullptr when they are not there whole.
const IMAGE_NT_HEADERS64* NtHeaders(const char* base, size_t available) {
  auto* dos = reinterpret_cast<const IMAGE_DOS_HEADER*>(base);
  if (available < sizeof *dos || dos->e_magic != IMAGE_DOS_SIGNATURE || dos->e_lfanew <= 0 ||
      static_cast<size_t>(dos->e_lfanew) + sizeof(IMAGE_NT_HEADERS64) > available) {
    return nullptr;
  }
  auto* nt = reinterpret_cast<const IMAGE_NT_HEADERS64*>(base + dos->e_lfanew);
  if (nt->Signature != IMAGE_NT_SIGNATURE ||
      nt->OptionalHeader.Magic != IMAGE_NT_OPTIONAL_HDR64_MAGIC) {
    return nullptr;
  }
  return nt;
}

// The image base the module's file asks for. The loader writes the address it actually used
// into the headers in memory when it relocates an image, so the file is read: its first page.
bool PreferredImageBase(const wchar_t* path, uint64_t* image_base) {
  HANDLE file =
      CreateFileW(path, GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                  nullptr, OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, nullptr);
  if (file == INVALID_HANDLE_VALUE) return false;
  char page[4096];
  DWORD read = 0;
  const bool ok = ReadFile(file, page, sizeof page, &read, nullptr);
  CloseHandle(file);
  const IMAGE_NT_HEADERS64* nt = ok ? NtHeaders(page, read) : nullptr;
  if (nt == nullptr) return false;
  *image_base = nt->OptionalHeader.ImageBase;
  return true;
}

// The RSDS CodeView record's GUID and age, from the image in memory; "" when it has none.
std::string CodeViewIdentity(const char* base, const IMAGE_NT_HEADERS64* nt) {
  const DWORD size = nt->OptionalHeader.SizeOfImage;
  const IMAGE_DATA_DIRECTORY& dir = nt->OptionalHeader.DataDirectory[IMAGE_DIRECTORY_ENTRY_DEBUG];
  if (dir.VirtualAddress == 0 || dir.VirtualAddress >= size ||
      dir.Size > size - dir.VirtualAddress) {
    return "";
  }
  auto* entries = reinterpret_cast<const IMAGE_DEBUG_DIRECTORY*>(base + dir.VirtualAddress);
  for (size_t i = 0; i < dir.Size / sizeof(IMAGE_DEBUG_DIRECTORY); ++i) {
    const IMAGE_DEBUG_DIRECTORY& e = entries[i];
    if (e.Type != IMAGE_DEBUG_TYPE_CODEVIEW || e.AddressOfRawData == 0 || e.SizeOfData < 24 ||
        e.AddressOfRawData >= size || e.SizeOfData > size - e.AddressOfRawData) {
      continue;
    }
    const char* cv = base + e.AddressOfRawData;
    if (std::memcmp(cv, "RSDS", 4) == 0) return std::string(cv + 4, 20);  // GUID, then age
  }
  return "";
}

}  // namespace

const IMAGE_NT_HEADERS64* ImageHeaders(HMODULE module) {
  return NtHeaders(reinterpret_cast<const char*>(module), 4096);  // the headers' page
}

bool DescribeModule(HMODULE handle, const wchar_t* path, LoadedModule* out) {
  auto* base = reinterpret_cast<const char*>(handle);
  const IMAGE_NT_HEADERS64* nt = ImageHeaders(handle);
  if (nt == nullptr) return false;
  LoadedModule& m = *out;
  m.handle = handle;
  m.base = reinterpret_cast<uint64_t>(handle);
  m.size = nt->OptionalHeader.SizeOfImage;
  uint64_t image_base = m.base;
  if (!PreferredImageBase(path, &image_base)) image_base = m.base;
  m.record.load_bias = m.base - image_base;
  m.record.path = Utf8(path);
  m.record.build_id = CodeViewIdentity(base, nt);
  m.record.segments.assign(1, {m.base, m.size});
  return true;
}

std::vector<LoadedModule> ListLoadedModules() {
  std::vector<HMODULE> handles(256);
  DWORD bytes = 0;
  for (;;) {
    if (!K32EnumProcessModules(GetCurrentProcess(), handles.data(),
                               static_cast<DWORD>(handles.size() * sizeof(HMODULE)), &bytes)) {
      return {};
    }
    if (bytes <= handles.size() * sizeof(HMODULE)) break;
    handles.resize(bytes / sizeof(HMODULE) + 16);
  }
  handles.resize(bytes / sizeof(HMODULE));
  std::vector<LoadedModule> modules;
  for (HMODULE h : handles) {
    wchar_t path[MAX_PATH * 4];
    const DWORD n = GetModuleFileNameW(h, path, MAX_PATH * 4);
    LoadedModule m;
    if (n > 0 && n < MAX_PATH * 4 && DescribeModule(h, path, &m)) modules.push_back(std::move(m));
  }
  return modules;
}

}  // namespace memlens::windows
