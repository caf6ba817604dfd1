// src/agent/got/got_table_test.cc
//
// GotTable on real libraries (tests/fixtures/got): the same source reaching malloc through a
// lazy PLT slot, a -fno-plt GLOB_DAT slot, a read-only full-RELRO PLT slot and a data pointer.
// The tests patch only those libraries, with counting hooks, so every count is exact.
#include "agent/got/got_table.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace memlens::agent::got {
namespace {

using MallocFn = void* (*)(size_t);
using FreeFn = void (*)(void*);

// The definitions the loader bound: the C library's (or a sanitizer's).
MallocFn RealMalloc() {
  static const auto real = reinterpret_cast<MallocFn>(dlsym(RTLD_DEFAULT, "malloc"));
  return real;
}
FreeFn RealFree() {
  static const auto real = reinterpret_cast<FreeFn>(dlsym(RTLD_DEFAULT, "free"));
  return real;
}

std::atomic<int> g_mallocs{0};
std::atomic<int> g_frees{0};
void* CountingMalloc(size_t size) {
  ++g_mallocs;
  return RealMalloc()(size);
}
void CountingFree(void* ptr) {
  ++g_frees;
  RealFree()(ptr);
}
void* ProgramsOwnMalloc(size_t size) { return RealMalloc()(size); }

uintptr_t Address(const void* function) { return reinterpret_cast<uintptr_t>(function); }

std::vector<Hook> CountingHooks() {
  return {{"malloc", Address(reinterpret_cast<void*>(&CountingMalloc))},
          {"free", Address(reinterpret_cast<void*>(&CountingFree))}};
}

bool FixturesOnly(const dl_phdr_info& object) {
  return object.dlpi_name && std::strstr(object.dlpi_name, "/got_fixture_");
}

struct Fixture {
  std::string path;
  void* handle = nullptr;
  MallocFn malloc = nullptr;
  FreeFn free = nullptr;
  MallocFn call_pointer = nullptr;
  MallocFn* pointer = nullptr;

  // Allocates and frees through the library: two mallocs (a direct call and one through its
  // pointer) and two frees.
  void Use() const {
    free(malloc(24));
    free(call_pointer(8));
  }
  // Whether `slot` lies in this library.
  bool Holds(const Slot& slot) const {
    Dl_info library, holder;
    return dladdr(reinterpret_cast<void*>(malloc), &library) && dladdr(slot.address, &holder) &&
           library.dli_fbase == holder.dli_fbase;
  }
};

Fixture Open(const char* name, int mode) {
  Fixture fixture;
  fixture.path = std::string(MEMLENS_GOT_FIXTURE_DIR) + "/" + name + ".so";
  fixture.handle = dlopen(fixture.path.c_str(), mode | RTLD_LOCAL);
  EXPECT_NE(fixture.handle, nullptr) << dlerror();
  if (!fixture.handle) return fixture;
  fixture.malloc = reinterpret_cast<MallocFn>(dlsym(fixture.handle, "got_fixture_malloc"));
  fixture.free = reinterpret_cast<FreeFn>(dlsym(fixture.handle, "got_fixture_free"));
  fixture.call_pointer =
      reinterpret_cast<MallocFn>(dlsym(fixture.handle, "got_fixture_call_pointer"));
  fixture.pointer = static_cast<MallocFn*>(dlsym(fixture.handle, "got_fixture_malloc_pointer"));
  return fixture;
}

// The protection /proc/self/maps shows for the page holding `address` ("r--", "rw-", ...).
std::string ProtectionAt(const void* address) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const uintptr_t at = Address(address);
  while (std::getline(maps, line)) {
    uintptr_t start = 0, end = 0;
    char perms[8] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &start, &end, perms) == 3 && start <= at &&
        at < end) {
      return std::string(perms, 3);
    }
  }
  return "unmapped";
}

std::vector<Slot> SlotsOf(GotTable& table, const Fixture& fixture) {
  std::vector<Slot> slots;
  for (const Slot& slot : table.Slots()) {
    if (fixture.Holds(slot)) slots.push_back(slot);
  }
  return slots;
}

size_t CountKind(const std::vector<Slot>& slots, SlotKind kind) {
  size_t n = 0;
  for (const Slot& slot : slots) n += slot.kind == kind;
  return n;
}

