// src/analyzer/symbolize/pe_symbolizer_test.cc
//
// Tests of the Symbolizer on Windows PE modules: tests/fixtures/pe/symbols.c built by mingw-w64
// into symbols.exe (DWARF), symbols_nodebug.exe (COFF symbols only) and symbols_stripped.exe.
// Addresses come from mingw's own nm (symbols.nm, written at build time), expected lines from
// searching symbols.c for the text on them, so neither depends on the code under test. Each
// module record is what the Windows agent writes: load_bias = actual base - ImageBase, the
// CodeView GUID + age as build_id. Without mingw-w64 at build time the tests skip, or fail
// when MEMLENS_REQUIRE_WINDOWS=1 (CI).
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>

#include "analyzer/symbolize/pe_image.h"
#include "analyzer/symbolize/symbolizer.h"
#include "gtest/gtest.h"

namespace memlens::analyzer {
namespace {

constexpr uint64_t kActualBase = 0x7ff612340000;  // where "Windows" loaded the image

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string Basename(const std::string& path) {
  const size_t slash = path.find_last_of("/\\");
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The 1-based line of symbols.c holding `text` (0 when none does).
uint32_t LineOf(const std::string& text) {
  std::ifstream in(MEMLENS_PE_FIXTURE_SOURCE);
  std::string line;
  for (uint32_t n = 1; std::getline(in, line); ++n) {
    if (line.find(text) != std::string::npos) return n;
  }
  ADD_FAILURE() << "no line of symbols.c holds " << text;
  return 0;
}

class PeSymbolizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = MEMLENS_PE_FIXTURE_DIR;
    if (dir.empty() || access((dir + "/symbols.exe").c_str(), R_OK) != 0) {
      const char* require = getenv("MEMLENS_REQUIRE_WINDOWS");
      const char* why = "PE fixtures missing: they are built only when x86_64-w64-mingw32-gcc, "
                        "-nm and -strip are found at configure time (Debian: apt-get install "
                        "gcc-mingw-w64-x86-64)";
      if (require != nullptr && std::string(require) == "1") FAIL() << why;
      GTEST_SKIP() << why;
    }
    dir_ = dir;
    std::istringstream nm(ReadFile(dir + "/symbols.nm"));
    for (std::string line; std::getline(nm, line);) {
      std::istringstream fields(line);  // "0000000140001530 T PeLeaf"; undefined ones lack the
      std::string address, kind, name;  // address
      if (fields >> address >> kind >> name) symbols_[name] = std::stoull(address, nullptr, 16);
    }
    ASSERT_TRUE(ParsePeImage(ReadFile(dir + "/symbols.exe"), &image_, &error_)) << error_;
    ASSERT_EQ(image_.build_id.size(), 20u) << "fixture linked without --build-id";
  }

  // The record the Windows agent writes for `file` of the fixture folder.
  format::ModuleRecord Record(const std::string& path, uint64_t id = 1) const {
    format::ModuleRecord record;
    record.id = id;
    record.path = path;
    record.load_bias = kActualBase - image_.image_base;
    record.build_id = image_.build_id;
    record.segments.push_back({kActualBase, image_.image_size});
    return record;
  }
  // The absolute address, at the actual base, of preferred address `address`.
  uint64_t Absolute(uint64_t address) const { return address - image_.image_base + kActualBase; }
  uint64_t Symbol(const std::string& name) {
    EXPECT_TRUE(symbols_.count(name)) << name << " not in symbols.nm";
    return symbols_[name];
  }
  // The return address of the first call from function `caller` to `callee`: the end of an
  // e8 rel32 instruction whose target is callee (-O0 code calls directly).
  uint64_t ReturnAddress(const std::string& caller, const std::string& callee) {
    const std::string file = ReadFile(dir_ + "/symbols.exe");
    const uint64_t start = Symbol(caller), target = Symbol(callee);
    for (const PeSection& s : image_.sections) {
      const uint64_t base = image_.image_base + s.rva;
      if (start < base || start >= base + s.file_size) continue;
      for (uint64_t at = start; at + 5 <= base + s.file_size && at < start + 256; ++at) {
        const uint64_t offset = s.file_offset + (at - base);
        int32_t relative = 0;
        std::memcpy(&relative, file.data() + offset + 1, 4);
        if (static_cast<unsigned char>(file[offset]) == 0xe8 && at + 5 + relative == target) {
          return at + 5;
        }
      }
    }
    ADD_FAILURE() << "no call from " << caller << " to " << callee;
    return 0;
  }

