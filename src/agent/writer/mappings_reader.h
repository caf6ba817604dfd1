// src/agent/writer/mappings_reader.h
//
// ReadMappings: the process's mappings and what of each is resident, read from
// /proc/PID/smaps (every mapping's header line and its Rss, Anonymous and Swap lines) and, for
// a private anonymous mapping that is only partly resident, /proc/PID/pagemap (which of its
// pages are): the body of a kMappings record (format/records.h; docs/agent.md, "Resident
// memory").
//
// Runs on: the writer thread, inside the program (writer.cc, /proc/self) or in memlens run
// (cli/hosted_writer.cc, /proc/PID of the program). Inside the program it must not wait on the
// program: it reads with pread through ProcFiles (no stdio and its locks), and never asks the
// allocator about its state (mallinfo and malloc_info lock every arena and walk every free
// chunk: the program's mallocs would wait for them). The kernel takes the process's mmap lock
// for reading while it lists mappings and page tables, a piece at a time (one huge mapping's
// page walk is one piece): the program's mmap, munmap and brk wait for it; how often that
// happens is the caller's rule (writer_core.cc).
#pragma once

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "format/records.h"

namespace memlens::agent {

// The files a reading uses, read with pread.
class ProcFiles {
 public:
  enum File { kSmaps = 0, kPagemap = 1 };
  virtual ~ProcFiles() = default;
  // Bytes read into buffer, 0 at the end of the file, -1 when it cannot be read.
  virtual ssize_t Read(File file, void* buffer, size_t size, uint64_t offset) = 0;
  // ioctl(pagemap, kPagemapScanRequest, arg) (PAGEMAP_SCAN, Linux 6.7): regions found, or -1
  // (errno set).
  virtual int ScanPagemap(void* arg) = 0;
};
extern const unsigned long kPagemapScanRequest;

// The two files of one /proc directory ("/proc/self", "/proc/1234") on descriptors of their
// own, opened at construction. smaps and pagemap name the process whose memory they were
// opened on: after an exec or in a forked child they must be opened again.
// Defined here, with no member out of line: the class has no key function, so its vtable and
// type info are made where it is used (memlens run's hosted writer has RTTI, the agent's
// code does not, and UBSan's checks there need the type info).
class ProcDirFiles : public ProcFiles {
 public:
  explicit ProcDirFiles(const std::string& proc_dir) {
    fds_[kSmaps] = open((proc_dir + "/smaps").c_str(), O_RDONLY | O_CLOEXEC);
    fds_[kPagemap] = open((proc_dir + "/pagemap").c_str(), O_RDONLY | O_CLOEXEC);
  }
  ~ProcDirFiles() override {
    for (int fd : fds_) {
      if (fd >= 0) close(fd);
    }
  }
  ProcDirFiles(const ProcDirFiles&) = delete;
  ProcDirFiles& operator=(const ProcDirFiles&) = delete;
  ssize_t Read(File file, void* buffer, size_t size, uint64_t offset) override {
    if (fds_[file] < 0) return -1;
    ssize_t n;
    do {
      n = pread(fds_[file], buffer, size, static_cast<off_t>(offset));
    } while (n < 0 && errno == EINTR);
    return n;
  }
  int ScanPagemap(void* arg) override {
    if (fds_[kPagemap] < 0) {
      errno = EBADF;
      return -1;
    }
    return ioctl(fds_[kPagemap], kPagemapScanRequest, arg);
  }

 private:
  int fds_[2] = {-1, -1};
};

// Reads the mappings into out->mappings (by address) and sets out->page_size; the caller sets
// the times and seq. Page runs are read for at most max_pages pages in all: a mapping past
// that keeps none (nor any when pagemap cannot be read). False, with no mappings, when smaps
// cannot be read or lists nothing (the process is gone).
//
// Page runs come from PAGEMAP_SCAN where the kernel has it (6.7 on): it returns the resident
// ranges themselves, and tells the shared zero page (a page only read, which Rss does not
// count) from a resident one. Older kernels: pagemap's 8 bytes a page, where the zero page
// shows present (`scan` false, for tests, reads so everywhere).
bool ReadMappings(ProcFiles* files, uint64_t max_pages, format::MappingsRecord* out,
                  bool scan = true);

// --- the parts, for tests ---

// Parses smaps text fed in pieces of any size into *out. A mapping that starts below the end
// of the one before (the list changed between two reads of the file) is left out, with its
// lines; sizes are clamped to the mapping.
class SmapsParser {
 public:
  SmapsParser(std::vector<format::Mapping>* out, uint64_t page_size)
      : out_(out), page_size_(page_size) {}
  void Feed(const char* data, size_t size);
  void Finish();  // the last line, when the text did not end with a newline

 private:
  void Line(std::string_view line);

  std::vector<format::Mapping>* out_;
  uint64_t page_size_;
  std::string partial_;    // a line cut by the end of a piece
  bool skipping_ = false;  // the current mapping's lines are dropped
};

// "start-end perms offset dev inode [name]": the mapping's start, end, flags, offset, inode
// and name (which may hold spaces and end with " (deleted)"). False when not a header line.
bool ParseMappingHeader(std::string_view line, format::Mapping* m);

// Whether the writer reads the pages of m from pagemap: private, anonymous (no file, not the
// kernel's [vsyscall], [vdso], [vvar]) and partly resident.
bool ReadsPages(const format::Mapping& m);

// Builds page runs (format::Mapping::page_runs: absent, present, absent... starting with
// absent) from pagemap entries given in order. Present = bit 63. The runs cover every page
// added, the last run included.
class PageRunBuilder {
 public:
  void Add(const uint64_t* entries, size_t count);
  // The runs so far; the builder starts over.
  std::vector<uint64_t> Take();

 private:
  std::vector<uint64_t> runs_;
  uint64_t current_ = 0;  // pages in the run being built
  bool present_ = false;  // what the run being built counts
};

}  // namespace memlens::agent
