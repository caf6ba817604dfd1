// src/agent/writer/writer.cc: see writer.h. The writer's loop is writer_core.cc's; here is what
// it reads from the program when it runs inside it (InProcessIo), and the agent's side of the
// control words, in the agent's memory or in the exchange's header (exchange.h).
#include "agent/writer/writer.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "agent/api/string_table.h"
#include "agent/hooks/real_functions.h"
#include "agent/own_mappings.h"
#include "agent/owned_fds.h"
#include "agent/python_support.h"
#include "agent/recorder/recorder.h"
#include "agent/recorder/sampler.h"
#include "agent/recorder/thread_buffer.h"
#include "agent/writer/hosted.h"
#include "agent/writer/mappings_reader.h"
#include "agent/writer/module_scanner.h"
#include "agent/writer/writer_core.h"
#include "base/monotonic_clock.h"

namespace memlens::agent {

WriterControl g_local_control;
WriterControl* g_control = &g_local_control;
bool g_control_shared = false;

namespace {

pthread_t g_writer_thread;

// The files of /proc/self the writer reads, on descriptors the agent owns (owned_fds.h): each
// read holds the owned descriptors' lock around its one system call, and a descriptor the
// program closed with a raw system call is opened again for the next reading.
class SelfFiles : public ProcFiles {
 public:
  static constexpr int kStatm = 2;  // after ProcFiles' kSmaps and kPagemap
  // Before the program runs: opened later, a file could get a number the program has just
  // closed and is about to reuse.
  void Open() {
    for (int file = 0; file < kCount; ++file) {
      int fd = open(kPaths[file], O_RDONLY | O_CLOEXEC);
      slots_[file] = fd >= 0 ? OwnFd(fd) : -1;
    }
  }
  void Close() {
    for (int& slot : slots_) {
      DisownFd(slot, true);
      slot = -1;
    }
  }
  ssize_t Read(File file, void* buffer, size_t size, uint64_t offset) override {
    return Read(static_cast<int>(file), buffer, size, offset);
  }
  int ScanPagemap(void* arg) override {
    LockOwnedFds();
    int fd = FdOf(slots_[kPagemap]);
    int n = fd >= 0 ? ioctl(fd, kPagemapScanRequest, arg) : -1;
    int error = fd >= 0 ? errno : EBADF;
    UnlockOwnedFds();
    errno = error;
    return n;
  }
  ssize_t Read(int file, void* buffer, size_t size, uint64_t offset) {
    LockOwnedFds();
    int fd = FdOf(slots_[file]);
    ssize_t n = fd >= 0 ? pread(fd, buffer, size, static_cast<off_t>(offset)) : -1;
    int error = errno;
    UnlockOwnedFds();
    if (n < 0 && error == EBADF && slots_[file] >= 0) {  // closed by a raw system call
      int reopened = open(kPaths[file], O_RDONLY | O_CLOEXEC);
      if (reopened >= 0) ReplaceFd(slots_[file], reopened);
    }
    return n;
  }

 private:
  static constexpr int kCount = 3;
  static constexpr const char* kPaths[kCount] = {"/proc/self/smaps", "/proc/self/pagemap",
                                                 "/proc/self/statm"};
  int slots_[kCount] = {-1, -1, -1};
};

// The writer inside the program: it reads the program's memory directly.
class InProcessIo : public WriterIo {
 public:
  InProcessIo(int fd_slot, const std::string& path, const SelfFiles& self,
              const format::ProcessRecord& process)
      : fd_slot_(fd_slot), self_(self), path_(path), process_(process) {
    struct stat st;
    if (fstat(FdOf(fd_slot_), &st) == 0) {
      sink_dev_ = st.st_dev;
      sink_ino_ = st.st_ino;
    }
  }
  ~InProcessIo() override { Close(); }
  void Close() {
    DisownFd(fd_slot_, true);  // -1 when the program took it: nothing closed
    fd_slot_ = -1;
    self_.Close();
  }

