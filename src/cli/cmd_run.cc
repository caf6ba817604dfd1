// src/cli/cmd_run.cc
//
// `memlens run [-o FILE] [--sample | --sample-rate BYTES] -- PROGRAM [ARGS...]`: runs PROGRAM
// with the agent preloaded, passes its stdin/stdout/stderr through untouched, and exits with
// its status (128+N when it was killed by signal N). memlens's own messages go to stderr and
// start with "memlens:".
//
// While the program runs, a thread of this process (SCHED_IDLE, so it takes only CPU time the
// program and its writer leave) replays the capture as it is written and builds
// its snapshot index, end included (analyzer/model/snapshot_index.h): every later view of the
// whole capture, or of a moment in it, starts from the index instead of replaying it.
// With --push URL, a pusher (cli/pusher.h) sends Pyroscope a profile of it every period.
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <future>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "agent/tracked_process.h"
#include "analyzer/export/format_units.h"
#include "analyzer/export/pyroscope.h"
#include "analyzer/model/process_set.h"
#include "analyzer/model/snapshot_index.h"
#include "base/private_file.h"
#include "cli/agent_file.h"
#include "cli/analysis_options.h"
#include "cli/commands.h"
#include "cli/hosted_writer.h"
#include "cli/live_terminal.h"
#include "cli/pusher.h"

namespace memlens::cli {
namespace {

struct RunOptions {
  std::string output;
  int python_frames = 0;  // 0: the agent's default
  bool python_stacks = false;
  bool sample = false;
  bool no_index = false;
  bool follow_children = false;  // -o names a directory of captures, one a process
  bool live = false;             // the live view on this terminal while the program runs
  std::string sample_rate;  // as given; empty: not given
  // --push URL (docs/push.md): every --push-every, a pprof to a Pyroscope server.
  std::string push_url, push_every = "60s", service;
  std::vector<std::string> labels;
  // For --help only: main.cc hands the program and its arguments over raw (ProgramStart), so
  // that no parser ever reads them.
  std::vector<std::string> help_only;
};

// "65536", "64K", "64k", "64KiB", "2M", "1T" (powers of 1024) -> bytes; false when not a size.
bool ParseBytes(const std::string& text, uint64_t* out) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 15) return false;
  uint64_t value = std::stoull(text.substr(0, digits));
  std::string unit = text.substr(digits);
  int shift = 0;
  if (!unit.empty()) {  // K, M, G, T in either case, or KiB..TiB (not kiB)
    const size_t prefix = std::string("KMGT").find(
        static_cast<char>(std::toupper(static_cast<unsigned char>(unit[0]))));
    const bool spelled = unit.size() == 1 ||
                         (unit.substr(1) == "iB" && std::isupper(static_cast<unsigned char>(unit[0])));
    if (prefix == std::string::npos || !spelled) return false;
    shift = 10 * static_cast<int>(prefix + 1);
  }
  *out = value << shift;
  return value != 0 && *out >> shift == value && *out <= (uint64_t{1} << 40);
}

pid_t g_child = 0;

std::string Dirname(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The program as execvp would find it (its path in *found), or an error message.
bool ResolveProgram(const std::string& name, std::string* found, std::string* error) {
  auto check = [&](const std::string& path) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return ENOENT;
    if (S_ISDIR(st.st_mode)) return EISDIR;
    if (access(path.c_str(), X_OK) != 0) return EACCES;
    return 0;
  };
  if (name.find('/') != std::string::npos) {
    int rc = check(name);
    if (rc) *error = "cannot run '" + name + "': " + strerror(rc);
    *found = name;
    return rc == 0;
  }
  const char* path_env = getenv("PATH");
  std::string path = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
  for (size_t start = 0; start <= path.size();) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    *found = (dir.empty() ? "." : dir) + "/" + name;
    if (check(*found) == 0) return true;
    start = end + 1;
  }
  *error = "cannot run '" + name + "': command not found in PATH";
  return false;
}

