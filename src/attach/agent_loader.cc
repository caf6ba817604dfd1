// src/attach/agent_loader.cc: the refusals, then dlopen and memlens_start_with in the process.
#include "attach/agent_loader.h"

#include <dlfcn.h>
#include <pwd.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "attach/process_objects.h"
#include "attach/traced_thread.h"

namespace memlens::attach {
namespace {

constexpr int kSafePointWaitMs = 3000;
constexpr uint64_t kScratchBytes = 20480;  // five strings of at most 4 KiB
constexpr uint64_t kStringBytes = 4096;
constexpr int kCapSysPtrace = 19;

std::string Process(pid_t pid) {
  return "process " + std::to_string(pid) + " (" + ProgramName(pid) + ")";
}

// "alice (uid 1000)".
std::string UserName(uid_t uid) {
  const passwd* user = getpwuid(uid);
  return (user ? std::string(user->pw_name) + " " : "") + "(uid " + std::to_string(uid) + ")";
}

bool HaveCapSysPtrace() {
  std::string caps = StatusField(getpid(), "CapEff");
  return !caps.empty() && ((std::stoull(caps, nullptr, 16) >> kCapSysPtrace) & 1);
}

int YamaScope() {
  std::ifstream scope("/proc/sys/kernel/yama/ptrace_scope");
  int value = 0;
  return scope >> value ? value : 0;
}

// The numbers of a /proc/PID/status field ("Uid", "Gid": real, effective, saved, filesystem).
std::vector<unsigned long> Numbers(const std::string& field) {
  std::istringstream in(field);
  std::vector<unsigned long> numbers;
  for (unsigned long n; in >> n;) numbers.push_back(n);
  return numbers;
}

// Why process `pid` cannot be traced by us, found before trying ("" when nothing is seen).
std::string Refusal(pid_t pid) {
  if (pid <= 0) return std::to_string(pid) + " is not a process id";
  if (pid == getpid()) return "process " + std::to_string(pid) + " is memlens itself";
  std::string tgid = StatusField(pid, "Tgid");
  if (tgid.empty()) return "no process " + std::to_string(pid);
  std::string who = Process(pid);
  if (tgid != std::to_string(pid)) {
    return std::to_string(pid) + " is a thread of process " + tgid + ": give the process's id";
  }
  std::string state = StatusField(pid, "State");
  if (state.rfind("Z", 0) == 0) {
    return StatusField(pid, "Threads") == "1"
               ? who + " has exited (a zombie its parent has not collected)"
               : "the main thread of " + who + " has exited (its other threads run on): "
                 "memlens borrows the main thread, so it cannot attach";
  }
  if (state.rfind("T", 0) == 0) {
    return who + " is stopped (SIGSTOP or Ctrl-Z): continue it first (kill -CONT " +
           std::to_string(pid) + ")";
  }
  std::string tracer = StatusField(pid, "TracerPid");
  if (!tracer.empty() && tracer != "0") {
    return who + " is already traced by process " + tracer + " (" +
           ProgramName(std::stoi(tracer)) + "): a process has one tracer at a time; detach "
           "the debugger first";
  }
  // The kernel lets a process trace another whose real, effective and saved user and group
  // ids are all its own real ones, or with CAP_SYS_PTRACE.
  bool capable = HaveCapSysPtrace();
  std::vector<unsigned long> uids = Numbers(StatusField(pid, "Uid"));
  std::vector<unsigned long> gids = Numbers(StatusField(pid, "Gid"));
  auto all = [](const std::vector<unsigned long>& ids, unsigned long id) {
    return ids.size() >= 3 && ids[0] == id && ids[1] == id && ids[2] == id;
  };
  if (!capable && !all(uids, getuid())) {
    uid_t other = uids.empty() ? 0 : (uids[0] != getuid() ? uids[0] : uids[1]);
    return who + " belongs to " + UserName(other) + " and memlens runs as " +
           UserName(getuid()) + ": only the process's owner, or root, can attach";
  }
  if (!capable && !all(gids, getgid())) {
    return who + " runs with other group ids than memlens (a set-group-ID program?): only "
                 "root can attach to it";
  }
  int yama = YamaScope();
  if (yama == 3) {
    return "this system forbids tracing any process (kernel.yama.ptrace_scope = 3, until reboot)";
  }
  if (yama == 2 && !capable) {
    return "only a process with CAP_SYS_PTRACE (root) may trace another here "
           "(kernel.yama.ptrace_scope = 2): run memlens attach as root";
  }
  struct stat ours, theirs;
  if (stat("/", &ours) == 0 && stat(("/proc/" + std::to_string(pid) + "/root/").c_str(),
                                    &theirs) == 0 &&
      (ours.st_dev != theirs.st_dev || ours.st_ino != theirs.st_ino)) {
    return who + " runs under another root directory (a container or a chroot), where "
                 "memlens's agent is not at the path memlens would give it";
  }
  return ProgramRefusal(pid);
}

// What the kernel's refusal to let us trace means.
std::string SeizeRefusal(pid_t pid, const std::string& reason) {
  if (reason == std::strerror(EPERM) || reason == std::strerror(EACCES)) {
    if (YamaScope() == 1 && !HaveCapSysPtrace()) {
      return "the kernel refused to let memlens trace " + Process(pid) + " (" + reason +
             "): kernel.yama.ptrace_scope = 1 lets a process trace its own descendants (or a "
             "process that allowed it with prctl PR_SET_PTRACER) only: run memlens attach with "
             "CAP_SYS_PTRACE (sudo), or allow it with sysctl kernel.yama.ptrace_scope=0";
    }
    return "the kernel refused to let memlens trace " + Process(pid) + " (" + reason +
           "): the process may have made itself untraceable (prctl PR_SET_DUMPABLE 0, a "
           "set-user-ID program), or this is a container without CAP_SYS_PTRACE (docker run "
           "--cap-add=SYS_PTRACE)";
  }
  if (reason.rfind("process ", 0) == 0 || reason.rfind("the process", 0) == 0) return reason;
  return "cannot trace " + Process(pid) + ": " + reason;
}

// By file name: libc.so.6 (glibc 2.34 on), libc-2.31.so before; the same for the loader.
bool IsLibc(const std::string& name) {
  return name.rfind("libc.so", 0) == 0 || name.rfind("libc-2.", 0) == 0;
}
bool IsLoader(const std::string& name) {
  return name.rfind("ld-linux", 0) == 0 || name.rfind("ld-2.", 0) == 0;
}
bool IsLibdl(const std::string& name) {
  return name.rfind("libdl.so", 0) == 0 || name.rfind("libdl-2.", 0) == 0;
}
bool IsAgent(const std::string& name) { return name.rfind("libmemlens.so", 0) == 0; }

// The functions of the C library the calls need, in the process.
struct LibcFunctions {
  uint64_t errno_location = 0, mmap = 0, munmap = 0, dlopen = 0, dlsym = 0, dlerror = 0;
  TracedThread::Loader loader;  // where a stop is unsafe (a dlopen is under way)
};

// The process's objects; a refusal to read its maps is the kernel's refusal to let us trace it.
bool ReadObjects(pid_t pid, std::vector<LoadedObject>* objects, std::string* error) {
  if (ReadLoadedObjects(pid, objects, error)) return true;
  if (errno == EACCES || errno == EPERM) *error = SeizeRefusal(pid, std::strerror(errno));
  return false;
}

bool FindLibcFunctions(pid_t pid, const std::vector<LoadedObject>& objects, LibcFunctions* f,
                       std::string* error) {
  const LoadedObject* loader = FindObject(objects, IsLoader);
  if (!loader) {
    *error = Process(pid) + " is statically linked (no dynamic loader in it): memlens is loaded "
             "by the program's own dynamic loader, which a static program does not have";
    return false;
  }
  f->loader = TracedThread::Loader{loader->begin, loader->end, 0};
  std::string no_r_debug;  // without it, r_state is not checked (an unusual loader)
  FindSymbol(pid, *loader, "_r_debug", &f->loader.r_debug, &no_r_debug);
  const LoadedObject* libc = FindObject(objects, IsLibc);
  if (!libc) {
    *error = Process(pid) + " does not use the GNU C library (no libc.so.6 is loaded)";
    return false;
  }
  // dlopen, dlsym and dlerror are in libc from glibc 2.34, in libdl.so.2 before (when the
  // program loaded it).
  const LoadedObject* libdl = FindObject(objects, IsLibdl);
  const LoadedObject* dl = libdl ? libdl : libc;
  std::string ignored;
  if (!FindSymbol(pid, *libc, "dlopen", &f->dlopen, &ignored)) {
    if (!libdl || !FindSymbol(pid, *libdl, "dlopen", &f->dlopen, &ignored)) {
      *error = Process(pid) + " has no dlopen (a GNU C library older than 2.34, without libdl)";
      return false;
    }
  } else {
    dl = libc;
  }
  return FindSymbol(pid, *dl, "dlsym", &f->dlsym, error) &&
         FindSymbol(pid, *dl, "dlerror", &f->dlerror, error) &&
         FindSymbol(pid, *libc, "__errno_location", &f->errno_location, error) &&
         FindSymbol(pid, *libc, "mmap", &f->mmap, error) &&
         FindSymbol(pid, *libc, "munmap", &f->munmap, error);
}

// Signals that would kill memlens while it holds the process's thread are held back until the
// thread is let go.
class HeldSignals {
 public:
  HeldSignals() {
    sigset_t held;
    sigemptyset(&held);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP}) sigaddset(&held, s);
    sigprocmask(SIG_BLOCK, &held, &before_);
  }
  ~HeldSignals() { sigprocmask(SIG_SETMASK, &before_, nullptr); }

