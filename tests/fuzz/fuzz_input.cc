// tests/fuzz/fuzz_input.cc: see fuzz_input.h.
#include "fuzz_input.h"

#include <cstdio>
#include <cstdlib>

namespace memlens::fuzz {

std::string ScratchPath(const char* name) {
  // Never destroyed: the exit handler that removes the folder runs after static destructors.
  static const std::string* folder = [] {
    const char* tmp = std::getenv("TMPDIR");
    auto* made = new std::string(std::string(tmp && *tmp ? tmp : "/tmp") + "/memlens-fuzz-XXXXXX");
    if (!mkdtemp(made->data())) std::abort();
    std::atexit([] { std::system(("rm -rf '" + *folder + "'").c_str()); });
    return made;
  }();
  return *folder + "/" + name;
}

bool WriteFile(const std::string& path, std::string_view bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}

}  // namespace memlens::fuzz
