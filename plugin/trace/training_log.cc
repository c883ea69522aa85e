#include "plugin/trace/training_log.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <unordered_set>
#include <utility>

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


// The year of the first "YYYY-MM-DD" date in `line` (19xx/20xx), 0 when none.
int YearOf(absl::string_view line) {
  for (size_t i = 0; i + 10 <= line.size(); ++i) {
    auto digits = [&](size_t at, size_t n) {
      for (size_t k = at; k < at + n; ++k) {
        if (!absl::ascii_isdigit(static_cast<unsigned char>(line[k]))) return false;
      }
      return true;
    };
    if (digits(i, 4) && line[i + 4] == '-' && digits(i + 5, 2) && line[i + 7] == '-' && digits(i + 8, 2) &&
        (i == 0 || !absl::ascii_isdigit(static_cast<unsigned char>(line[i - 1])))) {
      const int y = (line[i] - '0') * 1000 + (line[i + 1] - '0') * 100 + (line[i + 2] - '0') * 10 + (line[i + 3] - '0');
      if (y >= 1900 && y < 2100) return y;
    }
  }
  return 0;
}

// Composer's console record header: "[batch=20/100]:" or "[epoch=1][batch=5/5]:"; the batch number.
bool ComposerHeader(absl::string_view line, int64_t* batch) {
  const absl::string_view t = absl::StripAsciiWhitespace(line);
  if (!absl::StartsWith(t, "[") || !absl::EndsWith(t, "]:")) return false;
  const size_t b = t.find("[batch=");
  if (b == absl::string_view::npos) return false;
  absl::StatusOr<int64_t> n = IntegerAfter(t.substr(b), "[batch=");
  *batch = n.ok() ? *n : -1;
  return true;
}

// One Composer metric line "\t Train throughput/batches_per_sec: 0.1085": the name and value.
bool ComposerMetric(absl::string_view line, absl::string_view* name, absl::string_view* value) {
  const absl::string_view t = absl::StripLeadingAsciiWhitespace(line);
  if (!absl::StartsWith(t, "Train ")) return false;
  const size_t colon = t.find(": ");
  if (colon == absl::string_view::npos) return false;
  *name = t.substr(6, colon - 6);
  *value = absl::StripAsciiWhitespace(t.substr(colon + 2));
  return true;
}

// A value of the HF Trainer's printed dict: "'key': 1.5" or "'key': '1.5'" -> "1.5"; empty when absent.
absl::string_view HfValue(absl::string_view line, absl::string_view key) {
  const std::string k = absl::StrCat("'", key, "': ");
  const size_t p = line.find(k);
  if (p == absl::string_view::npos) return {};
  absl::string_view rest = line.substr(p + k.size());
  const size_t end = rest.find_first_of(",}");
  rest = absl::StripAsciiWhitespace(end == absl::string_view::npos ? rest : rest.substr(0, end));
  if (rest.size() >= 2 && rest.front() == '\'' && rest.back() == '\'') rest = rest.substr(1, rest.size() - 2);
  return rest;
}