  std::string dir_;
  std::map<std::string, uint64_t> symbols_;
  PeImage image_;
  std::string error_;
};

TEST_F(PeSymbolizerTest, ParsesHeadersSectionsAndCodeView) {
  EXPECT_EQ(image_.machine, 0x8664);
  EXPECT_EQ(image_.image_base, 0x140000000u);  // mingw's default for an .exe
  EXPECT_TRUE(image_.HasDwarf());
  bool long_name = false;
  for (const PeSection& s : image_.sections) long_name |= s.name == ".debug_line_str";
  EXPECT_TRUE(long_name) << "long section names come from the COFF string table";
  bool leaf = false;
  for (const PeFunction& f : image_.functions) {
    if (f.name == "PeLeaf") {
      leaf = true;
      EXPECT_EQ(f.address, Symbol("PeLeaf"));
      EXPECT_TRUE(f.global);
    }
  }
  EXPECT_TRUE(leaf);
}

TEST_F(PeSymbolizerTest, FunctionEntryResolvesToItsFirstLine) {
  Symbolizer symbolizer;
  symbolizer.AddModule(Record(dir_ + "/symbols.exe"));
  // Resolve looks up ip - 1: ip = entry + 1 asks for the entry itself.
  for (const auto& [name, text] : {std::pair<std::string, std::string>{"PeLeaf", "int PeLeaf("},
                                   {"PeLocal", "int PeLocal("},
                                   {"PeOuter", "int PeOuter("}}) {
    const uint64_t ip = Absolute(Symbol(name)) + 1;
    const std::vector<SourceFrame>& frames = symbolizer.Resolve(1, ip);
    ASSERT_EQ(frames.size(), 1u) << name;
    EXPECT_EQ(frames[0].function, name);
    EXPECT_EQ(Basename(frames[0].file), "symbols.c");
    EXPECT_EQ(frames[0].line, LineOf(text)) << name;
    EXPECT_EQ(frames[0].module, dir_ + "/symbols.exe");
    EXPECT_EQ(frames[0].module_offset, ip - (kActualBase - image_.image_base));
  }
  EXPECT_TRUE(symbolizer.warnings().empty()) << symbolizer.warnings()[0];
}

TEST_F(PeSymbolizerTest, CallSiteResolvesToTheCallsLine) {
  Symbolizer symbolizer;
  symbolizer.AddModule(Record(dir_ + "/symbols.exe"));
  const std::vector<SourceFrame>& frames =
      symbolizer.Resolve(1, Absolute(ReturnAddress("PeOuter", "PeLocal")));
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].function, "PeOuter");
  EXPECT_EQ(frames[0].line, LineOf("/* call site of PeTriple */"));
}

TEST_F(PeSymbolizerTest, InlinedFunctionIsExpanded) {
  Symbolizer symbolizer;
  symbolizer.AddModule(Record(dir_ + "/symbols.exe"));
  // Some address of PeOuter is in PeTriple's inlined body; none of it may resolve otherwise.
  bool seen = false;
  for (uint64_t at = Symbol("PeOuter"); at < Symbol("main"); ++at) {
    const std::vector<SourceFrame>& frames = symbolizer.Resolve(1, Absolute(at) + 1);
    ASSERT_FALSE(frames.empty());
    EXPECT_EQ(frames.back().function, "PeOuter");
    if (frames.size() != 2) continue;
    seen = true;
    EXPECT_EQ(frames[0].function, "PeTriple");
    EXPECT_TRUE(frames[0].inlined);
    EXPECT_EQ(frames[0].line, LineOf("/* inlined body */"));
    EXPECT_EQ(frames[1].line, LineOf("/* call site of PeTriple */"));
    EXPECT_FALSE(frames[1].inlined);
  }
  EXPECT_TRUE(seen);
}

TEST_F(PeSymbolizerTest, CoffSymbolsNameFunctionsWithoutDwarf) {
  Symbolizer symbolizer;
  symbolizer.AddModule(Record(dir_ + "/symbols_nodebug.exe"));
  for (const char* name : {"PeLeaf", "PeLocal", "PeOuter"}) {
    // Inside the function, not at its entry: the symbol's size comes from the next symbol.
    const std::vector<SourceFrame>& frames = symbolizer.Resolve(1, Absolute(Symbol(name)) + 5);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0].function, name);
    EXPECT_EQ(frames[0].line, 0u);
  }
  ASSERT_EQ(symbolizer.warnings().size(), 1u);
  EXPECT_NE(symbolizer.warnings()[0].find("no DWARF"), std::string::npos)
      << symbolizer.warnings()[0];
}

TEST_F(PeSymbolizerTest, StrippedImageGivesModuleAndOffset) {
  Symbolizer symbolizer;
  symbolizer.AddModule(Record(dir_ + "/symbols_stripped.exe"));
  const uint64_t ip = Absolute(Symbol("PeLeaf")) + 5;
  const std::vector<SourceFrame>& frames = symbolizer.Resolve(1, ip);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].function, "");
  EXPECT_EQ(frames[0].module_offset, ip - (kActualBase - image_.image_base));
  EXPECT_EQ(symbolizer.warnings().size(), 1u);
}

