#include "plugin/trace/training_log.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace stepcast::trace {
namespace {

// ESC [ parameters final-byte (SGR colours and the like) removed.
std::string StripAnsi(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\x1b' && i + 1 < s.size() && s[i + 1] == '[') {
      size_t j = i + 2;
      while (j < s.size() && !(s[j] >= '@' && s[j] <= '~')) ++j;
      i = j;  // skips the final byte too
      continue;
    }
    out.push_back(s[i]);
  }
  return out;
}

// A non-negative finite number, commas (torchtitan's "5,432") and a trailing '%' or unit
// letters ("3.13s") allowed; the unit is dropped.
absl::StatusOr<double> Number(absl::string_view field, absl::string_view text) {
  std::string t(absl::StripAsciiWhitespace(text));
  t.erase(std::remove(t.begin(), t.end(), ','), t.end());
  size_t end = 0;
  while (end < t.size() && (absl::ascii_isdigit(static_cast<unsigned char>(t[end])) || t[end] == '.' ||
                            t[end] == 'e' || t[end] == 'E' || t[end] == '+' || t[end] == '-')) {
    ++end;
  }
  double v = 0;
  if (end == 0 || !absl::SimpleAtod(t.substr(0, end), &v) || !std::isfinite(v) || v < 0) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": '", t.substr(0, 40), "' is not a finite number >= 0"));
  }
  return v;
}

absl::StatusOr<int64_t> Integer(absl::string_view field, absl::string_view text) {
  absl::StatusOr<double> v = Number(field, text);
  if (!v.ok()) return v.status();
  if (*v > 9e15 || *v != std::floor(*v)) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": '", text.substr(0, 40), "' is not a whole number"));
  }
  return static_cast<int64_t>(*v);
}

// The number after `key` in `s` ("iteration       71/     100" -> 71).
absl::StatusOr<int64_t> IntegerAfter(absl::string_view s, absl::string_view key) {
  const size_t p = s.find(key);
  if (p == absl::string_view::npos) return absl::NotFoundError(key);
  absl::string_view rest = absl::StripLeadingAsciiWhitespace(s.substr(p + key.size()));
  size_t n = 0;
  while (n < rest.size() && absl::ascii_isdigit(static_cast<unsigned char>(rest[n]))) ++n;
  return Integer(key, rest.substr(0, n));
}

bool HasTflops(absl::string_view key) { return absl::StrContains(absl::AsciiStrToLower(key), "tflop"); }

// Megatron-LM / Megatron-Bridge: " [date] iteration 71/ 100 | key: value | ...".
absl::Status Megatron(absl::string_view line, LogIteration* it) {
  std::vector<absl::string_view> fields = absl::StrSplit(line, '|');
  absl::StatusOr<int64_t> iter = IntegerAfter(fields[0], "iteration");
  if (!iter.ok()) return iter.status();
  it->iteration = *iter;
  for (size_t i = 1; i < fields.size(); ++i) {
    const size_t colon = fields[i].find(':');
    if (colon == absl::string_view::npos) continue;
    const absl::string_view key = absl::StripAsciiWhitespace(fields[i].substr(0, colon));
    const absl::string_view value = fields[i].substr(colon + 1);
    if (key == "elapsed time per iteration (ms)") {
      absl::StatusOr<double> v = Number(key, value);
      if (!v.ok()) return v.status();
      it->step_time_s = *v / 1000.0;
    } else if (key == "throughput per GPU (TFLOP/s/GPU)" || key == "flop throughput (TFLOP/sec/GPU)") {
      absl::StatusOr<double> v = Number(key, value);
      if (!v.ok()) return v.status();
      it->tflops_per_gpu = *v;
    } else if (key == "throughput (token/sec/GPU)") {
      absl::StatusOr<double> v = Number(key, value);
      if (!v.ok()) return v.status();
      it->tokens_per_s_per_gpu = *v;
    } else if (key == "global batch size") {
      absl::StatusOr<int64_t> v = Integer(key, value);
      if (!v.ok()) return v.status();
      it->global_batch_size = *v;
    }
  }
  return absl::OkStatus();
}

