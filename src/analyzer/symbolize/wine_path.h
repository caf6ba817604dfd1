// src/analyzer/symbolize/wine_path.h
//
// Where a Windows module path of a capture lies on this Linux machine. The Windows agent
// records paths as GetModuleFileNameW gives them ("Z:\tmp\app.exe",
// "C:\windows\system32\kernel32.dll"); under Wine each drive is a symlink in the prefix,
// $WINEPREFIX/dosdevices/z: -> "/", c: -> "../drive_c". The Symbolizer opens module files
// through HostPath; frames keep the recorded (Windows) path as their module name.
//
// Called by: the Symbolizer, on its thread. Reads the environment and the file system only.
#pragma once

#include <string>

namespace memlens::analyzer {

// True for "X:\..." and "X:/..." (any drive letter), with or without the "\\?\" prefix of
// long paths.
bool IsWindowsPath(const std::string& path);

// `path` itself when it is not a Windows path. Else its Linux path through the drive's symlink
// in `wine_prefix`/dosdevices (a relative link target is taken from dosdevices, as Wine does);
// with no dosdevices folder at all, drive Z: is "/" (Wine's default); "" when the drive cannot
// be resolved.
std::string WinePathToHost(const std::string& path, const std::string& wine_prefix);

// The prefix the recorded program most likely ran in: $WINEPREFIX, else $HOME/.wine.
std::string DefaultWinePrefix();

// WinePathToHost(path, DefaultWinePrefix()).
std::string HostPath(const std::string& path);

}  // namespace memlens::analyzer