 private:
  sigset_t before_;
};

// The process's main thread, borrowed: stopped at a safe point, with a scratch page of its
// own for the strings the calls take, its errno kept.
class BorrowedThread {
 public:
  bool Borrow(pid_t pid, const LibcFunctions& libc, std::string* error) {
    libc_ = libc;
    if (!thread_.Seize(pid, pid, kSafePointWaitMs, libc.loader, error)) {
      *error = SeizeRefusal(pid, *error);
      return false;
    }
    uint64_t errno_address = 0;
    if (!thread_.Call(libc.errno_location, {}, &errno_address, error)) return false;
    thread_.KeepErrno(errno_address);
    if (!thread_.Call(libc.mmap, {0, kScratchBytes, PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS, static_cast<uint64_t>(-1), 0},
                      &scratch_, error)) {
      return false;
    }
    if (scratch_ == reinterpret_cast<uint64_t>(MAP_FAILED)) {
      scratch_ = 0;
      *error = "the process could not map a page for memlens's call";
      return false;
    }
    return true;
  }
  ~BorrowedThread() {
    uint64_t ignored;
    std::string why;
    if (scratch_) thread_.Call(libc_.munmap, {scratch_, kScratchBytes}, &ignored, &why);
    thread_.Release();
  }
  // The address of a copy of `text` in the scratch page's slot'th string.
  uint64_t String(int slot, const std::string& text, std::string* error) {
    uint64_t at = scratch_ + slot * kStringBytes;
    if (text.size() >= kStringBytes) {
      *error = "a path longer than " + std::to_string(kStringBytes - 1) + " bytes";
      return 0;
    }
    return thread_.Write(at, text.c_str(), text.size() + 1, error) ? at : 0;
  }
  TracedThread& thread() { return thread_; }

