#include "calibrate/import_babelstream.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "calibrate/log_text.h"

namespace stepcast::calibrate {
namespace {
bool IsKernel(const std::string& k) {
  return k == "copy" || k == "mul" || k == "add" || k == "triad" || k == "dot" || k == "nstream";
}
}  // namespace

bool LooksLikeBabelStream(absl::string_view text) {
  return text.find("BabelStream") != absl::string_view::npos ||
         (text.find("Function") != absl::string_view::npos && text.find("Bytes/sec") != absl::string_view::npos) ||
         text.find("function,num_times,n_elements") != absl::string_view::npos;
}

absl::StatusOr<BabelStreamLog> ParseBabelStreamLog(absl::string_view text, const std::string& path) {
  BabelStreamLog log;
  log.path = path;
  double unit = 0;               // bytes per printed unit of the table
  std::vector<std::string> csv;  // the csv header's columns
  for (const LogLine& l : SplitLines(text)) {
    absl::string_view s = absl::StripAsciiWhitespace(l.text);
    if (s.empty()) continue;
    // BabelStream checks the kernels' results after the timed runs and prints "Validation failed
    // on a[]. Average error ..." (src/main.cpp check_solution): rates of wrong results are no
    // measurement (gpu code review 2, N12: b01 was imported with its failure line ignored).
    if (absl::StartsWith(s, "Validation failed")) {
      return LogError(path, l.number,
                      absl::StrCat("BabelStream reports '", s.substr(0, 120),
                                   "': its kernels' results were wrong, so its rates are not imported"));
    }
    if (absl::StartsWith(s, "Using ") && s.find("device") != absl::string_view::npos) {
      const size_t at = s.find("device");
      log.device = std::string(absl::StripAsciiWhitespace(s.substr(at + 6)).substr(0, 256));
      continue;
    }
    if (absl::StartsWith(s, "Precision:")) {
      log.precision = std::string(absl::StripAsciiWhitespace(s.substr(10)));
      continue;
    }
    if (absl::StartsWith(s, "Function")) {
      unit = s.find("MiBytes/sec") != absl::string_view::npos ? 1048576.0 : 1e6;
      continue;
    }
    if (absl::StartsWith(s, "function,")) {
      csv = absl::StrSplit(std::string(s), ',');
      unit = s.find("mibytes") != absl::string_view::npos ? 1048576.0 : 1e6;
      continue;
    }
    if (absl::StartsWith(s, "Bandwidth (")) {  // --triad-only
      const double u = s.find("GiB/s") != absl::string_view::npos ? 1073741824.0 : 1e9;
      const size_t colon = s.find(':');
      std::optional<double> v = colon == absl::string_view::npos ? std::nullopt
                                                                : ParseDouble(absl::StripAsciiWhitespace(s.substr(colon + 1)));
      if (!v) return LogError(path, l.number, "triad bandwidth is not a number");
      log.bytes_per_s["triad"] = *v * u;
      log.line["triad"] = l.number;
      continue;
    }
    if (!csv.empty() && s.find(',') != absl::string_view::npos) {
      std::vector<std::string> cells = absl::StrSplit(std::string(s), ',');
      const std::string k = absl::AsciiStrToLower(cells[0]);
      if (!IsKernel(k)) continue;
      if (cells.size() != csv.size()) {
        return LogError(path, l.number, absl::StrCat("csv row with ", cells.size(), " cells, the header has ", csv.size()));
      }
      for (size_t i = 0; i < csv.size(); ++i) {
        if (absl::StartsWith(csv[i], "max_m")) {
          std::optional<double> v = ParseDouble(cells[i]);
          if (!v || !(*v > 0)) return LogError(path, l.number, absl::StrCat("'", cells[i], "' is not a rate"));
          log.bytes_per_s[k] = *v * unit;
          log.line[k] = l.number;
        }
      }
      continue;
    }
    if (unit > 0) {
      std::vector<absl::string_view> t = Tokens(s);
      const std::string k = absl::AsciiStrToLower(std::string(t[0]));
      if (!IsKernel(k)) continue;
      if (t.size() < 5) {
        return LogError(path, l.number, absl::StrCat("truncated BabelStream row: ", t.size(), " columns, want 5"));
      }
      std::optional<double> v = ParseDouble(t[1]);
      if (!v || !(*v > 0)) return LogError(path, l.number, absl::StrCat("'", t[1].substr(0, 40), "' is not a rate"));
      log.bytes_per_s[k] = *v * unit;
      log.line[k] = l.number;
    }
  }
  if (log.bytes_per_s.empty()) return LogError(path, 0, "no BabelStream kernel rows (Copy, Mul, Add, Triad, Dot)");
  return log;
}

}  // namespace stepcast::calibrate
