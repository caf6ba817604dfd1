// src/analyzer/export/text_table.cc: see text_table.h.
#include "analyzer/export/text_table.h"

#include <algorithm>

namespace memlens::analyzer {
namespace {

// Columns on the terminal: UTF-8 continuation bytes take none (the ± of a sampled figure).
size_t Width(const std::string& text) {
  return std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xc0) != 0x80; });
}

}  // namespace

void TextTable::Print(std::ostream& out, const std::string& indent) const {
  std::vector<size_t> width(columns_.size());
  for (size_t c = 0; c < columns_.size(); ++c) width[c] = Width(columns_[c].title);
  for (const auto& row : rows_) {
    for (size_t c = 0; c < row.size() && c < width.size(); ++c) {
      width[c] = std::max(width[c], Width(row[c]));
    }
  }
  auto print_row = [&](const std::vector<std::string>& cells) {
    std::string line = indent;
    for (size_t c = 0; c < columns_.size(); ++c) {
      const std::string cell = c < cells.size() ? cells[c] : "";
      bool last = c + 1 == columns_.size();
      std::string pad(width[c] - std::min(width[c], Width(cell)), ' ');
      if (columns_[c].align == kRight) line += pad + cell;
      else line += last ? cell : cell + pad;
      if (!last) line += "  ";
    }
    out << line << '\n';
  };
  std::vector<std::string> titles;
  bool any_title = false;
  for (const auto& c : columns_) {
    titles.push_back(c.title);
    any_title |= !c.title.empty();
  }
  if (any_title) print_row(titles);
  for (const auto& row : rows_) print_row(row);
}

}  // namespace memlens::analyzer
