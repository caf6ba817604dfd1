// src/agent/got/got_table.cc: see got_table.h.
#include "agent/got/got_table.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <type_traits>

namespace memlens::agent::got {
namespace {

static_assert(sizeof(void*) == 8, "GOT patching reads 64-bit ELF relocations");
#if defined(__x86_64__)
constexpr uint32_t kRelJumpSlot = R_X86_64_JUMP_SLOT;
constexpr uint32_t kRelGlobDat = R_X86_64_GLOB_DAT;
constexpr uint32_t kRelAbs64 = R_X86_64_64;
#elif defined(__aarch64__)
constexpr uint32_t kRelJumpSlot = R_AARCH64_JUMP_SLOT;
constexpr uint32_t kRelGlobDat = R_AARCH64_GLOB_DAT;
constexpr uint32_t kRelAbs64 = R_AARCH64_ABS64;
#else
#error "GOT patching knows the relocation types of x86-64 and aarch64 only"
#endif

uintptr_t PageSize() {
  static const uintptr_t size = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  return size;
}
uintptr_t PageOf(uintptr_t address) { return address & ~(PageSize() - 1); }

// The protection of every mapping, read once per walk and only if a walk needs it. Our own
// mprotect calls give each page back what was read here, so the snapshot stays true for the
// pages we touch.
class Maps {
 public:
  // PROT_* bits of the mapping holding `address`; -1 if none or /proc/self/maps is unreadable.
  int ProtectionAt(uintptr_t address) {
    if (!loaded_) Load();
    auto it = std::upper_bound(ranges_.begin(), ranges_.end(), address,
                               [](uintptr_t a, const Range& r) { return a < r.end; });
    return it != ranges_.end() && it->start <= address ? it->prot : -1;
  }
  int error() const { return error_; }

 private:
  struct Range {
    uintptr_t start, end;
    int prot;
  };

  void Load() {
    loaded_ = true;
    // Raw calls: no stdio (it would allocate a FILE) and nothing the agent interposes.
    int fd = static_cast<int>(
        syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC));
    if (fd < 0) {
      error_ = errno;
      return;
    }
    std::string text;
    char buffer[16384];
    for (;;) {
      ssize_t n = syscall(SYS_read, fd, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (n < 0) error_ = errno;
        break;
      }
      text.append(buffer, static_cast<size_t>(n));
    }
    syscall(SYS_close, fd);
    // "start-end perms offset dev inode path", one mapping a line, in address order.
    for (size_t line = 0; line < text.size();) {
      size_t end_of_line = text.find('\n', line);
      if (end_of_line == std::string::npos) end_of_line = text.size();
      const char* p = text.c_str() + line;
      char* after;
      Range range{};
      range.start = std::strtoull(p, &after, 16);
      if (*after == '-') {
        range.end = std::strtoull(after + 1, &after, 16);
        if (*after == ' ' && after + 4 < text.c_str() + end_of_line) {
          range.prot = (after[1] == 'r' ? PROT_READ : 0) | (after[2] == 'w' ? PROT_WRITE : 0) |
                       (after[3] == 'x' ? PROT_EXEC : 0);
          ranges_.push_back(range);
        }
      }
      line = end_of_line + 1;
    }
  }

