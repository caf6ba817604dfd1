// src/analyzer/export/text_table.h
//
// TextTable: aligned columns for the terminal views. Numeric columns are right-aligned; the
// last column may be long (a function name) and is never padded.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace memlens::analyzer {

class TextTable {
 public:
  enum Align { kLeft, kRight };
  void AddColumn(std::string title, Align align) { columns_.push_back({std::move(title), align}); }
  void AddRow(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  void Print(std::ostream& out, const std::string& indent = "  ") const;

 private:
  struct Column {
    std::string title;
    Align align;
  };
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace memlens::analyzer