// NeMo: "key: value" fields split by '|' (NeMo 2) or "key=value" split by ", " inside the tqdm
// bar's last [...] (NeMo 1).
absl::Status NeMo(absl::string_view line, bool tqdm, LogIteration* it) {
  std::vector<std::pair<absl::string_view, absl::string_view>> kv;
  if (tqdm) {
    const size_t open = line.rfind('[');
    absl::string_view inner = open == absl::string_view::npos ? line : line.substr(open + 1);
    if (const size_t close = inner.rfind(']'); close != absl::string_view::npos) inner = inner.substr(0, close);
    for (absl::string_view f : absl::StrSplit(inner, ", ")) {
      const size_t eq = f.find('=');
      if (eq != absl::string_view::npos) kv.push_back({absl::StripAsciiWhitespace(f.substr(0, eq)), f.substr(eq + 1)});
    }
  } else {
    std::vector<absl::string_view> fields = absl::StrSplit(line, '|');
    if (absl::StatusOr<int64_t> i = IntegerAfter(fields[0], "iteration"); i.ok()) it->iteration = *i;
    for (size_t i = 1; i < fields.size(); ++i) {
      const size_t colon = fields[i].rfind(':');
      if (colon != absl::string_view::npos) {
        kv.push_back({absl::StripAsciiWhitespace(fields[i].substr(0, colon)), fields[i].substr(colon + 1)});
      }
    }
  }
  for (const auto& [key, value] : kv) {
    if (key == "global_step") {
      absl::StatusOr<double> v = Number(key, value);  // tqdm prints 99.00
      if (!v.ok()) return v.status();
      it->iteration = static_cast<int64_t>(*v);
    } else if (key == "train_step_timing in s") {
      absl::StatusOr<double> v = Number(key, value);
      if (!v.ok()) return v.status();
      it->step_time_s = *v;
    } else if (key == "global_batch_size") {
      absl::StatusOr<double> v = Number(key, value);
      if (!v.ok()) return v.status();
      it->global_batch_size = static_cast<int64_t>(*v);
    } else if (HasTflops(key)) {
      absl::StatusOr<double> v = Number(key, value);
      if (!v.ok()) return v.status();
      it->tflops_per_gpu = *v;
    }
  }
  if (std::isnan(it->step_time_s)) return absl::InvalidArgumentError("train_step_timing in s: missing");
  return absl::OkStatus();
}

// torchtitan: "step: 10  loss:  8.1234  ...  tps: 5,432  tflops: 245.67  mfu: 24.84%".
absl::Status Torchtitan(absl::string_view line, LogIteration* it) {
  auto value_of = [&](absl::string_view key) -> absl::string_view {
    const size_t p = line.find(key);
    if (p == absl::string_view::npos) return {};
    absl::string_view rest = absl::StripLeadingAsciiWhitespace(line.substr(p + key.size()));
    const size_t end = rest.find_first_of(" \t");
    return end == absl::string_view::npos ? rest : rest.substr(0, end);
  };
  absl::StatusOr<int64_t> step = IntegerAfter(line, "step:");
  if (!step.ok()) return step.status();
  it->iteration = *step;
  if (absl::string_view v = value_of(" tps:"); !v.empty()) {
    absl::StatusOr<double> x = Number("tps", v);
    if (!x.ok()) return x.status();
    it->tokens_per_s_per_gpu = *x;
  }
  if (absl::string_view v = value_of(" tflops:"); !v.empty()) {
    absl::StatusOr<double> x = Number("tflops", v);
    if (!x.ok()) return x.status();
    it->tflops_per_gpu = *x;
  }
  if (absl::string_view v = value_of(" mfu:"); !v.empty() && v != "N/A") {
    absl::StatusOr<double> x = Number("mfu", v);
    if (!x.ok()) return x.status();
    it->mfu = *x / 100.0;
  }
  return absl::OkStatus();
}

double Median(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return std::isnan(x); }), v.end());
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 == 1 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

}  // namespace