std::string AbsolutePath(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) return path;
  return std::string(cwd) + "/" + path;
}

// Runs argv and returns its standard output ("" when it cannot run).
std::string OutputOf(const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe(fds) != 0) return "";
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 2);
    close(fds[0]);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    unsetenv("LD_PRELOAD");
    execvp(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, n);
  close(fds[0]);
  int status;
  waitpid(pid, &status, 0);
  return out;
}

// "3.13", or "3.13t" for a free-threaded build, when the file at path, its links followed, is
// named python3.13 or python3.13t (as Debian, pyenv, venv, conda and CPython's own install name
// an interpreter, python3 being a link to it); "" otherwise.
std::string TagInName(const std::string& path) {
  char real[PATH_MAX];
  if (!realpath(path.c_str(), real)) return "";
  std::string name = Basename(real);
  if (name.rfind("python", 0) != 0) return "";
  std::string tag = name.substr(6);
  std::string version = !tag.empty() && tag.back() == 't' ? tag.substr(0, tag.size() - 1) : tag;
  size_t dot = version.find('.');
  auto digits = [](const std::string& text) {
    return !text.empty() && text.size() <= 3 &&
           text.find_first_not_of("0123456789") == std::string::npos;
  };
  if (dot == std::string::npos || !digits(version.substr(0, dot)) ||
      !digits(version.substr(dot + 1))) {
    return "";
  }
  // A free-threaded build installs python3.14 as a hard link to python3.14t: the same file
  // under the other name is the free-threaded interpreter.
  struct stat named, threaded;
  if (tag == version && stat(real, &named) == 0 &&
      stat((Dirname(real) + "/python" + version + "t").c_str(), &threaded) == 0 &&
      named.st_dev == threaded.st_dev && named.st_ino == threaded.st_ino) {
    tag += "t";
  }
  return tag;
}

// The tags of the hooks libraries next to the agent (libmemlens_python<tag>.so), sorted.
std::string SupportedTags(const std::string& folder) {
  std::vector<std::string> tags;
  if (DIR* dir = opendir(folder.c_str())) {
    constexpr std::string_view kPrefix = "libmemlens_python", kSuffix = ".so";
    while (dirent* entry = readdir(dir)) {
      std::string_view name = entry->d_name;
      if (name.size() > kPrefix.size() + kSuffix.size() && name.starts_with(kPrefix) &&
          name.ends_with(kSuffix)) {
        tags.emplace_back(name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size()));
      }
    }
    closedir(dir);
  }
  std::sort(tags.begin(), tags.end());
  std::string list;
  for (const auto& tag : tags) list += (list.empty() ? "" : ", ") + tag;
  return list;
}

// A Python interpreter is recorded with its Python frames only where this memlens has hooks for
// its version and build (libmemlens_python<tag>.so next to the agent, tag as in TagInName); any
// other is refused rather than read wrongly. The agent makes the same choice at run time
// (agent/python_support.cc), from the interpreter's own symbols.
bool CheckPython(const std::string& program, const std::string& path, const std::string& agent,
                 std::string* error) {
  if (Basename(program).rfind("python", 0) != 0) return true;
  std::string tag = TagInName(path);
  if (tag.empty()) {
    // -I -S: no site import, no environment: the version in a tenth of a full start-up, which
    // is still 30 ms on top of the program's own. sys.abiflags holds "t" in a free-threaded build.
    tag = OutputOf({program, "-I", "-S", "-c",
                    "import sys; print('%d.%d' % sys.version_info[:2] + ('t' if 't' in "
                    "sys.abiflags else ''))"});
  }
  while (!tag.empty() && (tag.back() == '\n' || tag.back() == '\r')) tag.pop_back();
  if (tag.empty()) return true;  // not an interpreter after all: run it as it is
  if (access((Dirname(agent) + "/libmemlens_python" + tag + ".so").c_str(), R_OK) == 0) return true;
  std::string supported = SupportedTags(Dirname(agent));
  *error = "Python " + tag + " is not supported: this memlens reads the frames of Python " +
           (supported.empty() ? std::string("(none: built without Python headers)") : supported) +
           "; run a supported interpreter";
  return false;
}

