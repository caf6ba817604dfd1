// src/agent/writer/module_scanner.cc: see module_scanner.h.
#include "agent/writer/module_scanner.h"

#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <climits>
#include <cstring>

namespace memlens::agent {
namespace {

struct Seen {
  std::string path;
  uint64_t load_bias;
  std::string build_id;
  std::vector<format::Segment> segments;
};

std::string ExecutablePath() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, n) : std::string();
}

std::string BuildIdOf(const dl_phdr_info* info) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
    const char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const auto* note = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const char* name = p + sizeof(ElfW(Nhdr));
      const char* desc = name + ((note->n_namesz + 3) & ~3u);
      if (desc + note->n_descsz > end) break;
      if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        return std::string(desc, note->n_descsz);
      }
      p = desc + ((note->n_descsz + 3) & ~3u);
    }
  }
  return {};
}

int CollectModule(dl_phdr_info* info, size_t, void* data) {
  auto* out = static_cast<std::vector<Seen>*>(data);
  Seen seen;
  seen.path = info->dlpi_name ? info->dlpi_name : "";
  if (seen.path.empty() && out->empty()) seen.path = ExecutablePath();  // the main program
  seen.load_bias = info->dlpi_addr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
      seen.segments.push_back({info->dlpi_addr + ph.p_vaddr, ph.p_memsz});
    }
  }
  if (seen.segments.empty()) return 0;
  seen.build_id = BuildIdOf(info);
  out->push_back(std::move(seen));
  return 0;
}

// dl_iterate_phdr holds the loader's lock while it walks the objects. A fork on another thread
// in that time would leave the child with the lock held for good: its first dlopen (a Python
// worker's first import of an extension) would hang. Scans and forks exclude each other.
// The fork's wait is bounded (a scan takes microseconds; a fork from a signal handler that
// interrupted a scan on its own thread would wait for itself): past it, the fork goes on.
pthread_mutex_t g_scan_or_fork = PTHREAD_MUTEX_INITIALIZER;
pthread_once_t g_fork_handlers_once = PTHREAD_ONCE_INIT;
bool g_held_for_fork = false;
void TakeScanLock() { pthread_mutex_lock(&g_scan_or_fork); }
void DropScanLock() { pthread_mutex_unlock(&g_scan_or_fork); }
void HoldScansForFork() {
  timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_nsec += 100 * 1000 * 1000;
  if (deadline.tv_nsec >= 1000000000) {
    deadline.tv_sec += 1;
    deadline.tv_nsec -= 1000000000;
  }
  g_held_for_fork = pthread_mutex_timedlock(&g_scan_or_fork, &deadline) == 0;
}
void ReleaseScansAfterFork() {
  if (g_held_for_fork) DropScanLock();
  g_held_for_fork = false;
}

}  // namespace

void ModuleScanner::Rescan(std::vector<format::ModuleRecord>* loaded,
                           std::vector<uint64_t>* unloaded) {
  pthread_once(&g_fork_handlers_once,
               [] { pthread_atfork(HoldScansForFork, ReleaseScansAfterFork, ReleaseScansAfterFork); });
  std::vector<Seen> seen;
  TakeScanLock();
  dl_iterate_phdr(CollectModule, &seen);
  DropScanLock();
  for (Known& k : modules_) {
    if (!k.loaded) continue;
    bool still = false;
    for (const Seen& s : seen) still |= s.path == k.path && s.load_bias == k.load_bias;
    if (!still) {
      k.loaded = false;
      unloaded->push_back(k.id);
    }
  }
  for (Seen& s : seen) {
    bool known = false;
    for (const Known& k : modules_) known |= k.loaded && s.path == k.path && s.load_bias == k.load_bias;
    if (known) continue;
    format::ModuleRecord record{next_id_++, s.load_bias, s.path, s.build_id, s.segments};
    modules_.push_back({record.id, s.path, s.load_bias, s.segments, true});
    loaded->push_back(std::move(record));
  }
}

bool ModuleScanner::Contains(uint64_t ip) const {
  for (const Known& k : modules_) {
    for (const format::Segment& s : k.segments) {
      if (ip - s.start < s.size) return true;
    }
  }
  return false;
}

}  // namespace memlens::agent
