// One CSV line's cells, for tests that read the project's CSV files (no gtest dependency: the
// pages fixture, which is not a gtest binary, uses it too).
#ifndef STEPCAST_TESTS_CSV_LINE_H_
#define STEPCAST_TESTS_CSV_LINE_H_

#include <string>
#include <vector>

namespace stepcast::testing {

// The cells of one CSV line (RFC 4180: a quoted cell may hold commas; "" inside quotes is a quote).
inline std::vector<std::string> SplitCsvLine(const std::string& line) {
  std::vector<std::string> cells(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      cells.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      cells.emplace_back();
    } else {
      cells.back() += c;
    }
  }
  return cells;
}

}  // namespace stepcast::testing

#endif  // STEPCAST_TESTS_CSV_LINE_H_
