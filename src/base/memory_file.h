// src/base/memory_file.h
//
// MemoryFile: a file in memory (memfd) with a name, /proc/self/fd/N, for code that opens files
// by name: the tests hand a capture to the reader without a temporary file to name and remove.
// Bytes appended later are seen by every open of the name (a capture growing as it is followed).
//
// Runs on: tests, any thread.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <string>
#include <string_view>

namespace memlens {

class MemoryFile {
 public:
  explicit MemoryFile(std::string_view bytes = {})
      : fd_(memfd_create("memlens-test", MFD_CLOEXEC)),
        path_("/proc/self/fd/" + std::to_string(fd_)) {
    Append(bytes);
  }
  ~MemoryFile() {
    if (fd_ >= 0) close(fd_);
  }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;

  // False when the file could not be made or a write fell short.
  bool ok() const { return fd_ >= 0 && ok_; }
  const std::string& path() const { return path_; }
  void Append(std::string_view bytes) {
    ok_ = ok_ && fd_ >= 0 &&
          (bytes.empty() || write(fd_, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  }

 private:
  int fd_;
  std::string path_;
  bool ok_ = true;
};

}  // namespace memlens
