// src/analyzer/symbolize/pe_elf.cc
//
// The ELF64 image PeToElf writes, in file order:
//
//   Elf64_Ehdr | Elf64_Phdr (PT_LOAD) | debug section bytes... | .symtab | .strtab | .shstrtab
//   | section headers: null, PE sections 1..n (PE section number k is ELF section k), .symtab,
//   .strtab (both only when there are functions), .shstrtab
//
// Keeping PE section k at ELF index k lets a COFF symbol's SectionNumber be its st_shndx.
#include "analyzer/symbolize/pe_elf.h"

#include <elf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace memlens::analyzer {
namespace {

constexpr uint16_t kMachineAmd64 = 0x8664;
constexpr uint16_t kMachineArm64 = 0xaa64;

void Align(std::string* out, size_t alignment) {
  out->resize((out->size() + alignment - 1) / alignment * alignment);
}

template <typename T>
void Append(std::string* out, const T& value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(value));
}

// A string table under construction: offset 0 is the empty name.
struct Names {
  std::string bytes = std::string(1, '\0');
  uint32_t Add(const std::string& name) {
    const uint32_t at = static_cast<uint32_t>(bytes.size());
    bytes.append(name);
    bytes.push_back('\0');
    return at;
  }
};

}  // namespace

std::string PeToElf(const PeImage& image, std::string_view file) {
  std::string out(sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr), '\0');
  Names section_names;
  std::vector<Elf64_Shdr> headers(1);  // index 0: SHN_UNDEF

  // One PT_LOAD over the whole image: libdwfl takes the module's range from it.
  Elf64_Phdr load{};
  load.p_type = PT_LOAD;
  load.p_flags = PF_R | PF_X;
  load.p_vaddr = load.p_paddr = image.image_base;
  load.p_memsz = image.image_size;
  load.p_align = 0x1000;  // image bases are 64 KiB aligned, so the start stays exact
  std::memcpy(out.data() + sizeof(Elf64_Ehdr), &load, sizeof(load));

  for (const PeSection& s : image.sections) {
    Elf64_Shdr h{};
    h.sh_name = section_names.Add(s.name);
    h.sh_addralign = 1;
    if (s.IsDebug()) {
      h.sh_type = SHT_PROGBITS;
      h.sh_offset = out.size();
      h.sh_size = s.file_size;  // bytes past the file's part are zero fill, never DWARF
      out.append(file.substr(s.file_offset, s.file_size));
    } else {
      h.sh_type = SHT_NOBITS;
      h.sh_flags = SHF_ALLOC | (s.IsCode() ? SHF_EXECINSTR : 0) |
                   ((s.characteristics & kPeSectionWrite) != 0 ? SHF_WRITE : 0);
      h.sh_addr = image.image_base + s.rva;
      h.sh_offset = out.size();
      h.sh_size = s.size;
    }
    headers.push_back(h);
  }

  // ELF wants the local symbols first; sh_info is the index of the first global one.
  // Each function extends to the next one of its section, or to the section's end.
  Names symbol_names;
  std::string symbols(sizeof(Elf64_Sym), '\0');
  uint32_t first_global = 1;
  for (bool global : {false, true}) {
    if (global) first_global = static_cast<uint32_t>(symbols.size() / sizeof(Elf64_Sym));
    for (size_t i = 0; i < image.functions.size(); ++i) {
      const PeFunction& f = image.functions[i];
      if (f.global != global) continue;
      const PeSection& s = image.sections[f.section - 1];
      uint64_t end = image.image_base + s.rva + s.size;
      for (size_t j = i + 1; j < image.functions.size(); ++j) {
        if (image.functions[j].address > f.address) {
          if (image.functions[j].section == f.section) end = image.functions[j].address;
          break;
        }
      }
      Elf64_Sym sym{};
      sym.st_name = symbol_names.Add(f.name);
      sym.st_info = ELF64_ST_INFO(global ? STB_GLOBAL : STB_LOCAL, STT_FUNC);
      sym.st_shndx = f.section;
      sym.st_value = f.address;
      sym.st_size = end > f.address ? end - f.address : 0;
      Append(&symbols, sym);
    }
  }

  const auto add_table = [&](const char* name, uint32_t type, const std::string& bytes) {
    Align(&out, 8);
    Elf64_Shdr h{};
    h.sh_name = section_names.Add(name);
    h.sh_type = type;
    h.sh_offset = out.size();
    h.sh_size = bytes.size();
    h.sh_addralign = type == SHT_SYMTAB ? 8 : 1;
    out.append(bytes);
    headers.push_back(h);
    return static_cast<uint16_t>(headers.size() - 1);
  };
  // No table at all without functions: libdwfl counts the null symbol of an empty one.
  if (!image.functions.empty()) {
    const uint16_t symtab = add_table(".symtab", SHT_SYMTAB, symbols);
    const uint16_t strtab = add_table(".strtab", SHT_STRTAB, symbol_names.bytes);
    headers[symtab].sh_link = strtab;
    headers[symtab].sh_info = first_global;
    headers[symtab].sh_entsize = sizeof(Elf64_Sym);
  }
  const uint32_t shstrtab_name = section_names.Add(".shstrtab");
  const uint16_t shstrtab = add_table("", SHT_STRTAB, section_names.bytes);
  headers[shstrtab].sh_name = shstrtab_name;

  Align(&out, 8);
  Elf64_Ehdr ehdr{};
  std::memcpy(ehdr.e_ident, ELFMAG, SELFMAG);
  ehdr.e_ident[EI_CLASS] = ELFCLASS64;
  ehdr.e_ident[EI_DATA] = ELFDATA2LSB;
  ehdr.e_ident[EI_VERSION] = EV_CURRENT;
  // ET_EXEC: libdwfl places it at its own addresses (bias 0) when reported at base 0.
  ehdr.e_type = ET_EXEC;
  ehdr.e_machine = image.machine == kMachineAmd64   ? EM_X86_64
                   : image.machine == kMachineArm64 ? EM_AARCH64
                                                    : EM_NONE;
  ehdr.e_version = EV_CURRENT;
  ehdr.e_entry = image.image_base + image.entry_rva;
  ehdr.e_phoff = sizeof(Elf64_Ehdr);
  ehdr.e_shoff = out.size();
  ehdr.e_ehsize = sizeof(Elf64_Ehdr);
  ehdr.e_phentsize = sizeof(Elf64_Phdr);
  ehdr.e_phnum = 1;
  ehdr.e_shentsize = sizeof(Elf64_Shdr);
  ehdr.e_shnum = static_cast<uint16_t>(headers.size());
  ehdr.e_shstrndx = shstrtab;
  std::memcpy(out.data(), &ehdr, sizeof(ehdr));
  for (const Elf64_Shdr& h : headers) Append(&out, h);
  return out;
}

int ElfMemfd(const std::string& name, std::string_view bytes) {
  const int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0) return -1;
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int saved = errno;
      close(fd);
      errno = n == 0 ? EIO : saved;
      return -1;
    }
    done += static_cast<size_t>(n);
  }
  if (lseek(fd, 0, SEEK_SET) != 0) {
    const int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

}  // namespace memlens::analyzer
