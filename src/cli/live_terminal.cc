// src/cli/live_terminal.cc: loading, drawing, keys.
#include "cli/live_terminal.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <vector>

#include "analyzer/export/format_units.h"
#include "analyzer/model/capture_argument.h"
#include "analyzer/views/live.h"
#include "cli/analysis_options.h"

namespace memlens::cli {
namespace {

using namespace analyzer;

volatile sig_atomic_t g_quit = 0;
void OnQuitSignal(int) { g_quit = 1; }

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

struct ViewState {
  LiveOptions options;
  bool paused = false;
  enum class Editing { kNone, kFilter, kMarker, kSnapshot } editing = Editing::kNone;
  std::string draft;     // what is being typed
  std::string status;    // the last thing the view has to say (a load error, a moment asked)
  int moments = 0;       // markers and snapshots asked so far: the next default name
  // A marker or snapshot to ask for (set by a key, asked by the loop): its name.
  std::string ask_name;
  bool ask_snapshot = false;
};

bool LoadFrame(const std::string& capture, const LiveOptions& options, LiveFrame* frame,
               std::string* error) {
  SnapshotSpec end;
  end.kind = SnapshotSpec::kEnd;
  end.text = "end";
  Profile profile;
  try {
    if (!LoadProfile(capture, end, &profile, error)) return false;
    StackResolver resolver(profile);
    *frame = BuildLiveFrame(profile, &resolver, options);
  } catch (const std::exception& e) {
    *error = std::string("cannot read the capture: ") + e.what();
    return false;
  }
  return true;
}

// One character per value, scaled to the largest; a 0 (no sample in a column) repeats the one
// before.
std::string Sparkline(std::vector<uint64_t> values, uint64_t* top) {
  static const char* const kLevels[] = {" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  for (size_t i = 1; i < values.size(); ++i) {
    if (values[i] == 0) values[i] = values[i - 1];
  }
  *top = values.empty() ? 0 : *std::max_element(values.begin(), values.end());
  std::string line;
  for (uint64_t v : values) {
    size_t level = *top ? static_cast<size_t>((v * 8 + *top - 1) / *top) : 0;
    line += kLevels[std::min<size_t>(level, 8)];
  }
  return line;
}

std::string Padded(const std::string& text, size_t width, bool right) {
  if (text.size() >= width) return text;
  std::string pad(width - text.size(), ' ');
  return right ? pad + text : text + pad;
}

std::string Location(const SourceFrame& site) {
  if (!site.file.empty()) return site.file + ":" + std::to_string(site.line);
  char offset[32];
  std::snprintf(offset, sizeof offset, "+0x%llx", static_cast<unsigned long long>(site.module_offset));
  return site.module.substr(site.module.rfind('/') + 1) + offset;
}

// The frame's lines, each at most `width` columns (the sparklines are `width - 12`).
std::vector<std::string> Render(const LiveFrame& f, const ViewState& state, bool loaded,
                                const std::string& capture) {
  std::vector<std::string> lines;
  std::string state_word = !loaded        ? "waiting for the capture"
                           : state.paused ? "PAUSED"
                           : f.ended      ? "ended (" + f.end_reason + ")"
                                          : "recording";
  lines.push_back("memlens live  " + (loaded ? f.command + "  (pid " + std::to_string(f.pid) + ")"
                                             : capture) +
                  "  " + FormatSeconds(f.seconds) + "  " + state_word);
  lines.push_back("heap in use " + FormatBytes(f.in_use_bytes) + " in " +
                  FormatCounted(f.in_use_blocks, "block") + "   peak " +
                  FormatBytes(f.peak_bytes) + " at " + FormatSeconds(f.peak_seconds) +
                  "   resident " + (f.resident_bytes ? FormatBytes(f.resident_bytes) : "-") +
                  "   threads " + std::to_string(f.threads) + "   dropped " +
                  FormatCount(f.dropped_events));
  lines.push_back("allocated   " + FormatBytes(f.allocated_bytes) + " in " +
                  FormatCounted(f.allocations, "allocation"));
  uint64_t top = 0;
  std::string heap = Sparkline(f.chart.heap, &top);
  lines.push_back("heap      |" + heap + "| " + FormatBytes(top));
  std::string resident = Sparkline(f.chart.resident, &top);
  lines.push_back("resident  |" + resident + "| " + (top ? FormatBytes(top) : "not sampled"));
  if (!f.chart.markers.empty()) lines.push_back("markers   |" + f.chart.markers + "|");
  lines.push_back("");
  const LiveSortOrder& order = kLiveSortOrders[state.options.sort];
  std::string filter = state.options.filter.empty()
                           ? ""
                           : ", filter \"" + state.options.filter + "\"";
  lines.push_back("Top sites by " + std::string(order.name) + " (" +
                  std::to_string(f.sites.size()) + " of " + std::to_string(f.sites_matching) +
                  filter + ")");
  lines.push_back("    IN USE   ALLOCATED     AT PEAK  LOCATION  FUNCTION");
  for (const SiteRow& row : f.sites) {
    lines.push_back(Padded(FormatBytes(row.stats.in_use_bytes), 10, true) + "  " +
                    Padded(FormatBytes(row.stats.allocated_bytes), 10, true) + "  " +
                    Padded(FormatBytes(row.stats.peak_bytes), 10, true) + "  " +
                    Location(row.site) + "  " + row.site.function);
  }
  lines.push_back("");
  using Editing = ViewState::Editing;
  if (state.editing == Editing::kFilter) {
    lines.push_back("filter: " + state.draft + "_   (Enter applies, Esc cancels)");
  } else if (state.editing != Editing::kNone) {
    lines.push_back(std::string(state.editing == Editing::kMarker ? "marker" : "snapshot") +
                    " name: " + state.draft + "_   (Enter asks the program, Esc cancels)");
  } else {
    lines.push_back(state.status);
  }
  lines.push_back("q quit   p pause   s sort   / filter   m marker   n snapshot");
  return lines;
}

// The controlling terminal in raw-ish mode (no echo, keys one at a time, Ctrl-C still a
// signal), on its alternate screen; put back as it was by the destructor.
class Terminal {
 public:
  bool Open(std::string* error) {
    fd_ = open("/dev/tty", O_RDWR | O_CLOEXEC);
    if (fd_ < 0 || tcgetattr(fd_, &before_) != 0) {
      *error = "memlens live needs a terminal (there is none here): `memlens live --once` prints "
               "one frame";
      return false;
    }
    termios raw = before_;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    tcsetattr(fd_, TCSANOW, &raw);
    Write("\x1b[?1049h\x1b[?25l");  // the alternate screen, the cursor hidden
    return true;
  }
  ~Terminal() {
    if (fd_ < 0) return;
    Write("\x1b[?25h\x1b[?1049l");
    tcsetattr(fd_, TCSANOW, &before_);
    close(fd_);
  }
  void Write(const std::string& text) {
    for (size_t done = 0; done < text.size();) {
      ssize_t n = write(fd_, text.data() + done, text.size() - done);
      if (n <= 0 && errno != EINTR) return;
      if (n > 0) done += static_cast<size_t>(n);
    }
  }
  void Draw(const std::vector<std::string>& lines) {
    winsize size{};
    ioctl(fd_, TIOCGWINSZ, &size);
    size_t rows = size.ws_row ? size.ws_row : 24, columns = size.ws_col ? size.ws_col : 80;
    std::string screen = "\x1b[H";
    for (size_t i = 0; i < lines.size() && i < rows; ++i) {
      screen += Clip(lines[i], columns) + "\x1b[K" + (i + 1 < rows ? "\r\n" : "");
    }
    Write(screen + "\x1b[J");
  }
  int Columns() {
    winsize size{};
    ioctl(fd_, TIOCGWINSZ, &size);
    return size.ws_col ? size.ws_col : 80;
  }
  // The next key, -1 after `seconds` without one (or a signal), kHangUp when the terminal is
  // gone.
  static constexpr int kHangUp = -2;
  int Key(double seconds) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(seconds * 1000)) <= 0) return -1;
    if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return kHangUp;
    unsigned char c = 0;
    ssize_t n = read(fd_, &c, 1);
    return n == 1 ? c : n == 0 ? kHangUp : -1;
  }

 private:
  // At most `columns` characters (UTF-8 sequences count once); control characters (from a
  // program's names) shown as '?', never sent to the terminal as they are.
  static std::string Clip(const std::string& line, size_t columns) {
    std::string out;
    size_t seen = 0;
    for (char c : line) {
      const auto byte = static_cast<unsigned char>(c);
      if ((byte & 0xc0) != 0x80 && seen++ == columns) break;
      out += byte < 0x20 || byte == 0x7f ? '?' : c;
    }
    return out;
  }
  int fd_ = -1;
  termios before_{};
};

