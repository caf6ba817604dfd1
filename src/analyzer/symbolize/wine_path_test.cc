// src/analyzer/symbolize/wine_path_test.cc
//
// Tests of the Windows-path mapping against a Wine prefix made in a temporary folder, with
// the drive links Wine itself makes (c: -> ../drive_c, relative; z: -> /, absolute).
#include "analyzer/symbolize/wine_path.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"

namespace memlens::analyzer {
namespace {

class WinePathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char templ[] = "/tmp/memlens_wine_XXXXXX";
    ASSERT_NE(mkdtemp(templ), nullptr);
    prefix_ = templ;
    ASSERT_EQ(mkdir((prefix_ + "/dosdevices").c_str(), 0755), 0);
    ASSERT_EQ(mkdir((prefix_ + "/drive_c").c_str(), 0755), 0);
    ASSERT_EQ(symlink("../drive_c", (prefix_ + "/dosdevices/c:").c_str()), 0);
    ASSERT_EQ(symlink("/", (prefix_ + "/dosdevices/z:").c_str()), 0);
  }
  void TearDown() override {
    unlink((prefix_ + "/dosdevices/c:").c_str());
    unlink((prefix_ + "/dosdevices/z:").c_str());
    rmdir((prefix_ + "/dosdevices").c_str());
    rmdir((prefix_ + "/drive_c").c_str());
    rmdir(prefix_.c_str());
  }
  std::string prefix_;
};

TEST_F(WinePathTest, RecognisesDrivePathsOnly) {
  EXPECT_TRUE(IsWindowsPath("Z:\\tmp\\a.exe"));
  EXPECT_TRUE(IsWindowsPath("c:/windows/system32/kernel32.dll"));
  EXPECT_TRUE(IsWindowsPath("\\\\?\\C:\\long\\a.dll"));
  EXPECT_FALSE(IsWindowsPath("/usr/lib/libc.so.6"));
  EXPECT_FALSE(IsWindowsPath("[vdso]"));
  EXPECT_FALSE(IsWindowsPath("C:"));
  EXPECT_FALSE(IsWindowsPath("\\\\server\\share\\a.dll"));
}

TEST_F(WinePathTest, DriveZIsTheRootThroughItsLink) {
  EXPECT_EQ(WinePathToHost("Z:\\tmp\\wt\\tgt.exe", prefix_), "/tmp/wt/tgt.exe");
  EXPECT_EQ(WinePathToHost("z:/tmp/wt/tgt.exe", prefix_), "/tmp/wt/tgt.exe");
  EXPECT_EQ(WinePathToHost("\\\\?\\Z:\\tmp\\wt\\tgt.exe", prefix_), "/tmp/wt/tgt.exe");
}

TEST_F(WinePathTest, RelativeLinkIsTakenFromDosdevices) {
  EXPECT_EQ(WinePathToHost("C:\\windows\\system32\\kernel32.dll", prefix_),
            prefix_ + "/dosdevices/../drive_c/windows/system32/kernel32.dll");
}

TEST_F(WinePathTest, UnmappedDriveIsUnresolved) {
  EXPECT_EQ(WinePathToHost("D:\\data\\a.dll", prefix_), "");
}

TEST_F(WinePathTest, WithoutAPrefixOnlyZIsKnown) {
  const std::string missing = prefix_ + "/no_such_prefix";
  EXPECT_EQ(WinePathToHost("Z:\\tmp\\a.exe", missing), "/tmp/a.exe");
  EXPECT_EQ(WinePathToHost("C:\\windows\\a.dll", missing), "");
  EXPECT_EQ(WinePathToHost("Z:\\tmp\\a.exe", ""), "/tmp/a.exe");
}

TEST_F(WinePathTest, LinuxPathsPassThrough) {
  EXPECT_EQ(WinePathToHost("/usr/lib/libc.so.6", prefix_), "/usr/lib/libc.so.6");
  EXPECT_EQ(HostPath("/usr/lib/libc.so.6"), "/usr/lib/libc.so.6");
}

TEST_F(WinePathTest, HostPathReadsWineprefix) {
  const char* saved = getenv("WINEPREFIX");
  const std::string before = saved != nullptr ? saved : "";
  setenv("WINEPREFIX", prefix_.c_str(), 1);
  EXPECT_EQ(DefaultWinePrefix(), prefix_);
  EXPECT_EQ(HostPath("C:\\x.dll"), prefix_ + "/dosdevices/../drive_c/x.dll");
  if (saved != nullptr) {
    setenv("WINEPREFIX", before.c_str(), 1);
  } else {
    unsetenv("WINEPREFIX");
  }
}

}  // namespace
}  // namespace memlens::analyzer
