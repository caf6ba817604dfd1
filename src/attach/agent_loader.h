// src/attach/agent_loader.h
//
// Puts the agent into a running process and takes recording out of it again: `memlens attach`
// and `memlens detach`; has a recording process mark a moment (the live view's markers and
// snapshots). Starting is the agent's own span machinery (memlens_start_with, as a
// program that records parts of itself calls it: docs/api.md, "Spans"), called by the
// process's main thread, borrowed with ptrace (traced_thread.h) after the process's own
// dlopen loaded libmemlens.so; stopping is memlens_stop_with, called the same way.
//
// Every refusal is one line, said before the process is touched where it can be: no such
// process, a thread id, a zombie, memlens itself, another tracer, another user, Yama's
// ptrace_scope, another root (a container), a statically linked or non-x86-64 program, no GNU
// C library (docs/attach.md, "Refusals").
//
// Runs on: the memlens command's main thread. Blocks SIGINT, SIGTERM, SIGHUP and SIGQUIT while
// the process's thread is borrowed.
#pragma once

#include <sys/types.h>

#include <string>

namespace memlens::attach {

// Loads `agent` (a path to libmemlens.so) into process `pid` and starts recording into
// `capture` (an absolute path, already expanded), with span `options` ("sample_rate=N,...",
// or ""). False with a one-line reason in *error; the process then runs on as before.
bool StartRecording(pid_t pid, const std::string& agent, const std::string& capture,
                    const std::string& options, std::string* error);
// The span is started quiet (quiet=1: the agent writes nothing on the program's stderr); on
// true, *error holds the warning the agent kept instead ("" for none), for memlens to say.

// Ends the recording that StartRecording (or the program itself) started in process `pid`:
// its capture is complete when this returns true. The agent stays loaded, idle.
bool StopRecording(pid_t pid, std::string* error);

// Has process `pid`, recording (attached, under memlens run, or a span), drop a marker or ask
// for a snapshot named `name` now, through the agent's API (memlens_add_marker,
// memlens_take_snapshot): it lands in the capture as if the program had called it, usable as
// CAPTURE@marker:NAME or CAPTURE@snapshot:NAME (the live view's keys m and n).
enum class Moment { kMarker, kSnapshot };
bool AddMoment(pid_t pid, Moment moment, const std::string& name, std::string* error);

}  // namespace memlens::attach
