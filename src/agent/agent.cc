// src/agent/agent.cc: see agent.h. Configuration comes from the environment (docs/agent.md):
//   MEMLENS_OUTPUT   capture path; %p is replaced by the pid, %e by the program's name
//                    (default: memlens-%e-%p.mlens in the current directory)
//   MEMLENS_PYTHON_FRAMES  the most Python frames kept per allocation, innermost first
//                    (python_support.h)
//   MEMLENS_SAMPLE_RATE  sample heap allocations, one byte in N on average (sampler.h,
//                    docs/sampling.md); unset or 0: record every allocation
//   MEMLENS_SAMPLE_SEED  the sampler's seed (a number), for reproducible samples; unset or 0:
//                    random
//   MEMLENS_TRACKED  the pid of the recorded process, set by the agent: a descendant that
//                    inherits it (a child that exec'd) does not record; the recorded process's
//                    own new image after an exec does, appending to the same capture
#include "agent/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "agent/fatal_signals.h"
#include "agent/hooks/real_functions.h"
#include "agent/owned_fds.h"
#include "agent/python_support.h"
#include "agent/recorder/recorder.h"
#include "agent/recorder/sampler.h"
#include "agent/writer/writer.h"
#include "base/private_file.h"

namespace memlens::agent {
namespace {

constexpr int kStopTimeoutMs = 10000;

std::atomic<bool> g_initializing{false};
bool g_after_exec = false;  // this image replaced the recorded one by exec: append
std::atomic<bool> g_stopping{false};
pid_t g_pid = 0;
// Set by InitializeOnce (which must not allocate) for Start to report: the variable whose value
// is not a valid setting, or that the sampler's table could not be mapped.
const char* g_bad_setting = nullptr;
bool g_sampler_failed = false;

// A decimal number of at most 2^62 (0 when text is unset or empty). No allocation, no locale.
bool ParseSetting(const char* text, uint64_t* out) {
  *out = 0;
  if (!text) return true;
  for (const char* c = text; *c; ++c) {
    if (*c < '0' || *c > '9' || *out > (uint64_t{1} << 62) / 10) return false;
    *out = *out * 10 + static_cast<uint64_t>(*c - '0');
  }
  return *out <= (uint64_t{1} << 62);
}

void Say(const std::string& line) {
  std::string message = "memlens: " + line + "\n";
  ssize_t ignored = write(2, message.data(), message.size());
  (void)ignored;
}

uint64_t ClockNs(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + ts.tv_nsec;
}

std::string ReadFile(const char* path) {
  std::string out;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, n);
  close(fd);
  return out;
}

format::ProcessRecord DescribeProcess() {
  format::ProcessRecord p;
  p.pid = static_cast<uint64_t>(getpid());
  p.ppid = static_cast<uint64_t>(getppid());
  p.start_realtime_ns = ClockNs(CLOCK_REALTIME);
  p.start_monotonic_ns = ClockNs(CLOCK_MONOTONIC);
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) p.executable.assign(exe, n);
  std::string cmdline = ReadFile("/proc/self/cmdline");
  for (size_t start = 0; start < cmdline.size();) {
    size_t end = cmdline.find('\0', start);
    if (end == std::string::npos) end = cmdline.size();
    p.argv.push_back(cmdline.substr(start, end - start));
    start = end + 1;
  }
  p.agent_version = MEMLENS_VERSION;
  return p;
}

std::string ExpandOutputPath(const format::ProcessRecord& process) {
  const char* pattern = getenv("MEMLENS_OUTPUT");
  std::string in = pattern && *pattern ? pattern : "memlens-%e-%p.mlens";
  std::string name = process.executable.substr(process.executable.rfind('/') + 1);
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '%' && i + 1 < in.size() && (in[i + 1] == 'p' || in[i + 1] == 'e')) {
      out += in[i + 1] == 'p' ? std::to_string(process.pid) : name;
      ++i;
    } else {
      out += in[i];
    }
  }
  return out;
}

void StopRecording(format::EndReason reason, int64_t detail) {
  if (g_state.load() != kRecording || getpid() != g_pid || IsWriterThread()) return;
  if (g_stopping.exchange(true)) {  // another thread is finishing the capture: let it
    WaitForWriter(kStopTimeoutMs);
    return;
  }
  RequestWriterStop(reason, detail);
  WaitForWriter(kStopTimeoutMs);
  g_state.store(kStopped);
}

void OnForkChild() {
  // The child has no writer thread and shares our capture file: it does not record.
  g_state.store(kPassive);
}

