// src/agent/recorder/frame_rules.h
//
// FrameRule: how to step from one x86-64 stack frame to its caller, read from the code's DWARF
// call-frame information (.eh_frame, found through .eh_frame_hdr with glibc's lock-free
// _dl_find_object). This is the part of DWARF CFI that compilers emit at call sites: the
// canonical frame address (CFA) is rsp or rbp plus a constant, the return address is at CFA-8,
// and rbp is either unchanged or saved at CFA plus a constant. Anything else (CFA expressions,
// signal trampolines, code without CFI) is kUnsupported and the unwinder hands the whole stack
// to libunwind instead.
//
// Runs on: application threads, on the allocation hot path (only when a thread's rule cache
// misses). No heap, no locks, no system calls: it only reads the loaded objects' own mapped
// .eh_frame_hdr and .eh_frame.
#pragma once

#include <cstdint>

namespace memlens::agent {

struct FrameRule {
  enum Kind : uint8_t {
    kUnknown = 0,      // not looked up (an empty cache slot)
    kNormal = 1,       // step with the fields below
    kOutermost = 2,    // the return address is undefined: the stack ends here (_start, clone)
    kUnsupported = 3,  // no CFI, or CFI this reader does not follow: use libunwind
  };
  uint8_t kind = kUnknown;
  uint8_t cfa_from_rbp = 0;  // CFA = (cfa_from_rbp ? rbp : rsp) + cfa_offset
  int16_t rbp_offset = 0;    // the caller's rbp is saved at CFA + rbp_offset; 0: rbp unchanged
  int32_t cfa_offset = 0;
};
static_assert(sizeof(FrameRule) == 8);

// The rule in effect at code address pc (for a caller's frame: its return address minus one,
// the call instruction itself).
FrameRule FindFrameRule(uintptr_t pc);

}  // namespace memlens::agent
