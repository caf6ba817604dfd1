// src/cli/commands.h
//
// The `memlens` subcommands, one file each (cmd_*.cc); main.cc's kCommands lists them (name,
// one-line help, example, Add function). A runner returns the process exit status.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace memlens::cli {

using CommandRunner = std::function<int()>;

// Each Add*Command registers its options on `cmd`, the subcommand main.cc made from its entry in
// the command list (name and help are kept there, once), and returns the function that runs it.
// `program`: the program and its arguments, which main.cc sets aside before CLI11 parses.
CommandRunner AddRunCommand(CLI::App* cmd, const std::vector<std::string>* program);
CommandRunner AddSummaryCommand(CLI::App* cmd);
CommandRunner AddTopCommand(CLI::App* cmd);
CommandRunner AddTreeCommand(CLI::App* cmd);
CommandRunner AddLeaksCommand(CLI::App* cmd);
CommandRunner AddDiffCommand(CLI::App* cmd);
CommandRunner AddTimelineCommand(CLI::App* cmd);
CommandRunner AddHistogramCommand(CLI::App* cmd);
CommandRunner AddTemporaryCommand(CLI::App* cmd);
CommandRunner AddMapCommand(CLI::App* cmd);
CommandRunner AddRssCommand(CLI::App* cmd);
CommandRunner AddBlocksCommand(CLI::App* cmd);
CommandRunner AddReportCommand(CLI::App* cmd);
CommandRunner AddIndexCommand(CLI::App* cmd);
CommandRunner AddExportCommand(CLI::App* cmd);
CommandRunner AddPushCommand(CLI::App* cmd);
CommandRunner AddAttachCommand(CLI::App* cmd);
CommandRunner AddDetachCommand(CLI::App* cmd);
CommandRunner AddLiveCommand(CLI::App* cmd);
CommandRunner AddMarkCommand(CLI::App* cmd);

}  // namespace memlens::cli
