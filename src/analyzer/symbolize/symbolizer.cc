// src/analyzer/symbolize/symbolizer.cc
//
// Offline symbolization with elfutils. Each distinct object file gets its own Dwfl, reported
// with dwfl_report_elf at base 0 and queried by ELF virtual address (ip - load_bias). One Dwfl
// per file, not one shared Dwfl for the process, because a capture's modules may overlap in
// address over time (dlclose, then dlopen of something else at the same place), and a file
// loaded several times (several ids, several biases) is then parsed only once.
//
// Per address: dwfl finds the compile unit; a per-CU index of function ranges (built on the
// CU's first use) finds the function DIE; a walk down its children finds the inlined
// instances that contain the address. Names come from DWARF, else from the ELF symbol table;
// a function named by neither is still recognised when it is one of the object's static
// initializers (kStaticInitializer).
//
// A Windows PE module (the Windows agent's captures) takes the same road: OpenFile reads it
// (pe_image.h), dresses its DWARF and COFF symbols as an ELF image in a memfd (pe_elf.h) and
// reports that; its Windows path is first mapped to a Linux one through Wine's drive links
// (wine_path.h), and its identity is its CodeView GUID + age instead of a GNU build-id.
#include "analyzer/symbolize/symbolizer.h"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "analyzer/symbolize/pe_elf.h"
#include "analyzer/symbolize/pe_image.h"
#include "analyzer/symbolize/wine_path.h"

namespace memlens::analyzer {
namespace {

// NULL: the default path, ":.debug:/usr/lib/debug", so the files of Debian's -dbgsym packages
// (/usr/lib/debug/.build-id/xx/yyyy.debug) and .gnu_debuglink files are found.
char* g_debuginfo_path = nullptr;

const Dwfl_Callbacks kOfflineCallbacks = {
    .find_elf = dwfl_build_id_find_elf,  // unused: dwfl_report_elf is given the file
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &g_debuginfo_path,
};

// A PE's DWARF is in the image itself (docs/windows.md): no separate debug file is looked for.
// elfutils' own search would find none, and leaks the path it built when it finds none.
int NoSeparateDebuginfo(Dwfl_Module*, void**, const char*, Dwarf_Addr, const char*, const char*,
                        GElf_Word, char**) {
  return -1;
}

const Dwfl_Callbacks kPeCallbacks = {
    .find_elf = dwfl_build_id_find_elf,  // unused, as above
    .find_debuginfo = NoSeparateDebuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &g_debuginfo_path,
};

// The addresses (ELF virtual) of the functions the dynamic loader runs before main: the
// entries of .preinit_array and .init_array, as the file holds them. x86-64 links write each
// entry's value into the section as well as into its relocation; an entry left 0 (a link that
// keeps values in relocations only) is skipped, and its initializer is then not recognised.
std::vector<uint64_t> InitializerAddresses(Elf* elf) {
  std::vector<uint64_t> addresses;
  const size_t entry = gelf_getclass(elf) == ELFCLASS64 ? 8 : 4;
  const uint64_t all_ones = entry == 8 ? ~uint64_t{0} : 0xffffffffu;  // an end marker
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr header;
    if (gelf_getshdr(scn, &header) == nullptr ||
        (header.sh_type != SHT_INIT_ARRAY && header.sh_type != SHT_PREINIT_ARRAY)) {
      continue;
    }
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (data == nullptr || data->d_buf == nullptr) continue;
    const char* bytes = static_cast<const char*>(data->d_buf);
    for (size_t at = 0; at + entry <= data->d_size; at += entry) {
      uint64_t value = 0;
      std::memcpy(&value, bytes + at, entry);  // little-endian host and file (x86-64)
      if (value != 0 && value != all_ones) addresses.push_back(value);
    }
  }
  std::sort(addresses.begin(), addresses.end());
  return addresses;
}

// The start addresses (ELF virtual) of the functions .eh_frame describes, sorted: the search
// table of .eh_frame_hdr (segment PT_GNU_EH_FRAME), which GNU linkers write as 4-byte offsets
// from the header (DW_EH_PE_datarel | DW_EH_PE_sdata4). libdw's CFI gives only the rows of
// an FDE, not where the FDE starts. Empty when the table is absent or encoded otherwise.
std::vector<uint64_t> FunctionStarts(Elf* elf) {
  std::vector<uint64_t> starts;
  size_t count = 0;
  if (elf_getphdrnum(elf, &count) != 0) return starts;
  for (size_t i = 0; i < count; ++i) {
    GElf_Phdr phdr;
    if (gelf_getphdr(elf, static_cast<int>(i), &phdr) == nullptr ||
        phdr.p_type != PT_GNU_EH_FRAME) {
      continue;
    }
    Elf_Data* data = elf_getdata_rawchunk(elf, phdr.p_offset, phdr.p_filesz, ELF_T_BYTE);
    if (data == nullptr || data->d_size < 12) return starts;
    const auto* header = static_cast<const unsigned char*>(data->d_buf);
    constexpr unsigned char kUdata4 = 0x03, kSdata4 = 0x0b, kDatarelSdata4 = 0x3b;
    if (header[0] != 1 || ((header[1] & 0x0f) != kUdata4 && (header[1] & 0x0f) != kSdata4) ||
        header[2] != kUdata4 || header[3] != kDatarelSdata4) {
      return starts;
    }
    uint32_t entries = 0;
    std::memcpy(&entries, header + 8, 4);
    if (entries > (data->d_size - 12) / 8) return starts;
    starts.reserve(entries);
    for (uint32_t e = 0; e < entries; ++e) {
      int32_t offset = 0;
      std::memcpy(&offset, header + 12 + 8 * e, 4);
      starts.push_back(phdr.p_vaddr + offset);
    }
    std::sort(starts.begin(), starts.end());  // sorted by the linker; sorting costs little
    return starts;
  }
  return starts;
}

std::string Hex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out.empty() ? "(none)" : out;
}

