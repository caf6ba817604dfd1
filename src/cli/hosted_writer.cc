// src/cli/hosted_writer.cc: see hosted_writer.h.
#include "cli/hosted_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "agent/own_mappings.h"
#include "agent/writer/exchange.h"
#include "agent/writer/mappings_reader.h"
#include "agent/writer/writer_core.h"
#include "base/private_file.h"

namespace memlens::cli {

using agent::ExchangeHeader;
using agent::RingView;
using agent::ThreadBuffer;

struct HostedWriter::State {
  std::string capture;
  int exchange_fd = -1;
  uint8_t* base = nullptr;
  ExchangeHeader* header = nullptr;
  pid_t pid = 0;
  int capture_fd = -1;
  bool failed = false;
  uint64_t log_read = 0;  // bytes of the names log already in the capture
  std::thread thread;
  std::mutex mutex;  // guards writer
  agent::Writer* writer = nullptr;  // the current image's
  format::EndReason reason = format::EndReason::kExit;
  int64_t detail = 0;
  std::atomic<bool> finishing{false};

  void Main();
  void WriteImages();
};

namespace {

// What the writer reads from the program, through the exchange and /proc.
class ExchangeIo : public agent::WriterIo {
 public:
  ExchangeIo(HostedWriter::State* s, uint32_t image)
      : s_(s), h_(s->header), image_(image), attached_(h_->attached.load()) {
    announced_ = std::make_unique<uint32_t[]>(agent::kExchangeSlots);
    stacks_.assign(agent::kExchangeSlots, nullptr);
    statm_ = open(("/proc/" + std::to_string(s->pid) + "/statm").c_str(), O_RDONLY | O_CLOEXEC);
  }
  ~ExchangeIo() override {
    for (void* stacks : stacks_) agent::Writer::DeleteThreadStacks(stacks);
    if (statm_ >= 0) close(statm_);
  }

