// Unit tests of what the export formats write for awkward names: RFC 4180 quoting (csv.h),
// frames the folded format cannot hold as they are (folded.h), and the list of formats.
#include "analyzer/export/export_formats.h"

#include <gtest/gtest.h>

#include <set>

#include "analyzer/export/csv.h"
#include "analyzer/export/folded.h"

namespace memlens::analyzer {
namespace {

TEST(CsvField, QuotesOnlyWhatRfc4180Requires) {
  EXPECT_EQ(CsvField("plain"), "plain");
  EXPECT_EQ(CsvField(""), "");
  EXPECT_EQ(CsvField("f(int, char)"), "\"f(int, char)\"");
  EXPECT_EQ(CsvField("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(CsvField("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(CsvField("cr\r"), "\"cr\r\"");
}

TEST(FoldedFrame, ReplacesWhatFlameGraphToolsCannotRead) {
  SourceFrame frame;
  frame.function = "odd;name\nwith\rbreaks";
  frame.file = "/src/dir/file.c";
  frame.line = 12;
  EXPECT_EQ(FoldedFrame(frame), "odd:name with breaks (file.c:12)");
  frame.line = 0;
  EXPECT_EQ(FoldedFrame(frame), "odd:name with breaks");
}

TEST(ExportFormats, NamesAreUniqueAndFound) {
  std::set<std::string> names;
  for (const ExportFormat& f : ExportFormats()) {
    EXPECT_TRUE(names.insert(f.name).second) << f.name;
    EXPECT_EQ(FindExportFormat(f.name), &f);
    EXPECT_EQ(f.extension[0], '.');
  }
  EXPECT_EQ(FindExportFormat("nosuch"), nullptr);
}

TEST(Metric, ParsesItsNames) {
  for (Metric m : {Metric::kInUse, Metric::kAllocated, Metric::kPeak}) {
    Metric parsed;
    ASSERT_TRUE(ParseMetric(MetricName(m), &parsed));
    EXPECT_EQ(parsed, m);
  }
  Metric parsed;
  EXPECT_FALSE(ParseMetric("leaked", &parsed));
  StackStats s;
  s.in_use_bytes = 1;
  s.allocated_bytes = 2;
  s.peak_bytes = 3;
  EXPECT_EQ(MetricBytes(s, Metric::kInUse), 1u);
  EXPECT_EQ(MetricBytes(s, Metric::kAllocated), 2u);
  EXPECT_EQ(MetricBytes(s, Metric::kPeak), 3u);
}

}  // namespace
}  // namespace memlens::analyzer
