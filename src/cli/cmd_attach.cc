// src/cli/cmd_attach.cc
//
// `memlens attach PID [-o FILE] [--duration S] [--sample]`: loads the agent into a running
// process and records it from now on, as a span (src/attach/agent_loader.h; docs/attach.md).
// Without --duration it returns once recording has started; `memlens detach PID` (or the
// process's end) ends the capture. With --duration it waits, then detaches; Ctrl-C detaches
// at once.
#include <limits.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <iostream>
#include <memory>

#include "attach/agent_loader.h"
#include "attach/process_objects.h"
#include "cli/agent_file.h"
#include "cli/analysis_options.h"
#include "cli/commands.h"
#include "format/capture_path.h"

namespace memlens::cli {
namespace {

struct AttachOptions {
  pid_t pid = 0;
  std::string output;
  double duration = 0;  // seconds; 0: no limit, return at once
  bool sample = false;
};

// Where the process writes: the pattern expanded for it, made absolute against our working
// directory (the process has its own).
std::string CapturePath(const AttachOptions& o) {
  char exe[PATH_MAX];
  ssize_t n = readlink(("/proc/" + std::to_string(o.pid) + "/exe").c_str(), exe, sizeof exe - 1);
  std::string program = n > 0 ? std::string(exe, static_cast<size_t>(n)) : "";
  if (program.empty()) program = attach::ProgramName(o.pid);
  std::string path = format::ExpandCapturePattern(
      o.output.empty() ? format::kDefaultCapturePattern : o.output, o.pid, program);
  char cwd[PATH_MAX];
  if (path[0] != '/' && getcwd(cwd, sizeof cwd)) path = std::string(cwd) + "/" + path;
  return path;
}

// The process is there and not a zombie.
bool Alive(pid_t pid) {
  std::string state = attach::StatusField(pid, "State");
  return !state.empty() && state[0] != 'Z' && state[0] != 'X';
}

// Waits `seconds`, or until Ctrl-C, SIGTERM or the process's end. True when the process is
// still there.
bool WaitWhileRecording(pid_t pid, double seconds) {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  sigprocmask(SIG_BLOCK, &stop, nullptr);
  timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    if (!Alive(pid)) return false;
    timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double elapsed = static_cast<double>(now.tv_sec - start.tv_sec) +
                     static_cast<double>(now.tv_nsec - start.tv_nsec) / 1e9;
    if (elapsed >= seconds) return true;
    timespec slice{0, 100 * 1000 * 1000};
    if (sigtimedwait(&stop, nullptr, &slice) > 0) {
      std::cerr << "memlens: interrupted: detaching now\n";
      return Alive(pid);
    }
  }
}

int Attach(const AttachOptions& o) {
  std::string capture = CapturePath(o), error;
  std::string options = o.sample ? "sample_rate=" + std::to_string(kDefaultSampleRate) : "";
  if (!attach::StartRecording(o.pid, FindAgent(), capture, options, &error)) {
    return Complain("attach: " + error);
  }
  std::string who = "process " + std::to_string(o.pid) + " (" + attach::ProgramName(o.pid) + ")";
  std::cerr << "memlens: recording " << who << " into " << capture << "\n";
  // The agent says nothing on the program's stderr (its own): its warning comes here.
  if (!error.empty()) std::cerr << "memlens: " << who << ": " << error << "\n";
  if (o.duration <= 0) {
    std::cerr << "memlens: `memlens detach " << o.pid << "` stops it; its capture is complete "
              << "then (or when the process ends)\n";
    return 0;
  }
  if (!WaitWhileRecording(o.pid, o.duration)) {
    std::cerr << "memlens: " << who << " ended; its capture ended with it: " << capture << "\n";
    return 0;
  }
  if (!attach::StopRecording(o.pid, &error)) {
    if (!Alive(o.pid)) {
      std::cerr << "memlens: " << who << " ended; its capture ended with it: " << capture << "\n";
      return 0;
    }
    return Complain("attach: cannot stop recording: " + error);
  }
  std::cerr << "memlens: detached; the capture is complete: " << capture << "\n"
            << "  memlens summary " << capture << "\n";
  return 0;
}

}  // namespace

CommandRunner AddAttachCommand(CLI::App* cmd) {
  auto o = std::make_shared<AttachOptions>();
  cmd->add_option("PID", o->pid, "the process to record (its process id)")->required();
  cmd->add_option("-o,--output", o->output,
                  "capture file (default: memlens-PROGRAM-PID.mlens in the current directory;\n"
                  "%p and %e are the pid and the program's name). The process writes it: it\n"
                  "must be able to")
      ->type_name("FILE");
  cmd->add_option("--duration", o->duration,
                  "record for SECONDS, then detach and leave the process running (Ctrl-C\n"
                  "detaches sooner). Without it memlens returns once recording started, and\n"
                  "`memlens detach PID` ends it")
      ->type_name("SECONDS")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--sample", o->sample,
                "sample heap allocations, one byte in 512 KiB on average (docs/sampling.md)");
  cmd->footer(
      "The process's main thread is borrowed for a moment (ptrace): it loads libmemlens.so with\n"
      "its own dlopen and starts recording, native allocations and, in a supported CPython,\n"
      "Python's with their lines. Blocks allocated before the attach are not in the capture;\n"
      "their frees are ignored (docs/attach.md says what \"in use\" means then). Tracing must be\n"
      "allowed: the same user or root, and Yama's ptrace_scope.");
  return [o] { return Attach(*o); };
}

}  // namespace memlens::cli