  // The rings' committed ends are taken first, the log read after: every name an event up to
  // those ends refers to was published before it (hosted.h), so it is in the log by then.
  void Rings(std::vector<RingView>* out) override {
    out->clear();
    if (ImageReplaced()) return;  // the rings are the next image's now
    uint32_t used = h_->slots_used.load(std::memory_order_acquire);
    if (used > agent::kExchangeSlots) used = agent::kExchangeSlots;
    for (uint32_t i = 0; i < used; ++i) {
      uint8_t* slot = s_->base + agent::kExchangeSlotsOffset + i * agent::kSlotBytes;
      auto* buffer = reinterpret_cast<ThreadBuffer*>(slot);
      out->push_back({buffer, slot + agent::kSlotHeaderBytes, buffer->committed_end(),
                      &announced_[i], &stacks_[i]});
    }
  }
  bool checked() const override { return true; }
  bool pipelined() const override { return true; }
  bool sampling() const override { return h_->sample_rate.load(std::memory_order_relaxed) != 0; }
  bool ThreadAlive(uint64_t tid) override {
    return !(syscall(SYS_tgkill, s_->pid, static_cast<pid_t>(tid), 0) != 0 && errno == ESRCH);
  }
  void Begin(format::RecordEncoder* meta, std::string* payload) override {
    RescanModules(meta, payload);
  }
  // The log's new entries: modules, code names, strings, the image's process record.
  bool RescanModules(format::RecordEncoder*, std::string* payload) override {
    uint64_t end = std::min<uint64_t>(h_->log_bytes.load(), agent::kExchangeLogBytes);
    // A replaced image's writer reads its own image's entries only, never the next one's
    // process record (AttachExchange notes where they start before it counts itself).
    if (h_->attached.load() != attached_) end = std::min<uint64_t>(end, h_->image_log_start.load());
    const uint8_t* log = s_->base + agent::kExchangeLogOffset;
    bool unloaded = false;
    while (s_->log_read + sizeof(agent::ExchangeLogEntry) <= end) {
      agent::ExchangeLogEntry entry;
      memcpy(&entry, log + s_->log_read, sizeof entry);
      const uint64_t at = s_->log_read + sizeof entry;
      if (entry.bytes > end - at) {  // not whole: the program wrote over its log
        s_->log_read = end;
        break;
      }
      payload->append(reinterpret_cast<const char*>(log + at), entry.bytes);
      unloaded = unloaded || entry.reserved == 1;
      s_->log_read = at + ((uint64_t{entry.bytes} + 7) & ~uint64_t{7});
    }
    return unloaded;
  }
  bool KnownModule(uint64_t) override { return true; }  // the log is read every round
  void DescribePythonCode(uint64_t, format::RecordEncoder*, std::string*) override {}
  void DescribeString(uint64_t id, format::RecordEncoder* meta, std::string*) override {
    if (id == 0) meta->String({0, "(no name)"});  // a null name, or the agent's table was full
  }
  agent::EvalLoopRange EvalLoop() override {
    return {h_->eval_begin.load(std::memory_order_relaxed),
            h_->eval_end.load(std::memory_order_acquire)};
  }
  uint64_t NextSeq(uint64_t drained_next) override { return drained_next; }
  uint64_t TakeDroppedEvents() override {
    uint64_t total = DroppedEventsTotal();
    uint64_t delta = total - dropped_taken_;
    dropped_taken_ = total;
    return delta;
  }
  uint64_t DroppedEventsTotal() override { return h_->dropped.load(std::memory_order_relaxed); }
  uint64_t UnrecordedChildren() override {
    return h_->unrecorded_children.load(std::memory_order_relaxed);
  }
  uint64_t StartMonotonicNs() override {
    return h_->start_monotonic_ns.load(std::memory_order_relaxed);
  }
  bool Resident(uint64_t* bytes) override {
    char text[128];
    ssize_t n = statm_ >= 0 ? pread(statm_, text, sizeof text - 1, 0) : -1;
    if (n <= 0) return false;
    text[n] = '\0';
    return agent::ResidentBytesOfStatm(text, bytes);
  }
  bool Mappings(uint64_t max_pages, format::MappingsRecord* out) override {
    if (!agent::ReadMappings(&proc_, max_pages, out)) return false;
    agent::ListOwnMappings(h_->own_mappings, &out->own);  // numbers only: nothing to trust
    return true;
  }
  bool Write(const std::string& bytes) override {
    if (s_->failed) return false;
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = write(s_->capture_fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        s_->failed = true;
        std::cerr << "memlens: writing the capture failed ("
                  << (n < 0 ? strerror(errno) : "no space")
                  << "); the program continues, the capture ends here\n";
        return false;
      }
      done += static_cast<size_t>(n);
    }
    return true;
  }
  bool ImageReplaced() override {
    return h_->images.load(std::memory_order_acquire) != image_ ||
           h_->attached.load(std::memory_order_acquire) != attached_;
  }

 private:
  HostedWriter::State* s_;
  ExchangeHeader* h_;
  uint32_t image_;
  uint32_t attached_;  // the exchange's `attached` when this image's writer started
  int statm_ = -1;
  // smaps and pagemap name the memory of the image they were opened on: this image's (it is
  // published once it runs, after its exec).
  agent::ProcDirFiles proc_{"/proc/" + std::to_string(s_->pid)};
  uint64_t dropped_taken_ = 0;
  std::unique_ptr<uint32_t[]> announced_;  // by slot: the writer's own, never the program's
  std::vector<void*> stacks_;
};

}  // namespace

// Nothing the program wrote into the exchange may take memlens run down: the program's exit
// status is still to be waited for and passed on. A writer that fails (memory) ends the capture
// at its last whole chunk and says so once.
void HostedWriter::State::Main() {
  try {
    WriteImages();
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(mutex);
    writer = nullptr;  // gone with the unwinding
    header->host_gone.store(1, std::memory_order_release);  // the program waits for us no more
    std::cerr << "memlens: the writer failed (" << e.what()
              << "); the program continues, the capture ends at its last chunk\n";
  }
}

