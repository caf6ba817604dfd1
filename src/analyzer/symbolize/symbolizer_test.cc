// src/analyzer/symbolize/symbolizer_test.cc
//
// Tests of Symbolizer against a real shared library (tests/fixtures/symbolize, built with
// -g -O2) loaded into this process: its path, load bias and build-id come from
// dl_iterate_phdr, as the agent's module scanner gets them, and the expected lines come from
// __LINE__ next to the calls in the fixture.
#include "analyzer/symbolize/symbolizer.h"

#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "gtest/gtest.h"
#include "stripped_fixture.h"
#include "symbolize_fixture.h"

namespace memlens::analyzer {
namespace {

uint64_t Ip(const fixture::CallSite& site) { return reinterpret_cast<uintptr_t>(site.ip); }

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// The NT_GNU_BUILD_ID note of a loaded object, read from its PT_NOTE segments in memory.
std::string BuildIdInMemory(const dl_phdr_info* info) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& phdr = info->dlpi_phdr[i];
    if (phdr.p_type != PT_NOTE) continue;
    const char* p = reinterpret_cast<const char*>(info->dlpi_addr + phdr.p_vaddr);
    const char* end = p + phdr.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) note;
      std::memcpy(&note, p, sizeof(note));
      const char* name = p + sizeof(note);
      const char* desc = name + ((note.n_namesz + 3) & ~3u);
      if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 &&
          std::memcmp(name, "GNU", 4) == 0 && desc + note.n_descsz <= end) {
        return std::string(desc, note.n_descsz);
      }
      p = desc + ((note.n_descsz + 3) & ~3u);
    }
  }
  return "";
}

// The module record the agent would write for the object containing `address`.
format::ModuleRecord ModuleOf(const void* address, uint64_t id) {
  struct Search {
    uintptr_t address;
    format::ModuleRecord record;
    bool found = false;
  } search{reinterpret_cast<uintptr_t>(address), {}, false};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        bool contains = false;
        std::vector<format::Segment> segments;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& phdr = info->dlpi_phdr[i];
          if (phdr.p_type != PT_LOAD) continue;
          const uint64_t start = info->dlpi_addr + phdr.p_vaddr;
          segments.push_back({start, phdr.p_memsz});
          contains |= s->address >= start && s->address < start + phdr.p_memsz;
        }
        if (!contains) return 0;
        s->record.load_bias = info->dlpi_addr;
        s->record.path = info->dlpi_name;
        if (s->record.path.empty()) {  // the main executable
          char buf[4096];
          ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf));
          if (n > 0) s->record.path.assign(buf, n);
        }
        s->record.build_id = BuildIdInMemory(info);
        s->record.segments = std::move(segments);
        s->found = true;
        return 1;
      },
      &search);
  EXPECT_TRUE(search.found);
  search.record.id = id;
  return search.record;
}

TEST(SymbolizerTest, NoinlineCallResolvesToFunctionFileAndLine) {
  const fixture::CallSite site = fixture::Outer(7);
  const format::ModuleRecord module = ModuleOf(site.ip, 1);
  ASSERT_FALSE(module.build_id.empty()) << "fixture built without --build-id";

  Symbolizer symbolizer;
  symbolizer.AddModule(module);
  const std::vector<SourceFrame>& frames = symbolizer.Resolve(1, Ip(site));
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].function, "fixture::Outer(int)");
  EXPECT_EQ(Basename(frames[0].file), "symbolize_fixture.cc");
  EXPECT_EQ(frames[0].file[0], '/') << frames[0].file;
  EXPECT_EQ(frames[0].line, static_cast<uint32_t>(site.call_line));
  EXPECT_EQ(frames[0].module, module.path);
  EXPECT_EQ(frames[0].module_offset, Ip(site) - module.load_bias);
  EXPECT_FALSE(frames[0].inlined);
  EXPECT_TRUE(symbolizer.warnings().empty()) << symbolizer.warnings()[0];
}

TEST(SymbolizerTest, InlinedFunctionIsExpanded) {
  const fixture::CallSite site = fixture::OuterWithInline(7);
  const format::ModuleRecord module = ModuleOf(site.ip, 1);

  Symbolizer symbolizer;
  symbolizer.AddModule(module);
  const std::vector<SourceFrame>& frames = symbolizer.Resolve(1, Ip(site));
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].function, "fixture::Inlined(int)");
  EXPECT_EQ(Basename(frames[0].file), "symbolize_fixture.cc");
  EXPECT_EQ(frames[0].line, static_cast<uint32_t>(site.call_line));
  EXPECT_TRUE(frames[0].inlined);
  EXPECT_EQ(frames[1].function, "fixture::OuterWithInline(int)");
  EXPECT_EQ(Basename(frames[1].file), "symbolize_fixture.cc");
  EXPECT_EQ(frames[1].line, static_cast<uint32_t>(site.inline_call_line));
  EXPECT_FALSE(frames[1].inlined);
  EXPECT_EQ(frames[0].module_offset, frames[1].module_offset);
}

