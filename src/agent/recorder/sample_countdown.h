// src/agent/recorder/sample_countdown.h
//
// The one step of sampling's short path that every allocation takes (docs/sampling.md): the
// thread's countdown to its next sample point. Shared by the agent's interposers (sampler.h)
// and the Python hooks library, which reaches the agent's thread-local countdown through the
// bridge (python_bridge.h), so both count one stream of bytes the same way. No dependencies:
// the hooks library includes it.
#pragma once

#include <cstdint>

namespace memlens::agent {

// Counts an allocation of `size` bytes down on the thread's countdown: true when no sample
// point falls in it (the count is then stored); false when one does, leaving the count for the
// full path to redraw. The countdown is the number of bytes up to and including the next
// sampled byte, clamped to the size from which blocks are recorded whole (0: not drawn yet), so
// one unsigned compare decides, whatever the size: a block that large always fails it. The
// bytes count before the allocation is made, so a failed allocation uses them up too: that
// biases nothing, sample points being memoryless.
inline bool CountsDownUnsampled(uint64_t* countdown, uint64_t size) {
  if (__builtin_expect(size >= *countdown, 0)) return false;
  *countdown -= size;
  return true;
}

}  // namespace memlens::agent