void Start() {
  InitializeOnce();
  if (g_bad_setting) {
    Say(std::string(g_bad_setting) + "='" + getenv(g_bad_setting) +
        "' is not a number of bytes (or a seed): not recording");
  } else if (g_sampler_failed) {
    Say("cannot map the table of sampled blocks: not recording");
  }
  if (g_state.load() != kRecording) return;
  HookGuard guard;
  format::ProcessRecord process = DescribeProcess();
  g_pid = static_cast<pid_t>(process.pid);
  std::string path = ExpandOutputPath(process);
  // After an exec the capture goes on in the same file (docs/agent.md, "exec"). Private, and
  // never through a symbolic link (base/private_file.h).
  int fd = g_after_exec ? OpenPrivateFile(path.c_str(), O_APPEND) : -1;
  bool append = fd >= 0;
  if (!append) fd = OpenPrivateFile(path.c_str(), O_CREAT | O_TRUNC);
  if (fd < 0) {
    const char* why = PrivateFileError(errno);
    Say("cannot write the capture '" + path + "': " + (why ? why : strerror(errno)) +
        "; not recording");
    g_state.store(kStopped);
    return;
  }
  // While this lock is held (until the writer closes the file, or the process dies), `summary`
  // says "still recording" rather than "killed". An exec'd image takes it again.
  flock(fd, LOCK_EX | LOCK_NB);
  struct stat st;
  if (!append && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    unlink((path + ".index").c_str());  // a new capture: the index beside it was the old one's
  }
  // At a high number, out of the program's way (owned_fds.h).
  int slot = OwnFd(fd);
  setenv("MEMLENS_TRACKED", std::to_string(process.pid).c_str(), 1);
  // The image an exec brings appends to this file, whatever %e would say for it.
  setenv("MEMLENS_OUTPUT", path.c_str(), 1);
  pthread_atfork(nullptr, nullptr, OnForkChild);
  if (slot < 0 || !StartWriter(slot, path, process, /*write_file_header=*/!append)) {
    Say("cannot start the writer thread; not recording");
    DisownFd(slot, true);
    g_state.store(kStopped);
    return;
  }
  InstallFatalSignalHandlers();
  AttachPython();  // before the interpreter initializes: main has not run yet
  real::ForgetDlError();  // most processes have no Py_Version
}

}  // namespace

void InitializeOnce() {
  if (g_initializing.exchange(true)) {
    // Re-entered from below on this thread (state stays uninitialized: calls pass through),
    // or raced by another thread, which waits here until the real functions are known.
    real::EnsureResolved();
    return;
  }
  real::EnsureResolved();
  const char* tracked = getenv("MEMLENS_TRACKED");
  if (tracked && *tracked) {
    if (strtol(tracked, nullptr, 10) != static_cast<long>(getpid())) {
      g_state.store(kPassive);  // a descendant of the recorded process
      return;
    }
    g_after_exec = true;
  }
  uint64_t rate, seed;
  if (!ParseSetting(getenv("MEMLENS_SAMPLE_RATE"), &rate)) g_bad_setting = "MEMLENS_SAMPLE_RATE";
  if (!ParseSetting(getenv("MEMLENS_SAMPLE_SEED"), &seed)) g_bad_setting = "MEMLENS_SAMPLE_SEED";
  if (g_bad_setting) {
    g_state.store(kPassive);
    return;
  }
  t_in_hook = true;
  InitializeRecorder();
  // Sampling is set before the first event, and never changes: every event of the image is
  // under the same rule, which the writer states in the capture (kSampling).
  g_sampler_failed = rate != 0 && !ConfigureSampling(rate, seed);
  g_direct_short_path = rate != 0 && !g_sampler_failed && real::AllocatorIsLibc();
  g_guarded_short_path = rate != 0 && !g_sampler_failed && !g_direct_short_path;
  t_in_hook = false;
  if (g_sampler_failed) {
    g_state.store(kPassive);
    return;
  }
  g_state.store(kRecording);
}

void NoteModulesChanged() { NoteModulesChangedForWriter(); }
void BeforeDlclose() {
  if (g_state.load() == kRecording && !t_in_hook) DrainNow(1000);
}
void PauseBeforeExec() {
  if (g_state.load() == kRecording && getpid() == g_pid && !t_in_hook) {
    PauseWriterForExec(kStopTimeoutMs);
  }
}
void ResumeAfterFailedExec() {
  if (g_state.load() == kRecording && getpid() == g_pid) ResumeWriter();
}
void StopBeforeExit(int status) { StopRecording(format::EndReason::kExit, status); }
void FinishOnFatalSignal(int signo) { StopRecording(format::EndReason::kSignal, signo); }
bool RecordingHere() { return g_state.load() == kRecording && getpid() == g_pid; }

}  // namespace memlens::agent

// The library's own initializer and finalizer. Allocations before Start (other libraries'
// constructors) are already in the thread buffers: the writer picks them up. The finalizer
// runs after the program's atexit handlers and static destructors, so those are recorded too.
__attribute__((constructor)) static void MemlensAgentStart() { memlens::agent::Start(); }
__attribute__((destructor)) static void MemlensAgentFinish() {
  memlens::agent::StopRecording(memlens::format::EndReason::kExit, 0);
}