  void Rings(std::vector<RingView>* out) override {
    out->clear();
    for (ThreadBuffer* b = FirstThreadBuffer(); b; b = b->next) {
      out->push_back({b, b->data, ~uint64_t{0}, &b->announced, &b->writer_stacks});
    }
  }
  bool checked() const override { return false; }
  bool sampling() const override { return g_sample_rate != 0; }
  bool ThreadAlive(uint64_t tid) override {
    return !(syscall(SYS_tgkill, getpid(), tid, 0) != 0 && errno == ESRCH);
  }
  void Begin(format::RecordEncoder* meta, std::string* payload) override {
    meta->Process(process_);
    // Before any event of the image.
    if (g_sample_rate) meta->Sampling({g_sample_rate, g_sample_exact_from});
    RescanModules(meta, payload);
  }
  bool RescanModules(format::RecordEncoder* meta, std::string*) override {
    std::vector<format::ModuleRecord> loaded;
    std::vector<uint64_t> unloaded;
    modules_.Rescan(&loaded, &unloaded);
    for (uint64_t id : unloaded) meta->ModuleUnload({id});
    for (const auto& m : loaded) meta->Module(m);
    return !unloaded.empty();
  }
  bool KnownModule(uint64_t ip) override { return modules_.Contains(ip); }
  void DescribePythonCode(uint64_t id, format::RecordEncoder* meta, std::string*) override {
    meta->PythonCode(PythonCodeRecordOf(id));
  }
  void DescribeString(uint64_t id, format::RecordEncoder* meta, std::string*) override {
    meta->String(StringRecordOf(id));
  }
  EvalLoopRange EvalLoop() override { return {g_eval_begin, g_eval_end}; }
  uint64_t NextSeq(uint64_t) override { return g_seq.load(std::memory_order_acquire); }
  uint64_t TakeDroppedEvents() override { return agent::TakeDroppedEvents(); }
  uint64_t DroppedEventsTotal() override { return agent::DroppedEventsTotal(); }
  uint64_t UnrecordedChildren() override { return agent::UnrecordedChildren(); }
  uint64_t StartMonotonicNs() override { return process_.start_monotonic_ns; }
  bool Resident(uint64_t* bytes) override;
  bool Mappings(uint64_t max_pages, format::MappingsRecord* out) override {
    if (!ReadMappings(&self_, max_pages, out)) return false;
    ListOwnMappings(OwnMappingSlots(), &out->own);
    return true;
  }
  bool Write(const std::string& bytes) override;
  bool ImageReplaced() override { return false; }

 private:
  bool SinkStillOurs();
  void Fail(const char* reason);

