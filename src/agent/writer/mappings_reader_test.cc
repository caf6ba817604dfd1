// The writer's reading of /proc/PID/smaps and pagemap (mappings_reader.h): the parser on
// smaps text as kernels print it, the page runs, and a reading of this test's own process,
// checked against what it mapped and against the kernel's resident figure.
#include "agent/writer/mappings_reader.h"

#include <errno.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

namespace memlens::agent {
namespace {

using format::Mapping;

constexpr char kSmaps[] =
    "55d0c0a00000-55d0c0a02000 r--p 00000000 fd:01 1835023                    /usr/bin/cat\n"
    "Size:                  8 kB\n"
    "KernelPageSize:        4 kB\n"
    "Rss:                   8 kB\n"
    "Pss:                   8 kB\n"
    "Anonymous:             0 kB\n"
    "AnonHugePages:         0 kB\n"
    "Swap:                  0 kB\n"
    "SwapPss:               0 kB\n"
    "VmFlags: rd mr mw me sd \n"
    "55d0c1c5e000-55d0c1c7f000 rw-p 00000000 00:00 0                          [heap]\n"
    "Rss:                  12 kB\n"
    "Anonymous:            12 kB\n"
    "Swap:                  4 kB\n"
    "SwapPss:               4 kB\n"
    "7f1a2b000000-7f1a2b100000 rw-s 00000000 00:01 2050                       /dev/shm/a b (deleted)\n"
    "Rss:                1024 kB\n"
    "Anonymous:             0 kB\n"
    "Swap:                  0 kB\n"
    "7f1a2c000000-7f1a2c021000 rw-p 00000000 00:00 0 \n"
    "Rss:                  40 kB\n"
    "Anonymous:            40 kB\n"
    "Swap:                  0 kB\n"
    "7f1a2d000000-7f1a2d010000 r--p 00001000 08:02 42                         /home/u/my file.bin\n"
    "Rss:                  64 kB\n"
    "Anonymous:             0 kB\n"
    "7ffd1e000000-7ffd1e021000 rw-p 00000000 00:00 0                          [stack]\n"
    "Rss:                  16 kB\n"
    "Anonymous:            16 kB\n"
    "Swap:                  0 kB\n"
    "7ffd1e1fe000-7ffd1e200000 r-xp 00000000 00:00 0                          [vdso]\n"
    "Rss:                   4 kB\n"
    "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n"
    "Rss:                   0 kB\n"
    "Anonymous:             0 kB\n";

std::vector<Mapping> Parse(const std::string& text, size_t piece) {
  std::vector<Mapping> out;
  SmapsParser parser(&out, 4096);
  for (size_t at = 0; at < text.size(); at += piece) {
    parser.Feed(text.data() + at, std::min(piece, text.size() - at));
  }
  parser.Finish();
  return out;
}

TEST(SmapsParser, ReadsEveryMappingAndItsResidentLines) {
  std::vector<Mapping> m = Parse(kSmaps, sizeof kSmaps);
  ASSERT_EQ(m.size(), 8u);
  EXPECT_EQ(m[0].start, 0x55d0c0a00000u);
  EXPECT_EQ(m[0].end, 0x55d0c0a02000u);
  EXPECT_EQ(m[0].flags, Mapping::kRead);
  EXPECT_EQ(m[0].inode, 1835023u);
  EXPECT_EQ(m[0].name, "/usr/bin/cat");
  EXPECT_EQ(m[0].rss, 8192u);
  EXPECT_EQ(m[0].swap, 0u);  // SwapPss is not Swap

  EXPECT_EQ(m[1].name, "[heap]");
  EXPECT_EQ(m[1].flags, Mapping::kRead | Mapping::kWrite);
  EXPECT_EQ(m[1].rss, 12288u);
  EXPECT_EQ(m[1].anonymous, 12288u);
  EXPECT_EQ(m[1].swap, 4096u);

  EXPECT_EQ(m[2].name, "/dev/shm/a b (deleted)");  // spaces kept, as the kernel prints it
  EXPECT_EQ(m[2].flags, Mapping::kRead | Mapping::kWrite | Mapping::kShared);
  EXPECT_EQ(m[2].inode, 2050u);

  EXPECT_EQ(m[3].name, "");  // no name (some kernels end the line with a space)
  EXPECT_EQ(m[3].rss, 40960u);

  EXPECT_EQ(m[4].name, "/home/u/my file.bin");
  EXPECT_EQ(m[4].offset, 0x1000u);
  EXPECT_EQ(m[5].name, "[stack]");
  EXPECT_EQ(m[6].name, "[vdso]");
  EXPECT_EQ(m[6].flags, Mapping::kRead | Mapping::kExec);
  EXPECT_EQ(m[7].name, "[vsyscall]");
  EXPECT_EQ(m[7].start, 0xffffffffff600000u);
  EXPECT_EQ(m[7].flags, Mapping::kExec);
}

TEST(SmapsParser, PiecesOfAnySizeGiveTheSameMappings) {
  const std::vector<Mapping> whole = Parse(kSmaps, sizeof kSmaps);
  for (size_t piece : {1, 2, 7, 64, 100}) EXPECT_EQ(Parse(kSmaps, piece), whole) << piece;
  std::string unterminated(kSmaps);
  unterminated.pop_back();  // the last line without its newline
  EXPECT_EQ(Parse(unterminated, 13), whole);
}

TEST(SmapsParser, LeavesOutOverlapsAndClampsSizes) {
  const std::string text =
      "1000-3000 rw-p 00000000 00:00 0 \n"
      "Rss:                  99 kB\n"  // more than the mapping: clamped to its 8 KiB
      "2000-5000 rw-p 00000000 00:00 0 \n"  // grew between two reads: starts below 3000
      "Rss:                  12 kB\n"
      "6000-7000 rw-p 00000000 00:00 0 \n"
      "Rss:                   4 kB\n";
  std::vector<Mapping> m = Parse(text, text.size());
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].rss, 8192u);
  EXPECT_EQ(m[1].start, 0x6000u);
  EXPECT_EQ(m[1].rss, 4096u);
}

