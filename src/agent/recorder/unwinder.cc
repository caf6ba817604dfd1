// src/agent/recorder/unwinder.cc: see unwinder.h. The agent is compiled with frame pointers
// (CMakeLists.txt): CaptureStack starts the walk from its own frame record.
#include "agent/recorder/unwinder.h"

#define UNW_LOCAL_ONLY  // in-process unwinding only: the fast, local flavour of libunwind
#include <libunwind.h>
#include <unistd.h>

#include <bit>
#include <cstring>
#include <new>

#include "agent/recorder/frame_rules.h"
#include "base/raw_mapping.h"

namespace memlens::agent {

std::atomic<uint32_t> g_code_generation{0};
uintptr_t g_self_begin[2] = {0, 0};
uintptr_t g_self_end[2] = {0, 0};

void AddSelfRange(uintptr_t begin, uintptr_t end) {
  g_self_end[1] = end;
  g_self_begin[1] = begin;
}

namespace {

constexpr uint32_t kRuleSlots = 4096;         // per thread, direct-mapped by return address
constexpr uint32_t kInitialCapacity = 1024;   // frames; doubled on demand
constexpr uint64_t kMaxFrameBytes = uint64_t{1} << 30;  // a bigger step is a broken rule

// The process-wide second level behind each thread's rule cache. A rule is a fact about the
// code, the same for every thread, and a Python program's stacks pass through more return
// addresses than a thread's 4096 slots hold (black: 1% of lookups missed them, each a search
// of .eh_frame_hdr and a run of CFI costing hundreds of nanoseconds). 16,384 slots (512 KiB),
// mapped once: a hashed table has all its pages touched soon, and they count against the
// program's memory; py_objects and black meet about 1,000 return addresses, which 65,536 slots
// looked up 1,002 and 1,004 times from the CFI, 16,384 slots 5,325 and 1,541 times (a few
// ms). Each slot is a seqlock: `seq` is odd while one thread writes the rest, and only grows,
// so a reader that sees it unchanged around its reads read one whole write. A
// thread that finds a slot being written neither uses nor fills it: nobody waits.
struct SharedRuleSlot {
  std::atomic<uint64_t> seq;
  std::atomic<uint64_t> ip;
  std::atomic<uint64_t> generation;  // g_code_generation when the rule was read
  std::atomic<uint64_t> rule;        // a FrameRule's 8 bytes
};
constexpr uint32_t kSharedRuleBits = 14;
SharedRuleSlot* g_shared_rules = nullptr;  // nullptr: not mapped, every miss searches the CFI

FrameRule SharedRule(uint64_t ip, uint32_t generation) {
  if (!g_shared_rules) return FindFrameRule(ip - 1);
  SharedRuleSlot& slot = g_shared_rules[(ip * 0xff51afd7ed558ccdULL) >> (64 - kSharedRuleBits)];
  uint64_t seq = slot.seq.load(std::memory_order_acquire);
  if (!(seq & 1)) {
    uint64_t slot_ip = slot.ip.load(std::memory_order_relaxed);
    uint64_t read_at = slot.generation.load(std::memory_order_relaxed);
    uint64_t bits = slot.rule.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (slot.seq.load(std::memory_order_relaxed) == seq && slot_ip == ip && read_at == generation) {
      return std::bit_cast<FrameRule>(bits);
    }
  }
  FrameRule rule = FindFrameRule(ip - 1);  // the call instruction, not the one after it
  if (!(seq & 1) && slot.seq.compare_exchange_strong(seq, seq + 1, std::memory_order_acquire)) {
    std::atomic_thread_fence(std::memory_order_release);  // the odd seq before the new fields
    slot.ip.store(ip, std::memory_order_relaxed);
    slot.generation.store(generation, std::memory_order_relaxed);
    slot.rule.store(std::bit_cast<uint64_t>(rule), std::memory_order_relaxed);
    slot.seq.store(seq + 2, std::memory_order_release);
  }
  return rule;
}

}  // namespace

// A return address's slot in a thread's rule cache.
inline uint32_t RuleSlot(uint64_t ip) { return (ip * 0x9e3779b97f4a7c15ULL) >> (64 - 12); }

struct UnwindState {
  struct Slot {
    uint64_t ip;
    FrameRule rule;
  };
  uint32_t generation = 0;
  uint32_t capacity = 0;  // frames in each of the four arrays
  uint32_t prev_count = 0;
  bool prev_matchable = false;
  uint64_t* arrays = nullptr;  // one mapping: prev_ip, prev_sp, fresh_ip, fresh_sp
  uint64_t* prev_ip = nullptr;  // the last committed stack, outermost first
  uint64_t* prev_sp = nullptr;  // the stack pointer in that frame (its callee's CFA)
  uint64_t* fresh_ip = nullptr;  // the capture in progress, innermost first
  uint64_t* fresh_sp = nullptr;
  Slot rules[kRuleSlots];