  int fd_slot_;  // the capture (owned_fds.h: its number may move)
  SelfFiles self_;
  std::string path_;
  dev_t sink_dev_ = 0;  // what fd_slot_ was opened on, checked before each chunk
  ino_t sink_ino_ = 0;
  bool said_reopened_ = false;
  bool failed_ = false;
  format::ProcessRecord process_;
  ModuleScanner modules_;
};

struct InProcessWriter {
  InProcessIo io;
  Writer writer;
  InProcessWriter(int fd_slot, const std::string& path, const SelfFiles& self,
                  const format::ProcessRecord& process, bool write_file_header)
      : io(fd_slot, path, self, process), writer(&io, g_control, write_file_header) {}
};

InProcessWriter* g_writer = nullptr;

std::atomic<bool> g_writer_has_arena{false};

void* WriterMain(void* arg) {
  t_in_hook = true;  // the writer's own allocations are never recorded
  // The C library gives a thread its malloc arena on its first allocation, and a thread that
  // finds no address space for one then (a program that fills memory as it starts) never gets
  // one: each of its allocations can only map fresh memory, never reuse what the program frees,
  // and the writer would wait for memory forever. So the arena is made first, and StartWriter
  // waits for it when a limit makes that matter.
  real::free(real::malloc(1));
  g_writer_has_arena.store(true, std::memory_order_release);
  // Named, so that top -H, perf and /proc tell it from the program's own threads.
  prctl(PR_SET_NAME, "memlens-writer", 0, 0, 0);
  auto* w = static_cast<InProcessWriter*>(arg);
  w->writer.Run();
  w->io.Close();
  return nullptr;
}

// Resident memory beside the heap shows what the allocator keeps from the system.
bool InProcessIo::Resident(uint64_t* bytes) {
  char text[128];
  ssize_t n = self_.Read(SelfFiles::kStatm, text, sizeof text - 1, 0);
  if (n <= 0) return false;
  text[n] = '\0';
  return ResidentBytesOfStatm(text, bytes);
}

// A program that closed our descriptor with a raw system call (the interposers see every other
// way, owned_fds.h) may have got its number for a file of its own: before each chunk, the
// descriptor must still be the file we opened, else the file is opened again by path, for
// appending. Returns false when that is impossible (the capture ends there).
bool InProcessIo::SinkStillOurs() {
  struct stat st;
  int fd = FdOf(fd_slot_);
  if (fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == sink_dev_ && st.st_ino == sink_ino_) {
    return true;
  }
  // The number, if open, is the program's now: never closed nor written by us again.
  int reopened = open(path_.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (reopened >= 0 && (fstat(reopened, &st) != 0 || st.st_dev != sink_dev_ ||
                        st.st_ino != sink_ino_)) {
    syscall(SYS_close, reopened);  // another file at that path now: not ours to write
    reopened = -1;
  }
  if (reopened < 0) {
    ReplaceFd(fd_slot_, -1);
    return false;
  }
  fcntl(reopened, F_SETFL, O_APPEND);  // blocking again (a FIFO opened without waiting)
  flock(reopened, LOCK_EX | LOCK_NB);  // "still recording" (agent.cc): the old lock went with it
  ReplaceFd(fd_slot_, reopened);
  if (!said_reopened_ && !Quiet()) {
    said_reopened_ = true;
    static const char kMessage[] =
        "memlens: the program closed the capture's descriptor; memlens opened the capture again\n";
    ssize_t ignored = ::write(2, kMessage, sizeof kMessage - 1);
    (void)ignored;
  }
  return true;
}

void InProcessIo::Fail(const char* reason) {
  // A failing disk must not take the program down: say it once, keep draining, count.
  failed_ = true;
  char message[256];
  int len = snprintf(message, sizeof message,
                     "memlens: writing the capture failed (%s); the program continues, the "
                     "capture ends here\n",
                     reason);
  if (len > 0 && !Quiet()) {
    ssize_t ignored = ::write(2, message, static_cast<size_t>(len));
    (void)ignored;
  }
}

bool InProcessIo::Write(const std::string& bytes) {
  if (failed_) return false;
  if (!SinkStillOurs()) {
    Fail("the program closed its descriptor and the file is gone");
    return false;
  }
  size_t done = 0;
  while (done < bytes.size()) {
    LockOwnedFds();  // the descriptor never moves under the call (owned_fds.h)
    ssize_t n = write(FdOf(fd_slot_), bytes.data() + done, bytes.size() - done);
    int error = errno;
    UnlockOwnedFds();
    if (n < 0 && error == EINTR) continue;
    if (n <= 0) {
      Fail(n < 0 ? strerror(error) : "no space");
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

format::PythonCodeRecord PythonCodeRecordOf(uint64_t id) {
  const PythonCodeInfo* info = FindPythonCode(id);
  format::PythonCodeRecord record;
  record.id = id;
  if (info) {
    record.filename = info->filename;
    record.name = info->name;
    record.first_line = info->first_line;
  } else {
    record.name = "<unknown Python code>";
  }
  return record;
}

format::StringRecord StringRecordOf(uint64_t id) {
  size_t length = 0;
  const char* text = StringText(static_cast<uint32_t>(id), &length);
  // Id 0: a null name, or the agent's name table was full.
  return {id, id == 0 ? std::string("(no name)") : std::string(text, length)};
}

bool StartWriter(int fd_slot, const std::string& path, const format::ProcessRecord& process,
                 bool write_file_header) {
  // Opened here, before the program runs: opened later, it could get a number the program has
  // just closed and is about to reuse.
  SelfFiles self;
  self.Open();
  delete g_writer;  // the last span's, finished (agent.cc starts no writer while one runs)
  g_control->stop_requested.store(0, std::memory_order_relaxed);
  g_control->paused.store(0, std::memory_order_relaxed);
  // A capture of its own (a span after an earlier one, docs/agent.md): the threads are announced
  // again, and the stacks the last writer knew are forgotten, as their producers forget theirs
  // (g_span_epoch, recorder.h).
  for (ThreadBuffer* b = FirstThreadBuffer(); b; b = b->next) {
    b->announced = 0;
    Writer::ForgetThreadStacks(b->writer_stacks);
  }
  g_writer = new InProcessWriter(fd_slot, path, self, process, write_file_header);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);  // the thread inherits a mask that blocks everything
  g_writer_running.store(true, std::memory_order_release);
  // The default stack (8 MiB of address space, RLIMIT_STACK) is far more than the writer's
  // loops need; an idle program's virtual size counted it all (docs/agent.md, "Limits").
  constexpr size_t kWriterStackBytes = 1 << 20;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kWriterStackBytes);
  int rc = pthread_create(&g_writer_thread, &attr, [](void* arg) -> void* {
    WriterMain(arg);
    g_writer_running.store(false, std::memory_order_release);
    return nullptr;
  }, g_writer);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc != 0) {
    g_writer_running.store(false, std::memory_order_release);
    g_writer->io.Close();
    return false;
  }
  pthread_detach(g_writer_thread);
  // Only a limit on address space or data lets a program fill memory (else it is killed by the
  // OOM killer first): without one, the program does not wait for the writer to be scheduled
  // (a fraction of a millisecond on a busy machine, on every recorded process's start).
  rlimit as{}, data{};
  const bool limited = (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) ||
                       (getrlimit(RLIMIT_DATA, &data) == 0 && data.rlim_cur != RLIM_INFINITY);
  for (int waited_us = 0; limited && !g_writer_has_arena.load(std::memory_order_acquire) &&
                          waited_us < 1000000;
       waited_us += 20) {
    timespec pause{0, 20000};
    nanosleep(&pause, nullptr);
  }
  return true;
}

void RequestWriterStop(format::EndReason reason, int64_t detail) {
  if (g_writer) g_writer->writer.SetStopReason(reason, detail);
  g_control->stop_requested.store(1, std::memory_order_release);
  WakeWriter();
}

// Polls every 100 us: the writer's last round usually takes well under a millisecond, and
// every process that exits waits here (a 1 ms poll added most of a millisecond to each).
// The timeout is clock time without a round, not a count of polls (each poll's sleep lasts
// longer than asked on a busy machine).
void WaitForWriter(int timeout_ms) {
  constexpr int kPollUs = 100;
  uint64_t rounds = g_control->rounds.load(std::memory_order_acquire);
  uint64_t since = MonotonicNs();
  while (g_writer_running.load(std::memory_order_acquire) &&
         MonotonicNs() - since < uint64_t(timeout_ms) * 1000000) {
    timespec pause{0, kPollUs * 1000};
    nanosleep(&pause, nullptr);
    uint64_t now = g_control->rounds.load(std::memory_order_acquire);
    if (now != rounds) since = MonotonicNs();
    rounds = now;
  }
}

bool IsWriterThread() {
  return g_writer_running.load(std::memory_order_acquire) &&
         pthread_equal(pthread_self(), g_writer_thread);
}

void NoteModulesChangedForWriter() {
  g_control->modules_changed.store(1, std::memory_order_release);
}

// The writer's round count when a wait last ran out: until the writer moves again, later
// waits give up at once (a stopped memlens run: one timeout, not one per dlclose or flush).
std::atomic<uint64_t> g_gave_up_at_round{~uint64_t{0}};

// Takes a ticket from `requested` and waits (at most timeout_ms of clock time) until the writer
// has marked a round that covers it in `done`. A hosted writer whose memlens run is gone is not
// waited for.
// `optional`: a wait the caller can do without (a marker's reading): giving up on it says
// nothing of the writer, and leaves the other waits as they were.
void RequestAndWait(std::atomic<uint64_t>& requested, const std::atomic<uint64_t>& done,
                    int timeout_ms, bool optional = false) {
  uint64_t ticket = requested.fetch_add(1, std::memory_order_acq_rel) + 1;
  const uint64_t rounds = g_control->rounds.load(std::memory_order_acquire);
  if (rounds == g_gave_up_at_round.load(std::memory_order_relaxed)) return;
  const uint64_t deadline = MonotonicNs() + uint64_t(timeout_ms) * 1000000;
  while (done.load(std::memory_order_acquire) < ticket &&
         g_writer_running.load(std::memory_order_acquire) && !HostedWriterGone()) {
    if (MonotonicNs() >= deadline) {
      if (optional) return;
      g_gave_up_at_round.store(g_control->rounds.load(std::memory_order_acquire),
                               std::memory_order_relaxed);
      return;
    }
    WakeWriter();
    timespec pause{0, 100000};
    nanosleep(&pause, nullptr);
  }
}

void PauseWriterForExec(int timeout_ms) {
  if (!g_writer_running.load(std::memory_order_acquire) || IsWriterThread()) return;
  g_control->paused.store(1, std::memory_order_release);
  RequestAndWait(g_control->pause_requested, g_control->pause_done, timeout_ms);
}

void ResumeWriter() {
  g_control->paused.store(0, std::memory_order_release);
  WakeWriter();
}

void DrainNow(int timeout_ms) {
  if (!g_writer_running.load(std::memory_order_acquire) || IsWriterThread()) return;
  RequestAndWait(g_control->drain_requested, g_control->drain_done, timeout_ms);
}

void FlushWriter(int timeout_ms) {
  if (!g_writer_running.load(std::memory_order_acquire) || IsWriterThread()) return;
  RequestAndWait(g_control->flush_requested, g_control->flush_done, timeout_ms);
}

void ReadMappingsBeforeMarker(int timeout_ms) {
  if (!g_writer_running.load(std::memory_order_acquire) || IsWriterThread()) return;
  if (MonotonicNs() < g_control->mappings_due_ns.load(std::memory_order_acquire)) return;
  RequestAndWait(g_control->mappings_requested, g_control->mappings_done, timeout_ms,
                 /*optional=*/true);
}

void ForgetWriterAfterFork() {
  if (g_writer) g_writer->io.Close();
  g_writer = nullptr;  // its thread is not in this process: its state may be half-changed
  g_writer_running.store(false, std::memory_order_relaxed);
  g_writer_has_arena.store(false, std::memory_order_relaxed);
  g_control = &g_local_control;
  g_control_shared = false;
  new (&g_local_control) WriterControl();
}

void DiscardBufferedEvents() {
  for (ThreadBuffer* b = FirstThreadBuffer(); b; b = b->next) {
    if (b->state.load(std::memory_order_acquire) != ThreadBuffer::kFree) {
      b->Drain([](const RawEvent&) {});
    }
  }
}

}  // namespace memlens::agent

namespace memlens::agent {

void* WaitForAgentMemory(size_t size, size_t alignment) {
  constexpr int kAgentMemoryWaitMs = 2000;
  for (int waited_ms = 0; waited_ms < kAgentMemoryWaitMs; ++waited_ms) {
    timespec pause{0, 1000000};
    nanosleep(&pause, nullptr);
    void* p = alignment <= 16 ? real::malloc(size) : real::aligned_alloc(alignment, size);
    if (p) return p;
  }
  if (!IsWriterThread()) return nullptr;
  static const char kMessage[] =
      "memlens: out of memory for memlens's own work (the program has taken it all): recording "
      "stopped, the capture ends at its last chunk; the program continues\n";
  if (!Quiet()) {
    ssize_t ignored = ::write(2, kMessage, sizeof kMessage - 1);
    (void)ignored;
  }
  g_state.store(kStopped, std::memory_order_release);
  g_writer_running.store(false, std::memory_order_release);  // nobody waits for us any more
  for (;;) {
    timespec pause{1, 0};
    nanosleep(&pause, nullptr);
  }
}

}  // namespace memlens::agent
