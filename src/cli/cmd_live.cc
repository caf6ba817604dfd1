// src/cli/cmd_live.cc
//
// `memlens live CAPTURE`: the live view of a capture still being written (by `memlens run`, a
// preloaded agent, a span, `memlens attach`), in the terminal, refreshed every --interval
// (src/cli/live_terminal.h). --once prints one frame and returns, for scripts; --web serves it
// as a page (src/cli/live_web.h).
#include <memory>

#include "cli/analysis_options.h"
#include "cli/commands.h"
#include "cli/live_terminal.h"
#include "cli/live_web.h"

namespace memlens::cli {
namespace {

struct LiveOptions {
  std::string capture;
  double interval = 1.0;
  bool once = false;
  int width = 100;
  bool web = false;
  LiveWebSettings site;
};

}  // namespace

CommandRunner AddLiveCommand(CLI::App* cmd) {
  auto o = std::make_shared<LiveOptions>();
  cmd->add_option("CAPTURE", o->capture,
                  "the capture a program is writing (or has written): memlens run -o FILE,\n"
                  "MEMLENS_OUTPUT, memlens attach -o FILE")
      ->required();
  cmd->add_option("--interval", o->interval, "seconds between two loads of the capture (default 1)")
      ->type_name("SECONDS")
      ->check(CLI::Range(0.1, 3600.0));
  cmd->add_flag("--once", o->once, "print one frame as text and return (no terminal needed)");
  cmd->add_option("--width", o->width, "with --once: the columns of the frame (default 100)")
      ->check(CLI::Range(40, 1000));
  cmd->add_flag("--web", o->web,
                "serve the view as a page instead (the HTML report of the capture as it stands,\n"
                "reloaded every --interval, with marker and snapshot buttons): prints its\n"
                "address, with a random token, and serves until Ctrl-C");
  cmd->add_option("--address", o->site.address,
                  "with --web: the IPv4 address to serve on (default 127.0.0.1; another needs\n"
                  "--allow-remote)");
  cmd->add_option("--port", o->site.port, "with --web: the port (default: any free one)")
      ->check(CLI::Range(0, 65535));
  cmd->add_flag("--allow-remote", o->site.allow_remote,
                "with --web: serve on an address other machines reach (plain HTTP; the token is\n"
                "the only key)");
  cmd->footer(
      "Keys: q quits (the program runs on, the capture stays as it is), p pauses, s cycles the\n"
      "sort (in use now, allocated, at the peak), / filters the sites by function, file or\n"
      "module. The view only reads the capture: the program never waits for it. A view of\n"
      "`memlens run --live` is the same, in the terminal memlens run was started from.");
  return [o] {
    if (o->once) return PrintLiveFrame(o->capture, o->width);
    if (o->web) {
      o->site.capture = o->capture;
      o->site.interval_seconds = o->interval;
      return RunLiveWeb(o->site);
    }
    LiveSettings settings;
    settings.capture = o->capture;
    settings.interval_seconds = o->interval;
    return RunLiveTerminal(settings);
  };
}

}  // namespace memlens::cli