std::string Demangle(const char* name) {
  if (name == nullptr) return "";
  if (name[0] == '_' && name[1] == 'Z') {
    int status = 0;
    char* demangled = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    if (status == 0 && demangled != nullptr) {
      std::string result(demangled);
      std::free(demangled);
      return result;
    }
    std::free(demangled);
  }
  return name;
}

// DW_AT_linkage_name gives the qualified, overloaded name ("ns::F(int)"); DW_AT_name alone
// is just "F". The _integrate variant follows DW_AT_abstract_origin (inlined and out-of-line
// copies of inline functions) and DW_AT_specification (members defined outside the class).
std::string DieFunctionName(Dwarf_Die* die) {
  Dwarf_Attribute attr;
  for (unsigned int name : {DW_AT_linkage_name, DW_AT_MIPS_linkage_name}) {
    if (dwarf_attr_integrate(die, name, &attr) != nullptr) {
      if (const char* s = dwarf_formstring(&attr)) return Demangle(s);
    }
  }
  if (dwarf_attr_integrate(die, DW_AT_name, &attr) != nullptr) {
    if (const char* s = dwarf_formstring(&attr)) return s;
  }
  return "";
}

// DWARF of a Windows program built on Windows names files "C:/src/a.c" or "C:\src\a.c".
bool IsDriveAbsolute(const char* path) {
  return path[0] != '\0' && path[1] == ':' && (path[2] == '/' || path[2] == '\\');
}

std::string AbsolutePath(const char* path, const char* comp_dir) {
  if (path == nullptr) return "";
  if (path[0] == '/' || IsDriveAbsolute(path) || comp_dir == nullptr || comp_dir[0] == '\0') {
    return path;
  }
  std::string joined(comp_dir);
  if (joined.back() != '/' && joined.back() != '\\') joined.push_back('/');
  return joined + path;
}

bool UdataAttr(Dwarf_Die* die, unsigned int name, Dwarf_Word* value) {
  Dwarf_Attribute attr;
  return dwarf_attr(die, name, &attr) != nullptr && dwarf_formudata(&attr, value) == 0;
}