TEST(MappingHeader, RefusesWhatIsNoHeader) {
  Mapping m;
  EXPECT_FALSE(ParseMappingHeader("Rss:                  12 kB", &m));
  EXPECT_FALSE(ParseMappingHeader("AnonHugePages:         0 kB", &m));  // starts with hex
  EXPECT_FALSE(ParseMappingHeader("VmFlags: rd wr mr mw me ac sd", &m));
  EXPECT_FALSE(ParseMappingHeader("3000-1000 rw-p 00000000 00:00 0", &m));  // end before start
  EXPECT_TRUE(ParseMappingHeader("1000-3000 rw-p 00000000 00:00 0", &m));
  EXPECT_EQ(m.name, "");
}

TEST(ReadsPages, OnlyPartlyResidentPrivateAnonymousMappings) {
  std::vector<Mapping> m = Parse(kSmaps, sizeof kSmaps);
  std::vector<bool> reads;
  for (const Mapping& one : m) reads.push_back(ReadsPages(one));
  // [heap] (3 of 33 pages resident), the nameless mapping (10 of 33) and [stack] (4 of 33);
  // not the files, the shared memory, nor the kernel's [vdso] and [vsyscall].
  EXPECT_EQ(reads, (std::vector<bool>{false, true, false, true, false, true, false, false}));
  Mapping full = m[3];
  full.rss = full.end - full.start;
  EXPECT_FALSE(ReadsPages(full));
  full.rss = 0;
  EXPECT_FALSE(ReadsPages(full));
}

TEST(PageRunBuilder, AlternatesStartingWithAbsent) {
  constexpr uint64_t P = uint64_t{1} << 63, S = uint64_t{1} << 62;  // present, swapped
  PageRunBuilder b;
  const uint64_t first[] = {P, P, 0, S};  // a swapped page is not resident
  b.Add(first, 4);
  const uint64_t second[] = {0, P, 0};  // runs go on across pieces
  b.Add(second, 3);
  EXPECT_EQ(b.Take(), (std::vector<uint64_t>{0, 2, 3, 1, 1}));
  const uint64_t absent[] = {0, 0};
  b.Add(absent, 2);
  EXPECT_EQ(b.Take(), (std::vector<uint64_t>{2}));  // started over
  EXPECT_EQ(b.Take(), (std::vector<uint64_t>{}));
}