class GotTableTest : public testing::Test {
 protected:
  // Loaded once for the whole suite (a library is never unloaded in the middle of a test).
  static void SetUpTestSuite() {
    plt_ = new Fixture(Open("got_fixture_plt", RTLD_LAZY));
    noplt_ = new Fixture(Open("got_fixture_noplt", RTLD_LAZY));
    now_ = new Fixture(Open("got_fixture_now", RTLD_LAZY));
  }
  void SetUp() override {
    ASSERT_TRUE(plt_->handle && noplt_->handle && now_->handle);
    g_mallocs = 0;
    g_frees = 0;
  }

  // A failed assertion must not leave the libraries patched for the next test.
  void TearDown() override {
    if (table_) table_->Unpatch();
  }
  GotTable& NewTable() {
    table_ = std::make_unique<GotTable>(CountingHooks(), FixturesOnly);
    return *table_;
  }

  std::unique_ptr<GotTable> table_;
  static Fixture* plt_;
  static Fixture* noplt_;
  static Fixture* now_;
};
Fixture* GotTableTest::plt_;
Fixture* GotTableTest::noplt_;
Fixture* GotTableTest::now_;

TEST_F(GotTableTest, EveryKindOfSlotCallsTheHookUntilUnpatched) {
  GotTable& table = NewTable();
  GotTable::Result result = table.Patch();
  EXPECT_EQ(result.error, "");
  EXPECT_EQ(result.written, result.covered);

  // Which slot each build reaches malloc and free through.
  std::vector<Slot> plt = SlotsOf(table, *plt_), noplt = SlotsOf(table, *noplt_),
                    now = SlotsOf(table, *now_);
  EXPECT_EQ(CountKind(plt, SlotKind::kJumpSlot), 2u);  // malloc, free
  EXPECT_EQ(CountKind(plt, SlotKind::kDataPointer), 1u);
  EXPECT_EQ(CountKind(noplt, SlotKind::kGlobDat), 2u);
  EXPECT_EQ(CountKind(noplt, SlotKind::kDataPointer), 1u);
  EXPECT_EQ(CountKind(now, SlotKind::kJumpSlot), 2u);
  EXPECT_EQ(result.covered, plt.size() + noplt.size() + now.size());

  for (const Fixture* fixture : {plt_, noplt_, now_}) {
    g_mallocs = 0;
    g_frees = 0;
    fixture->Use();
    EXPECT_EQ(g_mallocs, 2) << fixture->path;
    EXPECT_EQ(g_frees, 2) << fixture->path;
  }

  EXPECT_EQ(table.Unpatch(), result.covered);
  EXPECT_TRUE(table.Slots().empty());
  g_mallocs = 0;
  g_frees = 0;
  for (const Fixture* fixture : {plt_, noplt_, now_}) fixture->Use();
  EXPECT_EQ(g_mallocs, 0);
  EXPECT_EQ(g_frees, 0);
}

TEST_F(GotTableTest, UnpatchPutsBackWhatEachSlotHeld) {
  GotTable& table = NewTable();
  table.Patch();
  std::vector<Slot> slots = table.Slots();
  ASSERT_FALSE(slots.empty());
  for (const Slot& slot : slots) {
    EXPECT_TRUE(slot.ours);
    EXPECT_EQ(*slot.address, slot.hook);
    // A bound slot held the C library's function. A lazy PLT slot may not be bound yet: it
    // then held its own library's PLT stub, an address inside the library the slot is in.
    const bool real = slot.saved == Address(reinterpret_cast<void*>(RealMalloc())) ||
                      slot.saved == Address(reinterpret_cast<void*>(RealFree()));
    if (slot.kind != SlotKind::kJumpSlot || now_->Holds(slot)) {
      EXPECT_TRUE(real);
    } else {
      Dl_info stub, holder;
      EXPECT_TRUE(real || (dladdr(reinterpret_cast<void*>(slot.saved), &stub) &&
                           dladdr(slot.address, &holder) &&
                           stub.dli_fbase == holder.dli_fbase));
    }
  }
  table.Unpatch();
  for (const Slot& slot : slots) EXPECT_EQ(*slot.address, slot.saved);
}