// A subprogram's code range. Found by one walk over the whole CU, since functions are not
// always at the top of it: with LTO, gcc nests them in DW_TAG_namespace DIEs (which have no
// address range, so dwarf_getscopes would not look inside, and it also fails on inlines whose
// abstract origin lies in another CU, as LTO makes them).
struct FunctionRange {
  Dwarf_Addr low;
  Dwarf_Addr high;
  Dwarf_Die die;
};
using FunctionIndex = std::vector<FunctionRange>;  // sorted by low

constexpr int kMaxDieDepth = 128;  // a corrupt file must not overflow the stack

void IndexFunctions(Dwarf_Die* parent, int depth, FunctionIndex* index) {
  Dwarf_Die child;
  if (depth > kMaxDieDepth || dwarf_child(parent, &child) != 0) return;
  do {
    const int tag = dwarf_tag(&child);
    if (tag == DW_TAG_subprogram || tag == DW_TAG_entry_point) {
      Dwarf_Addr base = 0, low = 0, high = 0;
      ptrdiff_t offset = 0;
      while ((offset = dwarf_ranges(&child, offset, &base, &low, &high)) > 0) {
        if (low < high) index->push_back({low, high, child});
      }
    }
    if (dwarf_haschildren(&child) > 0) IndexFunctions(&child, depth + 1, index);
  } while (dwarf_siblingof(&child, &child) == 0);
}

const FunctionRange* FindFunction(const FunctionIndex& index, Dwarf_Addr pc) {
  auto it = std::upper_bound(index.begin(), index.end(), pc,
                             [](Dwarf_Addr a, const FunctionRange& r) { return a < r.low; });
  // Ranges do not overlap in sane output; a few steps back tolerate the odd exception.
  for (int steps = 0; it != index.begin() && steps < 8; ++steps) {
    --it;
    if (pc >= it->high) continue;
    // Aliases share a range (glibc's asm: __getpid, getpid, __GI_getpid...): the first one
    // in the CU is the primary name.
    while (it != index.begin() && std::prev(it)->low == it->low && pc < std::prev(it)->high) --it;
    return &*it;
  }
  return nullptr;
}

// Per compile unit, keyed by the unit DIE's address in the mapped DWARF; built on first use.
using FunctionCache = std::unordered_map<const void*, FunctionIndex>;

const FunctionIndex& FunctionsOf(FunctionCache* cache, Dwarf_Die* unit) {
  auto [it, inserted] = cache->try_emplace(unit->addr);
  if (inserted) {
    IndexFunctions(unit, 0, &it->second);
    std::stable_sort(it->second.begin(), it->second.end(),
                     [](const FunctionRange& a, const FunctionRange& b) { return a.low < b.low; });
  }
  return it->second;
}

bool HasPcAttributes(Dwarf_Die* die) {
  return dwarf_hasattr(die, DW_AT_low_pc) || dwarf_hasattr(die, DW_AT_ranges);
}

// Appends the inlined instances under `scope` that contain pc, outermost first.
bool FindInlineChain(Dwarf_Die* scope, Dwarf_Addr pc, int depth, std::vector<Dwarf_Die>* chain) {
  Dwarf_Die child;
  if (depth > kMaxDieDepth || dwarf_child(scope, &child) != 0) return false;
  do {
    const int tag = dwarf_tag(&child);
    if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_lexical_block &&
        tag != DW_TAG_try_block && tag != DW_TAG_catch_block) {
      continue;
    }
    if (HasPcAttributes(&child)) {
      if (dwarf_haspc(&child, pc) != 1) continue;
      if (tag == DW_TAG_inlined_subroutine) chain->push_back(child);
      FindInlineChain(&child, pc, depth + 1, chain);
      return true;
    }
    // A block without an address range of its own is transparent.
    if (FindInlineChain(&child, pc, depth + 1, chain)) return true;
  } while (dwarf_siblingof(&child, &child) == 0);
  return false;
}

