// The API's string table: one id per text, copies of the text (the caller's buffer may change),
// names cut at kMaxStringLength, and equal ids from many threads.
#include "agent/api/string_table.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace memlens::agent {
namespace {

std::string Text(uint32_t id) {
  size_t length = 0;
  const char* text = StringText(id, &length);
  return std::string(text, length);
}

TEST(StringTable, InternsByContentAndCopies) {
  char buffer[16] = "frame";
  uint32_t frame = InternString(buffer);
  ASSERT_NE(frame, 0u);
  std::snprintf(buffer, sizeof buffer, "menu");  // the same pointer, another text
  uint32_t menu = InternString(buffer);
  EXPECT_NE(menu, frame);
  EXPECT_EQ(Text(frame), "frame");
  EXPECT_EQ(Text(menu), "menu");
  EXPECT_EQ(InternString("frame"), frame);
  EXPECT_EQ(InternString(nullptr), 0u);
  EXPECT_EQ(Text(0), "");
  std::string empty;
  EXPECT_EQ(Text(InternString(empty.c_str())), "");
}

TEST(StringTable, LongNamesAreCut) {
  std::string name(1000, 'x');
  uint32_t id = InternString(name.c_str());
  EXPECT_EQ(Text(id), std::string(kMaxStringLength, 'x'));
  EXPECT_EQ(InternString(name.substr(0, kMaxStringLength).c_str()), id);
}

TEST(StringTable, ThreadsAgreeOnIds) {
  std::vector<std::thread> threads;
  std::vector<std::vector<uint32_t>> ids(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &ids] {
      for (int i = 0; i < 200; ++i) ids[t].push_back(InternString(("name" + std::to_string(i)).c_str()));
    });
  }
  for (auto& thread : threads) thread.join();
  for (int i = 0; i < 200; ++i) {
    // Two threads racing on a new name may get two ids; both must hold the same text.
    for (int t = 0; t < 4; ++t) EXPECT_EQ(Text(ids[t][i]), "name" + std::to_string(i));
    EXPECT_EQ(InternString(("name" + std::to_string(i)).c_str()), InternString(("name" + std::to_string(i)).c_str()));
  }
}

}  // namespace
}  // namespace memlens::agent
