#include "calibrate/import_mamf.h"

#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
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

// "MxNxK" -> (m, n, k); false when the token is not three integers joined by 'x'.
struct Dims {
  std::string m, n, k;
};
std::optional<Dims> ShapeToken(absl::string_view t) {
  std::vector<absl::string_view> p = absl::StrSplit(t, 'x');
  if (p.size() != 3) return std::nullopt;
  for (absl::string_view x : p) {
    if (x.empty()) return std::nullopt;
    for (char c : x) {
      if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    }
  }
  return Dims{std::string(p[0]), std::string(p[1]), std::string(p[2])};
}

// A number as the regular expression [0-9.]+ took it (digits and dots; ParseDouble decides).
bool NumberLike(absl::string_view t) {
  if (t.empty()) return false;
  for (char c : t) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c)) && c != '.') return false;
  }
  return true;
}

// The shape after "@" in tokens [from, end): "@ 1024x1024x1024" or "@1024x1024x1024".
std::optional<Dims> ShapeAfterAt(const std::vector<absl::string_view>& t, size_t from) {
  for (size_t i = from; i < t.size(); ++i) {
    if (t[i] == "@") return i + 1 < t.size() ? ShapeToken(t[i + 1]) : std::nullopt;
    if (absl::StartsWith(t[i], "@")) return ShapeToken(t[i].substr(1));
  }
  return std::nullopt;
}

// "702.1(mean)" -> "702.1" when the token ends with "(<what>)".
std::optional<absl::string_view> Tagged(absl::string_view t, absl::string_view what) {
  const std::string tag = absl::StrCat("(", what, ")");
  if (!absl::EndsWith(t, tag)) return std::nullopt;
  absl::string_view v = t.substr(0, t.size() - tag.size());
  if (!NumberLike(v)) return std::nullopt;
  return v;
}

}  // namespace

bool LooksLikeMamfFinder(absl::string_view text) {
  return text.find("Maximum Achievable Matmul") != absl::string_view::npos ||
         text.find("mamf-finder") != absl::string_view::npos ||
         text.find("shapes => the best outcome") != absl::string_view::npos ||
         (text.find("(MxNxK)") != absl::string_view::npos && text.find("TFLOPS") != absl::string_view::npos);
}

namespace {

// ParseMamfFinderLog in steps: each piece of each line read in turn (the device, the dtype, the
// count of shapes tried, a result row or summary line), then the log's checks.

// What the lines read so far say, beside the log itself.
struct MamfScan {
  MamfLog log;
  int dtype_line = 0;
  std::string dtype_name;
  bool next_is_device = false;   // after "** Platform/Device info", before its device line
  MamfShape mean, msmf, mamf;    // the summary's "mean:" shape, the MSMF and MAMF headlines
};

// The device: "_CudaDeviceProperties(name='NVIDIA H100 80GB HBM3', major=9, ...)", after
// "** Platform/Device info:" (with or without the later versions' "- " bullets). True when the
// piece was a device line (nothing more to read in it).
bool ReadDevice(absl::string_view s, absl::string_view st, MamfScan* scan) {
  MamfLog& log = scan->log;
  if (const size_t at = st.find("DeviceProperties(name='"); at != absl::string_view::npos && log.device.empty()) {
    absl::string_view rest = st.substr(at + 23);
    const size_t end = rest.find('\'');
    log.device_name = std::string(rest.substr(0, std::min<size_t>(end, 256)));
    log.device = std::string(absl::StripAsciiWhitespace(absl::StripPrefix(st, "- ")).substr(0, 1024));
    scan->next_is_device = false;
    return true;
  }
  if (scan->next_is_device && absl::StartsWith(st, "- ")) {
    if (st.find("name=") != absl::string_view::npos || st.find("Properties") != absl::string_view::npos) {
      log.device = std::string(absl::StripAsciiWhitespace(st.substr(2)).substr(0, 1024));
      scan->next_is_device = false;
    }
    return true;
  }
  if (absl::StartsWith(s, "** Platform/Device info")) scan->next_is_device = true;
  return false;
}

// The dtype: the header "** Dtype: torch.bfloat16" (true: nothing more to read in the piece), else
// "--dtype bfloat16" / "--dtype=bfloat16" of the command line while no dtype is known.
bool ReadDtype(absl::string_view s, int number, MamfScan* scan) {
  if (absl::StartsWith(s, "**")) {
    std::vector<absl::string_view> u = Tokens(s.substr(2));
    if (!u.empty() && u[0] == "Dtype:" && u.size() > 1) {
      scan->dtype_name = std::string(u[1].substr(0, 64));
      scan->dtype_line = number;
      return true;
    }
    if (!u.empty() && absl::StartsWith(u[0], "Dtype:") && u[0].size() > 6) {
      scan->dtype_name = std::string(u[0].substr(6, 64));
      scan->dtype_line = number;
      return true;
    }
  }
  if (scan->dtype_name.empty()) {
    if (const size_t at = s.find("--dtype"); at != absl::string_view::npos) {
      size_t i = at + 7;
      if (i < s.size() && (s[i] == ' ' || s[i] == '=')) {
        while (i < s.size() && (s[i] == ' ' || s[i] == '=')) ++i;
        size_t j = i;
        while (j < s.size() && !absl::ascii_isspace(static_cast<unsigned char>(s[j]))) ++j;
        if (j > i) {
          scan->dtype_name = std::string(s.substr(i, std::min<size_t>(j - i, 64)));
          scan->dtype_line = number;
        }
      }
    }
  }
  return false;
}

// Numbers of one line, parsed strictly (ParseInt / ParseDouble): "1.2.3", "." or a 400-digit
// dimension is an error naming the line; the first such error is kept in `bad`.
class MamfNumbers {
 public:
  MamfNumbers(const std::string& path, int number) : path_(path), number_(number) {}
  int64_t Dim(const std::string& v) {
    std::optional<int64_t> x = ParseInt(v);
    if (!x && bad.ok()) {
      bad = LogError(path_, number_, absl::StrCat("dimension '", v.substr(0, 40), v.size() > 40 ? "..." : "",
                                                  "' is not an integer in range"));
    }
    return x.value_or(0);
  }
  double Tflops(absl::string_view v) {
    std::optional<double> x = ParseDouble(v);
    if (!x && bad.ok()) bad = LogError(path_, number_, absl::StrCat("TFLOPS '", v.substr(0, 40), "' is not a number"));
    return x.value_or(0) * 1e12;
  }
  MamfShape Shape(const Dims& d) {
    MamfShape x;
    x.line = number_;
    x.m = Dim(d.m);
    x.n = Dim(d.n);
    x.k = Dim(d.k);
    return x;
  }
  absl::Status bad;

