// src/agent/writer/hosted.cc: see hosted.h.
#include "agent/writer/hosted.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <vector>

#include "agent/own_mappings.h"
#include "agent/owned_fds.h"
#include "agent/recorder/recorder.h"
#include "agent/writer/module_scanner.h"
#include "agent/writer/writer.h"
#include "format/record_encoder.h"

namespace memlens::agent {

ExchangeHeader* g_exchange = nullptr;
namespace {
constexpr uint32_t kAlwaysAttached = 1;  // where MADV_WIPEONFORK is refused (kernels < 4.14)
}  // namespace
const volatile uint32_t* g_exchange_attached = &kAlwaysAttached;

namespace {

int g_slot = -1;  // the exchange's descriptor (owned_fds.h)
uint8_t* g_log = nullptr;
// Appends to the log are rare (a module, a code object, a name): a spin lock orders them. A
// thread that cannot take it in a while (a signal handler that interrupted its holder) gives up:
// the name is then missing from the capture, not the program stuck.
std::atomic<bool> g_log_lock{false};
ModuleScanner* g_modules = nullptr;

void* MapShared(size_t offset, size_t bytes) {
  void* mem = reinterpret_cast<void*>(syscall(SYS_mmap, nullptr, bytes, PROT_READ | PROT_WRITE,
                                              MAP_SHARED, FdOf(g_slot), offset));
  return mem == MAP_FAILED ? nullptr : mem;
}

void Append(const std::string& records, uint32_t kind) {
  if (!g_exchange || records.empty()) return;
  int spins = 0;
  while (g_log_lock.exchange(true, std::memory_order_acquire)) {
    if (++spins > 1000000) return;
  }
  uint64_t at = g_exchange->log_bytes.load(std::memory_order_relaxed);
  size_t padded = (records.size() + 7) & ~size_t{7};
  if (at + sizeof(ExchangeLogEntry) + padded <= kExchangeLogBytes) {
    ExchangeLogEntry entry{static_cast<uint32_t>(records.size()), kind};
    memcpy(g_log + at, &entry, sizeof entry);
    memcpy(g_log + at + sizeof entry, records.data(), records.size());
    g_exchange->log_bytes.store(at + sizeof entry + padded, std::memory_order_release);
  }
  g_log_lock.store(false, std::memory_order_release);
}

// The descriptor MEMLENS_EXCHANGE names, when it is this build's exchange (a memory file of its
// size and magic), else -1: the number may be one of the program's own files.
int ExchangeFd() {
  const char* name = getenv("MEMLENS_EXCHANGE");
  if (!name || !*name) return -1;
  int fd = atoi(name);
  struct stat st;
  uint64_t magic = 0, bytes = 0;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<uint64_t>(st.st_size) != kExchangeBytes ||
      pread(fd, &magic, sizeof magic, 0) != sizeof magic ||
      pread(fd, &bytes, sizeof bytes, sizeof magic) != sizeof bytes || magic != kExchangeMagic ||
      bytes != kExchangeBytes) {
    return -1;
  }
  return fd;
}

}  // namespace

void LeaveExchangeInChild() {
  g_state.store(kPassive, std::memory_order_relaxed);  // a child is not recorded (agent.h)
  g_exchange = nullptr;  // this process's copy of the pointer: the parent's stays
  g_control = &g_local_control;
  g_control_shared = false;
  g_writer_running.store(false, std::memory_order_relaxed);
}

void LeaveExchangeToRecordHere() {
  LeaveExchangeInChild();
  g_exchange_attached = &kAlwaysAttached;
  DisownFd(g_slot, true);
  g_slot = -1;
}

void DropExchange() {
  int fd = ExchangeFd();
  if (fd >= 0) syscall(SYS_close, fd);
  unsetenv("MEMLENS_EXCHANGE");
}