// A key changes the view; false when it quits.
bool OnKey(int key, ViewState* state) {
  using Editing = ViewState::Editing;
  if (state->editing != Editing::kNone) {
    if (key == '\r' || key == '\n') {
      if (state->editing == Editing::kFilter) {
        state->options.filter = state->draft;
      } else if (!state->draft.empty()) {
        state->ask_name = state->draft;
        state->ask_snapshot = state->editing == Editing::kSnapshot;
      }
      state->editing = Editing::kNone;
    } else if (key == 27) {
      state->editing = Editing::kNone;
    } else if (key == 127 || key == 8) {  // a whole UTF-8 character
      while (!state->draft.empty() && (static_cast<unsigned char>(state->draft.back()) & 0xc0) == 0x80) {
        state->draft.pop_back();
      }
      if (!state->draft.empty()) state->draft.pop_back();
    } else if (key >= 32) {
      state->draft += static_cast<char>(key);
    }
    return true;
  }
  switch (key) {
    case 'q':
    case 'Q':
      return false;
    case 'p':
    case ' ':
      state->paused = !state->paused;
      break;
    case 's':
      state->options.sort = (state->options.sort + 1) % std::size(kLiveSortOrders);
      break;
    case '/':
      state->editing = Editing::kFilter;
      state->draft = state->options.filter;
      break;
    case 'm':
    case 'n':
      state->editing = key == 'm' ? Editing::kMarker : Editing::kSnapshot;
      state->draft = "live-" + std::to_string(state->moments + 1);
      break;
    default:
      break;
  }
  return true;
}

}  // namespace