  bool loaded_ = false;
  int error_ = 0;
  std::vector<Range> ranges_;
};

// The dynamic section's addresses. glibc has already added the load base to them (it rewrites
// the entries it uses when it loads the object); another libc may not have, and an address
// below the base can only be an unrelocated one.
uintptr_t Absolute(const dl_phdr_info& object, uintptr_t address) {
  return address < object.dlpi_addr ? object.dlpi_addr + address : address;
}

struct Dynamic {
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  size_t strsz = 0;
  const ElfW(Rela)* jmprel = nullptr;
  size_t jmprel_bytes = 0;
  bool jmprel_is_rela = true;
  const ElfW(Rela)* rela = nullptr;
  size_t rela_bytes = 0;
  const uint32_t* gnu_hash = nullptr;
  const uint32_t* hash = nullptr;
};

const ElfW(Phdr)* FindSegment(const dl_phdr_info& object, ElfW(Word) type) {
  for (int i = 0; i < object.dlpi_phnum; ++i) {
    if (object.dlpi_phdr[i].p_type == type) return &object.dlpi_phdr[i];
  }
  return nullptr;
}

bool ReadDynamic(const dl_phdr_info& object, Dynamic* out) {
  const ElfW(Phdr)* segment = FindSegment(object, PT_DYNAMIC);
  if (!segment) return false;
  auto* entry = reinterpret_cast<const ElfW(Dyn)*>(object.dlpi_addr + segment->p_vaddr);
  for (; entry->d_tag != DT_NULL; ++entry) {
    const uintptr_t value = entry->d_un.d_ptr;
    auto at = [&](auto*& field) {
      field = reinterpret_cast<std::remove_reference_t<decltype(field)>>(Absolute(object, value));
    };
    switch (entry->d_tag) {
      case DT_SYMTAB: at(out->symtab); break;
      case DT_STRTAB: at(out->strtab); break;
      case DT_STRSZ: out->strsz = value; break;
      case DT_JMPREL: at(out->jmprel); break;
      case DT_PLTRELSZ: out->jmprel_bytes = value; break;
      case DT_PLTREL: out->jmprel_is_rela = value == DT_RELA; break;
      case DT_RELA: at(out->rela); break;
      case DT_RELASZ: out->rela_bytes = value; break;
      case DT_GNU_HASH: at(out->gnu_hash); break;
      case DT_HASH: at(out->hash); break;
      default: break;
    }
  }
  return out->symtab && out->strtab;
}

// How many entries the dynamic symbol table has: the ELF header does not say; the hash tables
// do (DT_HASH: its chain count; DT_GNU_HASH: past the highest bucket's chain end).
size_t SymbolCount(const Dynamic& dynamic) {
  if (dynamic.hash) return dynamic.hash[1];
  if (!dynamic.gnu_hash) return 0;
  const uint32_t buckets = dynamic.gnu_hash[0];
  const uint32_t first = dynamic.gnu_hash[1];
  const uint32_t bloom_words = dynamic.gnu_hash[2];
  const uint32_t* bucket = dynamic.gnu_hash + 4 + bloom_words * (sizeof(ElfW(Addr)) / 4);
  const uint32_t* chain = bucket + buckets;
  uint32_t last = 0;
  for (uint32_t i = 0; i < buckets; ++i) last = std::max(last, bucket[i]);
  if (last < first) return first;
  while (!(chain[last - first] & 1)) ++last;  // the low bit ends a chain
  return last + 1;
}

// The loader has finished relocating the object: glibc makes its RELRO read-only right after
// (rounding both ends down to pages, as _dl_protect_relro does). Before that, a dlopen on
// another thread is still writing its slots, and would add the load base to a lazy slot that
// held our hook.
bool Relocated(const dl_phdr_info& object, Maps& maps) {
  const ElfW(Phdr)* relro = FindSegment(object, PT_GNU_RELRO);
  if (!relro) return true;
  uintptr_t start = PageOf(object.dlpi_addr + relro->p_vaddr);
  uintptr_t end = PageOf(object.dlpi_addr + relro->p_vaddr + relro->p_memsz);
  if (start == end) return true;
  int prot = maps.ProtectionAt(start);
  return prot >= 0 && !(prot & PROT_WRITE);
}

uintptr_t Load(const Slot& slot) { return __atomic_load_n(slot.address, __ATOMIC_ACQUIRE); }

struct Write {
  Slot* slot;
  uintptr_t expected;  // written only over this value (compare-and-swap)
  uintptr_t desired;
  bool done = false;
};

// Each page once: made writable if it is not (the real system call, never an interposer),
// written, and given back the protection it had.
void WriteAll(std::vector<Write>& writes, Maps& maps) {
  std::sort(writes.begin(), writes.end(),
            [](const Write& a, const Write& b) { return a.slot->address < b.slot->address; });
  for (size_t i = 0; i < writes.size();) {
    const uintptr_t page = PageOf(reinterpret_cast<uintptr_t>(writes[i].slot->address));
    size_t end = i;
    while (end < writes.size() &&
           PageOf(reinterpret_cast<uintptr_t>(writes[end].slot->address)) == page) {
      ++end;
    }
    const int prot = maps.ProtectionAt(page);
    const bool unprotect = prot >= 0 && !(prot & PROT_WRITE);
    if (prot >= 0 &&
        (!unprotect || syscall(SYS_mprotect, page, PageSize(), prot | PROT_WRITE) == 0)) {
      for (size_t k = i; k < end; ++k) {
        uintptr_t expected = writes[k].expected;
        writes[k].done = __atomic_compare_exchange_n(writes[k].slot->address, &expected,
                                                     writes[k].desired, false, __ATOMIC_RELEASE,
                                                     __ATOMIC_RELAXED);
      }
      if (unprotect) syscall(SYS_mprotect, page, PageSize(), prot);
    }
    i = end;
  }
}

// Patches the slots that need it. A loader-owned slot that lost its hook was resolved over our
// store by lazy binding on another thread: what it holds now is the function to restore, and
// the hook goes back. A few rounds, since that resolution can race each store.
size_t PatchSlots(std::vector<Slot>& slots, Maps& maps) {
  size_t written = 0;
  for (int round = 0; round < 3; ++round) {
    std::vector<Write> writes;
    for (Slot& slot : slots) {
      uintptr_t now = Load(slot);
      if (now == slot.hook) continue;
      if (!slot.ours && now == 0) continue;  // an unresolved weak import: the program tests it
      if (slot.ours && slot.kind == SlotKind::kDataPointer) continue;  // the program's change
      writes.push_back({&slot, now, slot.hook});
    }
    if (writes.empty()) break;
    WriteAll(writes, maps);
    for (Write& write : writes) {
      if (!write.done) continue;
      write.slot->saved = write.expected;
      write.slot->ours = true;
      ++written;
    }
  }
  return written;
}

size_t RestoreSlots(std::vector<Slot>& slots, Maps& maps) {
  std::vector<Write> writes;
  for (Slot& slot : slots) {
    if (slot.ours && Load(slot) == slot.hook) writes.push_back({&slot, slot.hook, slot.saved});
  }
  WriteAll(writes, maps);
  return std::count_if(writes.begin(), writes.end(), [](const Write& w) { return w.done; });
}

}  // namespace

