// src/analyzer/model/resident_parts.cc: see resident_parts.h.
#include "analyzer/model/resident_parts.h"

#include <algorithm>
#include <unordered_set>

namespace memlens::analyzer {
namespace {

using format::Mapping;

constexpr ResidentPartInfo kParts[kResidentParts] = {
    {'#', "heap_in_use", "Heap blocks in use",
     "what the program holds through malloc and Python's allocator (the other views' figures)"},
    {'o', "malloc_overhead", "malloc's overhead",
     "malloc's header and rounding on each block in use"},
    {'f', "malloc_free", "Free memory malloc keeps",
     "freed blocks glibc keeps in its arenas for reuse; malloc_trim(0) returns the resident part"},
    {'p', "python_free", "Free space in Python's allocator",
     "room inside pymalloc's arenas (or mimalloc's pages) not holding an object now"},
    {'M', "program_mappings", "Mappings the program made",
     "anonymous memory the program mapped itself (mmap), by the site that mapped it"},
    {'s', "stacks", "Thread stacks", "the main thread's stack and each thread's"},
    {'c', "code_and_data", "Code and data of programs and libraries",
     "the executable, the shared libraries, their data and bss"},
    {'F', "mapped_files", "Memory-mapped files", "other files the program mapped (data, caches, fonts)"},
    {'S', "shared_memory", "Shared memory", "shared mappings: /dev/shm, memfd, System V segments"},
    {'m', "memlens", "memlens", "memlens's own buffers in the process"},
    {'k', "kernel", "Kernel pages", "what the kernel maps into every process ([vdso], [vvar])"},
    {' ', "reserved", "Reserved address space",
     "PROT_NONE ranges: guard pages, arena tails, reservations; address space, not memory"},
    {'?', "unexplained", "Unexplained",
     "anonymous memory no record explains (a library's own mmap through a system call, an "
     "allocator other than glibc's)"},
};

constexpr uint64_t kArenaHeapBytes = uint64_t{64} << 20;  // glibc's HEAP_MAX_SIZE on 64-bit

bool Accessible(const Mapping& m) {
  return (m.flags & (Mapping::kRead | Mapping::kWrite | Mapping::kExec)) != 0;
}
bool Anonymous(const Mapping& m) {
  return m.inode == 0 && !(m.flags & Mapping::kShared) && (m.name.empty() || m.name[0] == '[');
}
bool Contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// What a mapping is by itself: its name, its file, glibc's shapes. kUnexplained for anonymous
// memory that only a claim can explain.
Owner BaseOwner(const format::MappingsRecord& sample, size_t i,
                const std::unordered_set<uint64_t>& code_inodes, const std::vector<Owner>& before) {
  const Mapping& m = sample.mappings[i];
  const std::string& name = m.name;
  if (!Accessible(m)) return Owner::kReserved;
  if (name == "[heap]") return Owner::kMallocMain;
  if (name == "[stack]") return Owner::kStack;
  if (name == "[vdso]" || name == "[vvar]" || name == "[vsyscall]" || name == "[vvar_vclock]") {
    return Owner::kKernel;
  }
  // memlens's exchange with memlens run, its named mappings (raw_mapping.h), its libraries.
  if (name.rfind("/memfd:memlens", 0) == 0 || name.rfind("[anon:memlens", 0) == 0 ||
      (m.inode != 0 && name.find("/libmemlens") != std::string::npos)) {
    return Owner::kMemlens;
  }
  if ((m.flags & Mapping::kShared) || name.rfind("/dev/shm/", 0) == 0 ||
      name.rfind("/memfd:", 0) == 0 || name.rfind("/SYSV", 0) == 0) {
    return Owner::kShared;
  }
  if (m.inode != 0) return code_inodes.count(m.inode) ? Owner::kCodeAndData : Owner::kMappedFile;
  // Names glibc (glibc.mem.decorate_maps) and CPython give their anonymous memory.
  if (Contains(name, "malloc arena")) return Owner::kMallocArena;
  if (Contains(name, "pthread stack") || Contains(name, "stack_and_tls")) return Owner::kStack;
  if (Contains(name, "glibc: malloc")) return Owner::kMallocMapped;
  if (Contains(name, "pymalloc")) return Owner::kPymalloc;
  const Mapping* previous = i ? &sample.mappings[i - 1] : nullptr;
  const bool after_previous = previous && previous->end == m.start;
  // A heap of one of glibc's other arenas: 64 MiB-aligned, its unused end PROT_NONE.
  if (m.start % kArenaHeapBytes == 0) {
    const Mapping* next = i + 1 < sample.mappings.size() ? &sample.mappings[i + 1] : nullptr;
    if (m.end - m.start == kArenaHeapBytes ||
        (next && next->start == m.end && !Accessible(*next) && Anonymous(*next) &&
         next->end == m.start + kArenaHeapBytes)) {
      return Owner::kMallocArena;
    }
  }
  // A library's bss: anonymous, right after its file's writable private mapping (its data).
  if (after_previous && previous->inode != 0 && (previous->flags & Mapping::kWrite) &&
      !(previous->flags & Mapping::kShared) &&
      (before.back() == Owner::kCodeAndData || before.back() == Owner::kMemlens)) {
    return before.back();
  }
  // A thread's stack: glibc maps it with its guard, PROT_NONE, right below.
  if (after_previous && !Accessible(*previous) && Anonymous(*previous)) return Owner::kStack;
  return Owner::kUnexplained;
}

}  // namespace

const ResidentPartInfo& PartInfo(ResidentPart part) { return kParts[static_cast<size_t>(part)]; }

std::optional<ResidentPart> PartOf(Owner owner) {
  switch (owner) {
    case Owner::kMallocMain:
    case Owner::kMallocArena:
    case Owner::kMallocMapped:
    case Owner::kPymalloc:
    case Owner::kMimalloc: return std::nullopt;
    case Owner::kProgramMapping: return ResidentPart::kProgramMappings;
    case Owner::kStack: return ResidentPart::kStacks;
    case Owner::kCodeAndData: return ResidentPart::kCodeAndData;
    case Owner::kMappedFile: return ResidentPart::kMappedFiles;
    case Owner::kShared: return ResidentPart::kSharedMemory;
    case Owner::kMemlens: return ResidentPart::kMemlens;
    case Owner::kKernel: return ResidentPart::kKernel;
    case Owner::kReserved: return ResidentPart::kReserved;
    case Owner::kUnexplained: return ResidentPart::kUnexplained;
  }
  return ResidentPart::kUnexplained;
}

const char* OwnerName(Owner owner) {
  static constexpr const char* kNames[] = {
      "malloc main arena", "malloc arena", "malloc mapped block", "pymalloc arena",
      "mimalloc", "program mapping", "stack", "code and data", "mapped file", "shared memory",
      "memlens", "kernel", "reserved", "unexplained"};
  return kNames[static_cast<size_t>(owner)];
}

ResidentPages::ResidentPages(const format::Mapping& m, uint64_t page_size) : m_(&m) {
  if (m.page_runs.empty()) return;
  uint64_t at = m.start, total = 0;
  for (size_t k = 0; k < m.page_runs.size(); ++k) {
    uint64_t bytes = m.page_runs[k] * page_size;
    if (k % 2 == 1 && bytes) {
      starts_.push_back(at);
      ends_.push_back(at + bytes);
      before_.push_back(total);
      total += bytes;
    }
    at += bytes;
  }
}

uint64_t ResidentPages::In(uint64_t start, uint64_t end) const {
  const Mapping& m = *m_;
  start = std::max(start, m.start);
  end = std::min(end, m.end);
  if (start >= end) return 0;
  if (m.page_runs.empty()) {
    const uint64_t size = m.end - m.start;
    if (m.rss == 0 || m.rss >= size) return m.rss ? end - start : 0;
    return static_cast<uint64_t>(static_cast<unsigned __int128>(m.rss) * (end - start) / size);
  }
  // Resident bytes below an address: the stretches before it, and the part of the one it is in.
  auto below = [&](uint64_t a) -> uint64_t {
    size_t k = std::upper_bound(starts_.begin(), starts_.end(), a) - starts_.begin();
    if (k == 0) return 0;
    --k;
    return before_[k] + std::min(a, ends_[k]) - starts_[k];
  };
  return below(end) - below(start);
}

std::vector<MappingPiece> ClassifyMappings(const format::MappingsRecord& sample,
                                           const ClaimSet& claim_set) {
  const auto& maps = sample.mappings;
  std::unordered_set<uint64_t> code_inodes;  // files with an executable mapping: ELF objects
  for (const Mapping& m : maps) {
    if (m.inode && (m.flags & Mapping::kExec)) code_inodes.insert(m.inode);
  }
  std::vector<Owner> base;
  base.reserve(maps.size());
  for (size_t i = 0; i < maps.size(); ++i) base.push_back(BaseOwner(sample, i, code_inodes, base));
  auto mapping_at = [&](uint64_t address) -> size_t {
    auto it = std::upper_bound(maps.begin(), maps.end(), address,
                               [](uint64_t a, const Mapping& m) { return a < m.start; });
    if (it == maps.begin() || address >= std::prev(it)->end) return maps.size();
    return static_cast<size_t>(std::prev(it) - maps.begin());
  };
  // Claims: memlens's own memory, the replay's, and the blocks malloc mapped on their own (a
  // large block outside its arenas).
  std::vector<Claim> claims = claim_set.claims;
  for (const auto& [start, bytes] : sample.own) {
    const uint64_t end = (start + bytes + sample.page_size - 1) & ~(sample.page_size - 1);
    claims.push_back({start, end, Owner::kMemlens});
  }
  for (const auto& [address, size] : claim_set.large_blocks) {
    size_t i = mapping_at(address);
    if (i == maps.size() || base[i] == Owner::kMallocMain || base[i] == Owner::kMallocArena) continue;
    uint64_t start = address - 16;  // the chunk's header, at the start of its mapping
    claims.push_back({start, start + MallocMappedBytes(size, sample.page_size), Owner::kMallocMapped});
  }
  std::sort(claims.begin(), claims.end(),
            [](const Claim& a, const Claim& b) { return a.start < b.start; });

  std::vector<MappingPiece> pieces;
  for (size_t i = 0; i < maps.size(); ++i) {
    const Mapping& m = maps[i];
    const size_t first = pieces.size();
    // What the replay knows (claims) comes before what a mapping's shape or place suggests (an
    // arena's heap, a stack, a bss), and explains a named mapping no name rule did.
    const bool claimable = Anonymous(m) && Accessible(m) &&
                           (m.name.empty() || base[i] == Owner::kUnexplained);
    uint64_t at = m.start;
    if (claimable) {
      auto c = std::upper_bound(claims.begin(), claims.end(), m.start,
                                [](uint64_t a, const Claim& x) { return a < x.start; });
      if (c != claims.begin() && std::prev(c)->end > m.start) --c;
      for (; c != claims.end() && c->start < m.end; ++c) {
        uint64_t start = std::max({c->start, at, m.start}), end = std::min(c->end, m.end);
        if (start >= end) continue;
        if (at < start) pieces.push_back({at, start, uint32_t(i), base[i], 0});
        pieces.push_back({start, end, uint32_t(i), c->owner, 0});
        at = end;
      }
    }
    if (at < m.end) pieces.push_back({at, m.end, uint32_t(i), base[i], 0});
    if (pieces.size() == first) continue;  // an empty mapping (the decoder refuses them)
    // Each piece's resident bytes; the last takes what is left, so that a mapping's pieces add
    // up to its Rss exactly, as the kernel counted it.
    ResidentPages pages(m, sample.page_size);
    uint64_t given = 0;
    for (size_t k = first; k + 1 < pieces.size(); ++k) {
      pieces[k].resident = std::min(pages.In(pieces[k].start, pieces[k].end), m.rss - given);
      given += pieces[k].resident;
    }
    pieces.back().resident = m.rss - given;
  }
  return pieces;
}

ResidentSample SplitParts(const format::MappingsRecord& sample,
                          const std::vector<MappingPiece>& pieces, const HeapShare& heap) {
  ResidentSample s;
  s.seconds = static_cast<double>(sample.monotonic_ns) / 1e9;
  s.seq = sample.seq;
  s.read_ns = sample.read_ns;
  for (const Mapping& m : sample.mappings) {
    s.resident_bytes += m.rss;
    s.virtual_bytes += m.end - m.start;
  }
  uint64_t malloc_resident = 0, malloc_virtual = 0, python_resident = 0, python_virtual = 0;
  auto add = [&](ResidentPart part, uint64_t resident, uint64_t size) {
    s.resident[static_cast<size_t>(part)] += resident;
    s.virtual_[static_cast<size_t>(part)] += size;
  };
  for (const MappingPiece& p : pieces) {
    const uint64_t size = p.end - p.start;
    if (std::optional<ResidentPart> part = PartOf(p.owner)) {
      add(*part, p.resident, size);
    } else if (IsMalloc(p.owner)) {
      malloc_resident += p.resident;
      malloc_virtual += size;
    } else {
      python_resident += p.resident;
      python_virtual += size;
    }
  }
  // malloc's pieces: blocks in use, then their overhead, then what is free; each bounded by
  // what the pieces hold (blocks of another allocator are not in them).
  auto split = [](uint64_t total, uint64_t first, uint64_t second, uint64_t* a, uint64_t* b) {
    *a = std::min(first, total);
    *b = std::min(second, total - *a);
    return total - *a - *b;
  };
  uint64_t in_use, overhead;
  add(ResidentPart::kMallocFree,
      split(malloc_resident, heap.malloc_in_use_resident, heap.malloc_overhead_resident, &in_use,
            &overhead),
      0);
  add(ResidentPart::kHeapInUse, in_use, 0);
  add(ResidentPart::kMallocOverhead, overhead, 0);
  s.virtual_[static_cast<size_t>(ResidentPart::kMallocFree)] +=
      split(malloc_virtual, heap.malloc_in_use, heap.malloc_overhead, &in_use, &overhead);
  s.virtual_[static_cast<size_t>(ResidentPart::kHeapInUse)] += in_use;
  s.virtual_[static_cast<size_t>(ResidentPart::kMallocOverhead)] += overhead;
  uint64_t none;
  add(ResidentPart::kPythonFree,
      split(python_resident, heap.python_in_use_resident, 0, &in_use, &none), 0);
  add(ResidentPart::kHeapInUse, in_use, 0);
  s.virtual_[static_cast<size_t>(ResidentPart::kPythonFree)] +=
      split(python_virtual, heap.python_in_use, 0, &in_use, &none);
  s.virtual_[static_cast<size_t>(ResidentPart::kHeapInUse)] += in_use;
  return s;
}

bool ResidentTimeline::InPythonArena(uint64_t address) const {
  auto it = arenas_.upper_bound(address);
  return it != arenas_.begin() && address < std::prev(it)->second.end;
}

void ResidentTimeline::OnBlock(uint64_t address, uint64_t size, uint64_t bytes, bool added) {
  auto change = [added](uint64_t* total, uint64_t by) {
    *total = added ? *total + by : *total - std::min(*total, by);
  };
  if (InPythonArena(address)) return change(&python_in_use_, bytes);
  change(&malloc_in_use_, bytes);
  // A sampled capture's block stands for bytes/size blocks of its size.
  const uint64_t overhead = MallocChunkBytes(size) - size;
  change(&malloc_overhead_, size ? static_cast<uint64_t>(static_cast<double>(overhead) *
                                                         static_cast<double>(bytes) /
                                                         static_cast<double>(size))
                                 : overhead);
  if (size >= kMallocMappedFrom) {
    if (added) {
      large_blocks_[address] = size;
    } else {
      large_blocks_.erase(address);
    }
  }
}

void ResidentTimeline::OnArenaEvent(const format::Event& e) {
  using format::EventKind;
  switch (e.kind) {
    case EventKind::kPyArenaAlloc:
      arenas_[e.address] = {e.address, e.address + e.size, Owner::kPymalloc};
      break;
    case EventKind::kMimallocMap:
      arenas_[e.address] = {e.address, e.address + e.size, Owner::kMimalloc};
      break;
    case EventKind::kPyArenaFree:
      arenas_.erase(e.address);
      break;
    case EventKind::kMimallocUnmap: {  // of a whole mapping, or of its start (mimalloc trims)
      auto it = arenas_.find(e.address);
      if (it == arenas_.end()) break;
      Claim rest = it->second;
      arenas_.erase(it);
      rest.start = e.address + e.size;
      if (rest.start < rest.end) arenas_[rest.start] = rest;
      break;
    }
    default:
      break;
  }
}

std::vector<Claim> ResidentTimeline::PythonArenas() const {
  std::vector<Claim> out;
  out.reserve(arenas_.size());
  for (const auto& [start, claim] : arenas_) out.push_back(claim);
  return out;
}

ResidentSample ResidentTimeline::TakeOne(const format::MappingsRecord& r, const ClaimSet& claims) {
  std::vector<MappingPiece> pieces = ClassifyMappings(r, claims);
  HeapShare heap;
  heap.malloc_in_use = heap.malloc_in_use_resident = malloc_in_use_;
  heap.malloc_overhead = malloc_overhead_;
  // A block malloc mapped on its own takes its whole mapping, not a chunk in an arena.
  for (const auto& [address, size] : large_blocks_) {
    auto it = std::upper_bound(pieces.begin(), pieces.end(), address,
                               [](uint64_t a, const MappingPiece& p) { return a < p.start; });
    if (it == pieces.begin() || std::prev(it)->owner != Owner::kMallocMapped) continue;
    heap.malloc_overhead += MallocMappedBytes(size, r.page_size) - MallocChunkBytes(size);
  }
  heap.malloc_overhead_resident = heap.malloc_overhead;
  heap.python_in_use = heap.python_in_use_resident = python_in_use_;
  return SplitParts(r, pieces, heap);
}

}  // namespace memlens::analyzer