TEST_F(GotTableTest, ReadOnlySlotsArePatchedAndTheirPagesStayReadOnly) {
  GotTable& table = NewTable();
  table.Patch();
  std::vector<Slot> now = SlotsOf(table, *now_), noplt = SlotsOf(table, *noplt_);
  ASSERT_EQ(CountKind(now, SlotKind::kJumpSlot), 2u);
  // Full RELRO's JUMP_SLOTs and -fno-plt's GLOB_DATs sit in RELRO, read-only after loading.
  std::vector<const Slot*> read_only;
  for (const Slot& slot : now) {
    if (slot.kind == SlotKind::kJumpSlot) read_only.push_back(&slot);
  }
  for (const Slot& slot : noplt) {
    if (slot.kind == SlotKind::kGlobDat) read_only.push_back(&slot);
  }
  ASSERT_EQ(read_only.size(), 4u);
  for (const Slot* slot : read_only) {
    EXPECT_EQ(*slot->address, slot->hook);
    EXPECT_EQ(ProtectionAt(slot->address), "r--");
  }
  now_->Use();
  EXPECT_EQ(g_mallocs, 2);
  table.Unpatch();
  for (const Slot* slot : read_only) {
    EXPECT_EQ(*slot->address, slot->saved);
    EXPECT_EQ(ProtectionAt(slot->address), "r--");
  }
  // The lazy .got.plt stays writable, as the loader needs it.
  for (const Slot& slot : SlotsOf(table, *plt_)) EXPECT_EQ(ProtectionAt(slot.address), "rw-");
}

TEST_F(GotTableTest, ASlotTheProgramChangedKeepsTheProgramsValue) {
  GotTable& table = NewTable();
  table.Patch();
  const MallocFn original = *plt_->pointer;
  ASSERT_EQ(Address(reinterpret_cast<void*>(original)),
            Address(reinterpret_cast<void*>(&CountingMalloc)));
  *plt_->pointer = ProgramsOwnMalloc;  // as xmlMemSetup would
  EXPECT_EQ(table.Refresh().written, 0u);  // not patched again
  EXPECT_EQ(*plt_->pointer, ProgramsOwnMalloc);
  table.Unpatch();                     // not restored over
  EXPECT_EQ(*plt_->pointer, ProgramsOwnMalloc);
  *plt_->pointer = RealMalloc();
}

// With the agent linked in (or a slot set to it some other way) the loader bound the slot to
// the hook: nothing to restore, and a later change by the program is left alone.
TEST_F(GotTableTest, ASlotBoundToTheHookAlreadyIsLeftAsItIs) {
  *plt_->pointer = CountingMalloc;
  GotTable& table = NewTable();
  table.Patch();
  *plt_->pointer = ProgramsOwnMalloc;
  EXPECT_EQ(table.Refresh().written, 0u);
  EXPECT_EQ(*plt_->pointer, ProgramsOwnMalloc);
  *plt_->pointer = CountingMalloc;
  table.Unpatch();
  EXPECT_EQ(*plt_->pointer, CountingMalloc);
  *plt_->pointer = RealMalloc();
}

TEST_F(GotTableTest, ASlotLazyBindingResolvedOverTheHookGetsItBack) {
  GotTable& table = NewTable();
  table.Patch();
  const Slot* lazy = nullptr;
  std::vector<Slot> plt = SlotsOf(table, *plt_);
  for (const Slot& slot : plt) {
    if (slot.kind == SlotKind::kJumpSlot &&
        slot.hook == Address(reinterpret_cast<void*>(&CountingMalloc))) {
      lazy = &slot;
    }
  }
  ASSERT_NE(lazy, nullptr);
  // What the loader's _dl_fixup on another thread would write over our store (a function
  // other than the one it held, to tell the two apart).
  const uintptr_t resolved = Address(reinterpret_cast<void*>(&ProgramsOwnMalloc));
  ASSERT_NE(lazy->saved, resolved);
  __atomic_store_n(lazy->address, resolved, __ATOMIC_RELEASE);
  plt_->Use();
  EXPECT_EQ(g_mallocs, 1);  // only the call through the data pointer
  GotTable::Result result = table.Refresh();
  EXPECT_EQ(result.written, 1u);
  EXPECT_EQ(*lazy->address, lazy->hook);
  g_mallocs = 0;
  plt_->Use();
  EXPECT_EQ(g_mallocs, 2);
  table.Unpatch();
  // The loader's latest value comes back, not the one it replaced.
  EXPECT_EQ(*lazy->address, resolved);
  *lazy->address = Address(reinterpret_cast<void*>(RealMalloc()));
}

