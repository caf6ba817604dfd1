// src/agent/writer/mappings_reader.cc: see mappings_reader.h.
#include "agent/writer/mappings_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace memlens::agent {
namespace {

// smaps is read 64 KiB at a time: the kernel holds the mmap lock while it fills one read's
// worth (one mapping at least), and lets go between reads.
constexpr size_t kSmapsPieceBytes = 64 << 10;
// pagemap is read 4,096 entries at a time (32 KiB: 16 MiB of address space with 4 KiB pages).
constexpr size_t kPagemapPieceEntries = 4096;
constexpr uint64_t kPresentBit = uint64_t{1} << 63;

// PAGEMAP_SCAN's argument and result (linux/fs.h from 6.7; older headers lack them).
struct PmScanArg {
  uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
  uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
struct PageRegion {
  uint64_t start, end, categories;
};
constexpr uint64_t kPageIsPresent = 1 << 3;
constexpr uint64_t kPageIsPfnZero = 1 << 5;
constexpr size_t kScanRegions = 1024;  // per ioctl: 24 KiB

enum class Runs { kRead, kNoScan, kFailed };

// One mapping's page runs by PAGEMAP_SCAN: the ranges of pages present and not the zero page.
Runs ScanPageRuns(ProcFiles* files, uint64_t page, format::Mapping* m, PageRegion* regions) {
  PmScanArg arg{};
  arg.size = sizeof arg;
  arg.start = m->start;
  arg.end = m->end;
  arg.vec = reinterpret_cast<uint64_t>(regions);
  arg.vec_len = kScanRegions;
  arg.category_inverted = kPageIsPfnZero;
  arg.category_mask = kPageIsPresent | kPageIsPfnZero;
  arg.return_mask = kPageIsPresent;
  std::vector<uint64_t>& runs = m->page_runs;
  runs.clear();
  uint64_t covered = m->start;  // the runs so far end here
  for (;;) {
    int n = files->ScanPagemap(&arg);
    if (n < 0) {
      runs.clear();
      return errno == ENOTTY || errno == EINVAL ? Runs::kNoScan : Runs::kFailed;
    }
    for (int i = 0; i < n; ++i) {
      const PageRegion& r = regions[i];
      if (r.start < covered || r.end > m->end || r.end <= r.start) {  // never, from a kernel
        runs.clear();
        return Runs::kFailed;
      }
      const uint64_t absent = (r.start - covered) / page, present = (r.end - r.start) / page;
      if (absent == 0 && !runs.empty()) {
        runs.back() += present;  // a range cut where one call's regions ended
      } else {
        runs.push_back(absent);
        runs.push_back(present);
      }
      covered = r.end;
    }
    if (arg.walk_end >= m->end || arg.walk_end <= arg.start) break;
    arg.start = arg.walk_end;  // the regions were full: on from where the walk stopped
  }
  if (covered < m->end) runs.push_back((m->end - covered) / page);
  return Runs::kRead;
}

bool IsHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// Reads an unsigned number in `base` (16 or 10) at the front of *s; false when none.
bool TakeNumber(std::string_view* s, int base, uint64_t* value) {
  uint64_t v = 0;
  size_t i = 0;
  for (; i < s->size(); ++i) {
    const char c = (*s)[i];
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (base == 16 && IsHex(c)) {
      digit = (c | 0x20) - 'a' + 10;
    } else {
      break;
    }
    v = v * base + digit;
  }
  if (i == 0) return false;
  *value = v;
  s->remove_prefix(i);
  return true;
}

bool TakeChar(std::string_view* s, char c) {
  if (s->empty() || s->front() != c) return false;
  s->remove_prefix(1);
  return true;
}

void SkipSpaces(std::string_view* s) {
  while (!s->empty() && s->front() == ' ') s->remove_prefix(1);
}

// Reads one mapping's page runs; false when pagemap cannot be read.
bool ReadPageRuns(ProcFiles* files, uint64_t page, format::Mapping* m, uint64_t* entries) {
  const uint64_t first = m->start / page, pages = (m->end - m->start) / page;
  PageRunBuilder runs;
  for (uint64_t done = 0; done < pages;) {
    const uint64_t want = std::min<uint64_t>(pages - done, kPagemapPieceEntries);
    ssize_t n = files->Read(ProcFiles::kPagemap, entries, want * sizeof(uint64_t),
                            (first + done) * sizeof(uint64_t));
    if (n <= 0 || n % sizeof(uint64_t) != 0) return false;
    runs.Add(entries, static_cast<size_t>(n) / sizeof(uint64_t));
    done += static_cast<uint64_t>(n) / sizeof(uint64_t);
  }
  m->page_runs = runs.Take();
  return true;
}

}  // namespace

const unsigned long kPagemapScanRequest = _IOWR('f', 16, PmScanArg);

bool ParseMappingHeader(std::string_view line, format::Mapping* m) {
  uint64_t start, end, offset, inode, dev;
  if (line.empty() || !IsHex(line.front())) return false;
  if (!TakeNumber(&line, 16, &start) || !TakeChar(&line, '-') ||
      !TakeNumber(&line, 16, &end) || !TakeChar(&line, ' ') || end <= start) {
    return false;
  }
  if (line.size() < 5 || line[4] != ' ') return false;
  const std::string_view perms = line.substr(0, 4);
  line.remove_prefix(5);
  // dev is "major:minor" in hex; kept by nobody (the inode and the name say what it is).
  if (!TakeNumber(&line, 16, &offset) || !TakeChar(&line, ' ') || !TakeNumber(&line, 16, &dev) ||
      !TakeChar(&line, ':') || !TakeNumber(&line, 16, &dev) || !TakeChar(&line, ' ') ||
      !TakeNumber(&line, 10, &inode)) {
    return false;
  }
  if (!line.empty() && line.front() != ' ') return false;
  SkipSpaces(&line);  // the kernel pads the name to a column; the name is the rest of the line
  m->start = start;
  m->end = end;
  m->flags = (perms[0] == 'r' ? format::Mapping::kRead : 0) |
             (perms[1] == 'w' ? format::Mapping::kWrite : 0) |
             (perms[2] == 'x' ? format::Mapping::kExec : 0) |
             (perms[3] == 's' ? format::Mapping::kShared : 0);
  m->offset = offset;
  m->inode = inode;
  m->name.assign(line.data(), line.size());
  m->rss = m->anonymous = m->swap = 0;
  m->page_runs.clear();
  return true;
}

void SmapsParser::Feed(const char* data, size_t size) {
  const char* end = data + size;
  if (!partial_.empty()) {
    const char* newline = static_cast<const char*>(memchr(data, '\n', size));
    if (!newline) {
      partial_.append(data, size);
      return;
    }
    partial_.append(data, newline);
    Line(partial_);
    partial_.clear();
    data = newline + 1;
  }
  while (data < end) {
    const char* newline = static_cast<const char*>(memchr(data, '\n', end - data));
    if (!newline) {
      partial_.assign(data, end);
      return;
    }
    Line(std::string_view(data, newline - data));
    data = newline + 1;
  }
}

void SmapsParser::Finish() {
  if (!partial_.empty()) Line(partial_);
  partial_.clear();
}

void SmapsParser::Line(std::string_view line) {
  format::Mapping header;
  if (ParseMappingHeader(line, &header)) {
    // The kernel lists from where its last read ended: a mapping that grew or merged between
    // two reads may start below it. The record's mappings never overlap (readers refuse that).
    skipping_ = !out_->empty() && header.start < out_->back().end;
    if (!skipping_) out_->push_back(std::move(header));
    return;
  }
  if (skipping_ || out_->empty()) return;
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return;
  const std::string_view key = line.substr(0, colon);
  format::Mapping& m = out_->back();
  uint64_t* field = key == "Rss"         ? &m.rss
                    : key == "Anonymous" ? &m.anonymous
                    : key == "Swap"      ? &m.swap
                                         : nullptr;
  if (!field) return;
  std::string_view value = line.substr(colon + 1);
  SkipSpaces(&value);
  uint64_t kb = 0;
  if (!TakeNumber(&value, 10, &kb)) return;
  // Whole pages, and never more than the mapping: readers refuse a record that says otherwise.
  const uint64_t bytes = std::min(kb * 1024, m.end - m.start);
  *field = bytes & ~(page_size_ - 1);
}

bool ReadsPages(const format::Mapping& m) {
  if (m.inode != 0 || (m.flags & format::Mapping::kShared)) return false;
  if (m.rss == 0 || m.rss >= m.end - m.start) return false;  // none or all: nothing to place
  // The kernel's own pages, the same in every process.
  return m.name != "[vsyscall]" && m.name != "[vdso]" && m.name != "[vvar]" &&
         m.name != "[vvar_vclock]";
}

void PageRunBuilder::Add(const uint64_t* entries, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const bool present = (entries[i] & kPresentBit) != 0;
    if (present != present_) {
      runs_.push_back(current_);  // the first run (absent) may be 0 pages
      present_ = present;
      current_ = 0;
    }
    ++current_;
  }
}