// Frames for `pc` (a DWARF address) in the CU `cudie`, innermost first. The outermost frame's
// function may be "" (asm, or no DIE for pc); the caller fills it from the symbol table.
std::vector<SourceFrame> DwarfFrames(FunctionCache* functions, Dwarf_Die* cudie, Dwarf_Addr pc,
                                     const SourceFrame& base) {
  Dwarf_Attribute attr;
  const char* comp_dir =
      dwarf_attr(cudie, DW_AT_comp_dir, &attr) ? dwarf_formstring(&attr) : nullptr;

  // The line table (the skeleton's, with split DWARF) gives the location of pc itself, i.e.
  // in the innermost inlined body.
  std::string source;
  uint32_t line = 0;
  if (Dwarf_Line* row = dwarf_getsrc_die(cudie, pc)) {
    int lineno = 0;
    if (dwarf_lineno(row, &lineno) == 0 && lineno > 0) {
      source = AbsolutePath(dwarf_linesrc(row, nullptr, nullptr), comp_dir);
      line = static_cast<uint32_t>(lineno);
    }
  }

  // With split DWARF (-gsplit-dwarf) the DIEs live in the .dwo unit, not the skeleton.
  Dwarf_Die unit = *cudie;
  uint8_t unit_type = 0;
  Dwarf_Die split;
  if (dwarf_cu_info(cudie->cu, nullptr, &unit_type, nullptr, &split, nullptr, nullptr,
                    nullptr) == 0 &&
      unit_type == DW_UT_skeleton && split.addr != nullptr &&
      dwarf_tag(&split) == DW_TAG_compile_unit) {
    unit = split;
  }

  std::vector<Dwarf_Die> dies;  // the function, then its inlined instances, outermost first
  if (const FunctionRange* function = FindFunction(FunctionsOf(functions, &unit), pc)) {
    dies.push_back(function->die);
    FindInlineChain(&dies[0], pc, 0, &dies);
  }
  Dwarf_Files* files = nullptr;
  if (dies.size() > 1 && dwarf_getsrcfiles(&unit, &files, nullptr) != 0) files = nullptr;

  std::vector<SourceFrame> frames;
  for (size_t i = dies.size(); i-- > 0;) {
    SourceFrame frame = base;
    frame.function = DieFunctionName(&dies[i]);
    frame.file = source;
    frame.line = line;
    if (i > 0) {
      frame.inlined = true;
      // The next frame out is at this inline's call site.
      Dwarf_Word value = 0;
      source.clear();
      line = 0;
      if (files != nullptr && UdataAttr(&dies[i], DW_AT_call_file, &value)) {
        source = AbsolutePath(dwarf_filesrc(files, value, nullptr, nullptr), comp_dir);
      }
      if (UdataAttr(&dies[i], DW_AT_call_line, &value)) line = static_cast<uint32_t>(value);
    }
    frames.push_back(std::move(frame));
  }
  if (frames.empty()) {  // no function DIE: keep what the line table said
    SourceFrame frame = base;
    frame.file = source;
    frame.line = line;
    frames.push_back(std::move(frame));
  }
  return frames;
}

// Whether the file open at `fd` is a PE image: it starts with "MZ" and names "PE\0\0".
bool IsPeFile(int fd) {
  char head[512];
  const ssize_t n = pread(fd, head, sizeof(head), 0);
  return n > 0 && LooksLikePe(std::string_view(head, static_cast<size_t>(n)));
}

// The PE image open at `fd` as an ELF image in a memfd (pe_elf.h); -1 with *error set when the
// image is corrupt or no memfd can be made. The PE's bytes are mapped only while converting.
int PeAsElf(int fd, const std::string& name, PeImage* image, std::string* error) {
  struct stat info;
  if (fstat(fd, &info) != 0 || info.st_size <= 0) {
    *error = "cannot read it";
    return -1;
  }
  const size_t size = static_cast<size_t>(info.st_size);
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) {
    *error = std::string("cannot map it (") + std::strerror(errno) + ")";
    return -1;
  }
  const std::string_view bytes(static_cast<const char*>(map), size);
  int elf_fd = -1;
  if (!ParsePeImage(bytes, image, error)) {
    *error = "corrupt PE image: " + *error;
  } else if (elf_fd = ElfMemfd(name, PeToElf(*image, bytes)); elf_fd < 0) {
    *error = std::string("memfd_create: ") + std::strerror(errno);
  }
  munmap(map, size);
  return elf_fd;
}

}  // namespace

