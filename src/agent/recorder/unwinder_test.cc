// The unwinder's reuse of the previous stack: a capture names only the frames that changed, and
// the previous stack's outer frames it keeps are exactly the ones still live, also when a
// caller further out moved on to another call site of the same frame.
#include "agent/recorder/unwinder.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace memlens::agent {
namespace {

// One capture as the recorder makes it: captured, its stack rebuilt from the frames that
// changed plus the kept outer frames of the last committed stack, then committed.
struct Capture {
  uint32_t fresh = 0;
  uint32_t kept = 0;
  std::vector<uint64_t> stack;  // innermost first
};

struct Recorder {
  UnwindState* state = NewUnwindState();
  std::vector<uint64_t> committed;  // innermost first
  std::vector<Capture> captures;

  __attribute__((noinline)) void Take() {
    CapturedStack stack;
    CaptureStack(state, &stack);
    Capture c{stack.fresh_count, stack.kept, {stack.fresh, stack.fresh + stack.fresh_count}};
    c.stack.insert(c.stack.end(), committed.end() - stack.kept, committed.end());
    CommitStack(state, stack);
    committed = c.stack;
    captures.push_back(c);
    asm volatile("" ::: "memory");  // keeps this frame: no tail call into CaptureStack
  }
};

// A fresh state walks the whole stack: the reference for what a reusing capture rebuilds.
__attribute__((noinline)) std::vector<uint64_t> WholeStackHere(Recorder* reference) {
  ResetUnwindState(reference->state);
  reference->committed.clear();
  reference->Take();
  return reference->captures.back().stack;
}

__attribute__((noinline)) void Leaf(Recorder* r, Recorder* reference,
                                    std::vector<uint64_t>* whole) {
  r->Take();
  // The reference's walk passes through WholeStackHere too: compare from Middle outwards.
  std::vector<uint64_t> all = WholeStackHere(reference);
  whole->assign(all.begin() + 3, all.end());
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void Middle(Recorder* r, Recorder* reference,
                                      std::vector<uint64_t>* whole) {
  Leaf(r, reference, whole);
  asm volatile("" ::: "memory");
}

// Calls Middle twice at the same stack depth from two call sites. The second capture's three
// innermost frames (in Take, Leaf and Middle) have the first one's return addresses and stack
// pointers, its fourth (in TwoSites) does not, and everything outside it is the same
// activations again.
__attribute__((noinline)) void TwoSites(Recorder* r, Recorder* reference,
                                        std::vector<uint64_t> whole[2]) {
  Middle(r, reference, &whole[0]);
  asm volatile("nop" ::: "memory");
  Middle(r, reference, &whole[1]);
  asm volatile("nop" ::: "memory");
}

TEST(Unwinder, KeepsTheOuterFramesPastACallerThatMovedOn) {
  InitializeUnwinder();
  Recorder r, reference;
  ASSERT_NE(r.state, nullptr);
  ASSERT_NE(reference.state, nullptr);
  std::vector<uint64_t> whole[2];
  TwoSites(&r, &reference, whole);
  ASSERT_EQ(r.captures.size(), 2u);
  const Capture& first = r.captures[0];
  const Capture& second = r.captures[1];
  // Both rebuilt stacks are the whole stack (compared from the frame in Middle outwards).
  ASSERT_GE(first.stack.size(), 6u);
  EXPECT_EQ(std::vector<uint64_t>(first.stack.begin() + 2, first.stack.end()), whole[0]);
  EXPECT_EQ(std::vector<uint64_t>(second.stack.begin() + 2, second.stack.end()), whole[1]);
  ASSERT_NE(first.stack[3], second.stack[3]) << "the two calls of Middle share a call site";
  // The frames up to TwoSites's are new activations; everything further out is kept.
  EXPECT_EQ(second.fresh, 4u);
  EXPECT_EQ(second.kept, first.stack.size() - 4);
}

// A capture from the same place again names no frame: the whole stack is kept.
TEST(Unwinder, SamePlaceTwiceKeepsTheWholeStack) {
  InitializeUnwinder();
  Recorder r;
  ASSERT_NE(r.state, nullptr);
  for (volatile int i = 0; i < 2; i = i + 1) r.Take();  // volatile: one call site, not unrolled
  ASSERT_EQ(r.captures.size(), 2u);
  EXPECT_EQ(r.captures[1].stack, r.captures[0].stack);
  EXPECT_EQ(r.captures[1].fresh, 0u);
  EXPECT_EQ(r.captures[1].kept, r.captures[0].stack.size());
}

}  // namespace
}  // namespace memlens::agent
