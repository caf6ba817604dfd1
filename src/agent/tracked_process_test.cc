// src/agent/tracked_process_test.cc
//
// The MEMLENS_TRACKED mark: its text both ways, the start time read from /proc/self/stat, and
// which marks name the calling process (the one whose pid was used again does not).
#include "agent/tracked_process.h"

#include <errno.h>
#include <stdint.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace memlens::agent {
namespace {

std::string Format(const TrackedProcess& process) {
  char text[kTrackedTextSize];
  return FormatTracked(process, text);
}

uint64_t Ticks(const std::string& stat) { return StartTicksFromStat(stat.data(), stat.size()); }

// Field 22 of /proc/self/stat, read the plain way.
uint64_t StartTicksOfThisProcess() {
  std::ifstream file("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string field;
  for (int n = 3; n <= 22; ++n) fields >> field;
  return std::stoull(field);
}

TEST(TrackedProcessTest, FormatsPidAndStartAndReadsThemBack) {
  EXPECT_EQ(Format({1234, 987654}), "1234:987654");
  EXPECT_EQ(Format({1234, 0}), "1234");  // the start not known: the bare pid
  EXPECT_EQ(Format({UINT64_MAX, UINT64_MAX}), "18446744073709551615:18446744073709551615");
  for (TrackedProcess p : {TrackedProcess{1234, 987654}, TrackedProcess{7, 0},
                           TrackedProcess{UINT64_MAX, UINT64_MAX}}) {
    TrackedProcess back;
    ASSERT_TRUE(ParseTracked(Format(p).c_str(), &back)) << Format(p);
    EXPECT_EQ(back.pid, p.pid);
    EXPECT_EQ(back.start_ticks, p.start_ticks);
  }
}

TEST(TrackedProcessTest, ReadsTheBarePidOfEarlierAgents) {
  TrackedProcess p;
  ASSERT_TRUE(ParseTracked("4321", &p));
  EXPECT_EQ(p.pid, 4321u);
  EXPECT_EQ(p.start_ticks, 0u);
}

TEST(TrackedProcessTest, OtherTextNamesNoProcess) {
  for (const char* text : {"", "abc", "12x", "12:", ":34", "12:34:56", "12:3x", " 12", "12 ",
                           "-12", "+12", "18446744073709551616", "1:18446744073709551616"}) {
    TrackedProcess p{5, 6};
    EXPECT_FALSE(ParseTracked(text, &p)) << text;
    EXPECT_EQ(p.pid, 0u) << text;
    EXPECT_EQ(p.start_ticks, 0u) << text;
  }
  TrackedProcess p;
  EXPECT_FALSE(ParseTracked(nullptr, &p));
}

TEST(TrackedProcessTest, FindsFieldTwentyTwoAfterTheCommandName) {
  const std::string tail = " 0 -1 4194304 99 0 0 0 0 0 0 0 20 0 1 0 1106714 3133440 383\n";
  EXPECT_EQ(Ticks("8873 (cat) R 8869 8869 7559" + tail), 1106714u);
  // A command name may hold spaces and parentheses: the fields count from the last ')'.
  EXPECT_EQ(Ticks("8873 (a) b (c)) R 8869 8869 7559" + tail), 1106714u);
  // Field 22 last, with or without the newline.
  EXPECT_EQ(Ticks("1 (x) S 0 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 42"), 42u);
  EXPECT_EQ(Ticks("1 (x) S 0 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 42\n"), 42u);
  // Too short, cut in the middle, not a number, no command name: not known.
  EXPECT_EQ(Ticks("1 (x) S 0 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0"), 0u);
  EXPECT_EQ(Ticks("1 (x) S 0 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 "), 0u);
  EXPECT_EQ(Ticks("1 (x) S 0 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 4x 5"), 0u);
  EXPECT_EQ(Ticks("1 x S 0 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 42"), 0u);
  EXPECT_EQ(Ticks(""), 0u);
}

TEST(TrackedProcessTest, ThisProcessIsItsPidAndStartTimeAndKeepsErrno) {
  errno = EDOM;
  const TrackedProcess self = ThisProcess();
  EXPECT_EQ(errno, EDOM);
  EXPECT_EQ(self.pid, static_cast<uint64_t>(getpid()));
  EXPECT_NE(self.start_ticks, 0u);
  EXPECT_EQ(self.start_ticks, StartTicksOfThisProcess());
}

TEST(TrackedProcessTest, APidUsedAgainIsAnotherProcess) {
  const TrackedProcess self = ThisProcess();
  const uint64_t pid = self.pid;
  const uint64_t start = self.start_ticks;
  // This process's own mark: an exec of it keeps both.
  EXPECT_TRUE(SameProcess({pid, start}, self));
  EXPECT_TRUE(IsThisProcess({pid, start}));
  // The mark of an earlier process that had this pid: it started before this one did.
  EXPECT_FALSE(SameProcess({pid, start - 1}, self));
  EXPECT_FALSE(IsThisProcess({pid, start - 1}));
  EXPECT_FALSE(IsThisProcess({pid, start + 1}));
  // Another pid, whatever the start.
  EXPECT_FALSE(SameProcess({pid + 1, start}, self));
  EXPECT_FALSE(IsThisProcess({pid + 1, start}));
  EXPECT_FALSE(IsThisProcess({}));
  // A bare pid (an earlier agent's), or a start this process cannot read: the pid decides.
  EXPECT_TRUE(IsThisProcess({pid, 0}));
  EXPECT_TRUE(SameProcess({pid, 0}, self));
  EXPECT_TRUE(SameProcess({pid, start + 1}, {pid, 0}));
  EXPECT_FALSE(SameProcess({pid + 1, 0}, {pid, 0}));
}

TEST(TrackedProcessTest, TheMarkOfThisProcessNamesIt) {
  char text[kTrackedTextSize];
  TrackedProcess back;
  ASSERT_TRUE(ParseTracked(FormatTracked(ThisProcess(), text), &back)) << text;
  EXPECT_TRUE(IsThisProcess(back)) << text;
  EXPECT_EQ(std::string(text),
            std::to_string(getpid()) + ":" + std::to_string(StartTicksOfThisProcess()));
}

}  // namespace
}  // namespace memlens::agent
