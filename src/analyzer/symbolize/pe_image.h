// src/analyzer/symbolize/pe_image.h
//
// PeImage: what the symbolizer needs from a Windows PE32+ image (an .exe or .dll of a capture
// taken by the Windows agent): its preferred base and size, its sections (long names such as
// ".debug_info" resolved through the COFF string table), the functions of its COFF symbol
// table (mingw-w64's ld keeps one unless the image is stripped; MSVC's link writes none), and
// its identity, the CodeView RSDS record of the debug directory (GUID + age).
//
// Called by: the Symbolizer (pe_elf.cc turns a PeImage into an ELF image libdwfl reads), on
// the symbolizer's thread. Pure: no I/O, no global state.
// Never trusts the bytes: every offset and count is checked against the buffer; what does not
// fit makes ParsePeImage fail with a reason, never read out of bounds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace memlens::analyzer {

// IMAGE_SCN_* characteristics the symbolizer looks at.
inline constexpr uint32_t kPeSectionCode = 0x00000020;     // IMAGE_SCN_CNT_CODE
inline constexpr uint32_t kPeSectionExecute = 0x20000000;  // IMAGE_SCN_MEM_EXECUTE
inline constexpr uint32_t kPeSectionWrite = 0x80000000;    // IMAGE_SCN_MEM_WRITE

struct PeSection {
  std::string name;  // ".text", ".debug_info" (a "/4" header name resolved)
  uint32_t rva = 0;  // VirtualAddress: from the image base
  uint32_t size = 0;  // bytes in memory (VirtualSize, else SizeOfRawData)
  uint32_t file_offset = 0;  // PointerToRawData
  uint32_t file_size = 0;  // bytes of it in the file: min(size, SizeOfRawData), in bounds
  uint32_t characteristics = 0;
  bool IsDebug() const { return name.rfind(".debug_", 0) == 0; }
  bool IsCode() const { return (characteristics & (kPeSectionCode | kPeSectionExecute)) != 0; }
};

// A function of the COFF symbol table.
struct PeFunction {
  std::string name;  // as linked: mangled for C++ ("_ZN2ns1FEi")
  uint64_t address = 0;  // preferred virtual address: image base + section rva + value
  uint16_t section = 0;  // 1-based index into PeImage::sections
  bool global = false;  // IMAGE_SYM_CLASS_EXTERNAL (else a file-local function)
};

struct PeImage {
  uint16_t machine = 0;  // IMAGE_FILE_MACHINE_*: 0x8664 for x86-64
  uint64_t image_base = 0;  // OptionalHeader.ImageBase: where DWARF and symbols place it
  uint32_t image_size = 0;  // SizeOfImage
  uint32_t entry_rva = 0;  // AddressOfEntryPoint
  std::vector<PeSection> sections;  // in header order: section number n is sections[n - 1]
  std::vector<PeFunction> functions;  // sorted by address
  // CodeView RSDS: the 16 GUID bytes as stored, then the age (4 bytes, little-endian); the
  // Windows agent records the same 20 bytes as the module's build_id. "" when absent.
  std::string build_id;
  bool HasDwarf() const;
};

// Whether `head` (a file's first bytes) starts like a PE image ("MZ", then "PE\0\0" at
// e_lfanew when head is long enough to hold it). Cheap; ParsePeImage says more.
bool LooksLikePe(std::string_view head);

// Parses the whole file `bytes`. False, with *error saying why, when it is not a PE32+ image
// or is truncated or corrupt; *image is then unspecified.
bool ParsePeImage(std::string_view bytes, PeImage* image, std::string* error);

}  // namespace memlens::analyzer
