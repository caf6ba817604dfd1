// src/cli/commands.h
//
// The `memlens` subcommands, one file each (cmd_*.cc). Each Add*Command registers its options
// on the CLI11 app and returns the function that runs it once the command line is parsed; that
// function returns the process exit status.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace memlens::cli {

using CommandRunner = std::function<int()>;

struct Command {
  CLI::App* app;
  CommandRunner run;
};

// `program`: the program and its arguments, which main.cc sets aside before CLI11 parses.
Command AddRunCommand(CLI::App* app, const std::vector<std::string>* program);
Command AddSummaryCommand(CLI::App* app);
Command AddTopCommand(CLI::App* app);
Command AddTreeCommand(CLI::App* app);
Command AddLeaksCommand(CLI::App* app);
Command AddDiffCommand(CLI::App* app);
Command AddTimelineCommand(CLI::App* app);
Command AddHistogramCommand(CLI::App* app);
Command AddTemporaryCommand(CLI::App* app);
Command AddMapCommand(CLI::App* app);
Command AddReportCommand(CLI::App* app);
Command AddIndexCommand(CLI::App* app);
Command AddExportCommand(CLI::App* app);
Command AddPushCommand(CLI::App* app);

}  // namespace memlens::cli