TEST(SymbolizerTest, ResultsAreCached) {
  const fixture::CallSite site = fixture::Outer(1);
  Symbolizer symbolizer;
  symbolizer.AddModule(ModuleOf(site.ip, 3));
  const std::vector<SourceFrame>* first = &symbolizer.Resolve(3, Ip(site));
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(&symbolizer.Resolve(3, Ip(site)), first);
}

TEST(SymbolizerTest, SameFileAtAnotherBiasUnderAnotherId) {
  const fixture::CallSite site = fixture::Outer(2);
  format::ModuleRecord first = ModuleOf(site.ip, 1);
  format::ModuleRecord second = first;  // as if dlclose'd and dlopen'ed 1 GiB higher
  second.id = 2;
  second.load_bias += 1ull << 30;

  Symbolizer symbolizer;
  symbolizer.AddModule(first);
  symbolizer.AddModule(second);
  const SourceFrame a = symbolizer.Resolve(1, Ip(site))[0];
  const SourceFrame b = symbolizer.Resolve(2, Ip(site) + (1ull << 30))[0];
  EXPECT_EQ(a.function, "fixture::Outer(int)");
  EXPECT_EQ(b.function, a.function);
  EXPECT_EQ(b.line, a.line);
  EXPECT_EQ(b.module_offset, a.module_offset);
}

TEST(SymbolizerTest, RecordWithoutBuildIdIsTrusted) {
  const fixture::CallSite site = fixture::Outer(3);
  format::ModuleRecord module = ModuleOf(site.ip, 1);
  module.build_id.clear();
  Symbolizer symbolizer;
  symbolizer.AddModule(module);
  EXPECT_EQ(symbolizer.Resolve(1, Ip(site))[0].function, "fixture::Outer(int)");
  EXPECT_TRUE(symbolizer.warnings().empty());
}

TEST(SymbolizerTest, WrongBuildIdWarnsAndGivesModuleOffset) {
  const fixture::CallSite site = fixture::Outer(4);
  format::ModuleRecord module = ModuleOf(site.ip, 1);
  module.build_id = std::string(20, '\xaa');

  Symbolizer symbolizer;
  symbolizer.AddModule(module);
  const std::vector<SourceFrame>& frames = symbolizer.Resolve(1, Ip(site));
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].function, "");
  EXPECT_EQ(frames[0].file, "");
  EXPECT_EQ(frames[0].line, 0u);
  EXPECT_EQ(frames[0].module, module.path);
  EXPECT_EQ(frames[0].module_offset, Ip(site) - module.load_bias);
  symbolizer.Resolve(1, Ip(fixture::OuterWithInline(1)));  // said once, not per address
  ASSERT_EQ(symbolizer.warnings().size(), 1u);
  EXPECT_TRUE(Contains(symbolizer.warnings()[0], "build-id")) << symbolizer.warnings()[0];
  EXPECT_TRUE(Contains(symbolizer.warnings()[0], module.path)) << symbolizer.warnings()[0];
  EXPECT_TRUE(Contains(symbolizer.warnings()[0], std::string(40, 'a')))
      << symbolizer.warnings()[0];
}

TEST(SymbolizerTest, MissingFileWarnsAndGivesModuleOffset) {
  format::ModuleRecord module;
  module.id = 9;
  module.load_bias = 0x7f0000000000;
  module.path = "/nonexistent/memlens/libmissing.so";
  module.build_id = "\x01\x02\x03\x04";

  Symbolizer symbolizer;
  symbolizer.AddModule(module);
  const std::vector<SourceFrame>& frames = symbolizer.Resolve(9, 0x7f0000001234);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].function, "");
  EXPECT_EQ(frames[0].line, 0u);
  EXPECT_EQ(frames[0].module, module.path);
  EXPECT_EQ(frames[0].module_offset, 0x1234u);
  symbolizer.Resolve(9, 0x7f0000005678);
  ASSERT_EQ(symbolizer.warnings().size(), 1u);
  EXPECT_TRUE(Contains(symbolizer.warnings()[0], module.path)) << symbolizer.warnings()[0];
}