uint64_t StatmResidentBytes() {
  FILE* f = fopen("/proc/self/statm", "r");
  unsigned long long size = 0, resident = 0;
  if (f) {
    EXPECT_EQ(fscanf(f, "%llu %llu", &size, &resident), 2);
    fclose(f);
  }
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

TEST(ReadMappings, ThisProcessEveryOtherPageTouched) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  constexpr size_t kPages = 64;
  auto* p = static_cast<char*>(
      mmap(nullptr, kPages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(p, MAP_FAILED);
  // Its own mapping: the kernel would join it to a neighbour of the same kind.
  ASSERT_EQ(madvise(p, kPages * page, MADV_NOHUGEPAGE), 0);
  for (size_t i = 1; i < kPages; i += 2) p[i * page] = 1;

  ProcDirFiles files("/proc/self");
  format::MappingsRecord record;
  ASSERT_TRUE(ReadMappings(&files, uint64_t{1} << 20, &record, /*scan=*/false));
  std::vector<uint64_t> read_runs;
  for (const Mapping& m : record.mappings) {
    if (m.start == reinterpret_cast<uint64_t>(p)) read_runs = m.page_runs;
  }
  ASSERT_TRUE(ReadMappings(&files, uint64_t{1} << 20, &record));
  const uint64_t statm = StatmResidentBytes();
  EXPECT_EQ(record.page_size, page);
  const Mapping* ours = nullptr;
  uint64_t rss = 0, previous_end = 0;
  for (const Mapping& m : record.mappings) {
    EXPECT_GE(m.start, previous_end);
    previous_end = m.end;
    if (m.start <= reinterpret_cast<uint64_t>(p) && reinterpret_cast<uint64_t>(p) < m.end) {
      ours = &m;
    }
    if (m.name != "[vsyscall]") rss += m.rss;
  }
  ASSERT_NE(ours, nullptr);
  EXPECT_EQ(ours->start, reinterpret_cast<uint64_t>(p));
  EXPECT_EQ(ours->end - ours->start, kPages * page);
  EXPECT_EQ(ours->rss, kPages / 2 * page);
  std::vector<uint64_t> alternating;
  for (size_t i = 0; i < kPages; ++i) alternating.push_back(1);  // absent, present, absent...
  EXPECT_EQ(ours->page_runs, alternating);
  EXPECT_EQ(read_runs, alternating);  // pagemap's entries, as on kernels before 6.7
  // The mappings' sum is the kernel's resident figure, a little apart: the test's own
  // allocations between the two readings (ASan's allocator makes many), and statm's counters,
  // which the kernel keeps per CPU and adds up in batches.
  EXPECT_NEAR(static_cast<double>(rss), static_cast<double>(statm),
              64.0 * page + 0.01 * static_cast<double>(statm));

  // Past the cap, no runs; and no pagemap, no runs.
  ASSERT_TRUE(ReadMappings(&files, kPages - 1, &record));
  for (const Mapping& m : record.mappings) {
    if (m.start == reinterpret_cast<uint64_t>(p)) {
      EXPECT_TRUE(m.page_runs.empty());
    }
  }
  munmap(p, kPages * page);
}

// A page only read maps the kernel's zero page: not resident (Rss does not count it), which
// PAGEMAP_SCAN tells; pagemap's entries say present.
TEST(ReadMappings, TheZeroPageIsNotResident) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto* p = static_cast<volatile char*>(
      mmap(nullptr, 8 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(p, MAP_FAILED);
  ASSERT_EQ(madvise(const_cast<char*>(p), 8 * page, MADV_NOHUGEPAGE), 0);
  EXPECT_EQ(p[2 * page], 0);
  p[5 * page] = 1;
  ProcDirFiles files("/proc/self");
  const auto at = reinterpret_cast<uint64_t>(p);
  for (bool scan : {true, false}) {
    format::MappingsRecord record;
    ASSERT_TRUE(ReadMappings(&files, uint64_t{1} << 20, &record, scan));
    const Mapping* ours = nullptr;
    for (const Mapping& m : record.mappings) {
      if (m.start == at) ours = &m;
    }
    ASSERT_NE(ours, nullptr);
    EXPECT_EQ(ours->rss, page);
    const std::vector<uint64_t> zero_present{2, 1, 2, 1, 2}, resident{5, 1, 2};
    if (scan && ours->page_runs != zero_present) {  // else a kernel without PAGEMAP_SCAN
      EXPECT_EQ(ours->page_runs, resident);
    } else {
      EXPECT_EQ(ours->page_runs, zero_present);
    }
  }
  munmap(const_cast<char*>(p), 8 * page);
}

class NoPagemap : public ProcFiles {
 public:
  ProcDirFiles files{"/proc/self"};
  ssize_t Read(File file, void* buffer, size_t size, uint64_t offset) override {
    return file == kPagemap ? -1 : files.Read(file, buffer, size, offset);
  }
  int ScanPagemap(void*) override {
    errno = EACCES;
    return -1;
  }
};

TEST(ReadMappings, WithoutPagemapTheMappingsKeepNoRuns) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto* p = static_cast<char*>(
      mmap(nullptr, 8 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(p, MAP_FAILED);
  p[page] = 1;
  NoPagemap files;
  format::MappingsRecord record;
  ASSERT_TRUE(ReadMappings(&files, uint64_t{1} << 20, &record));
  for (const Mapping& m : record.mappings) EXPECT_TRUE(m.page_runs.empty()) << m.name;
  munmap(p, 8 * page);
}

TEST(ReadMappings, NoSmapsNoRecord) {
  ProcDirFiles files("/proc/no-such-process");
  format::MappingsRecord record;
  EXPECT_FALSE(ReadMappings(&files, 1, &record));
  EXPECT_TRUE(record.mappings.empty());
}

}  // namespace
}  // namespace memlens::agent