void HostedWriter::State::WriteImages() {
  uint32_t images_done = 0;
  bool wrote_header = false;
  for (;;) {
    // The next image: the agent publishes it once its log records are in place.
    while (header->images.load(std::memory_order_acquire) == images_done) {
      if (finishing.load(std::memory_order_acquire)) {
        // It may have started just before it ended.
        if (header->images.load(std::memory_order_acquire) == images_done) return;
        break;
      }
      timespec pause{0, 1000000};
      nanosleep(&pause, nullptr);
    }
    images_done = header->images.load(std::memory_order_acquire);
    if (capture_fd < 0) {
      // memlens run emptied it already when it follows the capture; O_APPEND keeps each chunk
      // whole at the end whatever the indexer does.
      capture_fd = OpenPrivateFile(capture.c_str(), O_CREAT | O_TRUNC);
      if (capture_fd < 0) {
        std::cerr << "memlens: cannot write the capture '" << capture << "': " << strerror(errno)
                  << "\n";
        return;
      }
      flock(capture_fd, LOCK_EX | LOCK_NB);  // "still recording" for `summary`
      unlink((capture + ".index").c_str());
    }
    ExchangeIo io(this, images_done);
    agent::Writer image_writer(&io, &header->control, !wrote_header);
    wrote_header = true;
    {
      std::lock_guard<std::mutex> lock(mutex);
      writer = &image_writer;
      image_writer.SetStopReason(reason, detail);
    }
    image_writer.Run();
    {
      std::lock_guard<std::mutex> lock(mutex);
      writer = nullptr;
    }
    if (!io.ImageReplaced()) return;  // stopped: the END record is written
  }
}

std::unique_ptr<HostedWriter> HostedWriter::Create() {
  int fd = static_cast<int>(syscall(SYS_memfd_create, "memlens-exchange", MFD_CLOEXEC));
  if (fd < 0) return nullptr;
  if (ftruncate(fd, agent::kExchangeBytes) != 0) {
    close(fd);
    return nullptr;
  }
  void* mem = mmap(nullptr, agent::kExchangeBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mem == MAP_FAILED) {
    close(fd);
    return nullptr;
  }
  auto state = std::make_unique<State>();
  state->exchange_fd = fd;
  state->base = static_cast<uint8_t*>(mem);
  state->header = new (mem) ExchangeHeader();
  state->header->magic = agent::kExchangeMagic;
  state->header->bytes = agent::kExchangeBytes;
  state->header->host_pid.store(getpid(), std::memory_order_relaxed);
  return std::unique_ptr<HostedWriter>(new HostedWriter(std::move(state)));
}

HostedWriter::HostedWriter(std::unique_ptr<State> state) : state_(std::move(state)) {}

HostedWriter::~HostedWriter() {
  if (state_->thread.joinable()) Finish(0);
  munmap(state_->base, agent::kExchangeBytes);
  close(state_->exchange_fd);
  if (state_->capture_fd >= 0) close(state_->capture_fd);
}

void HostedWriter::PassToChild() {
  // Without close-on-exec, at a number above those programs use (the agent's own range,
  // agent/owned_fds.cc), so that a program that does not load the agent keeps its numbering.
  rlimit limit{};
  int high = 992;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    rlim_t top = limit.rlim_cur < 1024 ? limit.rlim_cur : 1024;
    high = top > 64 ? static_cast<int>(top - 32) : 3;
  }
  int fd = fcntl(state_->exchange_fd, F_DUPFD, high);
  if (fd >= 0) setenv("MEMLENS_EXCHANGE", std::to_string(fd).c_str(), 1);
}

void HostedWriter::Start(pid_t child, const std::string& capture) {
  state_->pid = child;
  state_->capture = capture;
  state_->thread = std::thread([state = state_.get()] { state->Main(); });
}

void HostedWriter::Finish(int wait_status) {
  State* s = state_.get();
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    s->reason = WIFSIGNALED(wait_status) ? format::EndReason::kSignal : format::EndReason::kExit;
    s->detail = WIFSIGNALED(wait_status) ? WTERMSIG(wait_status) : WEXITSTATUS(wait_status);
    if (s->writer) s->writer->SetStopReason(s->reason, s->detail);
    s->finishing.store(true, std::memory_order_release);
    s->header->control.stop_requested.store(1, std::memory_order_release);
  }
  s->header->control.wake.fetch_add(1, std::memory_order_release);
  syscall(SYS_futex, &s->header->control.wake, FUTEX_WAKE, 1, nullptr, nullptr, 0);
  if (s->thread.joinable()) s->thread.join();
  if (s->capture_fd >= 0) {
    close(s->capture_fd);
    s->capture_fd = -1;
  }
}

}  // namespace memlens::cli