int RunLiveTerminal(const LiveSettings& settings) {
  Terminal terminal;
  std::string error;
  if (!terminal.Open(&error)) return Complain(error);
  if (settings.own_signals) {
    struct sigaction quit {};
    quit.sa_handler = OnQuitSignal;  // no SA_RESTART: poll returns at once
    for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaction(s, &quit, nullptr);
  }
  RunAtIdlePriority();
  ViewState state;
  LiveFrame frame;
  bool loaded = false, final_frame = false;
  double next_load = 0;
  while (!g_quit) {
    state.options.chart_width = std::max(10, terminal.Columns() - 24);
    if (!state.paused && !final_frame && Now() >= next_load) {
      bool ended = settings.program_ended && settings.program_ended->load();
      LiveFrame fresh;
      if (LoadFrame(settings.capture, state.options, &fresh, &error)) {
        frame = std::move(fresh);
        loaded = true;
        if (state.status.rfind("cannot", 0) == 0) state.status.clear();
        final_frame = frame.ended || ended;  // nothing more will come
        if (final_frame) state.status = "the program has ended: q closes the view";
      } else if (loaded) {
        state.status = error;  // the last frame stays
      } else {
        state.status = "waiting for the program's first events in " + settings.capture;
      }
      next_load = Now() + settings.interval_seconds;
    }
    if (!state.ask_name.empty()) {
      std::string name = std::move(state.ask_name);
      state.ask_name.clear();
      if (!loaded || frame.ended) {
        state.status = "the program is not running: no moment can be marked";
      } else {
        state.status = "asking process " + std::to_string(frame.pid) + " for " +
                       (state.ask_snapshot ? "snapshot '" : "marker '") + name + "'...";
        terminal.Draw(Render(frame, state, loaded, settings.capture));
        state.status = AskForMoment(frame.pid, name, state.ask_snapshot);
        ++state.moments;
        next_load = 0;
      }
    }
    terminal.Draw(Render(frame, state, loaded, settings.capture));
    int key = terminal.Key(0.1);
    if (key == Terminal::kHangUp || (key >= 0 && !OnKey(key, &state))) break;
    if (final_frame && settings.close_after_end && *settings.close_after_end) break;
    if (key >= 0) {  // a new sort or filter shows at once, even on the last frame
      next_load = 0;
      final_frame = false;
    }
  }
  return 0;
}

