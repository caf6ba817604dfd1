// src/agent/tracked_process.h
//
// MEMLENS_TRACKED, the mark a recording agent leaves in its process's environment: which
// process records, as "PID:START". A process that starts with the mark must tell whether it is
// that process's own new image after an exec (it appends to the capture) or a process it started
// (passive, or a capture of its own under --follow-children). The pid alone cannot tell: once
// the recorded process has exited, a descendant that inherited the mark may be given its pid
// again. START is the process's start time, field 22 of /proc/PID/stat (clock ticks after boot):
// exec keeps it, and a later process with the same pid has another. docs/agent.md, "One process
// records".
//
// Compatibility: the bare "PID" that earlier agents wrote is read as they read it (the same pid,
// the same process); so is a mark whose start time this process cannot read (no /proc), and an
// earlier agent reads "PID:START" as PID. Any other text names no process: whoever finds it is
// another process than the recorded one, with no recorded ancestor known.
//
// Runs on: the thread that initializes the agent, possibly at the process's first allocation
// (ParseTracked, IsThisProcess, ThisProcess), and wherever the agent sets the mark (constructor,
// exec). None of these allocates, locks, touches stdio or the locale, or changes errno; the
// /proc file is read with raw system calls, past any interposer.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace memlens::agent {

// The variable's name: set by the agent, removed by memlens run for the program it starts.
inline constexpr char kTrackedVariable[] = "MEMLENS_TRACKED";

struct TrackedProcess {
  uint64_t pid = 0;          // the recorded process's; 0: none named
  uint64_t start_ticks = 0;  // its start time; 0: not known (a bare pid, or /proc unreadable)
};

// Room for "PID:START" and its NUL: two numbers of at most 20 digits and a colon.
inline constexpr size_t kTrackedTextSize = 42;

// Writes "PID:START" into `out` ("PID" when the start is not known), and returns `out`.
const char* FormatTracked(const TrackedProcess& process, char (&out)[kTrackedTextSize]);

// Reads "PID:START" or "PID" (decimal digits, nothing else, each number below 2^64). Returns
// false, with *out all zero, for any other text.
bool ParseTracked(const char* text, TrackedProcess* out);

// The start time in the text of a /proc/PID/stat (`size` bytes, not NUL-terminated): field 22,
// counted after the last ')' (the command name, field 2, may hold spaces and parentheses).
// 0 when the text has no such field.
uint64_t StartTicksFromStat(const char* stat, size_t size);

// The calling process: its pid and its start time (0 when /proc/self/stat cannot be read).
TrackedProcess ThisProcess();

// Whether `named` (a parsed mark) is `self`: the same pid, and the same start time unless
// either is not known.
bool SameProcess(const TrackedProcess& named, const TrackedProcess& self);

// Whether `named` is the calling process (then this image follows an exec of the recorded one).
// Reads /proc/self/stat only when the pids are equal and the mark has a start time.
bool IsThisProcess(const TrackedProcess& named);

}  // namespace memlens::agent
