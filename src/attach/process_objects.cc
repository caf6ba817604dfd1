// src/attach/process_objects.cc: /proc/PID/maps and the objects' dynamic symbol tables.
#include "attach/process_objects.h"

#include <fcntl.h>
#include <gelf.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace memlens::attach {
namespace {

// An ELF file open with libelf, closed with it.
class ElfFile {
 public:
  bool Open(const std::string& path, std::string* error) {
    elf_version(EV_CURRENT);
    fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) {
      *error = "cannot open '" + path + "': " + std::strerror(errno);
      return false;
    }
    elf_ = elf_begin(fd_, ELF_C_READ_MMAP, nullptr);
    if (elf_ == nullptr || elf_kind(elf_) != ELF_K_ELF) {
      *error = "'" + path + "' is not an ELF file";
      return false;
    }
    return true;
  }
  ~ElfFile() {
    if (elf_) elf_end(elf_);
    if (fd_ >= 0) close(fd_);
  }
  Elf* elf() const { return elf_; }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  Elf* elf_ = nullptr;
};

// The vaddr of the segment mapped from file offset 0, rounded down to its page: what the
// object's lowest mapping corresponds to.
bool FirstSegmentAddress(Elf* elf, uint64_t* vaddr) {
  size_t count = 0;
  if (elf_getphdrnum(elf, &count) != 0) return false;
  for (size_t i = 0; i < count; ++i) {
    GElf_Phdr phdr;
    if (gelf_getphdr(elf, static_cast<int>(i), &phdr) == nullptr || phdr.p_type != PT_LOAD) {
      continue;
    }
    uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    *vaddr = (phdr.p_vaddr - phdr.p_offset) & ~(page - 1);
    return true;
  }
  return false;
}

}  // namespace

bool ReadLoadedObjects(pid_t pid, std::vector<LoadedObject>* objects, std::string* error) {
  std::string maps_path = "/proc/" + std::to_string(pid) + "/maps";
  std::ifstream maps(maps_path);
  if (!maps) {
    *error = "cannot read " + maps_path + ": " + std::strerror(errno);
    return false;
  }
  objects->clear();
  std::string line;
  while (std::getline(maps, line)) {
    uint64_t begin = 0, end = 0, offset = 0, inode = 0;
    unsigned major = 0, minor = 0;
    char perms[8];
    int path_at = 0;
    if (std::sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64 " %n",
                    &begin, &end, perms, &offset, &major, &minor, &inode, &path_at) < 7 ||
        inode == 0 || path_at == 0 || line[path_at] != '/') {
      continue;  // anonymous, [stack], [vdso]...
    }
    std::string path = line.substr(path_at);
    constexpr char kDeleted[] = " (deleted)";
    bool deleted = path.size() > sizeof kDeleted - 1 &&
                   path.compare(path.size() - (sizeof kDeleted - 1), std::string::npos, kDeleted) == 0;
    if (deleted) path.resize(path.size() - (sizeof kDeleted - 1));
    uint64_t device = makedev(major, minor);
    LoadedObject* object = nullptr;
    for (auto& o : *objects) {
      if (o.device == device && o.inode == inode) object = &o;
    }
    if (!object) {
      objects->push_back(LoadedObject{path, deleted, device, inode, 0, begin, end});
      object = &objects->back();
    }
    object->begin = std::min(object->begin, begin);
    object->end = std::max(object->end, end);
    if (offset == 0 && (object->lowest == 0 || begin < object->lowest)) object->lowest = begin;
  }
  return true;
}

const LoadedObject* FindObject(const std::vector<LoadedObject>& objects,
                               const std::function<bool(const std::string& name)>& matches) {
  for (const auto& o : objects) {
    size_t slash = o.path.rfind('/');
    if (matches(o.path.substr(slash == std::string::npos ? 0 : slash + 1))) return &o;
  }
  return nullptr;
}

bool FindSymbol(pid_t pid, const LoadedObject& object, const char* symbol, uint64_t* address,
                std::string* error) {
  // Through the process's root: the file it mapped, even from another mount namespace.
  ElfFile file;
  const std::string path = "/proc/" + std::to_string(pid) + "/root" + object.path;
  if (!file.Open(path, error)) return false;
  struct stat st;
  if (fstat(file.fd(), &st) != 0 || st.st_ino != object.inode) {
    *error = "'" + object.path + "' was replaced on disk (an upgrade?) since process " +
             std::to_string(pid) + " loaded it: memlens cannot read the symbols it has; restart "
             "the process to attach to it";
    return false;
  }
  uint64_t first = 0;
  if (object.lowest == 0 || !FirstSegmentAddress(file.elf(), &first)) {
    *error = "cannot tell where '" + object.path + "' is loaded";
    return false;
  }
  for (Elf_Scn* scn = elf_nextscn(file.elf(), nullptr); scn; scn = elf_nextscn(file.elf(), scn)) {
    GElf_Shdr header;
    if (gelf_getshdr(scn, &header) == nullptr || header.sh_type != SHT_DYNSYM) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    size_t count = header.sh_entsize ? header.sh_size / header.sh_entsize : 0;
    for (size_t i = 0; data && i < count; ++i) {
      GElf_Sym sym;
      if (gelf_getsym(data, static_cast<int>(i), &sym) == nullptr ||
          sym.st_shndx == SHN_UNDEF || sym.st_value == 0) {
        continue;
      }
      const char* name = elf_strptr(file.elf(), header.sh_link, sym.st_name);
      if (name && std::strcmp(name, symbol) == 0) {
        *address = object.lowest - first + sym.st_value;
        return true;
      }
    }
  }
  *error = "'" + object.path + "' does not define " + symbol;
  return false;
}

std::string ProgramRefusal(pid_t pid) {
  ElfFile file;
  std::string error;
  if (!file.Open("/proc/" + std::to_string(pid) + "/exe", &error)) return "";
  GElf_Ehdr header;
  if (gelf_getehdr(file.elf(), &header) == nullptr || header.e_machine != EM_X86_64 ||
      gelf_getclass(file.elf()) != ELFCLASS64) {
    return "process " + std::to_string(pid) + " (" + ProgramName(pid) +
           ") is not a 64-bit x86 program: memlens attach drives x86-64 processes only";
  }
  return "";
}

std::string ProgramName(pid_t pid) {
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(comm, name);
  return name.empty() ? "?" : name;
}

std::string StatusField(pid_t pid, const std::string& key) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.compare(0, key.size() + 1, key + ":") == 0) {
      size_t at = line.find_first_not_of(" \t", key.size() + 1);
      return at == std::string::npos ? "" : line.substr(at);
    }
  }
  return "";
}

}  // namespace memlens::attach
