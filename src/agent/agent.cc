// src/agent/agent.cc: see agent.h. Configuration comes from the environment (docs/agent.md):
//   MEMLENS_OUTPUT   capture path; %p is replaced by the pid, %e by the program's name
//                    (default: memlens-%e-%p.mlens in the current directory)
//   MEMLENS_PYTHON_FRAMES  the most Python frames kept per allocation, innermost first
//                    (python_support.h)
//   MEMLENS_PYTHON_STACKS  1: Python-lines-only stacks, no native unwinding (python_support.h)
//   MEMLENS_SAMPLE_RATE  sample heap allocations, one byte in N on average (sampler.h,
//                    docs/sampling.md); unset or 0: record every allocation
//   MEMLENS_SAMPLE_SEED  the sampler's seed (a number), for reproducible samples; unset or 0:
//                    random
//   MEMLENS_TRACKED  the recorded process, "PID:START" (tracked_process.h), set by the agent:
//                    a descendant that inherits it (a child that exec'd, or one given the pid
//                    again after the recorded process exited) does not record; the recorded
//                    process's own new image after an exec does, appending to the same capture
//   MEMLENS_FOLLOW_CHILDREN  a directory (memlens run --follow-children): a descendant that
//                    inherits MEMLENS_TRACKED records too, into a capture of its own there, and
//                    so does a child forked while its parent records (from the fork on)
// Preloaded (named in LD_PRELOAD: memlens run), the agent records the whole process from its
// first allocation. Otherwise (dlopen'ed by memlens.Tracker, or linked) it is dormant and records
// only spans, from memlens_start to memlens_stop, each into a capture of its own (docs/agent.md,
// "Spans").
#include "agent/agent.h"

#include <dlfcn.h>
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

#include "agent/api/string_table.h"
#include "agent/fatal_signals.h"
#include "agent/got/got_patcher.h"
#include "agent/hooks/real_functions.h"
#include "agent/own_mappings.h"
#include "agent/owned_fds.h"
#include "agent/python_support.h"
#include "agent/recorder/recorder.h"
#include "agent/recorder/thread_buffer.h"
#include "agent/recorder/sampler.h"
#include "agent/tracked_process.h"
#include "agent/writer/hosted.h"
#include "agent/writer/writer.h"
#include "base/private_file.h"
#include "format/capture_path.h"