struct Symbolizer::ElfFile {
  Dwfl* dwfl = nullptr;
  Dwfl_Module* mod = nullptr;
  Elf* elf = nullptr;      // the module's ELF, owned by dwfl
  GElf_Addr elf_bias = 0;  // Dwfl address = ELF virtual address + elf_bias
  Dwarf_Addr low = 0, high = 0;  // the module's Dwfl address range
  std::string build_id;    // raw bytes from the file on disk, "" when it has none
  bool pe = false;         // a Windows PE image (build_id: its CodeView GUID + age)
  bool has_dwarf = false;
  FunctionCache functions;
  std::vector<uint64_t> initializers;  // InitializerAddresses: sorted ELF virtual addresses

  std::vector<uint64_t> function_starts;  // FunctionStarts, read on first need
  bool function_starts_read = false;

  // Whether the function holding Dwfl address `addr` is one of the static initializers: an
  // FDE of .eh_frame (kept by strip) covers it, and the covering FDE (FDEs never overlap: the
  // one with the greatest start at or below addr) starts at an initializer's address.
  bool InInitializer(Dwarf_Addr addr) {
    if (initializers.empty()) return false;
    Dwarf_Addr cfi_bias = 0;
    Dwarf_CFI* cfi = dwfl_module_eh_cfi(mod, &cfi_bias);
    Dwarf_Frame* frame = nullptr;
    if (cfi == nullptr || dwarf_cfi_addrframe(cfi, addr - cfi_bias, &frame) != 0) return false;
    std::free(frame);
    if (!function_starts_read) {
      function_starts_read = true;
      function_starts = FunctionStarts(elf);
    }
    const uint64_t at = addr - elf_bias;
    auto after = std::upper_bound(function_starts.begin(), function_starts.end(), at);
    return after != function_starts.begin() &&
           std::binary_search(initializers.begin(), initializers.end(), *(after - 1));
  }

  ~ElfFile() {
    if (dwfl != nullptr) dwfl_end(dwfl);
  }
};

size_t Symbolizer::KeyHash::operator()(const Key& k) const {
  uint64_t h = k.ip ^ (k.module_id * 0x9E3779B97F4A7C15ull);
  h ^= h >> 31;
  h *= 0xBF58476D1CE4E5B9ull;
  return static_cast<size_t>(h ^ (h >> 29));
}

Symbolizer::Symbolizer() = default;
Symbolizer::~Symbolizer() = default;

void Symbolizer::AddModule(const format::ModuleRecord& module) {
  auto [it, inserted] = modules_.try_emplace(module.id);
  if (!inserted) {
    // Rare (ids are unique within a capture), so a full sweep of the cache is fine.
    for (auto c = cache_.begin(); c != cache_.end();) {
      c = c->first.module_id == module.id ? cache_.erase(c) : std::next(c);
    }
    it->second = Module();
  }
  it->second.record = module;
}

void Symbolizer::Warn(std::string line) {
  if (warned_.insert(line).second) warnings_.push_back(std::move(line));
}

