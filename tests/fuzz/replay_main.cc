// tests/fuzz/replay_main.cc: a main for the fuzz targets in builds without libFuzzer (gcc, or
// MEMLENS_FUZZ off): runs the target once on every file of the folders and files given, so the
// corpus, and the inputs that once crashed, are replayed by every test run.
#include <dirent.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

int Run(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    std::fprintf(stderr, "%s: no such file or folder\n", path.c_str());
    return -1;
  }
  if (S_ISDIR(st.st_mode)) {
    int runs = 0;
    DIR* dir = opendir(path.c_str());
    while (dirent* e = dir ? readdir(dir) : nullptr) {
      if (e->d_name[0] == '.') continue;
      int n = Run(path + "/" + e->d_name);
      if (n < 0) return n;
      runs += n;
    }
    if (dir) closedir(dir);
    return runs;
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  const std::string bytes = s.str();
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  int runs = 0;
  for (int i = 1; i < argc; ++i) {
    int n = Run(argv[i]);
    if (n < 0) return 1;
    runs += n;
  }
  std::printf("%d inputs ran without a fault\n", runs);
  return runs > 0 ? 0 : 1;  // an empty corpus tests nothing
}