// Why the agent cannot enter the program at `path`, "" when it can: a statically linked
// program (no PT_INTERP) has no loader to read LD_PRELOAD, and a setuid or setgid one that gives
// us other credentials runs in the loader's secure mode, which ignores it (ld.so(8)).
std::string WhyNotRecorded(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return "";
  struct statvfs fs;
  bool nosuid = statvfs(path.c_str(), &fs) == 0 && (fs.f_flag & ST_NOSUID);
  if (!nosuid && (st.st_mode & S_ISUID) && st.st_uid != getuid()) {
    return "it is setuid, and the loader ignores LD_PRELOAD for a setuid program";
  }
  if (!nosuid && (st.st_mode & S_ISGID) && st.st_gid != getgid()) {
    return "it is setgid, and the loader ignores LD_PRELOAD for a setgid program";
  }
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  Elf64_Ehdr header;
  bool interpreted = true;  // anything this cannot read is left to the loader
  if (pread(fd, &header, sizeof header, 0) == sizeof header &&
      memcmp(header.e_ident, ELFMAG, SELFMAG) == 0 && header.e_ident[EI_CLASS] == ELFCLASS64 &&
      header.e_phentsize == sizeof(Elf64_Phdr) && header.e_phnum < 4096) {
    std::vector<Elf64_Phdr> headers(header.e_phnum);
    size_t bytes = headers.size() * sizeof(Elf64_Phdr);
    if (pread(fd, headers.data(), bytes, header.e_phoff) == static_cast<ssize_t>(bytes)) {
      interpreted = false;
      for (const Elf64_Phdr& h : headers) interpreted = interpreted || h.p_type == PT_INTERP;
    }
  }
  close(fd);
  return interpreted ? "" : "it is statically linked, and the agent is loaded through LD_PRELOAD, "
                            "which only the dynamic loader reads";
}

// pyenv's shims exec the interpreter, which is recorded; but for pip, pyenv's pip-rehash hook
// runs it as a child of a bash script, and only that script would be. Says what to run instead.
void WarnAboutPyenvPip(const std::vector<std::string>& command, const std::string& path) {
  std::string head(512, '\0');
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = read(fd, head.data(), head.size());
  close(fd);
  head.resize(n > 0 ? n : 0);
  size_t at = head.find("/libexec/pyenv\" exec");
  if (head.rfind("#!", 0) != 0 || at == std::string::npos) return;
  std::string name = Basename(command[0]);
  bool pip = name.rfind("pip", 0) == 0 || name.rfind("easy_install", 0) == 0;
  for (size_t i = 1; i + 1 < command.size(); ++i) {
    pip = pip || (command[i] == "-m" && command[i + 1] == "pip");
  }
  if (!pip) return;
  size_t quote = head.rfind('"', at);
  if (quote == std::string::npos) return;
  std::string pyenv = head.substr(quote + 1, at - quote - 1) + "/libexec/pyenv";
  std::string real = OutputOf({pyenv, "which", name});
  while (!real.empty() && real.back() == '\n') real.pop_back();
  if (real.empty() ||
      OutputOf({pyenv, "hooks", "exec"}).find("pip-rehash") == std::string::npos) {
    return;
  }
  std::vector<std::string> instead = {"memlens", "run", "--", real};
  instead.insert(instead.end(), command.begin() + 1, command.end());
  std::cerr << "memlens: " << command[0] << " is a pyenv shim, and pyenv runs pip as a child of "
            << "a bash script, which is all this records (children are not followed yet); to "
            << "record pip: " << analyzer::ShellQuote(instead) << "\n";
}

volatile sig_atomic_t g_forwarded = 0;  // a signal was passed on: --live's view closes at the end
void ForwardSignal(int signo) {
  g_forwarded = 1;
  if (g_child > 0) kill(g_child, signo);
}