bool AttachExchange() {
  int fd = ExchangeFd();
  if (fd < 0) return false;
  g_slot = OwnFd(fd);  // out of the program's way, as the capture's is (owned_fds.h)
  if (g_slot < 0) return false;
  void* mem = MapShared(0, kExchangeSlotsOffset);
  if (!mem) {
    DisownFd(g_slot, true);
    return false;
  }
  auto* header = static_cast<ExchangeHeader*>(mem);
  header->image_log_start.store(header->log_bytes.load());
  header->attached.fetch_add(1);
  // An exec's new image: the last one's threads are gone, its rings drained (its writer wrote
  // its END before the exec, and writes nothing until this image begins). Their slots start
  // again, free.
  const uint32_t used = header->slots_used.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < used && i < kExchangeSlots; ++i) {
    if (void* slot = MapShared(kExchangeSlotsOffset + i * kSlotBytes, kExchangePage)) {
      memset(slot, 0, kExchangePage);
      syscall(SYS_munmap, slot, kExchangePage);
    }
  }
  header->slots_used.store(0, std::memory_order_release);
  // Set once: an exec's new image starts with it again, a child made by _Fork sees it zeroed.
  void* page = reinterpret_cast<void*>(syscall(SYS_mmap, nullptr, kExchangePage,
                                               PROT_READ | PROT_WRITE,
                                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (page != MAP_FAILED) {
    if (syscall(SYS_madvise, page, kExchangePage, MADV_WIPEONFORK) == 0) {
      *static_cast<volatile uint32_t*>(page) = 1;
      g_exchange_attached = static_cast<volatile uint32_t*>(page);
    } else {
      syscall(SYS_munmap, page, kExchangePage);
    }
  }
  CopyOwnMappingsTo(header->own_mappings);  // an exec's new image lists its own
  g_log = static_cast<uint8_t*>(mem) + kExchangeLogOffset;
  g_control = &header->control;
  g_control_shared = true;
  g_exchange = header;
  return true;
}

void BeginHostedImage(const format::ProcessRecord& process, uint64_t sample_rate,
                      uint64_t sample_exact_from) {
  // The image an exec brings finds the exchange at its new number.
  setenv("MEMLENS_EXCHANGE", std::to_string(FdOf(g_slot)).c_str(), 1);
  g_exchange->start_monotonic_ns.store(process.start_monotonic_ns, std::memory_order_relaxed);
  g_exchange->sample_rate.store(sample_rate, std::memory_order_relaxed);
  g_exchange->eval_begin.store(0, std::memory_order_relaxed);
  g_exchange->eval_end.store(0, std::memory_order_relaxed);
  std::string records;
  format::RecordEncoder encoder(&records);
  encoder.Process(process);
  // Before any event of the image.
  if (sample_rate) encoder.Sampling({sample_rate, sample_exact_from});
  Append(records, 0);
  g_modules = new ModuleScanner();
  PublishModules();
  g_writer_running.store(true, std::memory_order_release);  // a writer drains the rings
  g_exchange->control.paused.store(0, std::memory_order_release);
  g_exchange->images.fetch_add(1, std::memory_order_release);
}

void* TakeExchangeSlot() {
  uint32_t i = g_exchange->slots_used.load(std::memory_order_relaxed);
  do {
    if (i >= kExchangeSlots) return nullptr;
  } while (!g_exchange->slots_used.compare_exchange_weak(i, i + 1, std::memory_order_acq_rel));
  return MapShared(kExchangeSlotsOffset + i * kSlotBytes, kSlotBytes);
}

void PublishModules() {
  if (!g_exchange || !g_modules) return;
  std::vector<format::ModuleRecord> loaded;
  std::vector<uint64_t> unloaded;
  g_modules->Rescan(&loaded, &unloaded);
  std::string records;
  format::RecordEncoder encoder(&records);
  for (uint64_t id : unloaded) encoder.ModuleUnload({id});
  for (const auto& m : loaded) encoder.Module(m);
  Append(records, unloaded.empty() ? 0 : 1);  // 1: the writer forgets the unloaded paths
}

void PublishPythonCode(uint64_t id) {
  if (!g_exchange) return;
  std::string records;
  format::RecordEncoder(&records).PythonCode(PythonCodeRecordOf(id));
  Append(records, 0);
}

void PublishString(uint32_t id) {
  if (!g_exchange) return;
  std::string records;
  format::RecordEncoder(&records).String(StringRecordOf(id));
  Append(records, 0);
}

void PublishEvalLoop(uint64_t begin, uint64_t end) {
  if (!g_exchange) return;
  g_exchange->eval_begin.store(begin, std::memory_order_relaxed);
  g_exchange->eval_end.store(end, std::memory_order_release);
}

bool HostedWriterGone() {
  if (!g_exchange) return false;
  const pid_t host = g_exchange->host_pid.load(std::memory_order_relaxed);
  if (!g_exchange->host_gone.load(std::memory_order_acquire) &&
      !(host > 0 && kill(host, 0) != 0 && errno == ESRCH)) {
    return false;
  }
  g_writer_running.store(false, std::memory_order_release);
  return true;
}

void KeepExchangeAcrossExec(bool keep) {
  if (!g_exchange) return;
  int fd = FdOf(g_slot);
  if (fd >= 0) fcntl(fd, F_SETFD, keep ? 0 : FD_CLOEXEC);
}

}  // namespace memlens::agent
