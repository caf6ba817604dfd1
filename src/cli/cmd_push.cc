// src/cli/cmd_push.cc
//
// `memlens push URL CAPTURE[@moment] [--label NAME=VALUE ...] [--service NAME]`: sends a finished
// capture to a Pyroscope server as one pprof (docs/push.md): in use at the moment, allocated up
// to it, dated from the start of recording to the moment.
#include <iostream>
#include <memory>

#include "analyzer/export/pprof.h"
#include "analyzer/export/pyroscope.h"
#include "cli/analysis_options.h"
#include "cli/commands.h"
#include "cli/pusher.h"

namespace memlens::cli {
namespace {

using namespace analyzer;

struct PushOptions {
  std::string url;
  std::string capture;
  std::vector<std::string> labels;
  std::string service;
};

constexpr std::chrono::milliseconds kTimeout{30000};

int Push(const PushOptions& o) {
  PushTarget target;
  std::string error;
  if (!MakePushTarget(o.url, o.labels, o.service, "", &target, &error)) return Complain(error);
  Profile profile;
  if (!LoadOrComplain(o.capture, &profile)) return kExitBadInput;
  const auto& argv = profile.process.argv;
  if (o.service.empty()) {
    target.service = ServiceNameOf(!argv.empty() ? argv[0] : profile.process.executable);
  }
  SetPidLabel(&target, profile.process.pid);
  StackResolver resolver(profile);
  // Dated from the start of recording to the moment: what the allocated figures cover.
  PprofOptions options = PprofTimesOf(profile);
  std::string pprof;
  if (!WritePprof(profile, &resolver, options, &pprof, &error)) return Complain(error);
  int64_t from = (options.time_nanos - options.duration_nanos) / 1000000000;
  int64_t until = options.time_nanos / 1000000000;
  IngestClient client(target);
  if (!client.Send(pprof, from, until, kTimeout, nullptr, &error)) {
    std::cerr << "memlens: push to " << RedactedUrl(o.url) << " failed: " << error << "\n";
    return 1;
  }
  std::cerr << "memlens: pushed " << o.capture << " to " << RedactedUrl(o.url) << " as "
            << IngestName(target) << "\n";
  return 0;
}

}  // namespace

CommandRunner AddPushCommand(CLI::App* cmd) {
  auto o = std::make_shared<PushOptions>();
  cmd->add_option("URL", o->url, "the server, as in http://localhost:4040 (docs/push.md)")
      ->required();
  cmd->add_option("CAPTURE", o->capture,
                  "capture file, FILE@MOMENT for what was in use at another moment")
      ->required();
  AddPushLabelOptions(cmd, "", &o->labels, &o->service);
  cmd->footer(
      "The profile holds what was in use at the moment (default: exit) and what was allocated\n"
      "up to it, dated from the start of recording to the moment. For basic auth put\n"
      "user:password@ in the URL or MEMLENS_PUSH_USER=user:password in the environment;\n"
      "MEMLENS_PUSH_TENANT sets X-Scope-OrgID.");
  return [o] { return Push(*o); };
}

}  // namespace memlens::cli
