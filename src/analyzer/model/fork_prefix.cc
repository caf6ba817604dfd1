// src/analyzer/model/fork_prefix.cc: see fork_prefix.h.
#include "analyzer/model/fork_prefix.h"

#include "analyzer/model/process_set.h"
#include "analyzer/reader/capture_reader.h"

namespace memlens::analyzer {
namespace {

// Reads a candidate capture of the parent, forwarding to the replay only the image the child
// was forked from (its start time names it), and in it the events before the fork: a wrong
// candidate (another process of that pid) forwards nothing.
class ForkPrefix : public format::RecordVisitor {
 public:
  ForkPrefix(const format::ProcessRecord& child, Replayer* replayer)
      : child_(child), replayer_(replayer) {}

  bool found() const { return found_; }
  bool done() const { return done_; }
  // Every event before the fork was read (the capture may end early: a parent killed).
  bool complete() const { return past_fork_ || next_seq_ >= child_.fork_seq; }

  void OnProcess(const format::ProcessRecord& r) override {
    if (Forwarding()) {  // the parent exec'd after the fork: its next image is not the child's
      done_ = true;
      return;
    }
    if (found_ || r.start_monotonic_ns != child_.fork_parent_image_ns) return;
    found_ = true;
    replayer_->OnProcess(r);  // which plays its own prefix first, when it was forked too
  }
  void OnModule(const format::ModuleRecord& r) override {
    if (Forwarding()) replayer_->OnModule(r);
  }
  void OnModuleUnload(const format::ModuleUnloadRecord& r) override {
    if (Forwarding()) replayer_->OnModuleUnload(r);
  }
  void OnThread(const format::ThreadRecord& r) override {
    if (Forwarding()) replayer_->OnThread(r);
  }
  void OnStackNode(const format::StackNodeRecord& r) override {
    if (Forwarding()) replayer_->OnStackNode(r);
  }
  void OnPythonCode(const format::PythonCodeRecord& r) override {
    if (Forwarding()) replayer_->OnPythonCode(r);
  }
  void OnString(const format::StringRecord& r) override {
    if (Forwarding()) replayer_->OnString(r);
  }
  void OnSampling(const format::SamplingRecord& r) override {
    if (Forwarding()) replayer_->OnSampling(r);
  }
  void OnEvent(const format::Event& e) override {
    if (!Forwarding()) return;
    if (e.seq >= child_.fork_seq) {
      past_fork_ = done_ = true;
      return;
    }
    next_seq_ = e.seq + 1;
    replayer_->PlayInherited(e);
  }
  // Time marks, samples of resident memory, drops and the end describe the parent's run, not
  // what the child inherited.

 private:
  bool Forwarding() const { return found_ && !done_; }

  const format::ProcessRecord& child_;
  Replayer* replayer_;
  bool found_ = false;
  bool done_ = false;
  bool past_fork_ = false;
  uint64_t next_seq_ = 0;
};

// The captures in `directory` of processes of this pid, by file name (process_set.h).
std::vector<std::string> CapturesOfPid(const std::string& directory, uint64_t pid) {
  std::vector<std::string> found;
  const std::string exact = "-" + std::to_string(pid) + ".mlens";
  const std::string again = "-" + std::to_string(pid) + "-";
  for (const std::string& path : CapturesIn(directory)) {
    const std::string name = path.substr(path.rfind('/') + 1);
    const bool named = name.size() > exact.size() &&
                       name.compare(name.size() - exact.size(), exact.size(), exact) == 0;
    if (named || name.find(again) != std::string::npos) found.push_back(path);
  }
  return found;
}

}  // namespace

void PlayForkPrefix(const std::string& directory, const format::ProcessRecord& child,
                    Replayer* replayer, std::vector<std::string>* warnings) {
  // A parent started before its child: captures that say otherwise (damaged, or made to name
  // each other) would have the replay go round and round.
  constexpr int kMostForks = 64;  // forks of forks, nested
  static thread_local int depth = 0;
  if (child.fork_parent_image_ns >= child.start_monotonic_ns || depth >= kMostForks) {
    warnings->push_back("this process's record of its fork is not plausible: the blocks it "
                        "inherited are not counted");
    return;
  }
  ++depth;
  struct Leave {
    ~Leave() { --depth; }
  } leave;
  for (const std::string& path : CapturesOfPid(directory, child.ppid)) {
    ForkPrefix prefix(child, replayer);
    ReadStatus status;
    std::string error;
    ReadOptions read;  // past the fork, the parent's events are not decoded
    read.decoding = [&prefix](uint64_t) {
      return prefix.done() ? format::EventDecoding::kSkip : format::EventDecoding::kDeliver;
    };
    ReadCapture(path, &prefix, &status, &error, read);
    if (!prefix.found()) continue;
    if (!prefix.complete()) {
      warnings->push_back("the capture of its parent (" + path +
                          ") ends before the fork: what this process inherited after that is "
                          "not counted");
    }
    return;
  }
  warnings->push_back("this process was forked by process " + std::to_string(child.ppid) +
                      ", whose capture is not in " + directory +
                      ": the blocks it inherited are not counted (their frees match nothing)");
}

}  // namespace memlens::analyzer
