// src/cli/hosted_writer.h
//
// The writer hosted by `memlens run` (docs/agent.md, "The hosted writer"): the agent in the
// program appends its events to rings in the exchange (agent/writer/exchange.h), and a thread
// of memlens run drains them, interns stacks, encodes, compresses and writes the capture with
// the writer's own loop (agent/writer/writer_core.h). The program keeps no writer thread, no
// stack trie and no chunk buffers, and what reached its rings outlives it: after the program
// has exited, or was killed, the last round drains everything committed and the END record
// says what waitpid said.
//
// Runs on: the thread that made it (Create, Finish) and a thread of its own.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

namespace memlens::cli {

class HostedWriter {
 public:
  // Makes the exchange (a memory file), or returns null when it cannot: the agent then writes
  // the capture itself, as it does without memlens run.
  static std::unique_ptr<HostedWriter> Create();
  ~HostedWriter();

  // In the child, before exec: the exchange's descriptor, inherited, named in MEMLENS_EXCHANGE.
  void PassToChild();
  // In memlens run, once the child is started: the writer's thread starts following it, and
  // writes `capture` once the agent has started.
  void Start(pid_t child, const std::string& capture);
  // The program is gone (wait_status from waitpid): drains what it left and ends the capture.
  void Finish(int wait_status);

  struct State;  // hosted_writer.cc

 private:
  HostedWriter(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace memlens::cli