Symbolizer::ElfFile* Symbolizer::OpenFile(const std::string& path) {
  auto [it, inserted] = files_.try_emplace(path);
  if (!inserted) return it->second.get();  // null when an earlier attempt failed

  // A Windows module's path ("Z:\dir\app.exe") names a file through Wine's drive links.
  const std::string host = HostPath(path);
  if (host.empty()) {
    Warn(path + ": its drive is not mapped in the Wine prefix " + DefaultWinePrefix() +
         " (set WINEPREFIX to the prefix the program ran in); its frames stay module+offset");
    return nullptr;
  }
  const std::string shown = host == path ? path : path + " (" + host + ")";

  // Opened here rather than by libdwfl so that a missing file is reported with errno's words.
  int fd = open(host.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    Warn(shown + ": cannot open (" + std::strerror(errno) + "); its frames stay module+offset");
    return nullptr;
  }
  auto file = std::make_unique<ElfFile>();
  PeImage pe;
  if (IsPeFile(fd)) {
    std::string error;
    const int elf_fd = PeAsElf(fd, host, &pe, &error);
    close(fd);
    if (elf_fd < 0) {
      Warn(shown + ": " + error + "; its frames stay module+offset");
      return nullptr;
    }
    fd = elf_fd;
    file->pe = true;
  }
  file->dwfl = dwfl_begin(file->pe ? &kPeCallbacks : &kOfflineCallbacks);
  if (file->dwfl == nullptr) {
    close(fd);
    Warn(shown + ": " + dwfl_errmsg(-1) + "; its frames stay module+offset");
    return nullptr;
  }
  dwfl_report_begin(file->dwfl);
  file->mod = dwfl_report_elf(file->dwfl, path.c_str(), host.c_str(), fd, 0, false);
  if (file->mod == nullptr) {
    close(fd);  // consumed only on success
    Warn(shown + ": not a usable ELF file (" + dwfl_errmsg(-1) +
         "); its frames stay module+offset");
    return nullptr;
  }
  dwfl_report_end(file->dwfl, nullptr, nullptr);

  // Where dwfl placed the file: 0 for ordinary shared objects and executables, but ask
  // rather than assume (prelinked objects have a non-zero first p_vaddr).
  file->elf = dwfl_module_getelf(file->mod, &file->elf_bias);
  if (file->elf == nullptr) {
    Warn(shown + ": " + dwfl_errmsg(-1) + "; its frames stay module+offset");
    return nullptr;
  }
  file->initializers = InitializerAddresses(file->elf);
  dwfl_module_info(file->mod, nullptr, &file->low, &file->high, nullptr, nullptr, nullptr,
                   nullptr);
  const unsigned char* bits = nullptr;
  GElf_Addr note_vaddr = 0;
  int length = dwfl_module_build_id(file->mod, &bits, &note_vaddr);
  if (length > 0) file->build_id.assign(reinterpret_cast<const char*>(bits), length);
  if (file->pe) file->build_id = pe.build_id;

  Dwarf_Addr dwarf_bias = 0;
  file->has_dwarf = dwfl_module_getdwarf(file->mod, &dwarf_bias) != nullptr;
  if (!file->has_dwarf && file->pe) {
    // MSVC keeps its debug info in a .pdb file, which is not read (docs/windows.md).
    Warn(shown + ": no DWARF debug info (built without -g, or by MSVC, whose PDB files are " +
         "not read); " +
         (dwfl_module_getsymtab(file->mod) > 0
              ? "function names from the COFF symbol table, no source lines"
              : "no symbols either; its frames stay module+offset"));
  } else if (!file->has_dwarf) {
    if (dwfl_module_getsymtab(file->mod) > 0) {
      Warn(path + ": no DWARF debug info (install its debug symbols); function names from the " +
           "symbol table, no source lines");
    } else {
      Warn(path + ": no symbols and no debug info; its frames stay module+offset");
    }
  }
  it->second = std::move(file);
  return it->second.get();
}

void Symbolizer::Examine(Module* module) {
  module->examined = true;
  const format::ModuleRecord& record = module->record;
  if (record.path.empty()) {
    Warn("module " + std::to_string(record.id) + ": no path recorded; its frames stay " +
         "module+offset");
    return;
  }
  // "[vdso]" and the like exist only in memory; nothing on disk to read, nothing to fix.
  // dl_iterate_phdr names the vDSO by its soname, with no directory.
  if (record.path[0] == '[' || record.path.rfind("linux-vdso.so", 0) == 0 ||
      record.path.rfind("linux-gate.so", 0) == 0) {
    return;
  }
  ElfFile* file = OpenFile(record.path);
  if (file == nullptr) return;
  if (!record.build_id.empty() && record.build_id != file->build_id) {
    // A PE's identity is its CodeView (RSDS) GUID + age, the agent's build_id for it.
    Warn(record.path + (file->pe ? ": CodeView GUID+age on disk " : ": build-id on disk ") +
         Hex(file->build_id) + " differs from the " +
         "recorded " + Hex(record.build_id) + " (file changed since the capture); its frames " +
         "stay module+offset");
    return;
  }
  module->file = file;
}

