// src/cli/live_web.h
//
// `memlens live --web CAPTURE`: the live view as a page in the browser. A small HTTP server on
// 127.0.0.1 (a random port unless --port) serves, to requests carrying its random token:
//   /?token=T        the live page (src/report/live.html): a bar over the HTML report
//   /report?token=T  the HTML report of the capture as it stands now (the page reloads it)
//   /mark?token=T&name=N&snapshot=0|1   (POST) a marker or snapshot asked of the program,
//                    through `memlens mark` (live_terminal.h: AskForMoment); JSON back
// Anything else, or a wrong token, is refused. One request at a time, each read within 5 s: a
// slow or vanished browser delays only the page. The capture is only read: the program never
// waits for the page. Another address than 127.0.0.1 is refused unless --allow-remote says it
// is meant (the token is then all that keeps others out, over plain HTTP).
//
// Runs on: memlens live's main thread, until SIGINT or SIGTERM.
#pragma once

#include <string>

namespace memlens::cli {

struct LiveWebSettings {
  std::string capture;
  std::string address = "127.0.0.1";
  int port = 0;  // 0: any free port
  bool allow_remote = false;
  double interval_seconds = 1.0;
};

// Serves until interrupted. Prints the page's address (with its token) on stdout, one line.
// Returns 0, or one line on stderr and kExitBadInput (a bad address, a port taken).
int RunLiveWeb(const LiveWebSettings& settings);

}  // namespace memlens::cli
