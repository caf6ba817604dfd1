// runtime_noise: a C++ program whose one leak is 1000 bytes at a known line, beside what the C
// and C++ runtime keeps for itself: libstdc++'s exception emergency pool (allocated before
// main), stdout's stdio buffer (at the first printf), and an exception thrown and caught
// (allocated and freed). Prints the size glibc gives stdout's buffer, for the test to check.
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

char* g_kept;

int Parse(const std::string& text) {
  if (text.empty()) throw std::invalid_argument("empty input");
  return std::stoi(text);
}

int main() {
  int parsed = 0;
  try {
    parsed = Parse("");
  } catch (const std::exception&) {
    parsed = -1;
  }
  g_kept = static_cast<char*>(std::malloc(1000));  // @leak
  // glibc's _IO_file_doallocate: BUFSIZ, or the file's block size when that is smaller.
  struct stat st;
  long buffer = BUFSIZ;
  if (fstat(1, &st) == 0 && st.st_blksize > 0 && st.st_blksize < BUFSIZ) buffer = st.st_blksize;
  std::printf("parsed %d, stdout buffer %ld\n", parsed, buffer);
  return 0;
}
