// src/cli/main.cc: the `memlens` command. One file per subcommand (cmd_*.cc).
#include <algorithm>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "cli/analysis_options.h"
#include "cli/commands.h"

namespace memlens::cli {
namespace {

// `run`'s program and its arguments, as given: main() sets them aside before CLI11 parses.
std::vector<std::string>& RunProgram() {
  static auto* program = new std::vector<std::string>;  // never destroyed (static storage rule)
  return *program;
}
CommandRunner AddRun(CLI::App* cmd) { return AddRunCommand(cmd, &RunProgram()); }

// The memlens commands, in the order `memlens --help` lists them: the one list that main, the
// help (commands and examples) and the unknown-command message read. A new command is one line.
struct CommandEntry {
  const char* name;
  const char* help;     // one line, shown by `memlens --help`
  const char* example;  // a command line for the help's examples
  const char* example_note;  // what the example does, or "" when the command line says it
  CommandRunner (*add)(CLI::App* cmd);
};
constexpr CommandEntry kCommands[] = {
    {"run", "Run a program and record its allocations into a capture file",
     "memlens run -- ./server --port 8080", "record a program (writes memlens-server-PID.mlens)",
     AddRun},
    {"summary", "Totals, peak, memory in use at exit, top sites",
     "memlens summary memlens-server-123.mlens", "peak, totals, leaks, top sites",
     AddSummaryCommand},
    {"top", "The top allocation sites, grouped and sorted",
     "memlens top CAPTURE --by function --sort allocated", "", AddTopCommand},
    {"tree", "The call tree with self and inclusive bytes", "memlens tree CAPTURE --bottom-up", "",
     AddTreeCommand},
    {"leaks", "Blocks still allocated at exit, by call stack; --growth: memory that keeps growing",
     "memlens leaks CAPTURE", "", AddLeaksCommand},
    {"diff", "What changed in memory in use between two snapshots (of one or two captures)",
     "memlens diff CAPTURE@t=1s CAPTURE@t=5s", "what grew between two moments", AddDiffCommand},
    {"timeline", "Heap in use and resident memory over time, with the program's markers",
     "memlens timeline CAPTURE", "heap and resident memory over time", AddTimelineCommand},
    {"histogram", "Allocation sizes in power-of-two buckets, overall and for the top sites",
     "memlens histogram CAPTURE", "allocation sizes, overall and per site", AddHistogramCommand},
    {"temporary", "Sites of temporary allocations (freed at once, before the next allocation)",
     "memlens temporary CAPTURE", "allocations freed at once (reuse them)", AddTemporaryCommand},
    {"map", "The address space of what is in use: regions, gaps, fragmentation",
     "memlens map CAPTURE@peak", "address space in use: regions, gaps", AddMapCommand},
    {"rss", "Why the process is bigger than its heap: resident memory split into its parts",
     "memlens rss CAPTURE@peak", "resident memory explained, part by part", AddRssCommand},
    {"blocks", "Every block in use, one by one: address, size, domain, call stack",
     "memlens blocks CAPTURE@peak --json", "every block in use, with its stack", AddBlocksCommand},
    {"report", "One self-contained interactive HTML page", "memlens report CAPTURE -o report.html",
     "one self-contained interactive page", AddReportCommand},
    {"index", "Build the snapshot index of a capture now (snapshots build it when first needed)",
     "memlens index CAPTURE", "make snapshots of a big capture quick", AddIndexCommand},
    {"export", "The capture in a format other tools read (pprof, speedscope, folded, ...)",
     "memlens export pprof CAPTURE -o heap.pb.gz", "for go tool pprof, speedscope, Perfetto",
     AddExportCommand},
    {"push", "Send a capture to a Grafana Pyroscope server as a pprof profile",
     "memlens push http://pyroscope:4040 CAPTURE", "what `memlens run --push` sends live",
     AddPushCommand},
    {"live", "Watch a capture being written: heap, resident memory, top sites, in the terminal",
     "memlens live memlens-server-123.mlens", "watch a running program's capture",
     AddLiveCommand},
    {"attach", "Record a running process from now on (until detach or --duration)",
     "memlens attach 4242 --duration 30", "record a running process for 30 s", AddAttachCommand},
    {"detach", "Stop recording a process memlens attach is recording; it runs on",
     "memlens detach 4242", "", AddDetachCommand},
    {"mark", "Have a process being recorded drop a marker (or ask for a snapshot) now",
     "memlens mark 4242 before-load --snapshot", "CAPTURE@snapshot:before-load afterwards",
     AddMarkCommand},
};

// "run, summary, ...": the commands' names, for a message.
std::string CommandNames() {
  std::string names;
  for (const auto& c : kCommands) names += (names.empty() ? "" : ", ") + std::string(c.name);
  return names;
}

// The help's footer: one example per command, notes aligned, then what every command shares.
std::string HelpFooter() {
  size_t width = 0;
  for (const auto& c : kCommands) {
    if (*c.example_note) width = std::max(width, std::strlen(c.example));
  }
  std::string footer = "Examples:\n";
  for (const auto& c : kCommands) {
    std::string line = std::string("  ") + c.example;
    if (*c.example_note) {
      line += std::string(width + 2 - std::strlen(c.example), ' ') + c.example_note;
    }
    footer += line + "\n";
  }
  return footer +
         "A capture argument may name a moment: FILE@peak, FILE@t=2.5s, FILE@end (the end of the\n"
         "process), FILE@program-end (the end of a Python program's own code). The default, exit,\n"
         "is FILE@program-end in a Python capture that has it, FILE@end otherwise.\n"
         "Every analysis command takes --json (docs/json-output.md).";
}

// CLI11 reports the first problem it checks, which is not always the one the user made: name
// an unknown command or flag before a missing argument, and say which command complained.
std::string ExplainParseError(const CLI::App& app, const std::vector<CLI::App*>& commands,
                              int argc, char** argv, const CLI::ParseError& error) {
  if (argc < 2) return "no command given";
  std::string first = argv[1];
  const CLI::App* command = nullptr;
  for (const auto& c : commands) {
    if (c->get_name() == first) command = c;
  }
  if (!command) {
    if (first[0] != '-') {
      return "unknown command '" + first + "' (commands: " + CommandNames() + ")";
    }
    return error.what();
  }
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") break;
    if (command->get_name() == "run" && arg[0] != '-') break;  // the program's own arguments
    if (arg.size() > 1 && arg[0] == '-') {
      std::string name = arg.substr(0, arg.find('='));
      if (!command->get_option_no_throw(name) && name != "-h" && name != "--help") {
        return command->get_name() + ": unknown option '" + name + "'";
      }
    }
  }
  return command->get_name() + ": " + error.what();
}

// `memlens run [OPTIONS] [--] PROGRAM [ARGS...]`: where PROGRAM begins in argv (argc when there
// is none), and where memlens's own options end (*options_end: the `--`, or PROGRAM). The
// program's words are its own, byte for byte: they never reach CLI11, which would read "[a,b]"
// as a list, drop "[]" and take "--sample" for itself.
int ProgramStart(const CLI::App& run, int argc, char** argv, int* options_end) {
  int i = 2;
  while (i < argc) {
    std::string arg = argv[i];
    if (arg == "--") {
      *options_end = i;
      return i + 1;
    }
    if (arg.size() < 2 || arg[0] != '-') break;
    // "--output=FILE" and "-oFILE" carry their value; "--output FILE" takes the next word.
    bool long_name = arg[1] == '-';
    bool attached = long_name ? arg.find('=') != std::string::npos : arg.size() > 2;
    std::string name = long_name ? arg.substr(0, arg.find('=')) : arg.substr(0, 2);
    const CLI::Option* option = run.get_option_no_throw(name);
    i += (option && option->get_items_expected_max() > 0 && !attached) ? 2 : 1;  // 0: a flag
  }
  *options_end = i < argc ? i : argc;
  return *options_end;
}

// `memlens run --list-options` (not in the help: it is for the Python package): run's options,
// one a line, "-o,--output<TAB>TEXT", the value's name empty for a flag. `python3 -m memlens run`
// reads it to tell memlens's options from the script's, so that an option added here needs no
// second list in the package.
int ListOptions(const CLI::App& run) {
  for (const CLI::Option* option : run.get_options()) {
    if (!option->nonpositional()) continue;
    std::string names;
    for (const auto& s : option->get_snames()) names += (names.empty() ? "-" : ",-") + s;
    for (const auto& l : option->get_lnames()) names += (names.empty() ? "--" : ",--") + l;
    // The value's name without its check: "INT", not "INT:INT in [1 - 512]".
    std::string value = option->get_items_expected_max() > 0 ? option->get_type_name() : "";
    std::cout << names << '\t' << value.substr(0, value.find(':')) << '\n';
  }
  return 0;
}

}  // namespace
}  // namespace memlens::cli