 private:
  const std::string& path_;
  const int number_;
};

// A result line of mamf-finder (stas00/ml-engineering, benchmarks/mamf-finder.py): a per-shape row
// of the old or the scout format, a "best outcomes" summary line, or a MAMF / MSMF headline.
// Errors: a number of the line that does not parse.
absl::Status ReadResultLine(absl::string_view s, const std::vector<absl::string_view>& t, int number,
                            const std::string& path, MamfScan* scan) {
  MamfNumbers num(path, number);
  // Old row: "    12 |  794.5(mean)  795.0(median)  801.0(max) @ 2048x2048x13312 | best: ...".
  bool matched = false;
  if (const size_t bar = s.find('|'); bar != absl::string_view::npos) {
    absl::string_view idx = absl::StripAsciiWhitespace(s.substr(0, bar));
    std::vector<absl::string_view> r = Tokens(s.substr(bar + 1));
    if (!idx.empty() && ParseInt(idx) && r.size() >= 4) {
      std::optional<absl::string_view> a = Tagged(r[0], "mean"), b = Tagged(r[1], "median"), c = Tagged(r[2], "max");
      std::optional<Dims> d = ShapeAfterAt(r, 3);
      if (a && b && c && d) {
        MamfShape x = num.Shape(*d);
        x.mean_flops_per_s = num.Tflops(*a);
        x.median_flops_per_s = num.Tflops(*b);
        x.max_flops_per_s = num.Tflops(*c);
        scan->log.shapes.push_back(x);
        matched = true;
      }
    }
  }
  // Scout row: "    18  3072x2816x20480     828.4  828.6  831.6  828.4   506  1980".
  if (!matched && t.size() >= 6 && ParseInt(t[0]) && ShapeToken(t[1]) && NumberLike(t[2]) && NumberLike(t[3]) &&
      NumberLike(t[4]) && NumberLike(t[5])) {
    MamfShape x = num.Shape(*ShapeToken(t[1]));
    x.mean_flops_per_s = num.Tflops(t[2]);
    x.median_flops_per_s = num.Tflops(t[3]);
    x.max_flops_per_s = num.Tflops(t[4]);
    scan->log.shapes.push_back(x);
    matched = true;
  }
  // Summary: "mean:   35.1 TFLOPS @ 15360x3072x1024 (MxNxK)".
  if (!matched && t.size() >= 3 && (t[0] == "mean:" || t[0] == "median:" || t[0] == "max:") && NumberLike(t[1])) {
    if (std::optional<Dims> d = ShapeAfterAt(t, 2)) {
      if (t[0] == "mean:") {
        scan->mean = num.Shape(*d);
        scan->mean.mean_flops_per_s = num.Tflops(t[1]);
      }
      matched = true;
    }
  }
  // Headline: "MAMF (max achievable, boost burst): 842 TFLOPS @ 3072x2816x20480 (MxNxK)".
  if (!matched && (t[0] == "MAMF" || t[0] == "MSMF" || absl::StartsWith(t[0], "MAMF(") ||
                   absl::StartsWith(t[0], "MSMF("))) {
    const size_t close = s.find("):");
    if (close != absl::string_view::npos) {
      std::vector<absl::string_view> r = Tokens(s.substr(close + 2));
      if (!r.empty() && NumberLike(r[0])) {
        if (std::optional<Dims> d = ShapeAfterAt(r, 1)) {
          MamfShape x = num.Shape(*d);
          x.mean_flops_per_s = num.Tflops(r[0]);
          (absl::StartsWith(t[0], "MSMF") ? scan->msmf : scan->mamf) = x;
        }
      }
    }
  }
  return num.bad;
}

// One piece of a line (mamf-finder's stdout joins the per-shape rows with "\r").
absl::Status ReadPiece(absl::string_view s, int number, const std::string& path, MamfScan* scan) {
  absl::string_view st = absl::StripLeadingAsciiWhitespace(s);
  if (ReadDevice(s, st, scan)) return absl::OkStatus();
  std::vector<absl::string_view> t = Tokens(s);
  if (t.empty()) return absl::OkStatus();
  if (ReadDtype(s, number, scan)) return absl::OkStatus();
  // "Tried  3375 shapes => the best outcomes were:"
  if (t.size() >= 3 && t[0] == "Tried" && t[2] == "shapes") {
    scan->log.tried_shapes = ParseInt(t[1]).value_or(0);
    return absl::OkStatus();
  }
  return ReadResultLine(s, t, number, path, scan);
}

// The log's checks once every line is read: a dtype stepcast models, the headline (MSMF, else
// the summary's mean, else MAMF), no shape with a zero dimension or rate, something measured; and
// whether the summary is the measurement (fewer rows than the shapes tried: a terminal copy keeps
// the last row only).
absl::StatusOr<MamfLog> FinishMamfLog(MamfScan scan, const std::string& path) {
  MamfLog& log = scan.log;
  if (scan.dtype_name.empty()) {
    return LogError(path, 0, "no '** Dtype:' header and no --dtype in the log: cannot tell the GEMMs' dtype");
  }
  std::optional<DType> d = MamfDType(scan.dtype_name);
  if (!d) return LogError(path, scan.dtype_line, absl::StrCat("dtype '", scan.dtype_name, "' is not one stepcast models"));
  log.dtype = *d;
  if (scan.msmf.line > 0) {
    log.headline = scan.msmf;
    log.headline_kind = "MSMF";
  } else if (scan.mean.line > 0) {
    log.headline = scan.mean;
    log.headline_kind = "mean";
  } else if (scan.mamf.line > 0) {
    log.headline = scan.mamf;
    log.headline_kind = "MAMF";
  }
  for (const MamfShape& x : log.shapes) {
    if (x.m <= 0 || x.n <= 0 || x.k <= 0 || !(x.mean_flops_per_s > 0)) {
      return LogError(path, x.line, "a shape with a zero dimension or rate");
    }
  }
  if (log.headline.line > 0 &&
      (log.headline.m <= 0 || log.headline.n <= 0 || log.headline.k <= 0 || !(log.headline.mean_flops_per_s > 0))) {
    return LogError(path, log.headline.line, "a summary shape with a zero dimension or rate");
  }
  if (log.shapes.empty() && log.headline.line == 0) {
    return LogError(path, 0, "no per-shape rows and no 'best outcomes' summary: nothing was measured (truncated?)");
  }
  // Fewer rows than the shapes tried (a terminal copy keeps the last row only): the summary is
  // the measurement; the rows left are an accident of the copy.
  log.use_summary = log.headline.line > 0 &&
                    (log.shapes.empty() || static_cast<int64_t>(log.shapes.size()) < log.tried_shapes);
  return std::move(log);
}

}  // namespace

absl::StatusOr<MamfLog> ParseMamfFinderLog(absl::string_view text, const std::string& path) {
  MamfScan scan;
  scan.log.path = path;
  for (const LogLine& full : SplitLines(text)) {
    // mamf-finder's stdout joins the per-shape rows with "\r": each piece is a row.
    for (absl::string_view piece : absl::StrSplit(full.text, '\r')) {
      if (absl::Status s = ReadPiece(piece, full.number, path, &scan); !s.ok()) return s;
    }
  }
  return FinishMamfLog(std::move(scan), path);
}

}  // namespace stepcast::calibrate
