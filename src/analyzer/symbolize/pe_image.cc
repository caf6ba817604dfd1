// src/analyzer/symbolize/pe_image.cc
//
// The PE/COFF reading behind PeImage. Layout (Microsoft's "PE Format" specification):
//
//   0          DOS header: "MZ" ... e_lfanew (u32 at 0x3c)
//   e_lfanew   "PE\0\0", then the COFF file header (20 bytes): Machine u16, NumberOfSections
//              u16, TimeDateStamp u32, PointerToSymbolTable u32, NumberOfSymbols u32,
//              SizeOfOptionalHeader u16, Characteristics u16
//   +24        optional header (PE32+: Magic 0x20b, ImageBase u64 at 24, SizeOfImage u32 at
//              56, NumberOfRvaAndSizes u32 at 108, data directories of 8 bytes from 112; the
//              debug directory is entry 6)
//   then       section headers, 40 bytes each: Name[8] ("/123": offset 123 in the string
//              table), VirtualSize, VirtualAddress, SizeOfRawData, PointerToRawData, ...,
//              Characteristics (u32 at 36)
//   symtab     NumberOfSymbols records of 18 bytes (Name[8] or 0 + string table offset,
//              Value u32, SectionNumber i16, Type u16, StorageClass u8, NumberOfAuxSymbols
//              u8, then that many auxiliary records), followed by the string table (u32
//              total size, itself included, then NUL-terminated names)
//
// All multi-byte fields are little-endian, as is every host this analyzer runs on (x86-64,
// aarch64); Load copies them with memcpy after a bounds check.
#include "analyzer/symbolize/pe_image.h"

#include <algorithm>
#include <cstring>

namespace memlens::analyzer {
namespace {

constexpr uint16_t kPe32PlusMagic = 0x20b;
constexpr uint32_t kDebugDirectoryIndex = 6;
constexpr uint32_t kDebugTypeCodeView = 2;
constexpr size_t kSectionHeaderSize = 40;
constexpr uint16_t kMaxSections = 1024;
constexpr size_t kSymbolSize = 18;
constexpr size_t kDebugEntrySize = 28;
constexpr uint16_t kSymbolTypeFunction = 0x20;  // DTYPE_FUNCTION << 4
constexpr uint8_t kClassExternal = 2;
constexpr uint8_t kClassStatic = 3;

// Bounds-checked little-endian reads from the file's bytes.
class Bytes {
 public:
  explicit Bytes(std::string_view bytes) : bytes_(bytes) {}
  size_t size() const { return bytes_.size(); }
  bool Has(uint64_t offset, uint64_t length) const {
    return offset <= bytes_.size() && length <= bytes_.size() - offset;
  }
  template <typename T>
  bool Load(uint64_t offset, T* value) const {
    if (!Has(offset, sizeof(T))) return false;
    std::memcpy(value, bytes_.data() + offset, sizeof(T));
    return true;
  }
  std::string_view Slice(uint64_t offset, uint64_t length) const {
    return Has(offset, length) ? bytes_.substr(offset, length) : std::string_view();
  }
  // The NUL-terminated string at offset, at most `limit` bytes ("" when offset is outside).
  std::string CString(uint64_t offset, size_t limit) const {
    if (offset >= bytes_.size()) return "";
    std::string_view rest = bytes_.substr(offset, limit);
    return std::string(rest.substr(0, rest.find('\0')));
  }

