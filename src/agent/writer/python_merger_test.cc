// PythonMerger: merging only what changed gives the same stacks, and the same shared prefix, as
// merging everything and comparing it with the previous merged stack.
#include "agent/writer/python_merger.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "agent/python_bridge.h"

namespace memlens::agent {
namespace {

constexpr uint64_t kEntry = MEMLENS_PYTHON_ENTRY_BIT;
constexpr EvalLoopRange kEval{0x5000, 0x6000};  // native ips in it are eval-loop frames
constexpr uint64_t kEvalIp = 0x5010;

std::vector<uint64_t> Reference(const std::vector<uint64_t>& native,
                                const std::vector<uint64_t>& python) {
  std::vector<uint64_t> out;
  MergeInnermostFirst(native.data(), native.size(), python.data(), python.size(), kEval, &out);
  std::reverse(out.begin(), out.end());  // outermost first, like merged()
  return out;
}

size_t CommonPrefix(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

size_t Merge(PythonMerger* merger, const std::vector<uint64_t>& native, size_t kept,
             const std::vector<uint64_t>& python) {
  return merger->Merge(native.data(), native.size(), kept, python.data(), python.size(), kEval);
}

std::vector<uint64_t> Merged(const PythonMerger& merger) {
  return {merger.merged(), merger.merged() + merger.merged_size()};
}

TEST(PythonMerger, ReplacesEachEvalLoopFrameByItsRun) {
  // main -> eval (f, g) -> helper -> eval (h) -> malloc; Python frames innermost first.
  std::vector<uint64_t> native = {0x100, kEvalIp, 0x200, kEvalIp + 8, 0x300};
  std::vector<uint64_t> python = {0xA3 | kEntry, 0xA2, 0xA1 | kEntry};
  PythonMerger merger;
  EXPECT_EQ(Merge(&merger, native, 0, python), 0u);
  EXPECT_EQ(Merged(merger), (std::vector<uint64_t>{0x100, 0xA1, 0xA2, 0x200, 0xA3, 0x300}));
}

TEST(PythonMerger, AnOuterLineThatChangedUnderKeptNativeFramesIsMergedAgain) {
  std::vector<uint64_t> native = {0x100, kEvalIp, 0x200, kEvalIp + 8, 0x300};
  PythonMerger merger;
  Merge(&merger, native, 0, {0xA3 | kEntry, 0xA2, 0xA1 | kEntry});
  // Same native stack (all kept), but the outer Python frame moved to another line.
  EXPECT_EQ(Merge(&merger, native, native.size(), {0xA3 | kEntry, 0xA2, 0xB1 | kEntry}), 1u);
  EXPECT_EQ(Merged(merger), (std::vector<uint64_t>{0x100, 0xB1, 0xA2, 0x200, 0xA3, 0x300}));
  // Only the innermost run changed: everything outside the inner eval-loop frame is shared.
  EXPECT_EQ(Merge(&merger, native, native.size(), {0xC3 | kEntry, 0xA2, 0xB1 | kEntry}), 4u);
  EXPECT_EQ(Merged(merger), (std::vector<uint64_t>{0x100, 0xB1, 0xA2, 0x200, 0xC3, 0x300}));
}

TEST(PythonMerger, PythonFramesWithoutNativeOnesAreTheStack) {
  // --python-stacks: no native frame; the merge is the Python frames outermost first, entry
  // bits cleared, sharing with the previous stack what it has in common (after a full stack).
  PythonMerger merger;
  Merge(&merger, {0x100, kEvalIp, 0x300}, 0, {0xA2, 0xA1 | kEntry});
  EXPECT_EQ(Merge(&merger, {}, 0, {0xA2, 0xA1 | kEntry}), 0u);
  EXPECT_EQ(Merged(merger), (std::vector<uint64_t>{0xA1, 0xA2}));
  EXPECT_EQ(Merge(&merger, {}, 0, {0xB3, 0xB2 | kEntry, 0xA1 | kEntry}), 1u);
  EXPECT_EQ(Merged(merger), (std::vector<uint64_t>{0xA1, 0xB2, 0xB3}));
  EXPECT_EQ(Merged(merger), Reference({}, {0xB3, 0xB2 | kEntry, 0xA1 | kEntry}));
  EXPECT_EQ(Merge(&merger, {0x100, kEvalIp, 0x300}, 0, {0xA2, 0xA1 | kEntry}), 0u);
  EXPECT_EQ(Merged(merger), (std::vector<uint64_t>{0x100, 0xA1, 0xA2, 0x300}));
}

TEST(PythonMerger, ForgetIgnoresKept) {
  PythonMerger merger;
  Merge(&merger, {0x100, kEvalIp, 0x300}, 0, {0xA1 | kEntry});
  merger.Forget();
  // `kept` would claim the old outer frames; after Forget the merger must not trust it.
  EXPECT_EQ(Merge(&merger, {0x101, kEvalIp, 0x300}, 3, {0xA1 | kEntry}), 0u);
  EXPECT_EQ(Merged(merger), (std::vector<uint64_t>{0x101, 0xA1, 0x300}));
}

// Random walks over stacks: native frames pushed and popped at the inner end (eval-loop frames
// among them), Python runs changing with them, lines moving anywhere, and now and then a stack
// whose runs and eval-loop frames do not pair up. kept is the true shared prefix, or less (the
// agent may keep less than it could).
TEST(PythonMerger, MatchesTheReferenceMergeOnRandomStacks) {
  std::mt19937_64 rng(12345);
  PythonMerger merger;
  std::vector<uint64_t> native, prev_native, prev_merged;
  std::vector<std::vector<uint64_t>> runs;  // per eval-loop frame, outermost first; each run
                                            // innermost first, its entry frame last
  for (int step = 0; step < 20000; ++step) {
    int action = static_cast<int>(rng() % 10);
    if (action < 3 && native.size() < 40) {  // call into native code
      native.push_back(0x1000 + rng() % 64 * 8);
    } else if (action < 5 && native.size() < 40) {  // call into the eval loop
      native.push_back(kEvalIp + rng() % 4 * 8);
      std::vector<uint64_t> run(1 + rng() % 3);
      for (auto& f : run) f = 0x10000 + rng() % 32;
      runs.push_back(run);
    } else if (action < 8 && !native.empty()) {  // return
      if (kEval.Contains(native.back())) runs.pop_back();
      native.pop_back();
    } else if (!runs.empty()) {  // a line moves in some frame of some run
      auto& run = runs[rng() % runs.size()];
      run[rng() % run.size()] = 0x10000 + rng() % 32;
    }
    std::vector<uint64_t> python;  // innermost first
    for (size_t r = runs.size(); r-- > 0;) {
      for (size_t i = 0; i < runs[r].size(); ++i) {
        python.push_back(runs[r][i] | (i + 1 == runs[r].size() ? kEntry : 0));
      }
    }
    // Now and then the runs and the eval-loop frames do not pair up: Python frames cut at a
    // depth limit (the outer ones go), or an unwinder that stopped early (outer native go).
    std::vector<uint64_t> sent = native;
    if (rng() % 20 == 0 && !python.empty()) python.resize(rng() % python.size());
    if (rng() % 20 == 0 && !sent.empty()) sent.erase(sent.begin(), sent.begin() + rng() % sent.size());
    if (python.empty()) {  // an event without Python frames comes between
      merger.Forget();
      prev_native = sent;
      continue;
    }
    size_t kept = CommonPrefix(prev_native, sent);
    if (rng() % 4 == 0) kept = rng() % (kept + 1);
    std::vector<uint64_t> expected = Reference(sent, python);
    size_t common = Merge(&merger, sent, kept, python);
    ASSERT_EQ(Merged(merger), expected) << "step " << step;
    ASSERT_EQ(common, CommonPrefix(prev_merged, expected)) << "step " << step;
    prev_native = sent;
    prev_merged = expected;
  }
}

}  // namespace
}  // namespace memlens::agent