std::atomic<int> g_follow{analyzer::kWriterRunning};  // the indexer's view of the capture
void CancelIndexing(int) { g_follow.store(analyzer::kReadCancelled); }

// Whether this run can index its capture as it is written: a regular file (or none yet) at a
// path the agent uses as it is (a %p or %e pattern is expanded by the agent alone).
bool CanFollow(const std::string& capture) {
  if (analyzer::IndexTurnedOff() || capture.find('%') != std::string::npos) return false;
  struct stat st;
  return stat(capture.c_str(), &st) != 0 || S_ISREG(st.st_mode);
}

// A capture smaller than this is not indexed: views replay it whole in a fifth of a second,
// while indexing it cost a short run a tenth of its time, even when the replay at the exit is
// dropped (py_numpy, 1.3 MB: 1.29x following from the start, 1.20x without, 11 paired rounds).
// Following starts only past it, so the backlog then is small (black, 12 MB: starting at 8 MiB
// cost 0.37x more than from the start). MEMLENS_INDEX_MIN_BYTES overrides (the tests: 0).
constexpr uint64_t kIndexFromBytes = 2 << 20;

uint64_t IndexFromBytes() {
  const char* env = getenv("MEMLENS_INDEX_MIN_BYTES");
  return env && *env ? strtoull(env, nullptr, 10) : kIndexFromBytes;
}

std::mutex g_exit_mutex;
std::condition_variable g_exited;  // notified when g_follow leaves kWriterRunning

// Waits until the capture holds `bytes` (true), or the program is gone with less (false).
bool GrowsPast(const std::string& capture, uint64_t bytes) {
  for (;;) {
    int follow = g_follow.load();  // read before the size: a done writer wrote its last byte
    struct stat st;
    if (stat(capture.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) >= bytes) return true;
    if (follow != analyzer::kWriterRunning) return false;
    std::unique_lock<std::mutex> lock(g_exit_mutex);
    g_exited.wait_for(lock, std::chrono::milliseconds(20),
                      [] { return g_follow.load() != analyzer::kWriterRunning; });
  }
}

// Builds the capture's index on a thread of its own, reading the capture as the agent writes
// it; Finish waits for it once the program has exited.
class CaptureIndexer {
 public:
  explicit CaptureIndexer(const std::string& capture)
      : done_(std::async(std::launch::async, [capture] {
          // This thread (and the reader thread it starts) runs only on CPU time nothing else
          // wants: the program and the agent's writer come first. (In paired runs indexing
          // cost deep_stacks about 20% at nice 19, about 8% at SCHED_IDLE.)
          sched_param idle{};
          if (sched_setscheduler(0, SCHED_IDLE, &idle) != 0) setpriority(PRIO_PROCESS, 0, 19);
          if (!GrowsPast(capture, IndexFromBytes())) return false;
          analyzer::SnapshotIndex index;
          std::string error;
          try {  // no index is no harm: views replay instead
            return analyzer::BuildSnapshotIndex(capture, &index, &error, &g_follow);
          } catch (const std::exception&) {
            return false;
          }
        })) {}

  // The program is gone: the capture is complete. A replay that lags behind it says so after
  // a second, and ^C skips it (the capture is whole either way; views replay without index).
  void Finish() {
    {
      std::lock_guard<std::mutex> lock(g_exit_mutex);
      g_follow.store(analyzer::kWriterDone);
    }
    g_exited.notify_all();
    if (done_.wait_for(std::chrono::seconds(1)) == std::future_status::timeout) {
      signal(SIGINT, CancelIndexing);
      std::cerr << "memlens: indexing the capture for fast analysis (Ctrl-C skips it)...\n";
    }
    done_.get();
  }

 private:
  std::future<bool> done_;
};

