// src/cli/pusher.cc
#include "cli/pusher.h"

#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <iostream>

#include "analyzer/export/pprof.h"
#include "analyzer/model/sites.h"

namespace memlens::cli {
namespace {

using namespace analyzer;

int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The pusher's threads take only CPU time that the program (and its agent's writer) leave.
void RunIdle() {
  sched_param idle{};
  if (sched_setscheduler(0, SCHED_IDLE, &idle) != 0) setpriority(PRIO_PROCESS, 0, 19);
}

}  // namespace

bool MakePushTarget(const std::string& url, const std::vector<std::string>& labels,
                    const std::string& service, const std::string& program, PushTarget* target,
                    std::string* error) {
  if (!CheckPushUrl(url, error)) return false;
  target->url = url;
  target->service = service.empty() ? ServiceNameOf(program) : service;
  if (!CheckServiceName(target->service, error)) return false;
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  target->labels.clear();
  SetPushLabel(&target->labels, {"host", *host ? host : "unknown"});
  SetPushLabel(&target->labels, {"pid", ""});
  for (const std::string& text : labels) {
    PushLabel label;
    if (!ParsePushLabel(text, &label, error)) return false;
    SetPushLabel(&target->labels, label);
  }
  return true;
}

void AddPushLabelOptions(CLI::App* cmd, const std::string& when, std::vector<std::string>* labels,
                         std::string* service) {
  cmd->add_option("--label", *labels,
                  when + "a label NAME=VALUE on every profile (repeat for more; host and\n"
                  "pid are set)")
      ->type_name("NAME=VALUE")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--service", *service,
                  when + "the service name (default: the recorded program's name)");
}

void SetPidLabel(PushTarget* target, uint64_t pid) {
  for (PushLabel& label : target->labels) {
    if (label.name == "pid" && label.value.empty()) label.value = std::to_string(pid);
  }
}

bool ParsePushPeriod(const std::string& text, std::chrono::milliseconds* period,
                     std::string* error) {
  char* end = nullptr;
  double value = strtod(text.c_str(), &end);
  std::string unit = end ? end : "";
  double scale = unit == "ms" ? 1 : unit == "s" || unit.empty() ? 1e3 : unit == "m" ? 6e4 : 0;
  double ms = value * scale;
  if (end == text.c_str() || scale == 0 || !(ms >= 100 && ms <= 864e5)) {
    *error = "--push-every '" + text + "': give a period from 100ms to 24h, as in 60s, 500ms or 2m";
    return false;
  }
  *period = std::chrono::milliseconds(static_cast<int64_t>(ms));
  return true;
}

Pusher::Pusher(PushTarget target, std::string capture, std::chrono::milliseconds every)
    : target_(std::move(target)), capture_(std::move(capture)), every_(every) {
  // A server that closes its end must not kill memlens run (and change the exit status the
  // program's would have been). The program was forked before: its signals stay its own.
  signal(SIGPIPE, SIG_IGN);
  period_start_ = NowNanos();
  collector_ = std::thread([this] { Collect(); });
  sender_ = std::thread([this] { Send(); });
}

Pusher::~Pusher() {
  if (collector_.joinable() || sender_.joinable()) Finish();
}

// Loads the capture at its end as it stands (the agent writes a chunk at least every 100 ms),
// keeps the allocations made since the last period, and queues the pprof.
bool Pusher::PushPeriod(bool last, std::string* error) {
  SnapshotSpec end;
  end.kind = SnapshotSpec::kEnd;
  end.text = "end";
  Profile profile;
  int64_t until = NowNanos();
  try {
    if (!LoadProfile(capture_, end, &profile, error)) return false;
    TakePeriod(&allocated_, &profile);
    StackResolver resolver(profile);
    PprofOptions options;
    options.time_nanos = until;
    options.duration_nanos = until - period_start_;
    Pending pending;
    if (!WritePprof(profile, &resolver, options, &pending.pprof, error)) return false;
    pending.from = period_start_ / 1000000000;
    pending.until = until / 1000000000;
    period_start_ = until;
    std::lock_guard<std::mutex> lock(mutex_);
    if (queue_.size() >= kMaxPending) {  // the server is behind: the oldest goes
      queue_.pop_front();
      ++dropped_;
    }
    queue_.push_back(std::move(pending));
    ++made_;
  } catch (const std::exception& e) {
    *error = std::string("cannot read the capture: ") + e.what();
    return false;
  }
  changed_.notify_all();
  return true;
}

void Pusher::Collect() {
  RunIdle();
  for (bool last = false; !last;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      last = changed_.wait_for(lock, every_, [this] { return stop_collecting_; });
    }
    std::string error;
    // Before the agent's first chunk there is nothing to read yet: the period goes on.
    if (!PushPeriod(last, &error) && last) {
      std::lock_guard<std::mutex> lock(mutex_);
      ++failed_;
      if (first_error_.empty()) first_error_ = error;
    }
  }
}

void Pusher::Send() {
  RunIdle();
  IngestClient client(target_);
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return !queue_.empty() || closing_; });
    if (queue_.empty() || cancel_) break;
    Pending pending = std::move(queue_.front());
    queue_.pop_front();
    sending_ = true;
    lock.unlock();
    std::string error;
    bool ok =
        client.Send(pending.pprof, pending.from, pending.until, kSendTimeout, &cancel_, &error);
    lock.lock();
    sending_ = false;
    if (ok) {
      ++sent_;
    } else {
      ++failed_;
      if (first_error_.empty()) first_error_ = error;
    }
    changed_.notify_all();
  }
}

void Pusher::Finish() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_collecting_ = true;
  }
  changed_.notify_all();
  collector_.join();
  {
    std::unique_lock<std::mutex> lock(mutex_);
    closing_ = true;
    changed_.notify_all();
    if (!changed_.wait_for(lock, kFinalWait, [this] { return queue_.empty() && !sending_; })) {
      cancel_ = true;  // the sender gives up its request within about a second
      dropped_ += queue_.size();
      queue_.clear();
      changed_.notify_all();
    }
  }
  sender_.join();
  std::string where = "memlens: push to " + RedactedUrl(target_.url) + ": ";
  uint64_t lost = dropped_ + failed_;
  if (lost == 0) {
    std::cerr << where << sent_ << " profiles sent\n";
    return;
  }
  std::cerr << where << sent_ << " profiles sent, " << lost << " not (" << dropped_
            << " dropped while the server was slow or away, " << failed_ << " failed"
            << (first_error_.empty() ? "" : ", first: " + first_error_) << ")\n";
}

}  // namespace memlens::cli
