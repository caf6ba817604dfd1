// src/cli/cmd_mark.cc
//
// `memlens mark PID NAME [--snapshot]`: a process being recorded (by memlens run, a preloaded
// agent, a span or memlens attach) drops a marker, or asks for a snapshot, named NAME, now, as if
// it had called memlens_add_marker or memlens_take_snapshot itself: CAPTURE@marker:NAME and
// CAPTURE@snapshot:NAME name the moment afterwards. The live view's keys m and n run it. Its main
// thread is borrowed for the call as `memlens attach` borrows it (src/attach/agent_loader.h).
#include <iostream>
#include <memory>

#include "attach/agent_loader.h"
#include "attach/process_objects.h"
#include "cli/analysis_options.h"
#include "cli/commands.h"

namespace memlens::cli {
namespace {

struct MarkOptions {
  pid_t pid = 0;
  std::string name;
  bool snapshot = false;
};

int Mark(const MarkOptions& o) {
  if (o.name.empty()) return Complain("mark: give the moment a name");
  std::string error;
  attach::Moment moment = o.snapshot ? attach::Moment::kSnapshot : attach::Moment::kMarker;
  if (!attach::AddMoment(o.pid, moment, o.name, &error)) return Complain("mark: " + error);
  const char* kind = o.snapshot ? "snapshot" : "marker";
  std::cerr << "memlens: " << kind << " '" << o.name << "' added to process " << o.pid << " ("
            << attach::ProgramName(o.pid) << "): CAPTURE@" << kind << ":" << o.name
            << " names it\n";
  return 0;
}

}  // namespace

CommandRunner AddMarkCommand(CLI::App* cmd) {
  auto o = std::make_shared<MarkOptions>();
  cmd->add_option("PID", o->pid, "the process being recorded")->required();
  cmd->add_option("NAME", o->name, "the marker's (or snapshot's) name")->required();
  cmd->add_flag("--snapshot", o->snapshot,
                "ask for a snapshot (CAPTURE@snapshot:NAME) rather than a marker");
  cmd->footer(
      "The process's main thread is borrowed for a moment (ptrace), as memlens attach does, to\n"
      "call the agent's memlens_add_marker or memlens_take_snapshot; the moment is in the\n"
      "capture once the agent has written it (within 100 ms).");
  return [o] { return Mark(*o); };
}

}  // namespace memlens::cli