struct GotTable::Walk {
  Walk(GotTable* t, bool p, std::vector<Object> b) : table(t), patching(p), before(std::move(b)) {}
  GotTable* table;
  bool patching;
  std::vector<Object> before;  // the table as the last call left it
  std::vector<Object> after;
  bool first = true;
  bool rescan = false;  // an object was unloaded since: known objects are read again
  unsigned long long subs = 0;
  Maps maps;
  size_t written = 0, covered = 0, restored = 0;
};

GotTable::GotTable(std::vector<Hook> hooks, Filter filter)
    : hooks_(std::move(hooks)), filter_(filter) {
  std::sort(hooks_.begin(), hooks_.end(),
            [](const Hook& a, const Hook& b) { return a.name < b.name; });
}

int GotTable::Visit(dl_phdr_info* info, size_t, void* data) {
  Walk& walk = *static_cast<Walk*>(data);
  if (walk.first) {
    walk.first = false;
    walk.subs = info->dlpi_subs;
    walk.rescan = info->dlpi_subs != walk.table->subs_;
  }
  if (walk.table->filter_(*info)) walk.table->VisitObject(*info, walk);
  return 0;
}

void GotTable::VisitObject(const dl_phdr_info& info, Walk& walk) {
  const char* name = info.dlpi_name ? info.dlpi_name : "";
  Object* known = nullptr;
  for (Object& object : walk.before) {
    if (object.base == info.dlpi_addr && object.phdr == info.dlpi_phdr && object.name == name) {
      known = &object;
      break;
    }
  }
  if (!known && !walk.patching) return;  // never patched: nothing to restore

  Object current{info.dlpi_addr, info.dlpi_phdr, name, {}};
  if (known && !walk.rescan) {
    current.slots = std::move(known->slots);
  } else {
    if (walk.patching && !Relocated(info, walk.maps)) {  // a later Patch takes it
      if (known) walk.after.push_back(std::move(*known));
      return;
    }
    Dynamic dynamic;
    if (!ReadDynamic(info, &dynamic)) return;
    auto scan = [&](const ElfW(Rela)* table, size_t bytes) {
      if (!table) return;
      for (size_t i = 0; i < bytes / sizeof(ElfW(Rela)); ++i) {
        const ElfW(Rela)& rel = table[i];
        const uint32_t type = ELF64_R_TYPE(rel.r_info);
        SlotKind kind;
        if (type == kRelJumpSlot) {
          kind = SlotKind::kJumpSlot;
        } else if (type == kRelGlobDat) {
          kind = SlotKind::kGlobDat;
        } else if (type == kRelAbs64 && rel.r_addend == 0) {
          kind = SlotKind::kDataPointer;
        } else {
          continue;
        }
        // Whether the object defines the symbol or not: the slot of a defined one exists because
        // the definition may be preempted (the C library's own malloc, free, calloc and realloc
        // slots, through which strdup and fopen allocate, are of that kind).
        if (ELF64_R_SYM(rel.r_info) == 0) continue;
        const ElfW(Sym)& symbol = dynamic.symtab[ELF64_R_SYM(rel.r_info)];
        if (dynamic.strsz && symbol.st_name >= dynamic.strsz) continue;
        const char* symbol_name = dynamic.strtab + symbol.st_name;
        auto hook = std::lower_bound(
            hooks_.begin(), hooks_.end(), symbol_name,
            [](const Hook& h, const char* n) { return std::strcmp(h.name.c_str(), n) < 0; });
        if (hook == hooks_.end() || hook->name != symbol_name) continue;
        uintptr_t address = info.dlpi_addr + rel.r_offset;
        if (address % sizeof(uintptr_t)) continue;  // cannot be stored atomically
        current.slots.push_back(
            {reinterpret_cast<uintptr_t*>(address), 0, hook->address, kind, false});
      }
    };
    if (dynamic.jmprel_is_rela) scan(dynamic.jmprel, dynamic.jmprel_bytes);
    scan(dynamic.rela, dynamic.rela_bytes);  // some linkers count the PLT's in it too
    auto by_address = [](const Slot& a, const Slot& b) { return a.address < b.address; };
    std::sort(current.slots.begin(), current.slots.end(), by_address);
    auto same = [](const Slot& a, const Slot& b) { return a.address == b.address; };
    current.slots.erase(std::unique(current.slots.begin(), current.slots.end(), same),
                        current.slots.end());
    if (known) {  // read again after an unload: keep what we know of the slots still there
      for (Slot& slot : current.slots) {
        auto it = std::lower_bound(known->slots.begin(), known->slots.end(), slot, by_address);
        if (it != known->slots.end() && it->address == slot.address && it->hook == slot.hook) {
          slot = *it;
        }
      }
    }
  }

  if (walk.patching) {
    walk.written += PatchSlots(current.slots, walk.maps);
    for (const Slot& slot : current.slots) walk.covered += Load(slot) == slot.hook;
    walk.after.push_back(std::move(current));
  } else {
    walk.restored += RestoreSlots(current.slots, walk.maps);
  }
}

