// src/cli/main.cc: the `memlens` command. One file per subcommand (cmd_*.cc).
#include <iostream>
#include <vector>

#include "cli/analysis_options.h"
#include "cli/commands.h"

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
      "Every analysis command takes --json (docs/json-output.md).");
  std::vector<Command> commands = {AddRunCommand(&app), AddSummaryCommand(&app),
                                   AddTopCommand(&app), AddTreeCommand(&app),
                                   AddLeaksCommand(&app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "memlens: " << e.what() << "\nRun 'memlens --help' for usage.\n";
    return kExitBadInput;
  }
  for (const auto& command : commands) {
    if (command.app->parsed()) return command.run();
  }
  return kExitBadInput;
}