 private:
  TracedThread thread_;
  LibcFunctions libc_;
  uint64_t scratch_ = 0;
};

// dlerror's message, after a dlopen or dlsym in the process returned null.
std::string DlError(BorrowedThread* borrowed, const LibcFunctions& libc) {
  uint64_t message = 0;
  std::string why;
  borrowed->thread().Call(libc.dlerror, {}, &message, &why);
  return message ? borrowed->thread().ReadString(message, 512) : "no reason given";
}

// The agent's function `name` in the process, by dlsym on the agent's `handle` there.
bool AgentFunction(BorrowedThread* borrowed, const LibcFunctions& libc, uint64_t handle,
                   const char* name, uint64_t* address, std::string* error) {
  uint64_t name_at = borrowed->String(4, name, error);
  if (!name_at || !borrowed->thread().Call(libc.dlsym, {handle, name_at}, address, error)) {
    return false;
  }
  if (*address == 0) *error = std::string("the agent has no ") + name + ": " + DlError(borrowed, libc);
  return *address != 0;
}

}  // namespace

bool StartRecording(pid_t pid, const std::string& agent, const std::string& capture,
                    const std::string& options, std::string* error) {
  *error = Refusal(pid);
  if (!error->empty()) return false;
  if (access(agent.c_str(), R_OK) != 0) {
    *error = "cannot find memlens's agent at '" + agent + "': " + std::strerror(errno);
    return false;
  }
  std::vector<LoadedObject> objects;
  LibcFunctions libc;
  if (!ReadObjects(pid, &objects, error) || !FindLibcFunctions(pid, objects, &libc, error)) {
    return false;
  }
  HeldSignals held;
  BorrowedThread borrowed;
  if (!borrowed.Borrow(pid, libc, error)) return false;
  TracedThread& thread = borrowed.thread();
  uint64_t path = borrowed.String(0, agent, error), handle = 0;
  if (!path || !thread.Call(libc.dlopen, {path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE}, &handle,
                            error)) {
    return false;
  }
  if (handle == 0) {
    *error = Process(pid) + " could not load the agent: " + DlError(&borrowed, libc);
    return false;
  }
  uint64_t start = 0, result = 0;
  uint64_t capture_at = borrowed.String(1, capture, error);
  const std::string quiet_options = options.empty() ? "quiet=1" : options + ",quiet=1";
  uint64_t options_at = capture_at ? borrowed.String(2, quiet_options, error) : 0;
  uint64_t reason_at = options_at ? borrowed.String(3, "", error) : 0;
  if (!reason_at || !AgentFunction(&borrowed, libc, handle, "memlens_start_with", &start, error) ||
      !thread.Call(start, {capture_at, options_at, reason_at, kStringBytes}, &result, error)) {
    return false;
  }
  if (static_cast<int32_t>(result) != 0) {
    *error = Process(pid) + " did not start recording: " + thread.ReadString(reason_at, 4096);
    return false;
  }
  *error = thread.ReadString(reason_at, 4096);  // the agent's warning, if it had one
  return true;
}

