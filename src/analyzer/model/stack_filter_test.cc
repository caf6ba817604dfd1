// FramePattern and StackFilter: the pattern syntax, what each field matches (files and modules
// by full path or base name), and tracemalloc's semantics (includes OR-ed, excludes win).
#include "analyzer/model/stack_filter.h"

#include <gtest/gtest.h>

namespace memlens::analyzer {
namespace {

SourceFrame Frame(const char* function, const char* file, const char* module) {
  SourceFrame f;
  f.function = function;
  f.file = file;
  f.module = module;
  return f;
}

FramePattern Pattern(const std::string& text) {
  FramePattern p;
  std::string error;
  EXPECT_TRUE(FramePattern::Parse(text, &p, &error)) << error;
  return p;
}

TEST(FramePattern, FieldsAndGlobs) {
  SourceFrame f = Frame("cache_insert", "/src/net/cache.cc", "/usr/lib/libnet.so.2");
  EXPECT_TRUE(Pattern("function:cache_*").Matches(f));
  EXPECT_FALSE(Pattern("function:cache").Matches(f));
  EXPECT_TRUE(Pattern("file:cache.cc").Matches(f));           // base name
  EXPECT_TRUE(Pattern("file:*/net/*").Matches(f));            // full path, '*' crosses '/'
  EXPECT_FALSE(Pattern("file:net.cc").Matches(f));
  EXPECT_TRUE(Pattern("module:libnet.so*").Matches(f));
  EXPECT_FALSE(Pattern("module:cache_*").Matches(f));         // a function glob, not a module
  EXPECT_TRUE(Pattern("cache_*").Matches(f));                 // no prefix: any field
  EXPECT_TRUE(Pattern("libnet.so.2").Matches(f));
  FramePattern p;
  std::string error;
  EXPECT_FALSE(FramePattern::Parse("", &p, &error));
  EXPECT_FALSE(error.empty());
  EXPECT_FALSE(FramePattern::Parse("function:", &p, &error));
}

TEST(StackFilter, IncludesAreOredAndExcludesWin) {
  SourceFrame a = Frame("path_a", "/t/leak.c", "/t/prog");
  SourceFrame b = Frame("path_b", "/t/leak.c", "/t/prog");
  SourceFrame helper = Frame("make_block", "/t/leak.c", "/t/prog");
  Stack via_a = {&helper, &a}, via_b = {&helper, &b};

  StackFilter none;
  EXPECT_TRUE(none.empty());
  EXPECT_TRUE(none.Keeps(via_a));

  StackFilter include_a;
  include_a.include = {Pattern("function:path_a")};
  EXPECT_TRUE(include_a.Keeps(via_a));
  EXPECT_FALSE(include_a.Keeps(via_b));

  StackFilter either;  // includes are OR-ed
  either.include = {Pattern("function:path_a"), Pattern("function:path_b")};
  EXPECT_TRUE(either.Keeps(via_a) && either.Keeps(via_b));

  StackFilter exclude_wins;
  exclude_wins.include = {Pattern("function:make_block")};
  exclude_wins.exclude = {Pattern("function:path_a")};
  EXPECT_FALSE(exclude_wins.Keeps(via_a));
  EXPECT_TRUE(exclude_wins.Keeps(via_b));
}

}  // namespace
}  // namespace memlens::analyzer