void RunAtIdlePriority() {
  sched_param idle{};
  if (sched_setscheduler(0, SCHED_IDLE, &idle) != 0) setpriority(PRIO_PROCESS, 0, 19);
}

std::string LiveTerminalRefusal() {
  int tty = open("/dev/tty", O_RDWR | O_CLOEXEC);
  if (tty < 0) return "--live draws on a terminal, and there is none here";
  close(tty);
  for (int fd : {0, 1, 2}) {
    if (isatty(fd)) {
      return std::string("--live draws on this terminal, which the program would use too (its "
                         "standard ") +
             (fd == 0 ? "input" : fd == 1 ? "output" : "error") +
             " is a terminal): redirect them (PROGRAM < /dev/null > out.log 2>&1), or run "
             "without --live and watch from another terminal with memlens live CAPTURE";
    }
  }
  return "";
}

std::string AskForMoment(uint64_t pid, const std::string& name, bool snapshot) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return std::string("cannot ask: ") + std::strerror(errno);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, out[1], 2);
  std::string pid_text = std::to_string(pid);
  std::vector<const char*> argv = {"memlens", "mark", pid_text.c_str(), name.c_str()};
  if (snapshot) argv.push_back("--snapshot");
  argv.push_back(nullptr);
  // Ordinary scheduling (not the view's SCHED_IDLE: the program's main thread waits for it)
  // and default signals.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sched_param normal{};
  posix_spawnattr_setschedpolicy(&attributes, SCHED_OTHER);
  posix_spawnattr_setschedparam(&attributes, &normal);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &all);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSCHEDULER | POSIX_SPAWN_SETSIGMASK |
                                            POSIX_SPAWN_SETSIGDEF);
  pid_t child = 0;
  int spawned = posix_spawn(&child, "/proc/self/exe", &actions, &attributes,
                            const_cast<char* const*>(argv.data()), environ);
  if (spawned == EPERM) {  // leaving SCHED_IDLE needs CAP_SYS_NICE or RLIMIT_NICE: as we are
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    spawned = posix_spawn(&child, "/proc/self/exe", &actions, &attributes,
                          const_cast<char* const*>(argv.data()), environ);
  }
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(out[1]);
  std::string said;
  char buffer[512];
  for (ssize_t n; spawned == 0 && (n = read(out[0], buffer, sizeof buffer)) != 0;) {
    if (n > 0) said.append(buffer, static_cast<size_t>(n));
    else if (errno != EINTR) break;
  }
  close(out[0]);
  if (spawned != 0) return std::string("cannot run memlens mark: ") + std::strerror(spawned);
  while (waitpid(child, nullptr, 0) < 0 && errno == EINTR) {}
  said = said.substr(0, said.find('\n'));
  return said.rfind("memlens: ", 0) == 0 ? said.substr(9) : said;
}

int PrintLiveFrame(const std::string& capture, int width) {
  ViewState state;
  state.options.chart_width = std::max(10, width - 24);
  LiveFrame frame;
  std::string error;
  if (!LoadFrame(capture, state.options, &frame, &error)) return Complain(error);
  for (const std::string& line : Render(frame, state, true, capture)) {
    std::cout << line.substr(0, line.find_last_not_of(' ') + 1) << "\n";
  }
  return 0;
}

}  // namespace memlens::cli