std::vector<SourceFrame> Symbolizer::Lookup(const Module& module, uint64_t ip) {
  SourceFrame base;
  base.module = module.record.path;
  base.module_offset = ip - module.record.load_bias;
  ElfFile* file = module.file;
  if (file == nullptr || ip == 0) return {base};

  // ip - 1 is inside the call instruction, so the call's line and inline chain are found,
  // not those of whatever follows the call (another line, or another function after a
  // call to a noreturn function).
  const Dwarf_Addr addr = (ip - 1 - module.record.load_bias) + file->elf_bias;
  if (addr < file->low || addr >= file->high) return {base};

  std::vector<SourceFrame> frames;
  Dwarf_Addr dwarf_bias = 0;
  Dwarf_Die* cudie =
      file->has_dwarf ? dwfl_module_addrdie(file->mod, addr, &dwarf_bias) : nullptr;
  if (cudie != nullptr) {
    frames = DwarfFrames(&file->functions, cudie, addr - dwarf_bias, base);
  } else {
    frames.push_back(base);
  }
  // No DWARF for this address (stripped objects such as Debian's libc, asm, PLT): the ELF
  // symbol table (.symtab, else .dynsym) still names the function.
  if (frames.back().function.empty()) {
    GElf_Off offset = 0;
    GElf_Sym sym;
    frames.back().function = Demangle(
        dwfl_module_addrinfo(file->mod, addr, &offset, &sym, nullptr, nullptr, nullptr));
  }
  // Nameless in the file (local functions of a stripped object, such as the initializer in
  // Debian's libstdc++ that allocates the exception emergency pool before main), but known to
  // be a static initializer: say so rather than show a bare offset.
  if (frames.back().function.empty() && file->InInitializer(addr)) {
    frames.back().function = kStaticInitializer;
  }
  return frames;
}

Symbolizer::SymbolUse Symbolizer::DynamicSymbol(uint64_t module_id, const std::string& name) {
  auto module = modules_.find(module_id);
  if (module == modules_.end()) return SymbolUse::kUnreadable;
  if (!module->second.examined) Examine(&module->second);
  ElfFile* file = module->second.file;
  if (file == nullptr) return SymbolUse::kUnreadable;
  for (Elf_Scn* scn = elf_nextscn(file->elf, nullptr); scn != nullptr;
       scn = elf_nextscn(file->elf, scn)) {
    GElf_Shdr header;
    if (gelf_getshdr(scn, &header) == nullptr || header.sh_type != SHT_DYNSYM ||
        header.sh_entsize == 0) {
      continue;
    }
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (data == nullptr) continue;
    for (size_t i = 0; i < header.sh_size / header.sh_entsize; ++i) {
      GElf_Sym sym;
      if (gelf_getsym(data, static_cast<int>(i), &sym) == nullptr) break;
      const char* text = elf_strptr(file->elf, header.sh_link, sym.st_name);
      if (text == nullptr || name != text) continue;
      return sym.st_shndx == SHN_UNDEF ? SymbolUse::kImports : SymbolUse::kDefines;
    }
  }
  return SymbolUse::kNone;
}

const std::vector<SourceFrame>& Symbolizer::Resolve(uint64_t module_id, uint64_t ip) {
  auto [it, inserted] = cache_.try_emplace(Key{module_id, ip});
  if (!inserted) return it->second;
  auto module = modules_.find(module_id);
  if (module == modules_.end()) {
    Warn("frames in unknown module id " + std::to_string(module_id) +
         " (no module record); they stay as raw addresses");
    SourceFrame frame;
    frame.module_offset = ip;
    it->second.push_back(std::move(frame));
    return it->second;
  }
  if (!module->second.examined) Examine(&module->second);
  it->second = Lookup(module->second, ip);
  return it->second;
}

}  // namespace memlens::analyzer
