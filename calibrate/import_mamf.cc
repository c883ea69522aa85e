#include "calibrate/import_mamf.h"

#include <regex>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "calibrate/log_text.h"

namespace stepcast::calibrate {
namespace {

// torch dtype names as mamf-finder prints or takes them.
std::optional<DType> MamfDType(std::string name) {
  name = absl::AsciiStrToLower(name);
  if (absl::StartsWith(name, "torch.")) name = name.substr(6);
  if (name == "bfloat16" || name == "bf16") return DType::kBF16;
  if (name == "float16" || name == "half" || name == "fp16") return DType::kFP16;
  if (absl::StartsWith(name, "float8") || name == "fp8") return DType::kFP8;
  if (name == "float32" || name == "float" || name == "fp32") return DType::kFP32;
  return std::nullopt;
}

}  // namespace

bool LooksLikeMamfFinder(absl::string_view text) {
  return text.find("Maximum Achievable Matmul") != absl::string_view::npos ||
         text.find("mamf-finder") != absl::string_view::npos ||
         text.find("shapes => the best outcome") != absl::string_view::npos ||
         (text.find("(MxNxK)") != absl::string_view::npos && text.find("TFLOPS") != absl::string_view::npos);
}

absl::StatusOr<MamfLog> ParseMamfFinderLog(absl::string_view text, const std::string& path) {
  MamfLog log;
  log.path = path;
  static const std::regex old_row(
      R"(^\s*\d+\s*\|\s*([0-9.]+)\(mean\)\s+([0-9.]+)\(median\)\s+([0-9.]+)\(max\)\s*@\s*(\d+)x(\d+)x(\d+))");
  static const std::regex scout_row(R"(^\s*\d+\s+(\d+)x(\d+)x(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+[0-9.]+)");
  static const std::regex summary(R"(^\s*(mean|median|max):\s+([0-9.]+)\s*TFLOPS\s*@\s*(\d+)x(\d+)x(\d+))");
  static const std::regex headline(R"(^\s*(MAMF|MSMF)\s*\([^)]*\):\s+([0-9.]+)\s*TFLOPS\s*@\s*(\d+)x(\d+)x(\d+))");
  static const std::regex dtype_header(R"(^\*\*\s*Dtype:\s*(\S+))");
  static const std::regex dtype_arg(R"(--dtype[ =]+(\S+))");
  int dtype_line = 0;
  std::string dtype_name;
  bool next_is_device = false;
  MamfShape mean, msmf, mamf;
  for (const LogLine& l : SplitLines(text)) {
    const std::string s(l.text);
    std::smatch m;
    if (next_is_device && absl::StartsWith(absl::StripLeadingAsciiWhitespace(s), "- ")) {
      // "** Platform/Device info:" is followed by the uname line, then the device properties.
      if (s.find("name=") != std::string::npos || s.find("Properties") != std::string::npos) {
        log.device = std::string(absl::StripAsciiWhitespace(s.substr(s.find("- ") + 2)));
        next_is_device = false;
      }
      continue;
    }
    if (absl::StartsWith(s, "** Platform/Device info")) next_is_device = true;
    if (std::regex_search(s, m, dtype_header)) {
      dtype_name = m[1].str();
      dtype_line = l.number;
      continue;
    }
    if (dtype_name.empty() && std::regex_search(s, m, dtype_arg)) {
      dtype_name = m[1].str();
      dtype_line = l.number;
    }
    // Numbers are parsed strictly (ParseInt / ParseDouble): a matched "1.2.3", "." or a 400-digit
    // dimension is an error naming the line, not std::stod's exception.
    absl::Status bad;
    auto dim = [&](const std::string& t) -> int64_t {
      std::optional<int64_t> v = ParseInt(t);
      if (!v && bad.ok()) bad = LogError(path, l.number, absl::StrCat("dimension '", t, "' is not an integer in range"));
      return v.value_or(0);
    };
    auto tflops = [&](const std::string& t) -> double {
      std::optional<double> v = ParseDouble(t);
      if (!v && bad.ok()) bad = LogError(path, l.number, absl::StrCat("TFLOPS '", t, "' is not a number"));
      return v.value_or(0) * 1e12;
    };
    auto shape = [&](const std::smatch& mm, int first) {
      MamfShape x;
      x.line = l.number;
      x.m = dim(mm[first].str());
      x.n = dim(mm[first + 1].str());
      x.k = dim(mm[first + 2].str());
      return x;
    };
    if (std::regex_search(s, m, old_row)) {
      MamfShape x = shape(m, 4);
      x.mean_flops_per_s = tflops(m[1].str());
      x.median_flops_per_s = tflops(m[2].str());
      x.max_flops_per_s = tflops(m[3].str());
      log.shapes.push_back(x);
    } else if (std::regex_search(s, m, scout_row)) {
      MamfShape x = shape(m, 1);
      x.mean_flops_per_s = tflops(m[4].str());
      x.median_flops_per_s = tflops(m[5].str());
      x.max_flops_per_s = tflops(m[6].str());
      log.shapes.push_back(x);
    } else if (std::regex_search(s, m, summary)) {
      if (m[1].str() == "mean") {
        mean = shape(m, 3);
        mean.mean_flops_per_s = tflops(m[2].str());
      }
    } else if (std::regex_search(s, m, headline)) {
      MamfShape x = shape(m, 3);
      x.mean_flops_per_s = tflops(m[2].str());
      (m[1].str() == "MSMF" ? msmf : mamf) = x;
    }
    if (!bad.ok()) return bad;
  }
  if (dtype_name.empty()) {
    return LogError(path, 0, "no '** Dtype:' header and no --dtype in the log: cannot tell the GEMMs' dtype");
  }
  std::optional<DType> d = MamfDType(dtype_name);
  if (!d) return LogError(path, dtype_line, absl::StrCat("dtype '", dtype_name, "' is not one stepcast models"));
  log.dtype = *d;
  if (msmf.line > 0) {
    log.headline = msmf;
    log.headline_kind = "MSMF";
  } else if (mean.line > 0) {
    log.headline = mean;
    log.headline_kind = "mean";
  } else if (mamf.line > 0) {
    log.headline = mamf;
    log.headline_kind = "MAMF";
  }
  for (const MamfShape& x : log.shapes) {
    if (x.m <= 0 || x.n <= 0 || x.k <= 0 || !(x.mean_flops_per_s > 0)) {
      return LogError(path, x.line, "a shape with a zero dimension or rate");
    }
  }
  if (log.shapes.empty() && log.headline.line == 0) {
    return LogError(path, 0, "no per-shape rows and no 'best outcomes' summary: nothing was measured (truncated?)");
  }
  return log;
}

}  // namespace stepcast::calibrate
