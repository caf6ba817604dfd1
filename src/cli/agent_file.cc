// src/cli/agent_file.cc
#include "cli/agent_file.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

namespace memlens::cli {

std::string FindAgent() {
  if (const char* env = getenv("MEMLENS_AGENT"); env && *env) return env;
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return "";
  std::string path(exe, static_cast<size_t>(n));
  for (int up = 0; up < 2; ++up) path.erase(path.rfind('/'));  // .../bin/memlens -> ...
  return path + "/lib/libmemlens.so";
}

}  // namespace memlens::cli
