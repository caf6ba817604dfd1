// src/analyzer/symbolize/wine_path.cc
//
// Drive letters resolved by reading the dosdevices symlink rather than opening through it, so
// that warnings name the real Linux file.
#include "analyzer/symbolize/wine_path.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

namespace memlens::analyzer {
namespace {

// Without the "\\?\" (or NT "\??\") prefix that long paths carry.
std::string WithoutLongPrefix(const std::string& path) {
  if (path.size() >= 4 && path[0] == '\\' && (path[1] == '\\' || path[1] == '?') &&
      path[2] == '?' && path[3] == '\\') {
    return path.substr(4);
  }
  return path;
}

bool IsDrivePath(const std::string& path) {
  const char c = path.size() >= 3 ? path[0] : '\0';
  return ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) && path[1] == ':' &&
         (path[2] == '\\' || path[2] == '/');
}

}  // namespace

bool IsWindowsPath(const std::string& path) { return IsDrivePath(WithoutLongPrefix(path)); }

std::string WinePathToHost(const std::string& recorded, const std::string& wine_prefix) {
  const std::string path = WithoutLongPrefix(recorded);
  if (!IsDrivePath(path)) return recorded;
  const char drive = static_cast<char>(path[0] | 0x20);  // lower case
  std::string rest = path.substr(3);
  for (char& c : rest) {
    if (c == '\\') c = '/';
  }

  const std::string devices = wine_prefix + "/dosdevices";
  std::string root;
  char target[4096];
  const ssize_t n = readlink((devices + "/" + drive + ":").c_str(), target, sizeof(target) - 1);
  struct stat info;
  if (n > 0) {
    root.assign(target, n);
    if (root[0] != '/') root = devices + "/" + root;
  } else if (drive == 'z' && (wine_prefix.empty() || stat(devices.c_str(), &info) != 0)) {
    root = "/";
  } else {
    return "";
  }
  if (root.back() != '/') root.push_back('/');
  return root + rest;
}

std::string DefaultWinePrefix() {
  if (const char* prefix = std::getenv("WINEPREFIX"); prefix != nullptr && prefix[0] != '\0') {
    return prefix;
  }
  const char* home = std::getenv("HOME");
  return home != nullptr && home[0] != '\0' ? std::string(home) + "/.wine" : "";
}

std::string HostPath(const std::string& path) {
  return IsWindowsPath(path) ? WinePathToHost(path, DefaultWinePrefix()) : path;
}

}  // namespace memlens::analyzer