TEST(SymbolizerTest, VdsoEmptyPathAndUnknownIdDoNotCrash) {
  format::ModuleRecord vdso;
  vdso.id = 1;
  vdso.load_bias = 0x7fff00000000;
  vdso.path = "[vdso]";
  format::ModuleRecord nameless;
  nameless.id = 2;
  nameless.load_bias = 0x1000;
  format::ModuleRecord vdso_soname = vdso;  // how dl_iterate_phdr names it
  vdso_soname.id = 3;
  vdso_soname.path = "linux-vdso.so.1";

  Symbolizer symbolizer;
  symbolizer.AddModule(vdso);
  symbolizer.AddModule(nameless);
  symbolizer.AddModule(vdso_soname);
  const SourceFrame v = symbolizer.Resolve(1, 0x7fff00000abc)[0];
  EXPECT_EQ(v.module, "[vdso]");
  EXPECT_EQ(v.module_offset, 0xabcu);
  EXPECT_EQ(symbolizer.Resolve(3, 0x7fff00000abc)[0].module, "linux-vdso.so.1");
  EXPECT_TRUE(symbolizer.warnings().empty());  // nothing on disk, nothing the user can fix

  EXPECT_EQ(symbolizer.Resolve(2, 0x1010)[0].module_offset, 0x10u);
  EXPECT_EQ(symbolizer.warnings().size(), 1u);
  const SourceFrame u = symbolizer.Resolve(77, 0x4242)[0];
  EXPECT_EQ(u.module, "");
  EXPECT_EQ(u.module_offset, 0x4242u);
  EXPECT_EQ(symbolizer.warnings().size(), 2u);
  EXPECT_EQ(symbolizer.Resolve(2, 0)[0].function, "");  // ip 0: no ip-1 underflow trouble
}

TEST(SymbolizerTest, AddressOutsideTheFileGivesModuleOffset) {
  const fixture::CallSite site = fixture::Outer(5);
  format::ModuleRecord module = ModuleOf(site.ip, 1);
  Symbolizer symbolizer;
  symbolizer.AddModule(module);
  const std::vector<SourceFrame>& frames = symbolizer.Resolve(1, module.load_bias + (1ull << 40));
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].function, "");
  EXPECT_EQ(frames[0].module_offset, 1ull << 40);
}

// Debian's libc has no DWARF (unless its dbgsym is installed) but has dynamic symbols.
TEST(SymbolizerTest, SymbolTableFallbackNamesLibcFunctions) {
  const void* function = reinterpret_cast<const void*>(&getpid);
  format::ModuleRecord libc = ModuleOf(function, 4);
  Symbolizer symbolizer;
  symbolizer.AddModule(libc);
  // A "return address" one past the first instruction: ip-1 is getpid's entry.
  const SourceFrame frame = symbolizer.Resolve(4, reinterpret_cast<uintptr_t>(function) + 1)[0];
  EXPECT_TRUE(Contains(frame.function, "getpid")) << frame.function;
  EXPECT_EQ(frame.module, libc.path);
}

// A stripped object's local functions have no name anywhere in the file; one that is a static
// initializer (listed in .init_array) is named so, any other stays module+offset.
TEST(SymbolizerTest, UnnamedStaticInitializerIsNamedSo) {
  const void* in_initializer = memlens_stripped_initializer_ip();
  const void* in_other = memlens_stripped_unnamed_ip();
  ASSERT_NE(in_initializer, nullptr);  // the constructor ran when the test binary loaded
  format::ModuleRecord stripped = ModuleOf(in_initializer, 6);
  ASSERT_TRUE(Contains(stripped.path, "libmemlens_stripped_fixture")) << stripped.path;
  Symbolizer symbolizer;
  symbolizer.AddModule(stripped);

  const SourceFrame initializer =
      symbolizer.Resolve(6, reinterpret_cast<uintptr_t>(in_initializer))[0];
  EXPECT_EQ(initializer.function, kStaticInitializer);
  EXPECT_EQ(initializer.file, "");
  EXPECT_EQ(initializer.module_offset,
            reinterpret_cast<uintptr_t>(in_initializer) - stripped.load_bias);

  const SourceFrame other = symbolizer.Resolve(6, reinterpret_cast<uintptr_t>(in_other))[0];
  EXPECT_EQ(other.function, "");
  EXPECT_EQ(other.module, stripped.path);
}

// How StackResolver tells the Python interpreter's modules (Py_Version defined, Py_BytesMain
// imported) from the others.
TEST(SymbolizerTest, DynamicSymbolTellsDefinedFromImported) {
  const format::ModuleRecord stripped =
      ModuleOf(reinterpret_cast<const void*>(&memlens_stripped_unnamed_ip), 1);
  format::ModuleRecord missing;
  missing.id = 2;
  missing.path = "/nonexistent/libpython3.11.so.1.0";
  Symbolizer symbolizer;
  symbolizer.AddModule(stripped);
  symbolizer.AddModule(missing);
  using Use = Symbolizer::SymbolUse;
  EXPECT_EQ(symbolizer.DynamicSymbol(1, "memlens_stripped_unnamed_ip"), Use::kDefines);
  EXPECT_EQ(symbolizer.DynamicSymbol(1, "__cxa_finalize"), Use::kImports);
  EXPECT_EQ(symbolizer.DynamicSymbol(1, "Py_Version"), Use::kNone);
  EXPECT_EQ(symbolizer.DynamicSymbol(2, "Py_Version"), Use::kUnreadable);
  EXPECT_EQ(symbolizer.DynamicSymbol(3, "Py_Version"), Use::kUnreadable);  // no such module
}

}  // namespace
}  // namespace memlens::analyzer