// The directory of a run with --follow-children: made (0700) when missing; one that exists
// must hold no capture, so that no earlier run's processes mix with this one's.
bool MakeRunDirectory(const std::string& path, bool* made, std::string* error) {
  *made = false;
  if (path.find('%') != std::string::npos) {
    *error = "--follow-children: -o names the run's directory: give a path without %";
    return false;
  }
  if (mkdir(path.c_str(), 0700) == 0) {
    *made = true;
    return true;
  }
  struct stat st;
  if (errno != EEXIST || lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    *error = "--follow-children: cannot make the directory '" + path + "': " +
             (errno == EEXIST ? "it exists and is not a directory" : strerror(errno));
    return false;
  }
  if (st.st_uid != geteuid()) {  // its owner could read or replace the captures
    *error = "--follow-children: '" + path + "' belongs to another user: name a directory of "
             "yours with -o";
    return false;
  }
  if (!analyzer::CapturesIn(path).empty()) {
    *error = "--follow-children: '" + path + "' already holds captures: name a new or empty "
             "directory with -o";
    return false;
  }
  if (access(path.c_str(), W_OK | X_OK) != 0) {
    *error = "--follow-children: cannot write in '" + path + "': " + strerror(errno);
    return false;
  }
  return true;
}

int Run(const RunOptions& options, std::vector<std::string> command) {
  if (command.empty()) return Complain("run: no program given (usage: memlens run [-o FILE] -- PROGRAM [ARGS...])");
  std::string error;
  std::string program_path;
  if (!ResolveProgram(command[0], &program_path, &error)) return Complain(error);
  std::string agent = FindAgent();
  if (access(agent.c_str(), R_OK) != 0) {
    return Complain("cannot find the agent library at '" + agent + "' (set MEMLENS_AGENT)");
  }
  if (!CheckPython(command[0], program_path, agent, &error)) return Complain(error);
  // The program runs all the same, untouched; memlens says once why it records nothing.
  const std::string why_not_recorded = WhyNotRecorded(program_path);
  if (const std::string& why = why_not_recorded; !why.empty()) {
    std::cerr << "memlens: " << command[0] << " cannot be recorded: " << why << "\n";
  }
  WarnAboutPyenvPip(command, program_path);
  uint64_t sample_rate = options.sample ? kDefaultSampleRate : 0;
  if (!options.sample_rate.empty() && !ParseBytes(options.sample_rate, &sample_rate)) {
    return Complain("--sample-rate '" + options.sample_rate +
                    "': give a number of bytes from 1 to 1T, as in 65536, 64K or 1M");
  }
  analyzer::PushTarget push;
  std::chrono::milliseconds push_every{0};
  if (!options.push_url.empty()) {
    if (!MakePushTarget(options.push_url, options.labels, options.service, command[0], &push,
                        &error) ||
        !ParsePushPeriod(options.push_every, &push_every, &error)) {
      return Complain(error);
    }
    if (options.output.find('%') != std::string::npos) {
      return Complain("--push reads the capture as it is written: give -o a path without %");
    }
  }
  if (options.live && options.follow_children) {
    return Complain("--live watches one capture, --follow-children writes one a process: watch "
                    "one of them with memlens live CAPTURE");
  }
  if (options.live) {
    if (std::string why = LiveTerminalRefusal(); !why.empty()) return Complain(why);
  }
  std::string output = options.output.empty() ? "" : AbsolutePath(options.output);
  const bool follow = options.follow_children;
  bool made_directory = false;  // by this run: removed again if no process was recorded
  if (follow && !output.empty() && !MakeRunDirectory(output, &made_directory, &error)) {
    return Complain(error);
  }
  // Captures are private (0600) and never written through a symbolic link planted at the path
  // (base/private_file.h).
  if (!output.empty() && !follow) {
    int probe = OpenPrivateFile(output.c_str(), O_CREAT);
    if (probe < 0) {
      const char* why = PrivateFileError(errno);
      return Complain("cannot write the capture '" + output + "': " +
                      (why ? why : strerror(errno)));
    }
    close(probe);
  }

  // Like a shell: the terminal's ^C and ^\ reach the program; memlens waits for it to finish.
  signal(SIGINT, SIG_IGN);
  signal(SIGQUIT, SIG_IGN);
  // The capture's path, the same for the child (which names it to the agent) and for us; with
  // --follow-children, the program's capture in the run's directory, beside its descendants'.
  const std::string name = "memlens-" + Basename(command[0]) + "-";
  auto run_directory_of = [&](pid_t pid) {
    return output.empty() ? AbsolutePath(name + std::to_string(pid)) : output;
  };
  auto capture_of = [&](pid_t pid) {
    if (follow) {
      return run_directory_of(pid) + "/" + Basename(command[0]) + "-" + std::to_string(pid) +
             ".mlens";
    }
    return output.empty() ? AbsolutePath(name + std::to_string(pid) + ".mlens") : output;
  };
  // The writer runs here, in memlens run, unless the capture's name is the agent's to expand
  // (a %e pattern), or it cannot (docs/agent.md, "The hosted writer"). MEMLENS_HOSTED_WRITER=0
  // keeps it in the program, as without memlens run.
  std::unique_ptr<HostedWriter> hosted;
  const char* hosted_setting = getenv("MEMLENS_HOSTED_WRITER");
  if (output.find('%') == std::string::npos && why_not_recorded.empty() &&
      !(hosted_setting && std::string(hosted_setting) == "0")) {
    struct stat st;
    if (output.empty() || follow || stat(output.c_str(), &st) != 0 || S_ISREG(st.st_mode)) {
      hosted = HostedWriter::Create();
    }
  }
  // The child waits at this gate until the capture file is ready to be followed.
  int gate[2];
  if (pipe2(gate, O_CLOEXEC) != 0) return Complain(std::string("pipe failed: ") + strerror(errno));
  pid_t child = fork();
  if (child < 0) return Complain(std::string("fork failed: ") + strerror(errno));
  if (child == 0) {
    close(gate[1]);
    char byte;
    while (read(gate[0], &byte, 1) < 0 && errno == EINTR) {}
    close(gate[0]);
    signal(SIGINT, SIG_DFL);
    signal(SIGQUIT, SIG_DFL);
    // --live: the view's markers and snapshots come from `memlens mark`, run by this memlens:
    // Yama's ptrace_scope 1 lets it trace the program only if the program names us (and so
    // our descendants). Nothing the program sees; no effect without Yama.
    if (options.live) prctl(PR_SET_PTRACER, static_cast<unsigned long>(getppid()), 0, 0, 0);
    setenv("MEMLENS_OUTPUT", capture_of(getpid()).c_str(), 1);
    if (options.python_frames > 0) {
      setenv("MEMLENS_PYTHON_FRAMES", std::to_string(options.python_frames).c_str(), 1);
    }
    setenv("MEMLENS_PYTHON_STACKS", options.python_stacks ? "1" : "0", 1);
    if (sample_rate) {
      setenv("MEMLENS_SAMPLE_RATE", std::to_string(sample_rate).c_str(), 1);
    } else {
      unsetenv("MEMLENS_SAMPLE_RATE");  // full tracing, whatever our own environment says
    }
    // We may run inside a recorded process ourselves: the program is no descendant of it.
    unsetenv(agent::kTrackedVariable);
    if (follow) {
      setenv("MEMLENS_FOLLOW_CHILDREN", run_directory_of(getpid()).c_str(), 1);
    } else {
      unsetenv("MEMLENS_FOLLOW_CHILDREN");
    }
    unsetenv("MEMLENS_EXCHANGE");
    if (hosted) hosted->PassToChild();
    const char* preload = getenv("LD_PRELOAD");
    std::string value = agent + (preload && *preload ? ":" + std::string(preload) : "");
    setenv("LD_PRELOAD", value.c_str(), 1);
    std::vector<char*> argv;
    for (auto& arg : command) argv.push_back(arg.data());
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    std::cerr << "memlens: cannot run '" << command[0] << "': " << strerror(errno) << "\n";
    _exit(127);
  }
  g_child = child;
  signal(SIGTERM, ForwardSignal);
  signal(SIGHUP, ForwardSignal);
  close(gate[0]);
  const std::string run_directory = run_directory_of(child);
  if (follow && output.empty() && !MakeRunDirectory(run_directory, &made_directory, &error)) {
    kill(child, SIGKILL);  // still at the gate: it never ran the program
    while (waitpid(child, nullptr, 0) < 0 && errno == EINTR) {}
    return Complain(error);
  }
  std::string capture = capture_of(child);
  // The file is emptied before the agent starts, so what the indexer reads is this run's.
  std::unique_ptr<CaptureIndexer> indexer;
  if (!options.no_index && CanFollow(capture)) {
    int fd = OpenPrivateFile(capture.c_str(), O_CREAT | O_TRUNC);
    if (fd >= 0) {
      close(fd);
      indexer = std::make_unique<CaptureIndexer>(capture);
    }
  }
  if (hosted) hosted->Start(child, capture);
  std::unique_ptr<Pusher> pusher;
  if (!push.url.empty()) {
    SetPidLabel(&push, child);
    pusher = std::make_unique<Pusher>(push, capture, push_every);
  }
  std::atomic<bool> program_ended{false};
  std::thread live;
  if (options.live) {
    LiveSettings settings;
    settings.capture = capture;
    settings.program_ended = &program_ended;
    settings.own_signals = false;
    settings.close_after_end = &g_forwarded;
    live = std::thread([settings] {
      try {
        RunLiveTerminal(settings);
      } catch (const std::exception& e) {  // the terminal is put back as the view unwinds
        std::cerr << "memlens: the live view stopped: " << e.what() << "\n";
      }
    });
  }
  close(gate[1]);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
  if (hosted) hosted->Finish(status);  // the capture is whole before the indexer's last read
  program_ended.store(true);
  if (live.joinable()) live.join();  // the view shows the last frame until q
  if (indexer) indexer->Finish();
  if (pusher) pusher->Finish();
  struct stat st;  // a FIFO or a device has no size to check; a link is never written through
  bool written = lstat(capture.c_str(), &st) == 0 && !S_ISLNK(st.st_mode) &&
                 (!S_ISREG(st.st_mode) || st.st_size > 0);
  // The file made for following, when the program never ran: leave nothing behind (a run's
  // directory that no process wrote in either).
  if (indexer && (output.empty() || follow) && !written) unlink(capture.c_str());
  const size_t captures = follow ? analyzer::CapturesIn(run_directory).size() : 0;
  if (follow && captures == 0 && made_directory) rmdir(run_directory.c_str());
  // What was written, said once the program is gone. Descendants that outlive it go on
  // writing their own captures in the run's directory.
  const bool any = follow ? captures > 0 : written;
  auto say_written = [&] {
    if (!any) return;
    if (follow) {
      std::cerr << "memlens: captures of " << captures << (captures == 1 ? " process" : " processes")
                << " written to " << run_directory << "/ (memlens summary " << run_directory
                << " lists them)\n";
    } else {
      std::cerr << "memlens: capture written to " << capture << "\n";
    }
  };
  if (WIFSIGNALED(status)) {
    int signo = WTERMSIG(status);
    std::cerr << "memlens: " << command[0] << " was killed by signal " << signo << " ("
              << strsignal(signo) << ")\n";
    say_written();
    return 128 + signo;
  }
  if (any) {
    say_written();
  } else if (WEXITSTATUS(status) != 127) {
    std::cerr << "memlens: no capture was written to " << (follow ? run_directory + "/" : capture)
              << "\n";
  }
  return WEXITSTATUS(status);
}

}  // namespace