absl::StatusOr<bool> ParseTrainingLogLine(const std::string& raw, std::string* framework, LogIteration* out) {
  const std::string line = StripAnsi(raw);
  absl::Status st;
  if (absl::StrContains(line, "elapsed time per iteration (ms):") && absl::StrContains(line, "iteration")) {
    *framework = "megatron";
    st = Megatron(line, out);
  } else if (absl::StrContains(line, "train_step_timing in s=")) {
    *framework = "nemo";
    st = NeMo(line, /*tqdm=*/true, out);
  } else if (absl::StrContains(line, "train_step_timing in s:")) {
    *framework = "nemo";
    st = NeMo(line, /*tqdm=*/false, out);
  } else if (absl::StrContains(line, "step:") && absl::StrContains(line, " tps:") &&
             !absl::StrContains(line, "validate step:")) {
    *framework = "torchtitan";
    st = Torchtitan(line, out);
  } else {
    return false;
  }
  if (!st.ok()) return st;
  return true;
}

absl::StatusOr<TrainingLog> ReadTrainingLog(const std::string& path, const TrainingLogOptions& o) {
  struct stat sb {};
  if (::stat(path.c_str(), &sb) != 0) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  if (!S_ISREG(sb.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file: give the log file itself"));
  }
  if (sb.st_size > o.max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", sb.st_size, " bytes, more than max_bytes ", o.max_bytes));
  }
  if (o.warmup_records < 0) return absl::InvalidArgumentError("warmup_records: must be >= 0");
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  TrainingLog log;
  log.path = path;
  log.warmup_records = o.warmup_records;
  std::string line;
  bool too_long = false;
  int64_t number = 0, read = 0;
  auto finish = [&]() -> absl::Status {
    ++number;
    if (too_long) {
      too_long = false;
      line.clear();
      return absl::OkStatus();
    }
    std::string framework;
    LogIteration it;
    absl::StatusOr<bool> got = ParseTrainingLogLine(line, &framework, &it);
    line.clear();
    if (!got.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": line ", number, ": ", got.status().message()));
    if (!*got) return absl::OkStatus();
    if (!log.framework.empty() && log.framework != framework) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": line ", number, ": a ", framework, " line in a ",
                                                     log.framework, " log"));
    }
    log.framework = framework;
    it.line = number;
    log.iterations.push_back(it);
    return absl::OkStatus();
  };
  char buf[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), f.get())) > 0) {
    read += static_cast<int64_t>(n);
    if (read > o.max_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": more than max_bytes ", o.max_bytes, " bytes"));
    }
    for (size_t i = 0; i < n; ++i) {
      const char c = buf[i];
      if (c == '\n' || c == '\r') {  // tqdm redraws its bar with \r
        if (absl::Status s = finish(); !s.ok()) return s;
        continue;
      }
      if (too_long) continue;
      if (static_cast<int64_t>(line.size()) >= o.max_line_bytes) {
        too_long = true;
        line.clear();
        continue;
      }
      line.push_back(c);
    }
  }
  if (!line.empty() || too_long) {
    if (absl::Status s = finish(); !s.ok()) return s;
  }
  log.lines = number;
  if (log.iterations.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": no iteration line of Megatron-LM / Megatron-Bridge ('elapsed time per iteration (ms):'), NeMo "
              "('train_step_timing in s') or torchtitan ('step: ... tps: ...')"));
  }
  if (static_cast<int64_t>(log.iterations.size()) <= o.warmup_records) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": ", log.iterations.size(),
                                                      " logged iterations, none after the ", o.warmup_records,
                                                      " warm-up record(s)"));
  }
  std::vector<double> t, tf, mfu, tps;
  for (size_t i = static_cast<size_t>(o.warmup_records); i < log.iterations.size(); ++i) {
    const LogIteration& it = log.iterations[i];
    t.push_back(it.step_time_s);
    tf.push_back(it.tflops_per_gpu);
    mfu.push_back(it.mfu);
    tps.push_back(it.tokens_per_s_per_gpu);
  }
  log.median_step_time_s = Median(t);
  log.median_tflops_per_gpu = Median(tf);
  log.median_mfu = Median(mfu);
  log.median_tokens_per_s_per_gpu = Median(tps);
  return log;
}

}  // namespace stepcast::trace
