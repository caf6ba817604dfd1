// src/agent/writer/python_merger.h
//
// A thread's merged stack: its native frames with each frame of CPython's eval loop replaced by
// the Python frames that call of the loop was running. The writer builds one per event of a
// Python program.
//
// The agent sends the native stack as the previous event's outermost `kept` frames plus the
// changed ones, and the Python frames whole (innermost first; the first frame each call of the
// eval loop ran carries MEMLENS_PYTHON_ENTRY_BIT, so the frames split into runs, one per call).
// Merging all of it and comparing the result with the previous merged stack, frame by frame,
// took over a quarter of the writer's instructions on object-heavy Python (some 25 frames an
// event, of which 5 changed).
// PythonMerger redoes only what changed: when the stack is consistent (as many runs as
// eval-loop frames), the k-th eval-loop frame from the outside ran the k-th run from the
// outside, so the merged frames that come from kept native frames and unchanged outer runs are
// the previous event's, and only the rest is merged and compared.
//
// Runs on: the writer thread (one merger per application thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace memlens::agent {

// The eval loop's code, [begin, end) (empty: no frame is in it).
struct EvalLoopRange {
  uint64_t begin = 0;
  uint64_t end = 0;
  bool Contains(uint64_t ip) const { return ip - begin < end - begin; }
};

// The reference merge, innermost first, appended to *out: the native stack (given outermost
// first) with each eval-loop frame replaced by the next run of Python frames (given innermost
// first), entry bits cleared. Python frames left over (an unwinder that stopped early) go
// outermost; eval-loop frames left without a run (Python frames cut by a depth limit) stay.
void MergeInnermostFirst(const uint64_t* native, size_t native_count, const uint64_t* python,
                         size_t python_count, EvalLoopRange eval, std::vector<uint64_t>* out);

class PythonMerger {
 public:
  // Merges into merged() (outermost first) the same frames as MergeInnermostFirst. The first
  // `kept` native frames must be those of the previous Merge's native stack (unless Forget was
  // called since). Returns how many outermost frames of merged() are those of the previous
  // merged().
  size_t Merge(const uint64_t* native, size_t native_count, size_t kept, const uint64_t* python,
               size_t python_count, EvalLoopRange eval);

  const uint64_t* merged() const { return merged_.data(); }
  size_t merged_size() const { return merged_size_; }

  // The next Merge's `kept` refers to a native stack this merger did not see (an event without
  // Python frames came between): it merges everything, still compared with merged().
  void Forget() { incremental_ = false; }
  // Forgets merged() too: the next Merge shares nothing with what came before.
  void Clear() {
    incremental_ = false;
    merged_size_ = 0;
  }

 private:
  // Writes the merged frame at position m, counting it into *common while the merged frames
  // so far are the previous call's.
  void Emit(uint64_t frame, size_t* m, size_t* common, size_t old_size);

  // Buffers that only grow (no clearing or zero-filling per event); sizes kept beside them.
  std::vector<uint64_t> merged_;  // outermost first
  size_t merged_size_ = 0;
  std::vector<uint64_t> reference_;  // the reference merge, innermost first (inconsistent stacks)
  // This call's Python frames outermost first (entry bits kept), and where each run starts;
  // swapped with the previous call's after the merge.
  std::vector<uint64_t> python_, last_python_;
  std::vector<uint32_t> starts_, last_starts_;
  size_t last_runs_ = 0;
  size_t last_native_ = 0;  // the previous call's native frames
  // The previous (consistent) call's native stack: merged frames from native frames [0, i),
  // and the native index of each eval-loop frame.
  std::vector<uint32_t> merged_before_;
  std::vector<uint32_t> eval_frames_;
  size_t eval_count_ = 0;
  bool incremental_ = false;  // the arrays above describe the previous call
};

}  // namespace memlens::agent
