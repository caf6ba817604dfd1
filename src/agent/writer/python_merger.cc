// src/agent/writer/python_merger.cc: see python_merger.h.
#include "agent/writer/python_merger.h"

#include <algorithm>

#include "agent/python_bridge.h"

namespace memlens::agent {
namespace {

constexpr uint64_t kEntry = MEMLENS_PYTHON_ENTRY_BIT;

template <typename T>
T* Room(std::vector<T>* buffer, size_t n) {
  if (buffer->size() < n) buffer->resize(2 * n);
  return buffer->data();
}

}  // namespace

void MergeInnermostFirst(const uint64_t* native, size_t native_count, const uint64_t* python,
                         size_t python_count, EvalLoopRange eval, std::vector<uint64_t>* out) {
  size_t p = 0;
  for (size_t i = native_count; i-- > 0;) {
    const uint64_t ip = native[i];
    if (p < python_count && eval.Contains(ip)) {
      uint64_t frame;
      do {
        frame = python[p++];
        out->push_back(frame & ~kEntry);
      } while (!(frame & kEntry) && p < python_count);
    } else {
      out->push_back(ip);
    }
  }
  for (; p < python_count; ++p) out->push_back(python[p] & ~kEntry);
}

inline void PythonMerger::Emit(uint64_t frame, size_t* m, size_t* common, size_t old_size) {
  if (*common == *m && *m < old_size && merged_[*m] == frame) ++*common;
  merged_[(*m)++] = frame;
}

size_t PythonMerger::Merge(const uint64_t* native, size_t native_count, size_t kept,
                           const uint64_t* python, size_t python_count, EvalLoopRange eval) {
  const size_t old_size = merged_size_;
  Room(&merged_, native_count + python_count);  // a merged stack is never longer
  size_t m = 0, common = 0;
  if (native_count == 0) {  // Python lines only (--python-stacks): the frames, outermost first
    for (size_t k = python_count; k-- > 0;) Emit(python[k] & ~kEntry, &m, &common, old_size);
    merged_size_ = m;
    incremental_ = false;
    return common;
  }
  // The Python frames outermost first, and where each run starts: a run (one call of the eval
  // loop) ends, innermost first, at its entry frame, so outermost first it starts at one (the
  // outermost run may have none, when the frames were cut short).
  uint64_t* py = Room(&python_, python_count);
  uint32_t* starts = Room(&starts_, python_count + 1);
  size_t runs = 0;
  for (size_t k = 0; k < python_count; ++k) {
    const uint64_t frame = python[python_count - 1 - k];
    py[k] = frame;
    if (k == 0 || (frame & kEntry)) starts[runs++] = static_cast<uint32_t>(k);
  }
  starts[runs] = static_cast<uint32_t>(python_count);

  // Eval-loop frames: those among the kept frames are known, the rest are counted.
  if (!incremental_ || kept > last_native_) kept = 0;  // not a stack this merger saw
  size_t kept_evals = 0;
  if (kept) {
    while (kept_evals < eval_count_ && eval_frames_[kept_evals] < kept) ++kept_evals;
  }
  size_t evals = kept_evals;
  for (size_t i = kept; i < native_count; ++i) evals += eval.Contains(native[i]);

  if (evals != runs) {  // inconsistent: the reference merge, compared with the last one
    reference_.clear();
    MergeInnermostFirst(native, native_count, python, python_count, eval, &reference_);
    for (size_t i = reference_.size(); i-- > 0;) Emit(reference_[i], &m, &common, old_size);
    merged_size_ = m;
    incremental_ = false;
    return common;
  }

  // Start at the first native frame that changed, or at the first kept eval-loop frame whose
  // run changed: everything merged from the frames before it is as it was.
  size_t same_runs = 0;
  if (kept) {
    // Python frames equal outermost first, then the runs that lie wholly among them and end
    // where the last call's did.
    const size_t limit = std::min(kept_evals, last_runs_);
    const size_t until = std::min<size_t>(starts[limit], last_starts_[limit]);
    const uint64_t* last = last_python_.data();
    size_t same = 0;
    while (same < until && py[same] == last[same]) ++same;
    while (same_runs < limit && starts[same_runs + 1] <= same &&
           starts[same_runs + 1] == last_starts_[same_runs + 1]) {
      ++same_runs;
    }
  }
  const size_t first = same_runs < kept_evals ? eval_frames_[same_runs] : kept;
  size_t run = same_runs < kept_evals ? same_runs : kept_evals;
  m = common = first ? merged_before_[first] : 0;
  uint32_t* before = Room(&merged_before_, native_count + 1);
  uint32_t* evals_at = Room(&eval_frames_, evals);
  before[first] = static_cast<uint32_t>(m);
  for (size_t i = first; i < native_count; ++i) {
    const uint64_t ip = native[i];
    if (eval.Contains(ip)) {  // consistent: every eval-loop frame has its run
      evals_at[run] = static_cast<uint32_t>(i);
      for (size_t k = starts[run]; k < starts[run + 1]; ++k) {
        Emit(py[k] & ~kEntry, &m, &common, old_size);
      }
      ++run;
    } else {
      Emit(ip, &m, &common, old_size);
    }
    before[i + 1] = static_cast<uint32_t>(m);
  }
  merged_size_ = m;
  eval_count_ = run;
  python_.swap(last_python_);
  starts_.swap(last_starts_);
  last_runs_ = runs;
  last_native_ = native_count;
  incremental_ = true;
  return common;
}

}  // namespace memlens::agent