  bool SetArrays(uint32_t new_capacity) {
    auto* mem = static_cast<uint64_t*>(MapZeroed(size_t{4} * new_capacity * sizeof(uint64_t)));
    if (!mem) return false;
    uint64_t* ip = mem;
    uint64_t* sp = mem + new_capacity;
    uint64_t* fip = mem + 2 * size_t{new_capacity};
    uint64_t* fsp = mem + 3 * size_t{new_capacity};
    if (arrays) {  // a deeper stack than ever on this thread: keep what we have, free the old
      std::memcpy(ip, prev_ip, prev_count * sizeof(uint64_t));
      std::memcpy(sp, prev_sp, prev_count * sizeof(uint64_t));
      std::memcpy(fip, fresh_ip, capacity * sizeof(uint64_t));
      std::memcpy(fsp, fresh_sp, capacity * sizeof(uint64_t));
      Unmap(arrays, size_t{4} * capacity * sizeof(uint64_t));
    }
    arrays = mem;
    prev_ip = ip;
    prev_sp = sp;
    fresh_ip = fip;
    fresh_sp = fsp;
    capacity = new_capacity;
    return true;
  }

  bool Grow() { return capacity < kMaxStackFrames && SetArrays(capacity * 2); }

  FrameRule RuleFor(uint64_t ip) {
    Slot& slot = rules[RuleSlot(ip)];
    if (slot.ip != ip || slot.rule.kind == FrameRule::kUnknown) {
      slot.rule = SharedRule(ip, generation);
      slot.ip = ip;
    }
    return slot.rule;
  }
};
static_assert(kRuleSlots == 1u << 12);

namespace {

// The slow, general path: libunwind for the whole stack. Not reusable next time, since it
// yields no stack pointers.
void CaptureWithLibunwind(UnwindState* s, CapturedStack* out) {
  for (;;) {
    int n = unw_backtrace(reinterpret_cast<void**>(s->fresh_ip), static_cast<int>(s->capacity));
    if (static_cast<uint32_t>(n) == s->capacity && s->Grow()) continue;
    int skip = 0;
    while (skip < n && IsOwnCode(s->fresh_ip[skip])) ++skip;
    out->fresh = s->fresh_ip + skip;
    out->fresh_count = static_cast<uint32_t>(n - skip);
    out->kept = 0;
    out->truncated = static_cast<uint32_t>(n) == s->capacity;
    out->matchable = false;
    return;
  }
}

// The innermost of the previous stack's frames [0, end) whose return-address slot no longer
// holds the address seen there, or -1 when every one does (the activations from there outwards
// are the same). Innermost first: a caller that moved on to another call site, the usual reason,
// sits right outside the frames that matched.
int64_t ReplacedOuterFrame(const UnwindState* s, int64_t end) {
  for (int64_t i = end - 1; i >= 0; --i) {
    if (*reinterpret_cast<const uint64_t*>(s->prev_sp[i] - 8) != s->prev_ip[i]) return i;
  }
  return -1;
}

// The walk's state, in registers while FastSteps runs.
struct Walk {
  uint64_t ip;
  uint64_t sp;
  uint64_t rbp;
  uint64_t* fresh;      // the next fresh frame's return address; its stack pointer is
  uint64_t* fresh_end;  // `stride` slots further (fresh_ip and fresh_sp share one mapping)
  size_t stride;
  uint64_t prev_frame_sp;  // frames from here outwards may match the previous stack
  uint64_t rule_ip;        // the return address whose rule is unpacked below (a kNormal one)
  int64_t cfa_offset;
  int64_t rbp_offset;
  bool cfa_from_rbp;
};

enum class FastStop { kFrame, kEnd, kBadStep };

// Steps the frames that need nothing but a rule the thread's cache holds: deeper than any
// frame of the previous stack, with room in the fresh arrays. Returns kFrame at the first frame
// that needs more (the general loop in CaptureStack takes it), kEnd past the outermost frame,
// kBadStep where a rule gives no sane caller frame. No calls, so the walk stays in registers;
// a recursion repeats one return address and steps without even a cache lookup.
__attribute__((always_inline)) inline FastStop FastSteps(Walk& w, const UnwindState::Slot* rules) {
  uint64_t ip = w.ip, sp = w.sp, rbp = w.rbp;
  uint64_t* fresh = w.fresh;
  uint64_t* const fresh_end = w.fresh_end;
  const size_t stride = w.stride;
  const uint64_t prev_frame_sp = w.prev_frame_sp;
  uint64_t rule_ip = w.rule_ip;
  int64_t cfa_offset = w.cfa_offset, rbp_offset = w.rbp_offset;
  bool cfa_from_rbp = w.cfa_from_rbp;
  FastStop stop = FastStop::kFrame;
  while (sp < prev_frame_sp && fresh != fresh_end) {
    if (ip != rule_ip) {
      const UnwindState::Slot& slot = rules[RuleSlot(ip)];
      if (slot.ip != ip || slot.rule.kind != FrameRule::kNormal) break;
      rule_ip = ip;
      cfa_from_rbp = slot.rule.cfa_from_rbp;
      cfa_offset = slot.rule.cfa_offset;
      rbp_offset = slot.rule.rbp_offset;
    }
    fresh[0] = ip;
    fresh[stride] = sp;
    ++fresh;
    uint64_t cfa = (cfa_from_rbp ? rbp : sp) + cfa_offset;
    if (cfa - sp - 1 >= kMaxFrameBytes) {  // not in (sp, sp + kMaxFrameBytes]
      stop = FastStop::kBadStep;
      break;
    }
    ip = *reinterpret_cast<const uint64_t*>(cfa - 8);
    if (rbp_offset != 0) rbp = *reinterpret_cast<const uint64_t*>(cfa + rbp_offset);
    sp = cfa;
    if (ip == 0) {
      stop = FastStop::kEnd;
      break;
    }
  }
  w.ip = ip;
  w.sp = sp;
  w.rbp = rbp;
  w.fresh = fresh;
  w.rule_ip = rule_ip;
  w.cfa_offset = cfa_offset;
  w.rbp_offset = rbp_offset;
  w.cfa_from_rbp = cfa_from_rbp;
  return stop;
}

}  // namespace

void InitializeUnwinder() {
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
  g_shared_rules = static_cast<SharedRuleSlot*>(
      MapZeroed(sizeof(SharedRuleSlot) << kSharedRuleBits));  // zero: no slot holds a rule yet
}

UnwindState* NewUnwindState() {
  void* mem = MapZeroed(sizeof(UnwindState));
  if (!mem) return nullptr;
  auto* state = new (mem) UnwindState();
  if (!state->SetArrays(kInitialCapacity)) {
    Unmap(mem, sizeof(UnwindState));
    return nullptr;
  }
  return state;
}

void ResetUnwindState(UnwindState* state) {
  state->prev_count = 0;
  state->prev_matchable = false;
}

__attribute__((noinline)) void CaptureStack(UnwindState* s, CapturedStack* out) {
  uint32_t generation = g_code_generation.load(std::memory_order_acquire);
  if (generation != s->generation) {  // code was unmapped: its rules and addresses are stale
    for (UnwindState::Slot& slot : s->rules) slot = {};
    s->prev_matchable = false;
    s->generation = generation;
  }
  // Our own frame record (the agent keeps frame pointers) gives the caller's registers, and so
  // do the records of the agent's frames further out: they are stepped over by their frame
  // records, without a rule lookup each. A record that does not lie above the stack pointer
  // is not one (code of ours built otherwise): the rules take over from there.
  const auto* frame = static_cast<const uint64_t*>(__builtin_frame_address(0));
  uint64_t ip = frame[1];
  uint64_t sp = reinterpret_cast<uint64_t>(frame + 2);
  uint64_t rbp = frame[0];
  while (IsOwnCode(ip) && rbp >= sp && rbp - sp < kMaxFrameBytes && !(rbp & 7)) {
    const auto* record = reinterpret_cast<const uint64_t*>(rbp);
    ip = record[1];
    sp = rbp + 16;
    rbp = record[0];
  }

  out->kept = 0;
  out->truncated = false;
  Walk w{ip, sp, rbp, nullptr, nullptr, 0, UINT64_MAX, 0, 0, 0, false};
  // Looks up the rule for w.ip into w. kOutermost ends the walk at this frame; a frame the
  // rules cannot step hands the whole stack to libunwind.
  enum class Lookup { kStep, kEnd, kLibunwind };
  auto lookup = [&]() {
    FrameRule rule = s->RuleFor(w.ip);
    if (rule.kind != FrameRule::kNormal) {
      return rule.kind == FrameRule::kOutermost ? Lookup::kEnd : Lookup::kLibunwind;
    }
    w.rule_ip = w.ip;
    w.cfa_from_rbp = rule.cfa_from_rbp;
    w.cfa_offset = rule.cfa_offset;
    w.rbp_offset = rule.rbp_offset;
    return Lookup::kStep;
  };
  // Steps to the caller's frame; false where the rule gives no sane frame above this one.
  // FastSteps' step, on w's fields: one helper shared by both cost deep_stacks 22
  // instructions per event in FastSteps' code (bench/instruction_cost.py).
  auto step = [&]() {
    uint64_t cfa = (w.cfa_from_rbp ? w.rbp : w.sp) + w.cfa_offset;
    if (cfa - w.sp - 1 >= kMaxFrameBytes) return false;  // not in (sp, sp + kMaxFrameBytes]
    w.ip = *reinterpret_cast<const uint64_t*>(cfa - 8);
    if (w.rbp_offset != 0) w.rbp = *reinterpret_cast<const uint64_t*>(cfa + w.rbp_offset);
    w.sp = cfa;
    return true;
  };

  // Leading frames of our own code that have no frame record: stepped, not recorded.
  while (IsOwnCode(w.ip)) {
    Lookup next = w.ip == w.rule_ip ? Lookup::kStep : lookup();
    if (next == Lookup::kLibunwind || (next == Lookup::kStep && !step())) {
      CaptureWithLibunwind(s, out);
      return;
    }
    if (next == Lookup::kEnd || w.ip == 0) {
      out->fresh = s->fresh_ip;
      out->fresh_count = 0;
      out->matchable = true;
      return;
    }
  }

  w.fresh = s->fresh_ip;
  w.fresh_end = s->fresh_ip + s->capacity;
  w.stride = s->fresh_sp - s->fresh_ip;
  // The frame of the previous stack at or just beyond sp, and a pending match: fresh frame
  // match_at equals previous frame match_prev; the next fresh frame matching the next previous
  // frame confirms (needed only where the matched frame's CFA is rbp-based, below).
  int64_t prev = s->prev_matchable ? static_cast<int64_t>(s->prev_count) - 1 : -1;
  // Previous frames at or inside this index cannot match: a frame outside them was replaced.
  int64_t replaced = prev + 1;
  int64_t match_prev = -2;
  uint32_t match_at = 0;
  // The stack pointer of previous frame `prev` (above any stack when there is none): frames
  // deeper than it, most of a walk, cannot match.
  if (prev >= 0) w.prev_frame_sp = s->prev_sp[prev];
  for (;;) {
    FastStop fast = FastSteps(w, s->rules);
    if (fast == FastStop::kEnd) break;
    if (fast == FastStop::kBadStep) {
      CaptureWithLibunwind(s, out);
      return;
    }
    // One frame that FastSteps left: it may match the previous stack, the arrays may be full,
    // or its rule is not in the thread's cache.
    if (w.sp >= w.prev_frame_sp) {
      const uint64_t sp = w.sp, ip = w.ip;
      const uint32_t n = static_cast<uint32_t>(w.fresh - s->fresh_ip);
      while (prev >= 0 && s->prev_sp[prev] < sp) --prev;
      if (prev >= 0 && prev < replaced && s->prev_sp[prev] == sp && s->prev_ip[prev] == ip) {
        if (match_prev == prev + 1 && match_at + 1 == n) {
          replaced = ReplacedOuterFrame(s, prev);
          if (replaced < 0) {
            w.fresh = s->fresh_ip + match_at;
            out->kept = static_cast<uint32_t>(match_prev) + 1;
            break;
          }
          // A caller further out moved on (the same callee called again from another call
          // site of the same frame): look for a match outside it. Each check starts inside the
          // last replaced frame, so all of them together load each slot at most once.
          match_prev = -2;
        } else {
          FrameRule rule = ip == w.rule_ip ? FrameRule{FrameRule::kNormal, w.cfa_from_rbp, 0, 0}
                                           : s->RuleFor(ip);
          if (rule.kind == FrameRule::kNormal && !rule.cfa_from_rbp) {
            // This frame's rule finds the caller's frame from the stack pointer alone, so the
            // next frame's stack pointer is the previous stack's too, and its return address
            // is the first slot ReplacedOuterFrame reads: that check stands for the second
            // match, and the walk stops one frame sooner.
            replaced = ReplacedOuterFrame(s, prev);
            if (replaced < 0) {
              out->kept = static_cast<uint32_t>(prev) + 1;
              break;
            }
          } else {
            match_prev = prev;
            match_at = n;
          }
        }
      }
      w.prev_frame_sp = prev >= 0 ? s->prev_sp[prev] : UINT64_MAX;
    }
    if (w.fresh == w.fresh_end) {
      const size_t n = w.fresh - s->fresh_ip;
      if (!s->Grow()) {
        out->truncated = true;
        break;
      }
      w.fresh = s->fresh_ip + n;
      w.fresh_end = s->fresh_ip + s->capacity;
      w.stride = s->fresh_sp - s->fresh_ip;
    }
    w.fresh[0] = w.ip;
    w.fresh[w.stride] = w.sp;
    ++w.fresh;
    if (w.ip != w.rule_ip) {
      Lookup next = lookup();
      if (next == Lookup::kEnd) break;
      if (next == Lookup::kLibunwind) {
        CaptureWithLibunwind(s, out);
        return;
      }
    }
    if (!step()) {
      CaptureWithLibunwind(s, out);
      return;
    }
    if (w.ip == 0) break;
  }
  out->fresh = s->fresh_ip;
  out->fresh_count = static_cast<uint32_t>(w.fresh - s->fresh_ip);
  out->matchable = !out->truncated;
}

__attribute__((noinline)) void CaptureCaller(UnwindState* s, CapturedStack* out) {
  uint32_t generation = g_code_generation.load(std::memory_order_acquire);
  if (generation != s->generation) {  // the cached rules may be of code that was unmapped
    for (UnwindState::Slot& slot : s->rules) slot = {};
    s->prev_matchable = false;
    s->generation = generation;
  }
  // As CaptureStack starts: our frame records, then our frames without one by their rules.
  const auto* frame = static_cast<const uint64_t*>(__builtin_frame_address(0));
  Walk w{frame[1], reinterpret_cast<uint64_t>(frame + 2), frame[0], nullptr, nullptr, 0,
         UINT64_MAX, 0, 0, 0, false};
  while (IsOwnCode(w.ip) && w.rbp >= w.sp && w.rbp - w.sp < kMaxFrameBytes && !(w.rbp & 7)) {
    const auto* record = reinterpret_cast<const uint64_t*>(w.rbp);
    w.ip = record[1];
    w.sp = w.rbp + 16;
    w.rbp = record[0];
  }
  out->kept = 0;
  out->truncated = false;
  out->matchable = false;
  out->fresh = s->fresh_ip;
  out->fresh_count = 0;
  for (int steps = 0; IsOwnCode(w.ip); ++steps) {
    FrameRule rule = s->RuleFor(w.ip);
    uint64_t cfa = (rule.cfa_from_rbp ? w.rbp : w.sp) + rule.cfa_offset;
    if (steps == 64 || rule.kind != FrameRule::kNormal || cfa - w.sp - 1 >= kMaxFrameBytes) {
      return;
    }
    if (rule.rbp_offset != 0) w.rbp = *reinterpret_cast<const uint64_t*>(cfa + rule.rbp_offset);
    w.ip = *reinterpret_cast<const uint64_t*>(cfa - 8);
    w.sp = cfa;
  }
  if (w.ip == 0) return;
  s->fresh_ip[0] = w.ip;
  out->fresh_count = 1;
}

void CommitStack(UnwindState* s, const CapturedStack& stack) {
  uint32_t kept = stack.kept;
  const uint32_t count = stack.fresh_count;
  const uint64_t* fresh = stack.fresh;
  while (kept + count > s->capacity) {  // a walk that stopped early may still be the deepest
    size_t offset = fresh - s->fresh_ip;
    if (!s->Grow()) {  // kept = 0 next time tells the writer to forget its copy too
      s->prev_count = 0;
      s->prev_matchable = false;
      return;
    }
    fresh = s->fresh_ip + offset;
  }
  const uint64_t* sps = s->fresh_sp + (fresh - s->fresh_ip);
  for (uint32_t i = 0; i < count; ++i) {
    s->prev_ip[kept + i] = fresh[count - 1 - i];
    s->prev_sp[kept + i] = sps[count - 1 - i];
  }
  s->prev_count = kept + count;
  s->prev_matchable = stack.matchable;
}

}  // namespace memlens::agent