// The totals of the tqdm bars on a line ("| 690/690 [31:31<00:00, ...]" -> 690).
void TqdmTotals(absl::string_view line, std::vector<int64_t>* out) {
  for (size_t p = line.find(" ["); p != absl::string_view::npos; p = line.find(" [", p + 1)) {
    size_t e = p;
    size_t b = e;
    while (b > 0 && absl::ascii_isdigit(static_cast<unsigned char>(line[b - 1]))) --b;
    if (b == e || b == 0 || line[b - 1] != '/') continue;
    int64_t total = 0;
    if (absl::SimpleAtoi(line.substr(b, e - b), &total) && total > 0) out->push_back(total);
  }
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

namespace {

// The file itself, before a byte is read: it exists, is a regular file within max_bytes, and the
// options are valid (the file's size can change while it is read: LogReader::ReadAll checks again).
absl::Status CheckLogFile(const std::string& path, const TrainingLogOptions& o) {
  struct stat sb {};
  if (::stat(path.c_str(), &sb) != 0) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  if (!S_ISREG(sb.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file: give the log file itself"));
  }
  if (sb.st_size > o.max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", sb.st_size, " bytes, more than max_bytes ", o.max_bytes));
  }
  if (o.warmup_records < 0) return absl::InvalidArgumentError("warmup_records: must be >= 0");
  return absl::OkStatus();
}

// Reads a log line by line: the one-line formats (ParseTrainingLogLine: Megatron, NeMo,
// torchtitan), Composer's multi-line records and the HF Trainer's summary dict with the step
// counts the log states.
class LogReader {
 public:
  LogReader(const std::string& path, const TrainingLogOptions& o) : path_(path), o_(o) {
    log_.path = path;
    log_.warmup_records = o.warmup_records;
  }

  // Every byte of `f`, split at '\n' and '\r' (tqdm redraws its bar with \r); a line over
  // max_line_bytes is skipped whole; the last record is closed at the end.
  absl::Status ReadAll(FILE* f) {
    char buf[1 << 16];
    size_t n = 0;
    int64_t read = 0;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) {
      read += static_cast<int64_t>(n);
      if (read > o_.max_bytes) {
        return absl::InvalidArgumentError(absl::StrCat(path_, ": more than max_bytes ", o_.max_bytes, " bytes"));
      }
      for (size_t i = 0; i < n; ++i) {
        const char c = buf[i];
        if (c == '\n' || c == '\r') {  // tqdm redraws its bar with \r
          if (absl::Status s = FinishLine(); !s.ok()) return s;
          continue;
        }
        if (too_long_) continue;
        if (static_cast<int64_t>(line_.size()) >= o_.max_line_bytes) {
          too_long_ = true;
          line_.clear();
          continue;
        }
        line_.push_back(c);
      }
    }
    if (!line_.empty() || too_long_) {
      if (absl::Status s = FinishLine(); !s.ok()) return s;
    }
    if (absl::Status s = FinishComposerRecord(); !s.ok()) return s;
    log_.lines = number_;
    return absl::OkStatus();
  }

  // The HF Trainer's summary as one record over the whole run. Its step count: the first stated
  // count ('Total optimization steps = N', then 'TrainOutput(global_step=N', then a tqdm bar's
  // total, the last of each first) within the rounding of train_runtime x train_steps_per_second
  // (steps/s printed to 3 decimals: +-0.0005 steps/s, so +-runtime x 0.0005 steps); else 1 /
  // train_steps_per_second.
  absl::Status AddHfSummary() {
    if (!hf_) return absl::OkStatus();
    LogIteration it;
    it.line = hf_->line;
    const double implied = hf_->runtime_s * hf_->steps_per_s;
    const double tolerance = hf_->runtime_s * 0.0005 + 1e-9;
    int64_t steps = 0;
    for (const std::vector<int64_t>* c : {&header_steps_, &output_steps_, &tqdm_steps_}) {
      for (auto i = c->rbegin(); i != c->rend() && steps == 0; ++i) {
        if (hf_->steps_per_s <= 0 || std::fabs(static_cast<double>(*i) - implied) <= tolerance) steps = *i;
      }
      if (steps > 0) break;
    }
    if (steps > 0) {
      it.iteration = steps;
      it.step_time_s = hf_->runtime_s / static_cast<double>(steps);
    } else if (hf_->steps_per_s > 0) {
      it.step_time_s = 1.0 / hf_->steps_per_s;  // no step count stated: the rounded rate
    } else {
      return absl::FailedPreconditionError(absl::StrCat(
          path_, ": line ", hf_->line, ": the HF Trainer summary states no train_steps_per_second and the log no step "
                 "count ('Total optimization steps = N', 'TrainOutput(global_step=N', a tqdm bar 'N/N [')"));
    }
    log_.iterations.push_back(it);
    log_.warmup_records = 0;  // one record over the whole run, warm-up included
    return absl::OkStatus();
  }

  TrainingLog& log() { return log_; }

 private:
  // Composer's record under way (its header line, batch number and metrics).
  struct ComposerRecord {
    int64_t line = 0, batch = -1;
    std::vector<std::pair<std::string, std::string>> metrics;
  };
  // The HF Trainer's last summary.
  struct HfSummary {
    int64_t line = 0;
    double runtime_s = 0, steps_per_s = 0;
  };

  // One iteration of `framework`; a log is of one framework.
  absl::Status Add(const std::string& framework, LogIteration it, absl::string_view text) {
    if (!log_.framework.empty() && log_.framework != framework) {
      return absl::InvalidArgumentError(absl::StrCat(path_, ": line ", it.line, ": a ", framework, " line in a ",
                                                     log_.framework, " log"));
    }
    log_.framework = framework;
    if (log_.year == 0) log_.year = YearOf(text);
    // Another rank's copy of a step already read (srun --label, torchrun's [rankN]: prefixes):
    // the step counts once, its first line kept. A number below every one read, or equal to the
    // lowest once higher ones were read, means the count started over (a NeMo line without
    // global_step counts iterations per epoch): a new set.
    if (it.iteration >= 0) {
      if (!seen_.empty() && (it.iteration < min_seen_ || (it.iteration == min_seen_ && max_seen_ > min_seen_))) {
        seen_.clear();
      }
      if (seen_.empty()) min_seen_ = max_seen_ = it.iteration;
      min_seen_ = std::min(min_seen_, it.iteration);
      max_seen_ = std::max(max_seen_, it.iteration);
      if (!seen_.insert(it.iteration).second) {
        ++log_.duplicate_records;
        return absl::OkStatus();
      }
    }
    log_.iterations.push_back(it);
    return absl::OkStatus();
  }

  // Closes Composer's record under way: an iteration when it carries SpeedMonitor's
  // throughput/batches_per_sec (step time = 1 / batches_per_sec; device flops_per_sec in FLOP/s
  // -> TFLOP/s), none while the monitor's window is not full.
  absl::Status FinishComposerRecord() {
    if (!record_) return absl::OkStatus();
    ComposerRecord r = std::move(*record_);
    record_.reset();
    LogIteration it;
    it.line = r.line;
    it.iteration = r.batch;
    bool throughput = false;
    for (const auto& [name, value] : r.metrics) {
      double* target = nullptr;
      double scale = 1;
      if (name == "throughput/batches_per_sec") {
        absl::StatusOr<double> v = Number(name, value);
        if (!v.ok()) return absl::InvalidArgumentError(absl::StrCat(path_, ": line ", r.line, ": ", v.status().message()));
        // Printed to 4 decimals: 0.0000 (a step of over 5.5 hours) states no rate.
        if (*v > 0) {
          it.step_time_s = 1.0 / *v;
          throughput = true;
        }
        continue;
      }
      if (name == "time/batch") {
        absl::StatusOr<int64_t> v = Integer(name, value);
        if (!v.ok()) return absl::InvalidArgumentError(absl::StrCat(path_, ": line ", r.line, ": ", v.status().message()));
        it.iteration = *v;
        continue;
      }
      if (name == "throughput/device/tokens_per_sec") target = &it.tokens_per_s_per_gpu;
      if (name == "throughput/device/flops_per_sec") target = &it.tflops_per_gpu, scale = 1e-12;
      if (name == "throughput/device/mfu") target = &it.mfu;
      if (target == nullptr) continue;
      absl::StatusOr<double> v = Number(name, value);
      if (!v.ok()) return absl::InvalidArgumentError(absl::StrCat(path_, ": line ", r.line, ": ", v.status().message()));
      *target = *v * scale;
    }
    if (!throughput) return absl::OkStatus();  // SpeedMonitor's window not full yet
    // SpeedMonitor keeps window_size + 1 batch-end times of state.timestamp.total_wct (the sum of
    // the batches' wall-clock times, composer/trainer/trainer.py _train_loop) and logs
    // window_size / (last - first): its first time is batch 1's end, so no throughput record
    // holds batch 1, the start-up the warm-up rule leaves out: one record fewer is left out.
    log_.warmup_records = std::max(0, o_.warmup_records - 1);
    return Add("llm-foundry", it, "");
  }

  // The HF Trainer's summary dict "{'train_runtime': ..., 'train_steps_per_second': ...}" on
  // line `clean` (kept until the end: the last one counts).
  absl::Status HfSummaryLine(const std::string& clean) {
    HfSummary h{number_, 0, 0};
    for (auto [key, target] : {std::pair{"train_runtime", &h.runtime_s}, std::pair{"train_steps_per_second", &h.steps_per_s}}) {
      const absl::string_view v = HfValue(clean, key);
      if (v.empty()) {
        if (std::string(key) == "train_runtime") {
          return absl::InvalidArgumentError(absl::StrCat(path_, ": line ", number_, ": train_runtime: no value"));
        }
        continue;
      }
      absl::StatusOr<double> x = Number(key, v);
      if (!x.ok()) return absl::InvalidArgumentError(absl::StrCat(path_, ": line ", number_, ": ", x.status().message()));
      *target = *x;
    }
    if (!(h.runtime_s > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(path_, ": line ", number_, ": train_runtime: must be > 0"));
    }
    if (!log_.framework.empty() && log_.framework != "hf-trainer") {
      return absl::InvalidArgumentError(absl::StrCat(path_, ": line ", number_, ": a hf-trainer line in a ",
                                                     log_.framework, " log"));
    }
    log_.framework = "hf-trainer";
    if (log_.year == 0) log_.year = YearOf(clean);
    hf_ = h;
    return absl::OkStatus();
  }

  // The step counts a line states, for the HF Trainer's summary: "Total optimization steps = N",
  // "TrainOutput(global_step=N" and tqdm bars' totals.
  void StepCounts(const std::string& clean) {
    if (const size_t p = clean.find("Total optimization steps ="); p != std::string::npos) {
      absl::StatusOr<double> v = Number("Total optimization steps", absl::string_view(clean).substr(p + 26));
      if (v.ok() && *v > 0) header_steps_.push_back(static_cast<int64_t>(*v));
    }
    if (const size_t p = clean.find("TrainOutput(global_step="); p != std::string::npos) {
      absl::StatusOr<int64_t> v = IntegerAfter(absl::string_view(clean).substr(p), "global_step=");
      if (v.ok() && *v > 0) output_steps_.push_back(*v);
    }
    TqdmTotals(clean, &tqdm_steps_);
  }

  // The line read so far, complete: a Composer header or metric, the HF Trainer's lines, or one
  // of ParseTrainingLogLine's formats.
  absl::Status FinishLine() {
    ++number_;
    if (too_long_) {
      too_long_ = false;
      line_.clear();
      return FinishComposerRecord();
    }
    const std::string clean = StripAnsi(line_);
    line_.clear();
    int64_t batch = -1;
    absl::string_view name, value;
    if (ComposerHeader(clean, &batch)) {
      if (absl::Status s = FinishComposerRecord(); !s.ok()) return s;
      record_ = ComposerRecord{number_, batch, {}};
      return absl::OkStatus();
    }
    if (record_ && ComposerMetric(clean, &name, &value)) {
      record_->metrics.emplace_back(std::string(name), std::string(value));
      return absl::OkStatus();
    }
    if (record_ && !absl::StripAsciiWhitespace(clean).empty()) {
      if (absl::Status s = FinishComposerRecord(); !s.ok()) return s;
    }
    // The HF Trainer: its summary dict and the lines stating the step count.
    if (absl::StrContains(clean, "'train_runtime':")) {
      if (absl::Status s = HfSummaryLine(clean); !s.ok()) return s;
    }
    StepCounts(clean);
    std::string framework;
    LogIteration it;
    absl::StatusOr<bool> got = ParseTrainingLogLine(clean, &framework, &it);
    if (!got.ok()) return absl::InvalidArgumentError(absl::StrCat(path_, ": line ", number_, ": ", got.status().message()));
    if (!*got) return absl::OkStatus();
    it.line = number_;
    return Add(framework, it, clean);
  }

  const std::string& path_;
  const TrainingLogOptions& o_;
  TrainingLog log_;
  std::string line_;
  bool too_long_ = false;
  int64_t number_ = 0;
  std::optional<ComposerRecord> record_;
  std::optional<HfSummary> hf_;
  std::vector<int64_t> header_steps_, output_steps_, tqdm_steps_;  // the step counts stated, in the order tried
  std::unordered_set<int64_t> seen_;  // the iteration numbers read (since the count last started over)
  int64_t min_seen_ = 0, max_seen_ = 0;  // the lowest and highest of them
};

// Some iteration, and some after the warm-up records.
absl::Status CheckIterations(const std::string& path, const TrainingLog& log) {
  if (log.iterations.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": no iteration line of Megatron-LM / Megatron-Bridge ('elapsed time per iteration (ms):'), NeMo "
              "('train_step_timing in s'), torchtitan ('step: ... tps: ...'), llm-foundry / Composer ('[batch=N/M]:' "
              "records with 'Train throughput/batches_per_sec') or the HF Trainer ('{'train_runtime': ...}')"));
  }
  if (static_cast<int64_t>(log.iterations.size()) <= log.warmup_records) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": ", log.iterations.size(),
                                                      " logged iterations, none after the ", log.warmup_records,
                                                      " warm-up record(s)"));
  }
  return absl::OkStatus();
}