namespace memlens::agent {
namespace {

constexpr int kStopTimeoutMs = 10000;

std::atomic<bool> g_initializing{false};
bool g_after_exec = false;  // this image replaced the recorded one by exec: append
// MEMLENS_FOLLOW_CHILDREN names a directory: the processes this one starts record too, each
// into a capture of its own there (g_run_dir).
bool g_following_children = false;
const char* g_run_dir = nullptr;
// This process is a descendant of a recorded one that exec'd a program, recording into a capture
// of its own in g_run_dir.
bool g_descendant = false;
// CLOCK_MONOTONIC when this image started recording: a child forked from it names it (9.2).
uint64_t g_image_start_ns = 0;
// A child forked while its parent recorded, recording on its own (RecordForkedChild): its
// capture's path. Null otherwise.
std::string* g_forked_capture = nullptr;
bool g_exec_dropped_fork = false;  // a forked child's exec dropped its recording: if it fails...
// A followed descendant's: the pid of the process MEMLENS_TRACKED named as it inherited it.
uint64_t g_recorded_ancestor = 0;
std::atomic<bool> g_stopping{false};
pid_t g_pid = 0;
bool g_preloaded = false;  // named in LD_PRELOAD: decided once, by InitializeOnce
bool g_recorder_ready = false;
// Spans: serialized by g_span_mutex (start and stop are rare, and never on the hot path).
pthread_mutex_t g_span_mutex = PTHREAD_MUTEX_INITIALIZER;
bool g_span_open = false;
bool g_span_patched = false;  // the open span patched the GOT/PLT slots (native, not preloaded)
uint64_t g_spans = 0;  // started so far
bool g_forked_while_recording = false;  // this process is a child forked during a recording
std::string* g_span_path = nullptr;  // the open span's capture
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

// Marks the environment: this process records, and its exec'd images append (tracked_process.h).
void MarkEnvironmentTracked() {
  char mark[kTrackedTextSize];
  setenv(kTrackedVariable, FormatTracked(ThisProcess(), mark), 1);
}

std::atomic<bool> g_quiet{false};  // the span that records was started with quiet=1
char g_quiet_note[256];            // the first line it did not say

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
  // The stack mode rides on the version string (format 8.2, docs/capture-format.md).
  p.agent_version = MEMLENS_VERSION;
  if (g_python_stacks) p.agent_version += format::kPythonStacksMark;
  return p;
}

// pattern: a span's own path, or null for MEMLENS_OUTPUT or the default.
std::string ExpandOutputPath(const format::ProcessRecord& process, const char* pattern = nullptr) {
  if (!pattern || !*pattern) pattern = getenv("MEMLENS_OUTPUT");
  return format::ExpandCapturePattern(pattern && *pattern ? pattern : format::kDefaultCapturePattern,
                                      process.pid, process.executable);
}

void StartForkedChildWriter();

void StopRecording(format::EndReason reason, int64_t detail) {
  if (g_state.load() != kRecording || getpid() != g_pid || IsWriterThread()) return;
  // A forked child's writer not started yet (RecordForkedChild) starts now to write what it
  // holds; not from a fatal signal's handler, which must not allocate: that is lost.
  if (CancelDeferredWriter()) {
    if (reason != format::EndReason::kSignal) StartForkedChildWriter();
    if (reason == format::EndReason::kSignal || g_state.load() != kRecording) {
      g_state.store(kStopped);
      return;
    }
  }
  if (g_exchange) {
    // memlens run drains the rings once the process is gone, and writes the END record from
    // what waitpid tells it. Modules loaded behind the dlopen hooks (the C library's own) go to
    // the log now, except from a fatal signal's handler, which must not allocate.
    if (reason != format::EndReason::kSignal) {
      HookGuard guard;
      PublishModules();
    }
    g_state.store(kStopped);
    return;
  }
  if (g_stopping.exchange(true)) {  // another thread is finishing the capture: let it
    WaitForWriter(kStopTimeoutMs);
    return;
  }
  RequestWriterStop(reason, detail);
  WaitForWriter(kStopTimeoutMs);
  g_state.store(kStopped);
}

int OpenDescendantCapture(const format::ProcessRecord& process, std::string* path,
                          std::string* error);

// A child forked while this process recorded, under memlens run --follow-children: from the
// fork on it records into a capture of its own, which names the fork (format 9.2) so that the
// analyzer starts it from the blocks it inherited, which the parent's capture holds up to
// fork_seq. Most forked children exec at once (a shell runs each command so), and their few
// events before it are not worth a writer: the fork handler only readies the recording
// (RecordForkedChild), into a ring of the child's own, and its writer starts at the first need
// (StartForkedChildWriter): the ring half full (WakeWriter), an exit, a fork. At an exec before
// that, the ring's events are dropped and the program the child runs is recorded as any
// followed descendant is, into a capture of its own (PauseBeforeExec).
struct ForkedChild {
  uint64_t parent_pid = 0;  // not getppid(): a parent that exits first leaves 1 there
  uint64_t parent_image_ns = 0;
  uint64_t fork_seq = 0;
  uint64_t realtime_ns = 0;  // when it was forked
  uint64_t monotonic_ns = 0;
};
ForkedChild g_forked;
// Taken by the fork's prepare handler, before other libraries' child handlers run (their
// allocations would go to the parent's rings and numbers): whether this process was recording,
// and the next sequence number.
bool g_recording_at_fork = false;
uint64_t g_seq_at_fork = 0;

void StartForkedChildWriter() {
  HookGuard guard;
  format::ProcessRecord process = DescribeProcess();
  process.start_realtime_ns = g_forked.realtime_ns;
  process.start_monotonic_ns = g_forked.monotonic_ns;
  process.ppid = g_forked.parent_pid;
  process.fork_parent_image_ns = g_forked.parent_image_ns;
  process.fork_seq = g_forked.fork_seq;
  std::string path, error;
  int slot = OpenDescendantCapture(process, &path, &error);
  if (!error.empty()) {
    SayToUser(error + "; not recording");
    g_state.store(kStopped);
    return;
  }
  if (slot < 0 || !StartWriter(slot, path, process, /*write_file_header=*/true)) {
    SayToUser("cannot start the writer thread in a forked child; not recording it");
    DisownFd(slot, true);
    unlink(path.c_str());  // nothing was written to it
    g_state.store(kStopped);
    return;
  }
  // The image an exec brings appends to this capture (docs/agent.md, "exec"): the exec's
  // environment is set to say so (PauseBeforeExec). Not setenv, here: this may be a program's
  // thread in the middle of its work, and another may be reading the environment.
  if (!g_forked_capture) g_forked_capture = new std::string();
  *g_forked_capture = path;
}

// Runs in the child's fork handler, on its only thread: the parent's writer and rings are let
// go untouched (they are the parent's); the events from here on go to a ring of its own.
void RecordForkedChild() {
  HookGuard guard;
  g_state.store(kPassive);  // until it is ready
  ResetOwnedFdsAfterFork();  // the parent's writer may have held their lock at the fork
  g_forked = {static_cast<uint64_t>(g_pid), g_image_start_ns, g_seq_at_fork,
              ClockNs(CLOCK_REALTIME), ClockNs(CLOCK_MONOTONIC)};
  ForgetBuffersAfterFork();  // before leaving the exchange: its slots are not unmapped
  if (g_exchange) {
    LeaveExchangeToRecordHere();
    g_on_new_string.store(nullptr, std::memory_order_release);
  } else {
    ForgetWriterAfterFork();
  }
  g_span_epoch.fetch_add(1);  // the new capture knows no stack yet
  ResetRecorderCounters();
  g_stopping.store(false);
  if (g_forked_capture) g_forked_capture->clear();  // its parent's, if it was forked too
  g_pid = getpid();
  g_image_start_ns = g_forked.monotonic_ns;
  DeferWriterStart(StartForkedChildWriter);
  g_state.store(kRecording);
}

// A process about to fork whose writer has not started: its capture must exist, from which
// the child's replay starts.
void OnForkPrepare() {
  g_recording_at_fork = g_state.load() == kRecording && getpid() == g_pid;
  if (g_recording_at_fork) StartDeferredWriter();
  g_seq_at_fork = g_seq.load(std::memory_order_relaxed);
}

void OnForkChild() {
  // The parent's writer may have held the descriptors' lock at the fork (for a whole read of
  // smaps): the child has no such thread, and would wait for it forever.
  ResetOwnedFdsAfterFork();
  const bool recording = g_recording_at_fork;
  g_recording_at_fork = false;
  if (recording && g_following_children && !g_span_open) return RecordForkedChild();
  // Else the child has no writer thread and shares our capture file: it does not record.
  if (recording) g_forked_while_recording = true;
  g_state.store(kPassive);
}

// Whether `preload` (an LD_PRELOAD value) names this library (by path, or by file name for a
// bare name the loader looked up). No allocation: this may run at the process's first malloc.
bool PreloadNamesAgent(const char* preload) {
  Dl_info self;
  if (!preload || !dladdr(reinterpret_cast<void*>(&PreloadNamesAgent), &self) || !self.dli_fname) {
    return false;
  }
  struct stat own;
  if (stat(self.dli_fname, &own) != 0) return false;
  const char* own_name = strrchr(self.dli_fname, '/');
  own_name = own_name ? own_name + 1 : self.dli_fname;
  char entry[PATH_MAX];
  for (const char* c = preload; *c;) {
    size_t n = strcspn(c, " :");
    if (n > 0 && n < sizeof entry) {
      memcpy(entry, c, n);
      entry[n] = '\0';
      struct stat st;
      if (strchr(entry, '/') ? stat(entry, &st) == 0 && st.st_dev == own.st_dev &&
                                   st.st_ino == own.st_ino
                             : strcmp(entry, own_name) == 0) {
        return true;
      }
    }
    c += n;
    if (*c) ++c;
  }
  return false;
}

// The capture just opened (fd, or -1 with errno): locked and owned, or *error set.
int TakeCapture(int fd, const std::string& path, std::string* error) {
  if (fd < 0) {
    const char* why = PrivateFileError(errno);
    *error = "cannot write the capture '" + path + "': " + (why ? why : strerror(errno));
    return -1;
  }
  // While this lock is held (until the writer closes the file, or the process dies), `summary`
  // says "still recording" rather than "killed". An exec'd image takes it again.
  flock(fd, LOCK_EX | LOCK_NB);
  return OwnFd(fd);
}

// Opens the capture at `path` for the writer: appended to when try_append and it exists (the
// image an exec brought), else created anew. Private, and never through a symbolic link
// (base/private_file.h). Returns its owned slot (owned_fds.h: at a high number, out of the
// program's way; -1 when none is free), or sets *error.
int OpenCapture(const std::string& path, bool try_append, bool* appended, std::string* error) {
  int fd = try_append ? OpenPrivateFile(path.c_str(), O_APPEND) : -1;
  *appended = fd >= 0;
  if (!*appended) fd = OpenPrivateFile(path.c_str(), O_CREAT | O_TRUNC);
  struct stat st;
  if (fd >= 0 && !*appended && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    unlink((path + ".index").c_str());  // a new capture: the index beside it was the old one's
  }
  return TakeCapture(fd, path, error);
}

// A followed descendant's capture, DIR/%e-%p.mlens, made anew: never one that exists, which
// another process of the run wrote before its pid was used again (then DIR/%e-%p-2.mlens, ...).
int OpenDescendantCapture(const format::ProcessRecord& process, std::string* path,
                          std::string* error) {
  const std::string pattern = std::string(g_run_dir) + "/%e-%p";
  const std::string stem = ExpandOutputPath(process, pattern.c_str());
  int fd = -1;
  for (int n = 1; fd < 0 && n < 1000; ++n) {
    *path = stem + (n == 1 ? "" : "-" + std::to_string(n)) + ".mlens";
    fd = OpenPrivateFile(path->c_str(), O_CREAT | O_EXCL);
    if (fd < 0 && errno != EEXIST) break;
  }
  return TakeCapture(fd, *path, error);
}

void Start() {
  InitializeOnce();
  if (g_bad_setting) {
    SayToUser(std::string(g_bad_setting) + "='" + getenv(g_bad_setting) +
        (strcmp(g_bad_setting, "MEMLENS_PYTHON_STACKS") == 0
             ? "' is not 0 or 1: not recording"
             : "' is not a number of bytes (or a seed): not recording"));
  } else if (g_sampler_failed) {
    SayToUser("cannot map the table of sampled blocks: not recording");
  }
  if (g_state.load() != kRecording || !g_preloaded) return;  // dormant until memlens_start
  HookGuard guard;
  format::ProcessRecord process = DescribeProcess();
  // Its parent was not recorded (a subshell that forked it): the capture names the one that was.
  if (g_descendant && g_recorded_ancestor != process.ppid) {
    process.recorded_parent = g_recorded_ancestor;
  }
  g_pid = static_cast<pid_t>(process.pid);
  g_image_start_ns = process.start_monotonic_ns;
  if (g_exchange) {  // memlens run writes the capture (hosted.h)
    MarkEnvironmentTracked();
    pthread_atfork(OnForkPrepare, nullptr, OnForkChild);
    g_on_new_string.store(PublishString, std::memory_order_release);
    BeginHostedImage(process, g_sample_rate, g_sample_exact_from);
    InstallFatalSignalHandlers();
    SetPythonFrames(0);
    AttachPython();
    real::ForgetDlError();
    return;
  }
  // After an exec the capture goes on in the same file (docs/agent.md, "exec").
  std::string path;
  bool append = false;
  std::string error;
  int slot = g_descendant ? OpenDescendantCapture(process, &path, &error)
                          : OpenCapture(path = ExpandOutputPath(process), g_after_exec, &append,
                                        &error);
  if (!error.empty()) {
    SayToUser(error + "; not recording");
    g_state.store(kStopped);
    return;
  }
  MarkEnvironmentTracked();
  // The image an exec brings appends to this file, whatever %e would say for it.
  setenv("MEMLENS_OUTPUT", path.c_str(), 1);
  pthread_atfork(OnForkPrepare, nullptr, OnForkChild);
  if (slot < 0 || !StartWriter(slot, path, process, /*write_file_header=*/!append)) {
    SayToUser("cannot start the writer thread; not recording");
    DisownFd(slot, true);
    g_state.store(kStopped);
    return;
  }
  InstallFatalSignalHandlers();
  SetPythonFrames(0);
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
  WatchOwnMappings();  // before the recorder maps its tables: memlens rss counts them as ours
  g_preloaded = PreloadNamesAgent(getenv("LD_PRELOAD"));
  const char* follow = getenv("MEMLENS_FOLLOW_CHILDREN");
  g_following_children = g_preloaded && follow && *follow == '/';
  if (g_following_children) {
    // Copied: the program may change its environment before the directory is used.
    static char dir[PATH_MAX];
    g_following_children = strlen(follow) < sizeof dir;  // no path is longer: not memlens run's
    if (g_following_children) g_run_dir = strcpy(dir, follow);
  }
  if (!g_preloaded) {  // dlopen'ed or linked: nothing is recorded until a span starts
    t_in_hook = true;
    InitializeRecorder();
    g_recorder_ready = true;
    t_in_hook = false;
    g_state.store(kDormant);
    return;
  }
  const char* tracked = getenv(kTrackedVariable);
  if (tracked && *tracked) {
    // Text that is no mark names no process: this is not the recorded one.
    TrackedProcess named;
    ParseTracked(tracked, &named);
    // A process with the recorded one's pid but not its start time is a descendant that was
    // given the pid again after the recorded process exited: it must not append to its capture.
    if (!IsThisProcess(named)) {
      DropExchange();  // the exchange is the recorded process's alone
      if (!FollowingChildren()) {
        g_state.store(kPassive);  // a descendant of the recorded process
        return;
      }
      g_descendant = true;  // recorded into a capture of its own
      g_recorded_ancestor = named.pid;
    } else {
      g_after_exec = true;
    }
  }
  uint64_t rate, exact_from, seed;
  if (!ParseSetting(getenv("MEMLENS_SAMPLE_RATE"), &rate)) g_bad_setting = "MEMLENS_SAMPLE_RATE";
  if (!ParseSetting(getenv("MEMLENS_SAMPLE_EXACT_FROM"), &exact_from)) {
    g_bad_setting = "MEMLENS_SAMPLE_EXACT_FROM";
  }
  if (!ParseSetting(getenv("MEMLENS_SAMPLE_SEED"), &seed)) g_bad_setting = "MEMLENS_SAMPLE_SEED";
  if (!SetPythonStacks(-1)) g_bad_setting = "MEMLENS_PYTHON_STACKS";
  if (g_bad_setting) {
    DropExchange();  // no writer will drain it: the program must not see it either
    g_state.store(kPassive);
    return;
  }
  t_in_hook = true;
  InitializeRecorder();
  g_recorder_ready = true;
  // Sampling is set before the first event, and never changes: every event of the image is
  // under the same rule, which the writer states in the capture (kSampling).
  g_sampler_failed = rate != 0 && !ConfigureSampling(rate, exact_from, seed);
  g_direct_short_path = rate != 0 && !g_sampler_failed && real::AllocatorIsLibc();
  g_guarded_short_path = rate != 0 && !g_sampler_failed && !g_direct_short_path;
  t_in_hook = false;
  if (g_sampler_failed) {
    DropExchange();
    g_state.store(kPassive);
    return;
  }
  // Under memlens run, the rings are in the exchange from the first event (hosted.h).
  AttachExchange();
  g_state.store(kRecording);
}

void NoteModulesChanged() {
  if (!g_exchange) return NoteModulesChangedForWriter();
  if (g_state.load() != kRecording || getpid() != g_pid) return;
  HookGuard guard;
  PublishModules();
}
void BeforeDlclose() {
  if (g_state.load() == kRecording && !t_in_hook) DrainNow(1000);
}
// The exchange is kept across the exec only for an image that will load the agent and find it
// (its environment names both): any other program would inherit a descriptor of ours.
bool ExecKeepsExchange(char* const envp[]) {
  const char* preload = nullptr;
  const char* exchange = nullptr;
  for (char* const* e = envp; e && *e; ++e) {
    if (strncmp(*e, "LD_PRELOAD=", 11) == 0) preload = *e + 11;
    if (strncmp(*e, "MEMLENS_EXCHANGE=", 17) == 0) exchange = *e + 17;
  }
  const char* ours = getenv("MEMLENS_EXCHANGE");
  return exchange && ours && strcmp(exchange, ours) == 0 && PreloadNamesAgent(preload);
}

namespace {

// A forked child's exec after its writer started (StartForkedChildWriter): the program it runs
// appends to this capture, as MEMLENS_TRACKED (this process, not its parent) and MEMLENS_OUTPUT
// (the capture) tell it. The fork handler set neither (setenv is not safe there), and a program
// may exec with an environment of its own (a shell's table of variables): the exec gets a copy
// of its environment with them set. Only where it has MEMLENS_TRACKED: an environment without it
// names no recorded process, and its program is no part of the run.
char* const* EnvironmentNamingThisCapture(char* const envp[]) {
  HookGuard guard;
  char mark[kTrackedTextSize];
  const std::string tracked =
      std::string(kTrackedVariable) + "=" + FormatTracked(ThisProcess(), mark);
  const std::string output = "MEMLENS_OUTPUT=" + *g_forked_capture;
  auto names = [](const char* entry, const std::string& ours) {
    return strncmp(entry, ours.c_str(), ours.find('=') + 1) == 0;
  };
  size_t n = 0;
  bool has_tracked = false;
  for (; envp && envp[n]; ++n) has_tracked |= names(envp[n], tracked);
  if (!has_tracked) return envp;
  // Left behind: the exec replaces the process, or fails and the program goes on with its own.
  char** copy = static_cast<char**>(malloc((n + 2) * sizeof(char*)));
  char* tracked_entry = strdup(tracked.c_str());
  char* output_entry = strdup(output.c_str());
  if (!copy || !tracked_entry || !output_entry) return envp;
  size_t k = 0;
  bool output_set = false;
  for (size_t i = 0; i < n; ++i) {
    if (names(envp[i], output)) {
      if (!output_set) copy[k++] = output_entry;
      output_set = true;
    } else {
      copy[k++] = names(envp[i], tracked) ? tracked_entry : envp[i];
    }
  }
  if (!output_set) copy[k++] = output_entry;
  copy[k] = nullptr;
  return copy;
}

}  // namespace

char* const* PauseBeforeExec(const char* path, char* const envp[]) {
  // An exec that cannot succeed (a shell trying each PATH entry in turn) leaves the capture as
  // it is: no END record, no wait.
  if (path && strchr(path, '/') && access(path, X_OK) != 0) return envp;
  if (g_state.load() != kRecording || getpid() != g_pid || t_in_hook) return envp;
  if (CancelDeferredWriter()) {  // a forked child that execs before its writer ever started
    g_state.store(kPassive);
    g_exec_dropped_fork = true;
    DiscardBufferedEvents();
    return envp;
  }
  char* const* exec_envp =
      g_forked_capture && !g_forked_capture->empty() ? EnvironmentNamingThisCapture(envp) : envp;
  KeepExchangeAcrossExec(ExecKeepsExchange(exec_envp));
  PauseWriterForExec(kStopTimeoutMs);
  return exec_envp;
}

void ResumeAfterFailedExec() {
  if (g_exec_dropped_fork) {  // it records on, from here, its writer still to start
    g_exec_dropped_fork = false;
    DeferWriterStart(StartForkedChildWriter);
    g_state.store(kRecording);
    return;
  }
  if (g_state.load() == kRecording && getpid() == g_pid) {
    KeepExchangeAcrossExec(false);
    ResumeWriter();
  }
}
void StopBeforeExit(int status) { StopRecording(format::EndReason::kExit, status); }
void FinishOnFatalSignal(int signo) { StopRecording(format::EndReason::kSignal, signo); }
bool FollowingChildren() { return g_following_children; }
bool RecordingHere() { return g_state.load() == kRecording && getpid() == g_pid; }

namespace {

struct SpanOptions {
  bool quiet = false;  // nothing on the program's stderr (memlens attach)
  uint64_t sample_rate = 0;
  uint64_t sample_exact_from = 0;  // 0: the rate
  uint64_t sample_seed = 0;
  uint64_t python_frames = 0;  // 0: MEMLENS_PYTHON_FRAMES or every frame
  bool native = true;
  int python_stacks = -1;  // -1: MEMLENS_PYTHON_STACKS
};

// The environment's settings (as under memlens run), then "key=value,..." over them. Returns
// the reason when a value is not valid.
std::string ParseSpanOptions(const char* options, SpanOptions* out) {
  struct Setting {
    const char* key;
    const char* variable;
    uint64_t* value;
  } settings[] = {{"sample_rate", "MEMLENS_SAMPLE_RATE", &out->sample_rate},
                  {"sample_exact_from", "MEMLENS_SAMPLE_EXACT_FROM", &out->sample_exact_from},
                  {"sample_seed", "MEMLENS_SAMPLE_SEED", &out->sample_seed},
                  {"python_frames", "MEMLENS_PYTHON_FRAMES", &out->python_frames}};
  for (const Setting& s : settings) {
    if (!ParseSetting(getenv(s.variable), s.value)) {
      return std::string(s.variable) + "='" + getenv(s.variable) + "' is not a number";
    }
  }
  std::string text = options ? options : "";
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    size_t equals = item.find('=');
    std::string key = item.substr(0, equals);
    std::string value = equals == std::string::npos ? "" : item.substr(equals + 1);
    uint64_t number = 0;
    bool valid = !value.empty() && ParseSetting(value.c_str(), &number);
    if (key == "native" || key == "python_stacks" || key == "quiet") {
      if (!valid || number > 1) return key + "='" + value + "' is not 0 or 1";
      if (key == "native") out->native = number == 1;
      if (key == "python_stacks") out->python_stacks = static_cast<int>(number);
      if (key == "quiet") out->quiet = number == 1;
      continue;
    }
    const Setting* setting = nullptr;
    for (const Setting& s : settings) {
      if (key == s.key) setting = &s;
    }
    if (!setting) {
      return "unknown option '" + key +
             "' (the options are sample_rate, sample_exact_from, sample_seed, python_frames, "
             "native, python_stacks, quiet)";
    }
    if (!valid) return key + "='" + value + "' is not a number";
    *setting->value = number;
  }
  return "";
}

// Why a span cannot start now, or "".
std::string SpanRefusal(const SpanOptions& options) {
  int state = g_state.load();
  if (state == kRecording) {
    return g_span_open ? "already recording (into '" + *g_span_path + "'): stop that span first"
                       : "this process is already recorded whole, from its start, by memlens "
                         "run (the agent is preloaded): no span can start; the whole capture "
                         "goes on";
  }
  if (g_forked_while_recording) {
    return "this process was forked while its parent recorded: it cannot record";
  }
  if (g_writer_running.load()) return "the last span's capture is still being finished";
  // The Python hooks and the short paths take the rule once (python_bridge.h: sampling).
  if ((g_spans > 0 || g_preloaded) && options.sample_rate != g_sample_rate) {
    return "sample_rate is fixed for the process by its first span (" +
           std::to_string(g_sample_rate) + "): this span asks " +
           std::to_string(options.sample_rate);
  }
  uint64_t exact_from = options.sample_exact_from ? options.sample_exact_from : options.sample_rate;
  if ((g_spans > 0 || g_preloaded) && g_sample_rate && exact_from != g_sample_exact_from) {
    return "sample_exact_from is fixed for the process by its first span (" +
           std::to_string(g_sample_exact_from) + "): this span asks " + std::to_string(exact_from);
  }
  return "";
}

bool StartSpanLocked(const char* pattern, const char* option_text, std::string* error) {
  if (g_state.load() == kUninitialized) InitializeOnce();
  SpanOptions options;
  *error = ParseSpanOptions(option_text, &options);
  if (error->empty()) *error = SpanRefusal(options);
  if (!error->empty()) return false;
  g_quiet_note[0] = '\0';
  g_quiet.store(options.quiet);
  if (!g_recorder_ready) {  // a preloaded process that does not record the whole run
    InitializeRecorder();
    g_recorder_ready = true;
  }
  if (g_spans == 0 && !g_preloaded && options.sample_rate) {
    if (!ConfigureSampling(options.sample_rate, options.sample_exact_from,
                           options.sample_seed)) {
      *error = "cannot map the table of sampled blocks";
      return false;
    }
    g_direct_short_path = real::AllocatorIsLibc();
    g_guarded_short_path = !g_direct_short_path;
  }
  if (!SetPythonStacks(options.python_stacks)) {
    *error = std::string("MEMLENS_PYTHON_STACKS='") + getenv("MEMLENS_PYTHON_STACKS") +
             "' is not 0 or 1";
    return false;
  }
  format::ProcessRecord process = DescribeProcess();
  std::string path = ExpandOutputPath(process, pattern);
  bool appended = false;
  int slot = OpenCapture(path, /*try_append=*/false, &appended, error);
  if (!error->empty()) return false;
  // Native memory: a preloaded agent's interposers are the program's already; otherwise the
  // slots through which every loaded object calls the allocator are pointed at them (got/).
  g_span_patched = options.native && !g_preloaded;
  if (g_span_patched && !got::PatchLoadedObjects(error)) {
    DisownFd(slot, true);
    unlink(path.c_str());  // nothing was recorded into it
    *error = "cannot record native memory (" + *error + "); start with native=0 for Python's "
             "allocator alone";
    g_span_patched = false;
    return false;
  }
  if (g_spans == 0) pthread_atfork(OnForkPrepare, nullptr, OnForkChild);
  // A capture of its own: stacks, sequence numbers and counters start again.
  g_span_epoch.fetch_add(1);
  DiscardBufferedEvents();
  ResetRecorderCounters();
  g_pid = static_cast<pid_t>(process.pid);
  g_stopping.store(false);
  if (slot < 0 || !StartWriter(slot, path, process, /*write_file_header=*/true)) {
    DisownFd(slot, true);
    if (g_span_patched) got::UnpatchAll();
    g_span_patched = false;
    *error = "cannot start the writer thread";
    return false;
  }
  SetPythonFrames(options.python_frames);
  AttachPython();  // the first span's hooks stay; later spans put back what stop took off
  real::ForgetDlError();
  ++g_spans;
  *g_span_path = path;
  g_span_open = true;
  g_state.store(kRecording);
  return true;
}

}  // namespace