TEST_F(GotTableTest, ALibraryLoadedLaterIsPatchedByRefresh) {
  GotTable& table = NewTable();
  table.Patch();
  Fixture late = Open("got_fixture_late", RTLD_NOW);
  ASSERT_NE(late.handle, nullptr);
  late.Use();
  EXPECT_EQ(g_mallocs, 0);
  EXPECT_EQ(table.Refresh().written, 3u);  // malloc, free, the pointer
  late.Use();
  EXPECT_EQ(g_mallocs, 2);
  EXPECT_EQ(g_frees, 2);
  table.Unpatch();
  EXPECT_TRUE(SlotsOf(table, late).empty());
  g_mallocs = 0;
  late.Use();
  EXPECT_EQ(g_mallocs, 0);
  dlclose(late.handle);
}

// The RELRO pages of the library loaded at `path`, as glibc protects them (ends rounded down).
std::pair<uintptr_t, uintptr_t> RelroOf(const std::string& path) {
  std::pair<std::string, std::pair<uintptr_t, uintptr_t>> search{path, {0, 0}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        auto& [wanted, range] = *static_cast<decltype(search)*>(out);
        if (!info->dlpi_name || wanted != info->dlpi_name) return 0;
        const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& segment = info->dlpi_phdr[i];
          if (segment.p_type != PT_GNU_RELRO) continue;
          range.first = (info->dlpi_addr + segment.p_vaddr) & ~(page - 1);
          range.second = (info->dlpi_addr + segment.p_vaddr + segment.p_memsz) & ~(page - 1);
        }
        return 1;
      },
      &search);
  return search.second;
}

// A library whose RELRO is still writable is being relocated by a dlopen on another thread:
// a lazy slot written now would get the load base added by the loader. It waits for a later
// Refresh, once the loader has made its RELRO read-only.
TEST_F(GotTableTest, ALibraryStillBeingRelocatedIsLeftForLater) {
  Fixture late = Open("got_fixture_late", RTLD_NOW);
  ASSERT_NE(late.handle, nullptr);
  auto [start, end] = RelroOf(late.path);
  ASSERT_LT(start, end);
  ASSERT_EQ(mprotect(reinterpret_cast<void*>(start), end - start, PROT_READ | PROT_WRITE), 0);
  GotTable& table = NewTable();
  table.Patch();
  EXPECT_TRUE(SlotsOf(table, late).empty());
  late.Use();
  EXPECT_EQ(g_mallocs, 0);
  ASSERT_EQ(mprotect(reinterpret_cast<void*>(start), end - start, PROT_READ), 0);
  EXPECT_EQ(table.Refresh().written, 3u);
  late.Use();
  EXPECT_EQ(g_mallocs, 2);
  table.Unpatch();
  dlclose(late.handle);
}

TEST_F(GotTableTest, AnUnloadedLibraryIsForgotten) {
  GotTable& table = NewTable();
  Fixture late = Open("got_fixture_late", RTLD_NOW);
  ASSERT_NE(late.handle, nullptr);
  table.Patch();
  const size_t with_late = table.Slots().size();
  ASSERT_EQ(SlotsOf(table, late).size(), 3u);
  ASSERT_EQ(dlclose(late.handle), 0);
  ASSERT_EQ(dlopen(late.path.c_str(), RTLD_NOW | RTLD_NOLOAD), nullptr);  // really unloaded
  table.Refresh();
  EXPECT_EQ(table.Slots().size(), with_late - 3);
  table.Unpatch();  // touches nothing of the unmapped library
  plt_->Use();
  EXPECT_EQ(g_mallocs, 0);
}

// Threads keep calling through the slots (the lazy ones resolving on first use) while the
// table is patched and unpatched again and again: every call lands, and once unpatched no slot
// holds a hook.
TEST_F(GotTableTest, ThreadsCallingThroughTheSlotsMeanwhileAreUnharmed) {
  std::atomic<bool> done{false};
  std::atomic<long> calls{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      while (!done.load()) {
        for (const Fixture* fixture : {plt_, noplt_, now_}) fixture->Use();
        calls += 6;
      }
    });
  }
  GotTable& table = NewTable();
  std::vector<Slot> slots;
  for (int round = 0; round < 50; ++round) {
    table.Patch();
    if (round == 0) slots = table.Slots();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    table.Unpatch();
  }
  done = true;
  for (std::thread& thread : threads) thread.join();
  EXPECT_GT(calls.load(), 0);
  EXPECT_GT(g_mallocs.load(), 0);  // while patched, calls went through the hooks
  ASSERT_FALSE(slots.empty());
  for (const Slot& slot : slots) EXPECT_NE(*slot.address, slot.hook);
}

