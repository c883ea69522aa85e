#include "calibrate/log_text.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "proto/codec.h"

namespace stepcast::calibrate {

std::vector<LogLine> SplitLines(absl::string_view text) {
  std::vector<LogLine> out;
  int number = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == absl::string_view::npos) end = text.size();
    absl::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out.push_back({++number, line});
    start = end + 1;
  }
  return out;
}

std::vector<absl::string_view> Tokens(absl::string_view line) {
  std::vector<absl::string_view> out;
  for (absl::string_view t : absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
    out.push_back(absl::string_view(t.data(), t.size()));
  }
  return out;
}

std::optional<double> ParseDouble(absl::string_view token) {
  double v = 0;
  if (!absl::SimpleAtod(absl::string_view(token.data(), token.size()), &v) || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<int64_t> ParseInt(absl::string_view token) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(absl::string_view(token.data(), token.size()), &v)) return std::nullopt;
  return v;
}

absl::string_view StripLauncherTag(absl::string_view line) {
  size_t i = 0;
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  absl::string_view rest = line.substr(i);
  // OpenMPI --tag-output: "[1,0]<stdout>:" / "[1,3]<stderr>:".
  if (!rest.empty() && rest[0] == '[') {
    const size_t close = rest.find(']');
    if (close != absl::string_view::npos && rest.substr(close + 1).rfind("<std", 0) == 0) {
      const size_t colon = rest.find(':', close);
      if (colon != absl::string_view::npos) return rest.substr(colon + 1);
    }
  }
  // srun --label: "12: ".
  size_t d = 0;
  while (d < rest.size() && absl::ascii_isdigit(static_cast<unsigned char>(rest[d]))) ++d;
  if (d > 0 && d < rest.size() && rest[d] == ':' && d + 1 < rest.size() && rest[d + 1] == ' ') {
    return rest.substr(d + 2);
  }
  return line;
}

absl::Status LogError(const std::string& path, int line, absl::string_view what) {
  if (line <= 0) return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
  return absl::InvalidArgumentError(absl::StrCat(path, ":", line, ": ", what));
}

absl::Status ReadWholeFile(const std::string& path, std::string* out, int64_t max_bytes) {
  absl::StatusOr<std::string> text = ReadInputFile(path, max_bytes);
  if (!text.ok()) return text.status();
  *out = *std::move(text);
  return absl::OkStatus();
}

std::vector<std::string> Words(absl::string_view text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const bool digit = absl::ascii_isdigit(c), alpha = absl::ascii_isalpha(c);
    if (!digit && !alpha) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && (digit ? absl::ascii_isdigit(static_cast<unsigned char>(text[j]))
                                     : absl::ascii_isalpha(static_cast<unsigned char>(text[j])))) {
      ++j;
    }
    out.push_back(absl::AsciiStrToLower(text.substr(i, j - i)));
    i = j;
  }
  return out;
}

std::vector<absl::string_view> IdentifierWords(absl::string_view text) {
  std::vector<absl::string_view> out;
  auto ident = [](char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  size_t i = 0;
  while (i < text.size()) {
    if (!ident(text[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && ident(text[j])) ++j;
    out.push_back(text.substr(i, j - i));
    i = j;
  }
  return out;
}

}  // namespace stepcast::calibrate