CommandRunner AddRunCommand(CLI::App* cmd, const std::vector<std::string>* program) {
  auto options = std::make_shared<RunOptions>();
  cmd->add_option("-o,--output", options->output,
                  "capture file (default: memlens-PROGRAM-PID.mlens in the current directory)");
  cmd->add_option("--python-frames", options->python_frames,
                  "in a Python program, keep at most N Python frames per allocation (the\n"
                  "innermost ones; default 512)")
      ->check(CLI::Range(1, 512));
  cmd->add_flag("--python-stacks", options->python_stacks,
                "in a Python program, record each allocation's Python lines only, without\n"
                "native frames (no native unwinding, as tracemalloc): an allocation made\n"
                "while Python code runs, by Python or by C code it called, gets the thread's\n"
                "Python stack; one made on a thread running no Python code gets only the\n"
                "frame that called the allocator. Cheaper than full mixed stacks: about\n"
                "half their cost on deep native stacks, 3/4 on pure Python (docs/python.md)");
  cmd->add_flag("--sample", options->sample,
                "sample heap allocations at the default rate, one byte in 512 KiB on average\n"
                "(docs/sampling.md): far cheaper than recording every allocation; every\n"
                "figure is then an unbiased estimate shown with its error, and blocks of the\n"
                "rate or more are recorded whole");
  cmd->add_option("--sample-rate", options->sample_rate,
                  "sample heap allocations at one byte in BYTES on average (65536, 64K, 1M,\n"
                  "up to 1T): a block of s < BYTES bytes is recorded with probability\n"
                  "1 - exp(-s/BYTES), a larger one always, its free only if it was; mappings are\n"
                  "recorded in full. MEMLENS_SAMPLE_SEED=N in the environment makes the samples\n"
                  "reproducible")
      ->type_name("BYTES");
  cmd->add_flag("--follow-children", options->follow_children,
                "record every process the program starts (fork, with or without an exec,\n"
                "posix_spawn, system, subprocess, multiprocessing, a shell's commands), and\n"
                "their descendants, each into a capture of its own in one directory: -o DIR\n"
                "(default memlens-PROGRAM-PID/); a forked child's starts from the blocks it\n"
                "inherited. `memlens summary DIR` lists the processes; every other view\n"
                "takes DIR, the processes merged by site, or one of the captures\n"
                "(docs/agent.md, \"Processes\")");
  cmd->add_flag("--live", options->live,
                "while the program runs, show its heap, resident memory and top sites on this\n"
                "terminal (memlens live's view; q closes it, the program runs on). The program\n"
                "must not use the terminal: redirect its input and output. Elsewhere, watch\n"
                "the capture with memlens live CAPTURE");
  cmd->add_flag("--no-index", options->no_index,
                "do not index the capture while the program runs. By default, once the\n"
                "capture holds 2 MiB, a low-priority thread replays it as it is written and\n"
                "stores its snapshot index (CAPTURE.index), so that later views start from it\n"
                "instead of replaying the whole capture (docs/snapshot-index.md)");
  cmd->add_option("--push", options->push_url,
                  "while the program runs, send a Pyroscope server (http(s)://HOST:PORT) a\n"
                  "pprof every --push-every: what is in use, what was allocated in the period\n"
                  "(docs/push.md)")
      ->type_name("URL");
  cmd->add_option("--push-every", options->push_every,
                  "the period of --push: 60s (default), 500ms, 2m")
      ->type_name("DURATION");
  AddPushLabelOptions(cmd, "with --push: ", &options->labels, &options->service);
  cmd->add_option("PROGRAM", options->help_only,
                  "the program to run and its arguments (after --, or after memlens's own\n"
                  "options), passed to it as they are");
  cmd->footer(
      "The program's input, output and exit status pass through unchanged. The agent can also\n"
      "be loaded without this command: LD_PRELOAD=.../libmemlens.so MEMLENS_OUTPUT=FILE PROGRAM\n"
      "(see docs/agent.md). An exec is followed into the same capture, whose analysis describes\n"
      "the last program image; child processes are recorded with --follow-children.");
  return [options, program] { return Run(*options, *program); };
}

}  // namespace memlens::cli