void SayToUser(const std::string& line) {
  if (g_quiet.load()) {
    if (!g_quiet_note[0]) snprintf(g_quiet_note, sizeof g_quiet_note, "%s", line.c_str());
    return;
  }
  std::string message = "memlens: " + line + "\n";
  ssize_t ignored = write(2, message.data(), message.size());
  (void)ignored;
}

const char* QuietNote() { return g_quiet_note; }
bool Quiet() { return g_quiet.load(std::memory_order_relaxed); }

// Start and stop never wait for each other: start may wait for the GIL (AttachPython) while
// a Python thread holding it calls stop.
constexpr char kSpanBusy[] = "another thread is starting or stopping a span right now";

bool StartSpan(const char* path, const char* options, std::string* error) {
  HookGuard guard;  // nothing the agent allocates here is the program's
  if (pthread_mutex_trylock(&g_span_mutex) != 0) {
    *error = kSpanBusy;
    return false;
  }
  if (!g_span_path) g_span_path = new std::string();
  bool started = StartSpanLocked(path, options, error);
  pthread_mutex_unlock(&g_span_mutex);
  return started;
}

bool StopSpan(std::string* error) {
  HookGuard guard;
  if (pthread_mutex_trylock(&g_span_mutex) != 0) {
    *error = kSpanBusy;
    return false;
  }
  bool stopped = false;
  if (!g_span_open || g_state.load() != kRecording || getpid() != g_pid) {
    *error = g_state.load() == kRecording && !g_span_open
                 ? "this process is recorded whole, from its start (memlens run): its capture "
                   "ends when it exits"
                 : "not recording: no span was started";
  } else if (!g_stopping.exchange(true)) {  // else exit or a fatal signal is finishing it
    g_state.store(kDormant);  // from here on nothing is recorded; the writer drains the rest
    RequestWriterStop(format::EndReason::kStopped, 0);
    WaitForWriter(kStopTimeoutMs);
    if (g_span_patched) got::UnpatchAll();  // the slots still holding our hooks go back
    g_span_patched = false;
    DetachPython();
    g_span_open = false;
    stopped = true;
  } else {
    *error = "the process is ending: its capture is being finished";
  }
  pthread_mutex_unlock(&g_span_mutex);
  return stopped;
}

void FlushSpan() {
  if (g_state.load() == kRecording && getpid() == g_pid && !t_in_hook) {
    FlushWriter(kStopTimeoutMs);
  }
}

}  // namespace memlens::agent

// The library's own initializer and finalizer. Allocations before Start (other libraries'
// constructors) are already in the thread buffers: the writer picks them up. The finalizer
// runs after the program's atexit handlers and static destructors, so those are recorded too.
__attribute__((constructor)) static void MemlensAgentStart() { memlens::agent::Start(); }
__attribute__((destructor)) static void MemlensAgentFinish() {
  memlens::agent::StopRecording(memlens::format::EndReason::kExit, 0);
}