TEST_F(PeSymbolizerTest, CodeViewMismatchIsReported) {
  format::ModuleRecord record = Record(dir_ + "/symbols.exe");
  record.build_id[0] ^= 1;  // another build of the same program
  Symbolizer symbolizer;
  symbolizer.AddModule(record);
  const std::vector<SourceFrame>& frames = symbolizer.Resolve(1, Absolute(Symbol("PeLeaf")) + 1);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].function, "");
  ASSERT_EQ(symbolizer.warnings().size(), 1u);
  EXPECT_NE(symbolizer.warnings()[0].find("CodeView"), std::string::npos)
      << symbolizer.warnings()[0];
}

TEST_F(PeSymbolizerTest, WindowsPathIsOpenedThroughWine) {
  char templ[] = "/tmp/memlens_wine_XXXXXX";
  ASSERT_NE(mkdtemp(templ), nullptr);
  const std::string prefix = templ;
  ASSERT_EQ(mkdir((prefix + "/dosdevices").c_str(), 0755), 0);
  ASSERT_EQ(symlink("/", (prefix + "/dosdevices/z:").c_str()), 0);
  const char* saved = getenv("WINEPREFIX");
  const std::string before = saved != nullptr ? saved : "";
  setenv("WINEPREFIX", prefix.c_str(), 1);

  std::string windows = "Z:" + dir_ + "/symbols.exe";
  for (char& c : windows) {
    if (c == '/') c = '\\';
  }
  Symbolizer symbolizer;
  symbolizer.AddModule(Record(windows));
  const std::vector<SourceFrame>& frames = symbolizer.Resolve(1, Absolute(Symbol("PeLeaf")) + 1);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].function, "PeLeaf");
  EXPECT_EQ(frames[0].module, windows);  // users see the path the program had
  EXPECT_TRUE(symbolizer.warnings().empty()) << symbolizer.warnings()[0];

  if (saved != nullptr) {
    setenv("WINEPREFIX", before.c_str(), 1);
  } else {
    unsetenv("WINEPREFIX");
  }
  unlink((prefix + "/dosdevices/z:").c_str());
  rmdir((prefix + "/dosdevices").c_str());
  rmdir(prefix.c_str());
}

// Writes `bytes` to a temporary file; returns its path.
std::string TemporaryFile(const std::string& bytes) {
  char templ[] = "/tmp/memlens_pe_XXXXXX";
  const int fd = mkstemp(templ);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  close(fd);
  return templ;
}

TEST_F(PeSymbolizerTest, TruncatedImageGivesModuleAndOffsetAndOneWarning) {
  const std::string file = ReadFile(dir_ + "/symbols.exe");
  uint32_t lfanew = 0;
  std::memcpy(&lfanew, file.data() + 0x3c, 4);
  for (size_t size : {size_t{0}, size_t{1}, size_t{2}, size_t{64}, size_t{lfanew} + 2,
                      size_t{lfanew} + 30, size_t{lfanew} + 300, file.size() / 2,
                      file.size() - 1}) {
    const std::string path = TemporaryFile(file.substr(0, size));
    Symbolizer symbolizer;
    symbolizer.AddModule(Record(path));
    const uint64_t ip = Absolute(Symbol("PeLeaf")) + 1;
    const std::vector<SourceFrame>& frames = symbolizer.Resolve(1, ip);
    ASSERT_EQ(frames.size(), 1u) << size;
    EXPECT_EQ(frames[0].function, "") << size;
    EXPECT_EQ(frames[0].module, path);
    EXPECT_EQ(frames[0].module_offset, ip - (kActualBase - image_.image_base));
    EXPECT_EQ(symbolizer.warnings().size(), 1u) << size;
    unlink(path.c_str());
  }
}

TEST_F(PeSymbolizerTest, CorruptHeadersNeverCrash) {
  const std::string file = ReadFile(dir_ + "/symbols.exe");
  std::mt19937 random(31);
  for (int round = 0; round < 200; ++round) {
    std::string bytes = file;
    for (int flips = 0; flips < 4; ++flips) {
      // The headers: DOS, COFF, optional and section headers fit in the first KiB.
      bytes[random() % 1024] = static_cast<char>(random());
    }
    std::string parse_error;
    PeImage image;
    ParsePeImage(bytes, &image, &parse_error);
    const std::string path = TemporaryFile(bytes);
    Symbolizer symbolizer;
    symbolizer.AddModule(Record(path));
    for (const char* name : {"PeLeaf", "PeOuter"}) {
      EXPECT_FALSE(symbolizer.Resolve(1, Absolute(Symbol(name)) + 1).empty());
    }
    EXPECT_LE(symbolizer.warnings().size(), 1u);
    unlink(path.c_str());
  }
}

}  // namespace
}  // namespace memlens::analyzer
