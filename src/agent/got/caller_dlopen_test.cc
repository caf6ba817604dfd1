// src/agent/got/caller_dlopen_test.cc
//
// DlopenAsCaller on real libraries (tests/fixtures/got): got_fixture_target.so lies only in
// got_runpath/, which got_fixture_runpath.so's RUNPATH names and nobody else's search path does.
#include "agent/got/caller_dlopen.h"

#include <dlfcn.h>

#include <string>

#include <gtest/gtest.h>

namespace memlens::agent::got {
namespace {

constexpr char kTarget[] = "got_fixture_target.so";

void* Open(const char* name) {
  std::string path = std::string(MEMLENS_GOT_FIXTURE_DIR) + "/" + name;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(handle, nullptr) << dlerror();
  return handle;
}

TEST(CallerDlopenTest, ABareNameIsFoundThroughTheCallersRunpath) {
  void* runpath = Open("got_fixture_runpath.so");
  ASSERT_NE(runpath, nullptr);
  // From here (this test's code), as from the agent's interposer, the name is not found.
  ASSERT_EQ(dlopen(kTarget, RTLD_NOW | RTLD_NOLOAD), nullptr);
  ASSERT_EQ(dlopen(kTarget, RTLD_NOW), nullptr);
  void* caller = dlsym(runpath, "got_fixture_malloc");
  void* target = DlopenAsCaller(caller, kTarget, RTLD_NOW, dlopen);
  ASSERT_NE(target, nullptr) << dlerror();
  Dl_info info;
  ASSERT_TRUE(dladdr(dlsym(target, "got_fixture_malloc"), &info));
  EXPECT_EQ(std::string(info.dli_fname),
            std::string(MEMLENS_GOT_FIXTURE_DIR) + "/got_runpath/" + kTarget);
  // Loaded now: the same object again, by its name, for any caller.
  void* again = DlopenAsCaller(caller, kTarget, RTLD_NOW, dlopen);
  EXPECT_EQ(again, target);
  dlclose(again);
  dlclose(target);
  dlclose(runpath);
}

TEST(CallerDlopenTest, ACallerWithoutASearchPathFindsWhatDlopenFinds) {
  void* plain = Open("got_fixture_noplt.so");
  ASSERT_NE(plain, nullptr);
  void* caller = dlsym(plain, "got_fixture_malloc");
  EXPECT_EQ(DlopenAsCaller(caller, kTarget, RTLD_NOW, dlopen), nullptr);
  EXPECT_NE(dlerror(), nullptr);  // the loader's own message
  void* libm = DlopenAsCaller(caller, "libm.so.6", RTLD_NOW, dlopen);
  EXPECT_NE(libm, nullptr);
  if (libm) dlclose(libm);
  dlclose(plain);
}

TEST(CallerDlopenTest, APathIsOpenedAsItIs) {
  std::string path = std::string(MEMLENS_GOT_FIXTURE_DIR) + "/got_runpath/" + kTarget;
  void* target = DlopenAsCaller(nullptr, path.c_str(), RTLD_NOW, dlopen);
  EXPECT_NE(target, nullptr);
  if (target) dlclose(target);
  void* self = DlopenAsCaller(nullptr, nullptr, RTLD_NOW, dlopen);  // the program
  EXPECT_NE(self, nullptr);
}

}  // namespace
}  // namespace memlens::agent::got