 private:
  std::string_view bytes_;
};

// The COFF string table: where long section names and symbol names live.
struct StringTable {
  uint64_t offset = 0;  // of its u32 size field
  uint32_t size = 0;  // 0 when there is none
  std::string Get(const Bytes& bytes, uint64_t at) const {
    if (at < 4 || at >= size) return "";
    return bytes.CString(offset + at, size - at);
  }
};

// A name field of 8 bytes: inline and NUL-padded, or (for symbols) 4 zero bytes then an
// offset into the string table, or (for sections) "/decimal offset".
std::string SectionName(const Bytes& bytes, uint64_t at, const StringTable& strings) {
  std::string name = bytes.CString(at, 8);
  if (name.size() > 1 && name[0] == '/') {
    uint64_t offset = 0;
    for (size_t i = 1; i < name.size(); ++i) {
      if (name[i] < '0' || name[i] > '9') return name;
      offset = offset * 10 + (name[i] - '0');
    }
    return strings.Get(bytes, offset);
  }
  return name;
}

std::string SymbolName(const Bytes& bytes, uint64_t at, const StringTable& strings) {
  uint32_t zeroes = 0, offset = 0;
  bytes.Load(at, &zeroes);
  if (zeroes != 0) return bytes.CString(at, 8);
  bytes.Load(at + 4, &offset);
  return strings.Get(bytes, offset);
}

// The file offset of image rva `rva`, through the section that holds it; 0 when none does.
uint64_t FileOffsetOf(const PeImage& image, uint32_t rva) {
  for (const PeSection& s : image.sections) {
    if (rva >= s.rva && rva - s.rva < s.file_size) return uint64_t{s.file_offset} + (rva - s.rva);
  }
  return 0;
}

// The RSDS record of the debug directory: GUID (16) + age (4), as stored.
std::string CodeViewId(const Bytes& bytes, const PeImage& image, uint32_t dir_rva,
                       uint32_t dir_size) {
  const uint64_t dir = FileOffsetOf(image, dir_rva);
  if (dir == 0) return "";
  for (uint32_t i = 0; i < dir_size / kDebugEntrySize && i < 64; ++i) {
    const uint64_t entry = dir + uint64_t{i} * kDebugEntrySize;
    uint32_t type = 0, size = 0, rva = 0, pointer = 0;
    if (!bytes.Load(entry + 12, &type) || !bytes.Load(entry + 16, &size) ||
        !bytes.Load(entry + 20, &rva) || !bytes.Load(entry + 24, &pointer)) {
      return "";
    }
    if (type != kDebugTypeCodeView || size < 24) continue;
    // PointerToRawData is the file offset; an entry that gives only the rva is found by it.
    const uint64_t at = pointer != 0 ? pointer : FileOffsetOf(image, rva);
    std::string_view record = bytes.Slice(at, 24);
    if (record.size() == 24 && record.substr(0, 4) == "RSDS") return std::string(record.substr(4));
  }
  return "";
}

bool Fail(std::string* error, const char* why) {
  *error = why;
  return false;
}

}  // namespace

bool PeImage::HasDwarf() const {
  return std::any_of(sections.begin(), sections.end(),
                     [](const PeSection& s) { return s.name == ".debug_info" && s.file_size > 0; });
}

bool LooksLikePe(std::string_view head) {
  if (head.size() < 2 || head.substr(0, 2) != "MZ") return false;
  Bytes bytes(head);
  uint32_t lfanew = 0;
  if (!bytes.Load(0x3c, &lfanew) || !bytes.Has(lfanew, 4)) return true;  // say so later
  return head.substr(lfanew, 4) == std::string_view("PE\0\0", 4);
}

bool ParsePeImage(std::string_view file, PeImage* image, std::string* error) {
  *image = PeImage();
  const Bytes bytes(file);
  uint32_t lfanew = 0;
  if (file.substr(0, 2) != "MZ" || !bytes.Load(0x3c, &lfanew)) {
    return Fail(error, "no DOS header (truncated?)");
  }
  if (bytes.Slice(lfanew, 4) != std::string_view("PE\0\0", 4)) {
    return Fail(error, "no PE signature at e_lfanew (truncated or not a PE image)");
  }
  const uint64_t coff = uint64_t{lfanew} + 4;
  uint16_t section_count = 0, optional_size = 0, magic = 0;
  uint32_t symtab = 0, symbol_count = 0;
  if (!bytes.Load(coff, &image->machine) || !bytes.Load(coff + 2, &section_count) ||
      !bytes.Load(coff + 8, &symtab) || !bytes.Load(coff + 12, &symbol_count) ||
      !bytes.Load(coff + 16, &optional_size)) {
    return Fail(error, "truncated COFF header");
  }
  const uint64_t optional = coff + 20;
  if (!bytes.Load(optional, &magic)) return Fail(error, "truncated optional header");
  if (magic != kPe32PlusMagic) return Fail(error, "not a 64-bit (PE32+) image");
  uint32_t directory_count = 0;
  if (optional_size < 112 || !bytes.Has(optional, optional_size) ||
      !bytes.Load(optional + 16, &image->entry_rva) ||
      !bytes.Load(optional + 24, &image->image_base) ||
      !bytes.Load(optional + 56, &image->image_size) ||
      !bytes.Load(optional + 108, &directory_count)) {
    return Fail(error, "truncated optional header");
  }
  if (image->image_size == 0 || image->image_base + image->image_size < image->image_base) {
    return Fail(error, "corrupt optional header (image size)");
  }

  StringTable strings;
  if (symtab != 0) {
    const uint64_t at = uint64_t{symtab} + uint64_t{symbol_count} * kSymbolSize;
    if (!bytes.Load(at, &strings.size) || !bytes.Has(at, strings.size)) {
      return Fail(error, "COFF symbol or string table past the end of the file (truncated?)");
    }
    strings.offset = at;
  }

  // Windows loads at most 96 sections; a count far beyond that is a corrupt header.
  if (section_count > kMaxSections) return Fail(error, "corrupt COFF header (section count)");
  const uint64_t headers = optional + optional_size;
  if (!bytes.Has(headers, uint64_t{section_count} * kSectionHeaderSize)) {
    return Fail(error, "truncated section headers");
  }
  for (uint16_t i = 0; i < section_count; ++i) {
    const uint64_t at = headers + uint64_t{i} * kSectionHeaderSize;
    PeSection s;
    uint32_t virtual_size = 0, raw_size = 0;
    bytes.Load(at + 8, &virtual_size);
    bytes.Load(at + 12, &s.rva);
    bytes.Load(at + 16, &raw_size);
    bytes.Load(at + 20, &s.file_offset);
    bytes.Load(at + 36, &s.characteristics);
    s.name = SectionName(bytes, at, strings);
    s.size = virtual_size != 0 ? virtual_size : raw_size;
    s.file_size = s.file_offset == 0 ? 0 : std::min(s.size, raw_size);
    if (s.file_size != 0 && !bytes.Has(s.file_offset, s.file_size)) {
      return Fail(error, "section data past the end of the file (truncated?)");
    }
    if (uint64_t{s.rva} + s.size > image->image_size) {
      return Fail(error, "section outside the image (corrupt section header)");
    }
    image->sections.push_back(std::move(s));
  }

  uint32_t debug_rva = 0, debug_size = 0;
  if (directory_count > kDebugDirectoryIndex &&
      112 + 8 * (kDebugDirectoryIndex + 1) <= optional_size) {
    bytes.Load(optional + 112 + 8 * kDebugDirectoryIndex, &debug_rva);
    bytes.Load(optional + 116 + 8 * kDebugDirectoryIndex, &debug_size);
  }
  if (debug_rva != 0) image->build_id = CodeViewId(bytes, *image, debug_rva, debug_size);

  // Functions: the symbols of code sections that are typed as functions, or external (asm
  // entry points carry no type). Section symbols (".text", STATIC, untyped) and labels are
  // left out; they would split functions into pieces.
  for (uint64_t i = 0; symtab != 0 && i < symbol_count; ++i) {
    const uint64_t at = uint64_t{symtab} + i * kSymbolSize;
    uint32_t value = 0;
    int16_t section = 0;
    uint16_t type = 0;
    uint8_t storage = 0, aux = 0;
    bytes.Load(at + 8, &value);
    bytes.Load(at + 12, &section);
    bytes.Load(at + 14, &type);
    bytes.Load(at + 16, &storage);
    bytes.Load(at + 17, &aux);
    i += aux;
    if (section <= 0 || section > static_cast<int>(image->sections.size())) continue;
    const PeSection& s = image->sections[section - 1];
    const bool function = (type & 0x30) == kSymbolTypeFunction;
    if (!s.IsCode() || value >= s.size ||
        !(storage == kClassExternal || (storage == kClassStatic && function))) {
      continue;
    }
    PeFunction f;
    f.name = SymbolName(bytes, at, strings);
    if (f.name.empty()) continue;
    f.address = image->image_base + s.rva + value;
    f.section = static_cast<uint16_t>(section);
    f.global = storage == kClassExternal;
    image->functions.push_back(std::move(f));
  }
  std::stable_sort(image->functions.begin(), image->functions.end(),
                   [](const PeFunction& a, const PeFunction& b) { return a.address < b.address; });
  return true;
}

}  // namespace memlens::analyzer