std::vector<uint64_t> PageRunBuilder::Take() {
  if (current_) runs_.push_back(current_);
  std::vector<uint64_t> runs = std::move(runs_);
  runs_.clear();
  current_ = 0;
  present_ = false;
  return runs;
}

bool ReadMappings(ProcFiles* files, uint64_t max_pages, format::MappingsRecord* out, bool scan) {
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  out->page_size = page;
  out->mappings.clear();
  SmapsParser parser(&out->mappings, page);
  std::vector<char> piece(kSmapsPieceBytes);
  for (uint64_t offset = 0;;) {
    ssize_t n = files->Read(ProcFiles::kSmaps, piece.data(), piece.size(), offset);
    if (n < 0) {
      out->mappings.clear();
      return false;
    }
    if (n == 0) break;
    parser.Feed(piece.data(), static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
  parser.Finish();
  if (out->mappings.empty()) return false;

  std::vector<PageRegion> regions;
  std::vector<uint64_t> entries;
  uint64_t budget = max_pages;
  for (format::Mapping& m : out->mappings) {
    if (!ReadsPages(m)) continue;
    const uint64_t pages = (m.end - m.start) / page;
    if (pages > budget) continue;  // a smaller one further on may still fit
    budget -= pages;
    if (scan) {
      regions.resize(kScanRegions);
      const Runs got = ScanPageRuns(files, page, &m, regions.data());
      if (got == Runs::kRead) continue;
      // An older kernel: pagemap's entries, for this and the rest. An answer that makes no
      // sense for this mapping (seen under ASan's shadow memory): its entries, and the scan
      // again for the next.
      if (got == Runs::kNoScan) scan = false;
    }
    entries.resize(kPagemapPieceEntries);
    if (!ReadPageRuns(files, page, &m, entries.data())) {
      m.page_runs.clear();
      break;  // refused or gone: no runs for the rest either
    }
  }
  return true;
}

}  // namespace memlens::agent