GotTable::Result GotTable::Patch() {
  std::lock_guard<std::mutex> lock(mutex_);
  patched_ = true;
  return PatchLocked();
}

GotTable::Result GotTable::Refresh() {
  std::lock_guard<std::mutex> lock(mutex_);
  return patched_ ? PatchLocked() : Result{};
}

GotTable::Result GotTable::PatchLocked() {
  Walk walk{this, true, std::move(objects_)};
  dl_iterate_phdr(Visit, &walk);
  objects_ = std::move(walk.after);  // what is left in walk.before was unloaded: forgotten
  subs_ = walk.subs;
  Result result{walk.written, walk.covered, {}};
  if (walk.maps.error()) {
    result.error = std::string("cannot read /proc/self/maps: ") + std::strerror(walk.maps.error());
  }
  return result;
}

size_t GotTable::Unpatch() {
  std::lock_guard<std::mutex> lock(mutex_);
  patched_ = false;
  Walk walk{this, false, std::move(objects_)};
  dl_iterate_phdr(Visit, &walk);
  objects_.clear();
  subs_ = walk.subs;
  return walk.restored;
}

std::vector<Slot> GotTable::Slots() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Slot> all;
  for (const Object& object : objects_) {
    all.insert(all.end(), object.slots.begin(), object.slots.end());
  }
  return all;
}

bool ObjectContains(const dl_phdr_info& object, uintptr_t address) {
  for (int i = 0; i < object.dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = object.dlpi_phdr[i];
    uintptr_t start = object.dlpi_addr + segment.p_vaddr;
    if (segment.p_type == PT_LOAD && address - start < segment.p_memsz) return true;
  }
  return false;
}

bool IsLoaderOrVdso(const dl_phdr_info& object) {
  // The loader frees what it allocated through its own pointer to malloc, taken at start
  // (__rtld_malloc); it is also where the program's lazy binding runs. The vdso imports nothing.
  // The loader is known by its load address, or by its name where it was run as the program
  // (ld-linux-x86-64.so.2 ./program: no AT_BASE then).
  const uintptr_t loader = getauxval(AT_BASE);
  const char* name = object.dlpi_name ? object.dlpi_name : "";
  const char* slash = std::strrchr(name, '/');
  return (loader != 0 && object.dlpi_addr == loader) ||
         std::strncmp(slash ? slash + 1 : name, "ld-linux", 8) == 0 ||
         ObjectContains(object, getauxval(AT_SYSINFO_EHDR));
}

std::vector<Hook> ExportedFunctions(const dl_phdr_info& object, const char* skip_prefix) {
  std::vector<Hook> functions;
  Dynamic dynamic;
  if (!ReadDynamic(object, &dynamic)) return functions;
  const size_t count = SymbolCount(dynamic);
  const size_t prefix_length = std::strlen(skip_prefix);
  for (size_t i = 1; i < count; ++i) {
    const ElfW(Sym)& symbol = dynamic.symtab[i];
    const int binding = ELF64_ST_BIND(symbol.st_info);
    if (symbol.st_shndx == SHN_UNDEF || ELF64_ST_TYPE(symbol.st_info) != STT_FUNC ||
        (binding != STB_GLOBAL && binding != STB_WEAK) ||
        ELF64_ST_VISIBILITY(symbol.st_other) != STV_DEFAULT) {
      continue;
    }
    const char* name = dynamic.strtab + symbol.st_name;
    if (*name == '\0' || std::strncmp(name, skip_prefix, prefix_length) == 0) continue;
    functions.push_back({name, object.dlpi_addr + symbol.st_value});
  }
  return functions;
}

}  // namespace memlens::agent::got