TEST_F(GotTableTest, RefreshPatchesNothingOutsidePatchAndUnpatch) {
  GotTable& table = NewTable();
  EXPECT_EQ(table.Refresh().covered, 0u);
  plt_->Use();
  EXPECT_EQ(g_mallocs, 0);
  table.Patch();
  table.Unpatch();
  EXPECT_EQ(table.Refresh().covered, 0u);
  plt_->Use();
  EXPECT_EQ(g_mallocs, 0);
}

bool CLibraryOnly(const dl_phdr_info& object) {
  return object.dlpi_name && std::strstr(object.dlpi_name, "/libc.so.6");
}

// The C library's own calls of malloc (strdup's, here) go through its GLOB_DAT slot, in its
// read-only RELRO: patched, they reach the hook, and the page is read-only again after.
TEST(GotTableOnLibcTest, TheCLibrarysOwnCallsReachTheHook) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ASan's and TSan's runtimes intercept strdup: its block comes from their "
                  "allocator, not from libc's malloc through libc's GOT (the plain build runs it)";
#endif
  GotTable table({{"malloc", Address(reinterpret_cast<void*>(&CountingMalloc))}}, CLibraryOnly);
  GotTable::Result result = table.Patch();
  std::vector<Slot> slots = table.Slots();
  ASSERT_GE(result.written, 1u);
  for (const Slot& slot : slots) {
    EXPECT_EQ(slot.kind, SlotKind::kGlobDat);
    EXPECT_EQ(ProtectionAt(slot.address), "r--");
  }
  g_mallocs = 0;
  char* copy = strdup("patched");
  const int counted = g_mallocs;
  table.Unpatch();
  RealFree()(copy);
  EXPECT_EQ(counted, 1);
  for (const Slot& slot : slots) {
    EXPECT_EQ(*slot.address, slot.saved);
    EXPECT_EQ(ProtectionAt(slot.address), "r--");
  }
  g_mallocs = 0;
  RealFree()(strdup("unpatched"));
  EXPECT_EQ(g_mallocs, 0);
}

TEST(GotHelpersTest, ExportedFunctionsAreTheDefinedFunctionsWithTheirAddresses) {
  Fixture fixture = Open("got_fixture_plt", RTLD_LAZY);
  ASSERT_NE(fixture.handle, nullptr);
  struct Found {
    std::vector<Hook> all, skipped;
  } found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        if (!info->dlpi_name || !std::strstr(info->dlpi_name, "/got_fixture_plt.so")) return 0;
        static_cast<Found*>(out)->all = ExportedFunctions(*info, "memlens_");
        static_cast<Found*>(out)->skipped = ExportedFunctions(*info, "got_fixture_call");
        return 1;
      },
      &found);
  std::map<std::string, uintptr_t> all;
  for (const Hook& hook : found.all) all[hook.name] = hook.address;
  // Its three functions; not the data pointer, nor malloc and free, which it imports.
  EXPECT_EQ(all.size(), 3u);
  for (const char* name : {"got_fixture_malloc", "got_fixture_free", "got_fixture_call_pointer"}) {
    EXPECT_EQ(all[name], Address(dlsym(fixture.handle, name))) << name;
  }
  EXPECT_EQ(found.skipped.size(), 2u);
  dlclose(fixture.handle);
}

TEST(GotHelpersTest, TheLoaderAndTheVdsoAreRecognized) {
  struct Seen {
    int loader = 0, vdso = 0, others = 0, libc = 0;
  } seen;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        Seen& seen = *static_cast<Seen*>(out);
        std::string name = info->dlpi_name ? info->dlpi_name : "";
        bool skipped = IsLoaderOrVdso(*info);
        if (name.find("/ld-linux") != std::string::npos) {
          seen.loader += skipped;
        } else if (name.find("linux-vdso") != std::string::npos) {
          seen.vdso += skipped;
        } else {
          seen.others += skipped;
          seen.libc += name.find("/libc.so") != std::string::npos;
        }
        return 0;
      },
      &seen);
  EXPECT_EQ(seen.loader, 1);
  EXPECT_EQ(seen.vdso, 1);
  EXPECT_EQ(seen.others, 0);
  EXPECT_EQ(seen.libc, 1);
}

}  // namespace
}  // namespace memlens::agent::got