namespace {

// Borrows the main thread of process `pid`, whose agent is loaded already, and runs
// `use(borrowed, handle)` with the agent's dlopen handle there.
template <typename Use>
bool WithLoadedAgent(pid_t pid, std::string* error, Use use) {
  *error = Refusal(pid);
  if (!error->empty()) return false;
  std::vector<LoadedObject> objects;
  LibcFunctions libc;
  if (!ReadObjects(pid, &objects, error) || !FindLibcFunctions(pid, objects, &libc, error)) {
    return false;
  }
  const LoadedObject* agent = FindObject(objects, IsAgent);
  if (!agent) {
    *error = "memlens is not loaded in " + Process(pid) + ": it was never attached";
    return false;
  }
  HeldSignals held;
  BorrowedThread borrowed;
  if (!borrowed.Borrow(pid, libc, error)) return false;
  // The loaded agent's handle, by the name it was loaded under (even if that file is gone).
  uint64_t path = borrowed.String(0, agent->path, error), handle = 0;
  if (!path || !borrowed.thread().Call(libc.dlopen, {path, RTLD_NOW | RTLD_NOLOAD}, &handle,
                                       error)) {
    return false;
  }
  if (handle == 0) {
    *error = "cannot reach the agent loaded in " + Process(pid) + ": " + DlError(&borrowed, libc);
    return false;
  }
  return use(&borrowed, libc, handle);
}

}  // namespace

bool StopRecording(pid_t pid, std::string* error) {
  return WithLoadedAgent(pid, error, [&](BorrowedThread* borrowed, const LibcFunctions& libc,
                                         uint64_t handle) {
    uint64_t stop = 0, result = 0;
    uint64_t reason_at = borrowed->String(3, "", error);
    if (!reason_at || !AgentFunction(borrowed, libc, handle, "memlens_stop_with", &stop, error) ||
        !borrowed->thread().Call(stop, {reason_at, kStringBytes}, &result, error)) {
      return false;
    }
    if (static_cast<int32_t>(result) != 0) {
      *error = Process(pid) + ": " + borrowed->thread().ReadString(reason_at, 4096);
      return false;
    }
    return true;
  });
}

bool AddMoment(pid_t pid, Moment moment, const std::string& name, std::string* error) {
  return WithLoadedAgent(pid, error, [&](BorrowedThread* borrowed, const LibcFunctions& libc,
                                         uint64_t handle) {
    const bool snapshot = moment == Moment::kSnapshot;
    uint64_t function = 0, recording = 0, ignored = 0;
    uint64_t name_at = borrowed->String(1, name, error);
    if (!name_at ||
        !AgentFunction(borrowed, libc, handle, "memlens_is_recording", &function, error) ||
        !borrowed->thread().Call(function, {}, &recording, error)) {
      return false;
    }
    if (static_cast<int32_t>(recording) == 0) {
      *error = Process(pid) + " is not recording";
      return false;
    }
    return AgentFunction(borrowed, libc, handle,
                         snapshot ? "memlens_take_snapshot" : "memlens_add_marker", &function,
                         error) &&
           borrowed->thread().Call(function, {name_at, 0}, &ignored, error);
  });
}

}  // namespace memlens::attach
