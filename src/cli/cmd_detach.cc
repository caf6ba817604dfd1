// src/cli/cmd_detach.cc
//
// `memlens detach PID`: ends the recording `memlens attach` started in a running process (its
// capture is then complete) and leaves the process running, the agent loaded but idle
// (src/attach/agent_loader.h; docs/attach.md).
#include <iostream>
#include <memory>

#include "attach/agent_loader.h"
#include "attach/process_objects.h"
#include "cli/analysis_options.h"
#include "cli/commands.h"

namespace memlens::cli {
namespace {

int Detach(pid_t pid) {
  std::string error;
  if (!attach::StopRecording(pid, &error)) return Complain("detach: " + error);
  std::cerr << "memlens: stopped recording process " << pid << " (" << attach::ProgramName(pid)
            << "); its capture is complete\n";
  return 0;
}

}  // namespace

CommandRunner AddDetachCommand(CLI::App* cmd) {
  auto pid = std::make_shared<pid_t>(0);
  cmd->add_option("PID", *pid, "the process `memlens attach` is recording")->required();
  cmd->footer(
      "The process's main thread is borrowed for a moment (ptrace) to end the recording: the\n"
      "capture gets its last events and its END record, and the allocator goes back to the\n"
      "program. The agent stays loaded, idle; `memlens attach` can record it again.");
  return [pid] { return Detach(*pid); };
}

}  // namespace memlens::cli