// The medians of the iterations after the warm-up records (values not stated, NaN, left out).
void SetMedians(TrainingLog* log) {
  std::vector<double> t, tf, mfu, tps;
  for (size_t i = static_cast<size_t>(log->warmup_records); i < log->iterations.size(); ++i) {
    const LogIteration& it = log->iterations[i];
    t.push_back(it.step_time_s);
    tf.push_back(it.tflops_per_gpu);
    mfu.push_back(it.mfu);
    tps.push_back(it.tokens_per_s_per_gpu);
  }
  log->median_step_time_s = Median(t);
  log->median_tflops_per_gpu = Median(tf);
  log->median_mfu = Median(mfu);
  log->median_tokens_per_s_per_gpu = Median(tps);
}

}  // namespace

absl::StatusOr<TrainingLog> ReadTrainingLog(const std::string& path, const TrainingLogOptions& o) {
  if (absl::Status s = CheckLogFile(path, o); !s.ok()) return s;
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  LogReader reader(path, o);
  if (absl::Status s = reader.ReadAll(f.get()); !s.ok()) return s;
  if (absl::Status s = reader.AddHfSummary(); !s.ok()) return s;
  TrainingLog& log = reader.log();
  if (absl::Status s = CheckIterations(path, log); !s.ok()) return s;
  SetMedians(&log);
  return std::move(log);
}

}  // namespace stepcast::trace