int main(int argc, char** argv) {
  using namespace memlens::cli;
  CLI::App app{"memlens: where does my memory go? Records every allocation of a program and\n"
               "answers from the capture: peak, leaks, top sites, call trees.",
               "memlens"};
  app.set_version_flag("--version", MEMLENS_VERSION);
  app.require_subcommand(1);
  app.footer(HelpFooter());
  std::vector<CLI::App*> commands;
  std::vector<CommandRunner> runners;
  for (const auto& c : kCommands) {
    commands.push_back(app.add_subcommand(c.name, c.help));
    runners.push_back(c.add(commands.back()));
  }
  if (argc == 3 && std::strcmp(argv[1], "run") == 0 &&
      std::strcmp(argv[2], "--list-options") == 0) {
    return ListOptions(*app.get_subcommand("run"));
  }
  if (argc > 1 && std::strcmp(argv[1], "run") == 0) {
    int options_end = argc;
    int start = ProgramStart(*app.get_subcommand("run"), argc, argv, &options_end);
    RunProgram().assign(argv + start, argv + argc);
    argc = options_end;  // CLI11 sees memlens's own options only
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "memlens: " << ExplainParseError(app, commands, argc, argv, e)
              << "\nRun 'memlens --help' for usage.\n";
    return kExitBadInput;
  }
  for (size_t i = 0; i < commands.size(); ++i) {
    if (commands[i]->parsed()) return runners[i]();
  }
  return kExitBadInput;
}
