// src/cli/main.cc: the `memlens` command. One file per subcommand (cmd_*.cc).
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "cli/analysis_options.h"
#include "cli/commands.h"

namespace {

// CLI11 reports the first problem it checks, which is not always the one the user made: name
// an unknown command or flag before a missing argument, and say which command complained.
std::string ExplainParseError(const CLI::App& app, const std::vector<memlens::cli::Command>& commands,
                              int argc, char** argv, const CLI::ParseError& error) {
  if (argc < 2) return "no command given";
  std::string first = argv[1];
  const CLI::App* command = nullptr;
  for (const auto& c : commands) {
    if (c.app->get_name() == first) command = c.app;
  }
  if (!command) {
    if (first[0] != '-') {
      return "unknown command '" + first + "' (commands: run, summary, top, tree, leaks, diff, timeline, histogram, temporary, map, report, index, export, push)";
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

}  // namespace

int main(int argc, char** argv) {
  using namespace memlens::cli;
  CLI::App app{"memlens: where does my memory go? Records every allocation of a program and\n"
               "answers from the capture: peak, leaks, top sites, call trees.",
               "memlens"};
  app.set_version_flag("--version", MEMLENS_VERSION);
  app.require_subcommand(1);
  app.footer(
      "Examples:\n"
      "  memlens run -- ./server --port 8080      record a program (writes memlens-server-PID.mlens)\n"
      "  memlens summary memlens-server-123.mlens  peak, totals, leaks, top sites\n"
      "  memlens top CAPTURE --by function --sort allocated\n"
      "  memlens tree CAPTURE --bottom-up\n"
      "  memlens leaks CAPTURE\n"
      "  memlens diff CAPTURE@t=1s CAPTURE@t=5s     what grew between two moments\n"
      "  memlens timeline CAPTURE                   heap and resident memory over time\n"
      "  memlens histogram CAPTURE                  allocation sizes, overall and per site\n"
      "  memlens temporary CAPTURE                  allocations freed at once (reuse them)\n"
      "  memlens map CAPTURE@peak                   address space in use: regions, gaps\n"
      "  memlens report CAPTURE -o report.html      one self-contained interactive page\n"
      "  memlens index CAPTURE                      make snapshots of a big capture quick\n"
      "A capture argument may name a moment: FILE@peak, FILE@t=2.5s, FILE@end (the end of the\n"
      "process), FILE@program-end (the end of a Python program's own code). The default, exit,\n"
      "is FILE@program-end in a Python capture that has it, FILE@end otherwise.\n"
      "Every analysis command takes --json (docs/json-output.md).");
  std::vector<std::string> program;  // `run`'s program and its arguments, as given
  std::vector<Command> commands = {AddRunCommand(&app, &program), AddSummaryCommand(&app),
                                   AddTopCommand(&app), AddTreeCommand(&app),
                                   AddLeaksCommand(&app), AddDiffCommand(&app),
                                   AddTimelineCommand(&app), AddHistogramCommand(&app),
                                   AddTemporaryCommand(&app), AddMapCommand(&app),
                                   AddReportCommand(&app), AddIndexCommand(&app), AddExportCommand(&app),
                                   AddPushCommand(&app)};
  if (argc > 1 && std::strcmp(argv[1], "run") == 0) {
    int options_end = argc;
    int start = ProgramStart(*commands[0].app, argc, argv, &options_end);
    program.assign(argv + start, argv + argc);
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
  for (const auto& command : commands) {
    if (command.app->parsed()) return command.run();
  }
  return kExitBadInput;
}
