// word_index: the example memlens records in README.md's first command.
//
// Builds an index word -> line numbers of a text file. It has the three things a memory
// profiler should show at once: a temporary peak (the whole file read into one buffer, then
// split into lines), memory that stays for the program's lifetime (the index), and a leak (a
// per-line scratch buffer that is never freed for lines longer than 60 characters).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string ReadWholeFile(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

// Lower-cases a line into a fresh buffer; the caller is meant to free it, and forgets to when
// the line is long: the leak the summary points at.
char* NormalizedCopy(const std::string& line) {
  char* copy = static_cast<char*>(std::malloc(line.size() + 1));
  for (size_t i = 0; i <= line.size(); ++i) copy[i] = static_cast<char>(std::tolower(line.c_str()[i]));
  return copy;
}

using Index = std::map<std::string, std::vector<int>>;

void AddLine(Index* index, const std::string& line, int number) {
  char* normalized = NormalizedCopy(line);
  std::istringstream words(normalized);
  for (std::string word; words >> word;) (*index)[word].push_back(number);
  if (line.size() <= 60) std::free(normalized);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: word_index FILE\n");
    return 2;
  }
  Index index;
  {
    std::vector<std::string> lines = SplitLines(ReadWholeFile(argv[1]));
    for (size_t i = 0; i < lines.size(); ++i) AddLine(&index, lines[i], static_cast<int>(i + 1));
  }  // the file's text and lines are released here: the peak is behind us
  size_t occurrences = 0;
  for (const auto& [word, lines] : index) occurrences += lines.size();
  std::printf("%zu distinct words, %zu occurrences\n", index.size(), occurrences);
  return 0;
}
