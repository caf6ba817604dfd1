// src/cli/pusher.h
//
// `memlens run --push URL`: while the program runs, this process (never the program) reads the
// capture as the agent writes it and, every period, sends Pyroscope a pprof of what is in use
// now and what was allocated in the period (docs/push.md). Two threads: one loads the capture
// and encodes (SCHED_IDLE: only CPU time the program leaves), one sends. Between them a queue
// of at most kMaxPending profiles: when the server is slow or absent the oldest is dropped and
// counted, so nothing ever waits on the network but the sender, and the program waits on
// nothing at all.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "analyzer/export/pyroscope.h"

namespace memlens::cli {

// --push URL, --label NAME=VALUE..., --service NAME (default: the program's name), checked, the
// host label set (the pid label's value is SetPidLabel's). False with one line in *error.
bool MakePushTarget(const std::string& url, const std::vector<std::string>& labels,
                    const std::string& service, const std::string& program,
                    analyzer::PushTarget* target, std::string* error);
// --label NAME=VALUE... and --service NAME, as `run` (with --push) and `push` take them; `when`
// starts their help ("with --push: " or "").
void AddPushLabelOptions(CLI::App* cmd, const std::string& when, std::vector<std::string>* labels,
                         std::string* service);
// The pid label, unless the user gave one (MakePushTarget keeps its place, after host).
void SetPidLabel(analyzer::PushTarget* target, uint64_t pid);
// --push-every: "60s", "500ms", "2m", "1.5" (seconds), from 100 ms to a day.
bool ParsePushPeriod(const std::string& text, std::chrono::milliseconds* period,
                     std::string* error);

class Pusher {
 public:
  static constexpr size_t kMaxPending = 4;
  // One send gives up after this long; so does the wait for the last ones at exit.
  static constexpr std::chrono::milliseconds kSendTimeout{10000};
  static constexpr std::chrono::milliseconds kFinalWait{5000};

  // Starts pushing `capture` (written by the program being run) every `every`.
  Pusher(analyzer::PushTarget target, std::string capture, std::chrono::milliseconds every);
  ~Pusher();

  // The program is gone: pushes the complete capture's last period, waits at most kFinalWait
  // for what is queued, and says on stderr, in one line, how many profiles reached the server
  // and how many did not, with the first error.
  void Finish();

 private:
  struct Pending {
    std::string pprof;
    int64_t from = 0, until = 0;
  };
  void Collect();  // the loading thread
  void Send();     // the sending thread
  bool PushPeriod(bool last, std::string* error);

  analyzer::PushTarget target_;
  std::string capture_;
  std::chrono::milliseconds every_;
  analyzer::AllocatedSoFar allocated_;
  int64_t period_start_ = 0;  // UNIX seconds

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Pending> queue_;
  bool stop_collecting_ = false, closing_ = false, sending_ = false;
  std::atomic<bool> cancel_{false};
  uint64_t made_ = 0, sent_ = 0, dropped_ = 0, failed_ = 0;
  std::string first_error_;
  std::thread collector_, sender_;
};

}  // namespace memlens::cli
