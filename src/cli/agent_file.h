// src/cli/agent_file.h: where the agent library is, for the commands that load it into a
// process (`run` preloads it, `attach` has the process dlopen it), and the sampling rate they
// ask for with --sample.
#pragma once

#include <cstdint>
#include <string>

namespace memlens::cli {

// The default sampling rate: one byte in 512 KiB, as Go's heap profiler and jemalloc, so that
// sampling costs a few percent on allocation-bound programs (docs/sampling.md, "Why 512 KiB by
// default"). Its error is stated per figure, not bounded globally: blocks of the rate or more
// are recorded whole (exact), and every figure of smaller blocks carries its standard error.
inline constexpr uint64_t kDefaultSampleRate = 512 * 1024;

// The agent lives at ../lib/libmemlens.so from the memlens executable (build tree and install
// prefix alike); MEMLENS_AGENT overrides. "" when /proc/self/exe cannot be read.
std::string FindAgent();

}  // namespace memlens::cli
