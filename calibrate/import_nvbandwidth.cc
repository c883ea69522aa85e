#include "calibrate/import_nvbandwidth.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "calibrate/log_text.h"

namespace stepcast::calibrate {

double NvbandwidthTest::MedianCellBytesPerS() const {
  std::vector<double> v;
  for (size_t i = 0; i < matrix.size(); ++i) {
    for (size_t j = 0; j < matrix[i].size(); ++j) {
      if (!matrix[i][j] || !(*matrix[i][j] > 0)) continue;
      v.push_back(*matrix[i][j]);
    }
  }
  if (v.empty() || title.find("GB/s") == std::string::npos) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return 1e9 * (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

bool LooksLikeNvbandwidth(absl::string_view text) {
  return text.find("nvbandwidth") != absl::string_view::npos ||
         (text.find("Running ") != absl::string_view::npos && text.find("\nSUM ") != absl::string_view::npos);
}

absl::StatusOr<NvbandwidthLog> ParseNvbandwidthLog(absl::string_view text, const std::string& path) {
  NvbandwidthLog log;
  log.path = path;
  NvbandwidthTest* cur = nullptr;
  bool header_seen = false;
  size_t columns = 0;  // of the current matrix's column-index line
  for (const LogLine& l : SplitLines(text)) {
    absl::string_view s = absl::StripAsciiWhitespace(l.text);
    if (absl::StartsWith(s, "Running ")) {
      if (cur && !cur->sum) return LogError(path, l.number, absl::StrCat("test ", cur->name, " never printed its SUM line"));
      std::string name(absl::StripAsciiWhitespace(s.substr(8)));
      if (!name.empty() && name.back() == '.') name.pop_back();
      NvbandwidthTest& t = log.tests[name];
      t = NvbandwidthTest{};
      t.name = name;
      t.line = l.number;
      cur = &t;
      header_seen = false;
      continue;
    }
    if (absl::StartsWith(s, "SUM ")) {
      std::vector<absl::string_view> t = Tokens(s);
      if (t.size() != 3) return LogError(path, l.number, "a SUM line is 'SUM <test> <value>'");
      NvbandwidthTest& test = log.tests[std::string(t[1])];
      if (test.name.empty()) test.name = std::string(t[1]);
      test.sum = ParseDouble(t[2]);
      if (!test.sum) return LogError(path, l.number, absl::StrCat("'", t[2], "' is not a number"));
      cur = nullptr;
      continue;
    }
    if (cur == nullptr || s.empty()) continue;
    if (absl::StartsWith(s, "Waived")) {  // the test does not apply to this system
      log.tests.erase(cur->name);
      cur = nullptr;
      continue;
    }
    if (cur->title.empty()) {
      cur->title = std::string(s);
      continue;
    }
    std::vector<absl::string_view> t = Tokens(s);
    if (!header_seen) {  // the column indices
      header_seen = true;
      columns = t.size();
      continue;
    }
    // Every row has one cell per column (nvbandwidth prints the full matrix): more or fewer is a
    // garbled row, not a measurement (reliability review 2, N9: stray cells became HBM 12 GB/s).
    if (t.size() != columns + 1) {
      return LogError(path, l.number,
                      absl::StrCat("a matrix row of ", t.size() - 1, " cells under ", columns,
                                   " column indices (a garbled or truncated row)"));
    }
    // "<row label> cell cell ...": cells are numbers or N/A; the label may be a device or NUMA id.
    std::vector<std::optional<double>> row;
    for (size_t i = 1; i < t.size(); ++i) {
      if (t[i] == "N/A") {
        row.push_back(std::nullopt);
        continue;
      }
      std::optional<double> v = ParseDouble(t[i]);
      if (!v) return LogError(path, l.number, absl::StrCat("'", t[i].substr(0, 40), "' is neither a number nor N/A"));
      row.push_back(v);
    }
    cur->matrix.push_back(std::move(row));
  }
  if (cur && !cur->sum) return LogError(path, 0, absl::StrCat("truncated: test ", cur->name, " never printed its SUM line"));
  if (log.tests.empty()) return LogError(path, 0, "no nvbandwidth test ('Running <test>.' ... 'SUM <test> <value>')");
  return log;
}

}  // namespace stepcast::calibrate
