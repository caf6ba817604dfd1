// src/analyzer/model/replay_state.cc: the replay's state as the snapshot index saves it
// (docs/snapshot-index.md): the core's live set and peak bookkeeping, then each accumulator's
// part, in one order for saving and restoring (kIndexVersion changes with it).
#include "analyzer/model/replayer.h"

namespace memlens::analyzer {

namespace {

void SaveRegion(uint64_t start, const Region& r, std::string* out) {
  for (uint64_t v : {start, r.end - start, r.stack, uint64_t{r.counted}}) Put(out, v);
}

}  // namespace

void Replayer::SaveState(std::string* out) const {
  for (const TotalsField& f : kTotalsFields) {
    if (f.replayed) Put(out, p_->totals.*f.member);
  }
  for (uint64_t v : {live_bytes_, live_blocks_, peak_epoch_, mapping_live_bytes_, reserved_bytes_,
                     live_bytes_var_, live_blocks_var_}) {
    Put(out, v);
  }
  uint64_t touched = 0;
  for (const StackState& s : states_) touched += s.changed_in_epoch != 0;  // [0] never is
  Put(out, touched);
  uint64_t last = 0;
  ForEachState([&](uint64_t stack, const StackState& s) {
    if (s.changed_in_epoch == 0) return;  // never allocated or released
    Put(out, stack - last);
    last = stack;
    for (const StackStatField& f : kStackStatFields) Put(out, s.stats.*f.member);
    Put(out, s.changed_in_epoch);
  });
  SaveBlocks(heap_, out);
  Put(out, mappings_.size());
  for (const auto& [start, r] : mappings_) SaveRegion(start, r, out);
  Put(out, realloc_pending_.size());
  for (const auto& [thread, b] : realloc_pending_) {
    for (uint64_t v : {uint64_t{thread}, b.size, b.stack, uint64_t{b.python}}) Put(out, v);
  }
  Put(out, mremap_pending_.size());
  for (const auto& [thread, taken] : mremap_pending_) {
    Put(out, thread);
    Put(out, taken.size());
    for (const auto& [start, r] : taken) SaveRegion(start, r, out);
  }
  sizes_.Save(*p_, out);
  arenas_.Save(out);
  temporaries_.Save(out);
}

// Restores what SaveState saved, in the same order, at the first event of a resumed replay:
// the metadata read so far (stack nodes, modules, time marks) stays as read.
void Replayer::RestoreState() {
  resume_pending_ = false;
  StateReader r(resume_state_);
  // A damaged index may name any stack (PlausibleStack).
  std::function<uint64_t(uint64_t)> stack_id = [&](uint64_t id) {
    if (!PlausibleStack(id)) r.Fail();
    return r.ok() ? id : 0;
  };
  for (const TotalsField& f : kTotalsFields) {
    if (f.replayed) p_->totals.*f.member = r.Next();
  }
  for (uint64_t* v : {&live_bytes_, &live_blocks_, &peak_epoch_, &mapping_live_bytes_,
                      &reserved_bytes_, &live_bytes_var_, &live_blocks_var_}) {
    *v = r.Next();
  }
  uint64_t touched = r.Next(), stack = 0;
  for (uint64_t i = 0; i < touched && r.ok(); ++i) {
    stack += r.Next();
    if (stack_id(stack) != stack) break;
    StackState& s = State(stack);
    for (const StackStatField& f : kStackStatFields) s.stats.*f.member = r.Next();
    s.changed_in_epoch = r.Next();
  }
  RestoreBlocks(&r, stack_id, &heap_);
  for (uint64_t i = 0, n = r.Next(); i < n && r.ok(); ++i) {
    uint64_t start = r.Next(), size = r.Next(), stack = stack_id(r.Next());
    mappings_[start] = {start + size, stack, r.Next() != 0};
  }
  for (uint64_t i = 0, n = r.Next(); i < n && r.ok(); ++i) {
    uint32_t thread = static_cast<uint32_t>(r.Next());
    LiveBlock& b = realloc_pending_[thread];
    b.size = r.Next();
    b.stack = stack_id(r.Next());
    b.python = r.Next() != 0;
  }
  for (uint64_t i = 0, n = r.Next(); i < n && r.ok(); ++i) {
    auto& taken = mremap_pending_[static_cast<uint32_t>(r.Next())];
    for (uint64_t k = 0, m = r.Next(); k < m && r.ok(); ++k) {
      uint64_t start = r.Next(), size = r.Next(), stack = stack_id(r.Next());
      taken.push_back({start, {start + size, stack, r.Next() != 0}});
    }
  }
  sizes_.Restore(&r, p_);
  arenas_.Restore(&r, stack_id);
  temporaries_.Restore(&r, stack_id);
  if (!r.ok() || !r.AtEnd()) p_->warnings.push_back("the snapshot index is damaged: delete " + p_->path + ".index");
  timeline_.ResumeAt(resume_seq_, std::move(resume_timeline_), p_);
  resume_state_.clear();
}

}  // namespace memlens::analyzer
