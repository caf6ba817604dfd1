// What memlens sends Pyroscope besides the pprof: the period's allocations, the labels and the
// URL as messages show it.
#include "analyzer/export/pyroscope.h"

#include <gtest/gtest.h>

namespace memlens::analyzer {
namespace {

StackStats Stats(uint64_t allocations, uint64_t bytes, uint64_t in_use_blocks,
                 uint64_t in_use_bytes) {
  StackStats s;
  s.allocations = allocations;
  s.allocated_bytes = bytes;
  s.in_use_blocks = in_use_blocks;
  s.in_use_bytes = in_use_bytes;
  return s;
}

TEST(PyroscopeTest, PeriodKeepsInUseAndTheAllocationsSinceTheLastPeriod) {
  AllocatedSoFar so_far;
  Profile first;
  first.stacks[1] = Stats(3, 3000, 3, 3000);
  first.stacks[2] = Stats(2, 8192, 0, 0);
  TakePeriod(&so_far, &first);
  EXPECT_EQ(first.stacks.at(1).allocated_bytes, 3000u);
  EXPECT_EQ(first.stacks.at(2).allocations, 2u);

  Profile second;  // stack 1 allocated 2 more and freed one; stack 2 did nothing
  second.stacks[1] = Stats(5, 5000, 4, 4000);
  second.stacks[2] = Stats(2, 8192, 0, 0);
  TakePeriod(&so_far, &second);
  ASSERT_EQ(second.stacks.size(), 1u);  // nothing in use, nothing allocated: left out
  const StackStats& s = second.stacks.at(1);
  EXPECT_EQ(s.allocations, 2u);
  EXPECT_EQ(s.allocated_bytes, 2000u);
  EXPECT_EQ(s.in_use_blocks, 4u);
  EXPECT_EQ(s.in_use_bytes, 4000u);

  Profile after_exec;  // a new program image: its figures start over
  after_exec.stacks[1] = Stats(1, 100, 1, 100);
  TakePeriod(&so_far, &after_exec);
  EXPECT_EQ(after_exec.stacks.at(1).allocated_bytes, 100u);
}

TEST(PyroscopeTest, Labels) {
  PushLabel label;
  std::string error;
  EXPECT_TRUE(ParsePushLabel("env=prod-1.eu", &label, &error));
  EXPECT_EQ(label.name, "env");
  EXPECT_EQ(label.value, "prod-1.eu");
  for (const char* bad : {"env", "env=", "=x", "1env=x", "e-v=x", "env=a,b", "env=a}", "env=a=b",
                          "__name__=x", "service_name=x"}) {
    EXPECT_FALSE(ParsePushLabel(bad, &label, &error)) << bad;
  }
  PushTarget target{"http://h:4040", "shop.api", {{"host", "a"}, {"pid", "7"}}};
  SetPushLabel(&target.labels, {"host", "b"});
  SetPushLabel(&target.labels, {"env", "ci"});
  EXPECT_EQ(IngestName(target), "shop.api{host=b,pid=7,env=ci}");
  EXPECT_EQ(ServiceNameOf("/usr/bin/my server{1}"), "my_server_1_");
}

TEST(PyroscopeTest, Urls) {
  std::string error;
  EXPECT_TRUE(CheckPushUrl("http://localhost:4040", &error));
  EXPECT_TRUE(CheckPushUrl("https://u:p@profiles.example.net/prefix/", &error));
  for (const char* bad : {"localhost:4040", "ftp://h", "http://", "http://h/?q=1", "http://h/#f"}) {
    EXPECT_FALSE(CheckPushUrl(bad, &error)) << bad;
  }
  EXPECT_EQ(RedactedUrl("https://123:tok@h.net/x"), "https://123:***@h.net/x");
  EXPECT_EQ(RedactedUrl("https://user@h.net"), "https://user@h.net");
  EXPECT_EQ(RedactedUrl("http://h/a@b"), "http://h/a@b");
}

}  // namespace
}  // namespace memlens::analyzer
