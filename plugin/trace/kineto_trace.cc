#include "plugin/trace/kineto_trace.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "plugin/trace/annotations.h"
#include "plugin/trace/contention.h"
#include "plugin/trace/stragglers.h"
#include "rapidjson/error/en.h"
#include "rapidjson/reader.h"

namespace stepcast::trace {
namespace {

using probe::KernelCategory;
using probe::KernelRecord;

constexpr size_t kMaxKeptString = 4096;  // kernel and annotation names are kept up to this
constexpr int64_t kRatioFloorBytes = int64_t{64} << 20;

// A RapidJSON input stream over zlib's gzread (which also reads uncompressed files as they are),
// with the input bounds of KinetoOptions: the JSON's size, its ratio to the file's size, the
// longest string (tracked by a quote/escape state machine as the bytes are taken, so RapidJSON
// never buffers more of one string than the bound), and no NUL byte (JSON text holds none: a
// binary file is named as such instead of "the document is empty").
class GzStream {
 public:
  using Ch = char;
  GzStream(gzFile f, const KinetoOptions& o, int64_t file_bytes) : f_(f), o_(o), file_bytes_(file_bytes) {}
  // The fast paths inline (RapidJSON calls these once or twice per byte); refills, the NUL
  // check's failure and the string bound out of line.
  Ch Peek() {
    if (pos_ < len_ && buf_[pos_] != '\0') [[likely]] return buf_[pos_];
    return PeekSlow();
  }
  Ch Take() {
    const char c = Peek();
    if (c == '\0') return '\0';
    ++pos_;
    ++consumed_;
    if (in_string_) {
      if (escape_) {
        escape_ = false;
      } else if (c == '\\') {
        escape_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
      if (++string_bytes_ > o_.max_string_bytes) [[unlikely]] StringTooLong();
    } else if (c == '"') {
      in_string_ = true;
      string_bytes_ = 0;
    }
    return c;
  }
  size_t Tell() const { return consumed_; }
  // Output-stream members the concept names; never called by a non-in-situ Reader.
  Ch* PutBegin() { return nullptr; }
  void Put(Ch) {}
  void Flush() {}
  size_t PutEnd(Ch*) { return 0; }
  bool failed() const { return failed_; }
  std::string error() const { return error_; }

 private:
  [[gnu::noinline]] Ch PeekSlow() {
    if (pos_ == len_) Fill();
    if (pos_ >= len_) return '\0';
    if (buf_[pos_] == '\0') {
      Fail(absl::StrCat("byte ", consumed_, " is a NUL character: not JSON text (a binary file?)"));
      return '\0';
    }
    return buf_[pos_];
  }
  [[gnu::noinline]] void StringTooLong() {
    Fail(absl::StrCat("a JSON string longer than ", o_.max_string_bytes, " bytes (max_string_bytes) ends past byte ",
                      consumed_));
  }
  void Fail(std::string why) {
    if (failed_) return;
    failed_ = true;
    error_ = std::move(why);
    eof_ = true;
    len_ = pos_ = 0;
  }
  void Fill() {
    if (eof_) return;
    const int n = gzread(f_, buf_, sizeof(buf_));
    if (n < 0) {
      int code = 0;
      const char* msg = gzerror(f_, &code);
      Fail(absl::StrCat(msg != nullptr ? msg : "read error", " after ", consumed_, " bytes"));
      return;
    }
    if (n == 0) eof_ = true;
    len_ = static_cast<size_t>(n);
    pos_ = 0;
    read_ += n;
    if (read_ > o_.max_json_bytes) {
      Fail(absl::StrCat("more than ", o_.max_json_bytes, " bytes of JSON (max_json_bytes)"));
    } else if (read_ > kRatioFloorBytes && file_bytes_ > 0 &&
               static_cast<double>(read_) > o_.max_decompression_ratio * static_cast<double>(file_bytes_)) {
      Fail(absl::StrCat("decompresses to more than ", o_.max_decompression_ratio, " times its ", file_bytes_,
                        " bytes (max_decompression_ratio; real traces compress 13-20x): a gzip bomb?"));
    }
  }
  gzFile f_;
  const KinetoOptions& o_;
  int64_t file_bytes_ = 0, read_ = 0, string_bytes_ = 0;
  char buf_[1 << 16];
  size_t pos_ = 0, len_ = 0, consumed_ = 0;
  bool eof_ = false, failed_ = false, in_string_ = false, escape_ = false;
  std::string error_;
};

absl::StatusOr<int64_t> IntText(const char* s, size_t n) {
  int64_t v = 0;
  if (absl::SimpleAtoi(absl::string_view(s, n), &v)) return v;
  double d = 0;
  // A float only where it is an integer an int64 holds: the cast of 2.2e57 (a fuzzed "stream") is
  // undefined behaviour (fuzz_kineto, 2026-11-25).
  if (absl::SimpleAtod(absl::string_view(s, n), &d) && std::isfinite(d) && std::fabs(d) < 9.2e18 && d == std::floor(d)) {
    return static_cast<int64_t>(d);
  }
  return absl::InvalidArgumentError(absl::StrCat("'", absl::string_view(s, n), "' is not an integer"));
}

uint64_t HashTid(absl::string_view raw) { return std::hash<std::string_view>{}(std::string_view(raw.data(), raw.size())); }

// What the handler keeps of the event being read.
struct Event {
  std::string ph, cat, name, pid, tid, ts, dur, collective_name, process_group, grid, block;
  int64_t correlation = -1, stream = -1, device = -1;
  bool has_correlation = false;
  void Clear() {
    ph.clear();
    cat.clear();
    name.clear();
    pid.clear();
    tid.clear();
    ts.clear();
    dur.clear();
    collective_name.clear();
    process_group.clear();
    grid.clear();
    block.clear();
    correlation = stream = device = -1;
    has_correlation = false;
  }
};

enum class Field { kNone, kPh, kCat, kName, kPid, kTid, kTs, kDur, kArgs, kCorrelation, kStream, kDevice,
                   kCollective, kProcessGroup, kGrid, kBlock };

class Handler : public rapidjson::BaseReaderHandler<rapidjson::UTF8<>, Handler> {
 public:
  Handler(KinetoTrace* t, const KinetoOptions& o) : t_(t), o_(o) { t_->shapes.push_back(""); }

  bool StartObject() {
    if (!ScalarField("an object")) return false;
    ++depth_;
    if (depth_ == 1) root_object_ = true;
    if (InEvent() && depth_ == events_depth_ + 1) ev_.Clear();
    if (InEvent() && depth_ == events_depth_ + 2 && field_ == Field::kArgs) in_args_ = true;
    if (depth_ == 2 && top_key_ == "distributedInfo") in_dist_ = true;
    if (depth_ == 3 && top_key_ == "deviceProperties") {
      dev_id_ = -1;
      dev_name_.clear();
    }
    field_ = Field::kNone;
    return true;
  }
  bool EndObject(rapidjson::SizeType) {
    if (InEvent() && depth_ == events_depth_ + 2) in_args_ = false;
    if (InEvent() && depth_ == events_depth_ + 1) {
      if (!Finish()) return false;
    }
    if (depth_ == 2) in_dist_ = false;
    if (depth_ == 3 && top_key_ == "deviceProperties" && dev_id_ >= 0 && dev_id_ < 4096) {
      if (t_->device_names.size() <= static_cast<size_t>(dev_id_)) t_->device_names.resize(dev_id_ + 1);
      t_->device_names[dev_id_] = dev_name_;
    }
    --depth_;
    field_ = Field::kNone;
    return true;
  }
  bool StartArray() {
    if (!ScalarField("an array")) return false;
    // args.grid / args.block: [x, y, z]
    if (in_args_ && depth_ == events_depth_ + 2 && (field_ == Field::kGrid || field_ == Field::kBlock)) {
      array_field_ = field_;
    }
    ++depth_;
    if (depth_ == 1) events_depth_ = 1;  // a bare array of events
    if (depth_ == 2 && root_object_ && top_key_ == "traceEvents") events_depth_ = 2;
    field_ = Field::kNone;
    return true;
  }
  bool EndArray(rapidjson::SizeType) {
    if (depth_ == events_depth_) events_depth_ = -1;
    if (InEvent() && depth_ == events_depth_ + 3) array_field_ = Field::kNone;
    --depth_;
    field_ = Field::kNone;
    return true;
  }
  bool Key(const char* s, rapidjson::SizeType n, bool) {
    const absl::string_view k(s, n);
    field_ = Field::kNone;
    if (depth_ == 1 && root_object_) {
      top_key_.assign(s, std::min<size_t>(n, kMaxKeptString));
      return true;
    }
    if (in_dist_ && depth_ == 2) {
      dist_key_.assign(s, std::min<size_t>(n, kMaxKeptString));
      return true;
    }
    if (depth_ == 3 && top_key_ == "deviceProperties") {
      dev_key_.assign(s, std::min<size_t>(n, kMaxKeptString));
      return true;
    }
    if (!InEvent()) return true;
    if (depth_ == events_depth_ + 1) {
      if (k == "ph") field_ = Field::kPh;
      else if (k == "cat") field_ = Field::kCat;
      else if (k == "name") field_ = Field::kName;
      else if (k == "pid") field_ = Field::kPid;
      else if (k == "tid") field_ = Field::kTid;
      else if (k == "ts") field_ = Field::kTs;
      else if (k == "dur") field_ = Field::kDur;
      else if (k == "args") field_ = Field::kArgs;
    } else if (in_args_ && depth_ == events_depth_ + 2) {
      if (k == "correlation") field_ = Field::kCorrelation;
      else if (k == "stream") field_ = Field::kStream;
      else if (k == "device") field_ = Field::kDevice;
      else if (k == "Collective name") field_ = Field::kCollective;
      else if (k == "Process Group Name") field_ = Field::kProcessGroup;
      else if (k == "grid") field_ = Field::kGrid;
      else if (k == "block") field_ = Field::kBlock;
    }
    return true;
  }
  bool String(const char* s, rapidjson::SizeType n, bool) { return Value(s, n); }
  bool RawNumber(const char* s, rapidjson::SizeType n, bool) { return Value(s, n); }
  bool Null() { return Value("", 0); }
  bool Bool(bool) { return Value("", 0); }

  const std::string& error() const { return error_; }

 private:
  bool InEvent() const { return events_depth_ > 0 && depth_ > events_depth_; }

  // An event's ts or dur given as an object or array (reliability review 2, N15: it read "has no
  // ts").
  bool ScalarField(const char* what) {
    if (InEvent() && depth_ == events_depth_ + 1 && (field_ == Field::kTs || field_ == Field::kDur)) {
      error_ = absl::StrCat("an event's ", field_ == Field::kTs ? "ts" : "dur", " is ", what,
                            ", not a number of microseconds");
      return false;
    }
    return true;
  }

  static void Keep(std::string* out, const char* s, size_t n) { out->assign(s, std::min(n, kMaxKeptString)); }

  bool Value(const char* s, size_t n) {
    const Field f = field_;
    field_ = Field::kNone;
    if (array_field_ != Field::kNone && InEvent() && depth_ == events_depth_ + 3) {
      std::string& out = array_field_ == Field::kGrid ? ev_.grid : ev_.block;
      if (out.size() < 64) absl::StrAppend(&out, out.empty() ? "" : "x", absl::string_view(s, std::min<size_t>(n, 20)));
      return true;
    }
    if (in_dist_ && depth_ == 2) {
      if (dist_key_ == "rank" || dist_key_ == "world_size") {
        auto v = IntText(s, n);
        if (v.ok() && *v >= INT32_MIN && *v <= INT32_MAX) {
          (dist_key_ == "rank" ? t_->rank : t_->world_size) = static_cast<int32_t>(*v);
        }
      }
      return true;
    }
    if (depth_ == 3 && top_key_ == "deviceProperties") {
      if (dev_key_ == "id") {
        auto v = IntText(s, n);
        if (v.ok()) dev_id_ = *v;
      } else if (dev_key_ == "name") {
        Keep(&dev_name_, s, n);
      }
      return true;
    }
    switch (f) {
      case Field::kPh: Keep(&ev_.ph, s, n); break;
      case Field::kCat: Keep(&ev_.cat, s, n); break;
      case Field::kName: Keep(&ev_.name, s, n); break;
      case Field::kPid: Keep(&ev_.pid, s, n); break;
      case Field::kTid: Keep(&ev_.tid, s, n); break;
      case Field::kTs: Keep(&ev_.ts, s, n); break;
      case Field::kDur: Keep(&ev_.dur, s, n); break;
      case Field::kCollective: Keep(&ev_.collective_name, s, n); break;
      case Field::kProcessGroup: ev_.process_group.assign(s, std::min<size_t>(n, 256)); break;
      case Field::kCorrelation:
      case Field::kStream:
      case Field::kDevice: {
        auto v = IntText(s, n);
        if (!v.ok()) break;  // "stream": "unknown" and the like: left unknown
        if (f == Field::kCorrelation) {
          ev_.correlation = *v;
          ev_.has_correlation = true;
        } else if (*v >= INT32_MIN && *v <= INT32_MAX) {
          (f == Field::kStream ? ev_.stream : ev_.device) = *v;
        }
        break;
      }
      default: break;
    }
    return true;
  }

  bool Times(int64_t* start, int64_t* end) {
    auto ts = MicrosTextToNs(ev_.ts.data(), ev_.ts.size());
    if (!ts.ok()) {
      error_ = absl::StrCat("event '", ev_.name.substr(0, 80), "': ts: ", ts.status().message());
      return false;
    }
    int64_t dur = 0;
    if (!ev_.dur.empty()) {
      auto d = MicrosTextToNs(ev_.dur.data(), ev_.dur.size());
      if (!d.ok()) {
        error_ = absl::StrCat("event '", ev_.name.substr(0, 80), "': dur: ", d.status().message());
        return false;
      }
      dur = std::max<int64_t>(0, *d);
    }
    // Both within +-kMaxAbsNs: the sum cannot overflow; the end must stay inside too.
    if (*ts + dur > kMaxAbsNs) {
      error_ = absl::StrCat("event '", ev_.name.substr(0, 80), "': ts + dur (", ev_.ts.substr(0, 40), " + ",
                            ev_.dur.substr(0, 40), " us) is past ", kMaxAbsNs, " ns");
      return false;
    }
    *start = *ts;
    *end = *ts + dur;
    return true;
  }

  bool Cap(size_t size, int64_t cap, const char* what, const char* option) {
    if (static_cast<int64_t>(size) < cap) return true;
    error_ = absl::StrCat("more than ", cap, " ", what, " (", option, ")");
    return false;
  }

  uint32_t AnnotationNameId(const std::string& name) {
    auto [it, inserted] = annotation_ids_.try_emplace(name, static_cast<uint32_t>(t_->annotation_names.size()));
    if (inserted) {
      t_->annotation_names.push_back(name);
      name_bytes_ += static_cast<int64_t>(name.size()) + 64;
    }
    return it->second;
  }

  // Distinct kernel and annotation names, each up to 4 KiB, with their map entries.
  bool NameBytes(size_t n) {
    name_bytes_ += static_cast<int64_t>(n) + 64;
    if (name_bytes_ <= o_.max_name_bytes) return true;
    error_ = absl::StrCat("more than ", o_.max_name_bytes, " bytes of distinct kernel and annotation names (max_name_bytes)");
    return false;
  }

  // One event read: keep what the analysis needs.
  bool Finish() {
    ++t_->trace_events;
    if (ev_.ph != "X") return true;
    const std::string cat = absl::AsciiStrToLower(ev_.cat);
    const bool gpu = cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset" || cat == "memcpy" ||
                     cat == "memset";
    const bool launch = ev_.has_correlation && (cat == "cuda_runtime" || cat == "cuda_driver" ||
                                                cat == "runtime" || cat == "driver");
    // The CPU's ProfilerStep#N range only: newer Kineto (torch 2.11, 2026) also writes each step
    // as a "gpu_user_annotation" on the GPU timeline, which would count every step twice.
    const bool step = absl::StartsWith(ev_.name, "ProfilerStep#") && cat != "gpu_user_annotation";
    const bool cpu_annotation = cat == "user_annotation" || cat == "cpu_op" || cat == "python_function";
    const bool nccl_annotation = cpu_annotation && absl::StartsWith(ev_.name, "nccl:");
    const bool user_annotation = cat == "user_annotation" && !step;
    const bool step_annotation = user_annotation && probe::IsStepRangeName(ev_.name, o_.step_pattern);
    if (!gpu && !launch && !step && !nccl_annotation && !user_annotation) return true;
    if (ev_.ts.empty()) {
      error_ = absl::StrCat("event '", ev_.name.substr(0, 80), "' (ph X) has no ts");
      return false;
    }
    int64_t start = 0, end = 0;
    if (!Times(&start, &end)) return false;
    if (gpu) {
      if (!Cap(t_->records.size(), o_.max_records, "GPU records", "max_records")) return false;
      KernelRecord r;
      r.start_ns = start;
      r.end_ns = end;
      auto [it, inserted] = name_ids_.try_emplace(ev_.name, static_cast<uint32_t>(t_->names.size()));
      if (inserted) {
        t_->names.push_back(ev_.name);
        if (!NameBytes(ev_.name.size())) return false;
        // Classified once per distinct name (a trace repeats a few thousand names millions of times).
        name_category_.push_back(probe::ClassifyKernel(ev_.name));
        name_collective_.push_back(name_category_.back() == KernelCategory::kCommunication
                                       ? probe::CollectiveIndex(probe::CollectiveOf(ev_.name))
                                       : 0);
      }
      r.name_id = it->second;
      if (!ev_.grid.empty() || !ev_.block.empty()) {
        const std::string shape = absl::StrCat("grid ", ev_.grid, " block ", ev_.block);
        auto [sit, sinserted] = shape_ids_.try_emplace(shape, static_cast<uint32_t>(t_->shapes.size()));
        if (sinserted) t_->shapes.push_back(shape);
        r.shape_id = sit->second;
      }
      // Kineto names copies "Memcpy DtoD (Device -> Device)", sets "Memset (Device)".
      r.category = cat == "kernel" ? name_category_[r.name_id] : KernelCategory::kMemory;
      if (r.category == KernelCategory::kCommunication) {
        r.collective = name_collective_[r.name_id];
        const std::string from_arg = probe::CollectiveFromLabel(ev_.collective_name);
        if (!from_arg.empty() && ev_.has_correlation) collective_arg_[ev_.correlation] = probe::CollectiveIndex(from_arg);
        if (!ev_.process_group.empty() && ev_.has_correlation) {
          t_->process_group_of[ev_.correlation] = ev_.process_group;
        }
      }
      r.stream = static_cast<int32_t>(ev_.stream);
      r.device = static_cast<int32_t>(ev_.device);
      r.correlation = ev_.has_correlation ? ev_.correlation : -1;
      t_->records.push_back(r);
      return true;
    }
    if (launch) {
      if (!Cap(t_->launches.size(), o_.max_launches, "launches", "max_launches")) return false;
      t_->launches.push_back({ev_.correlation, start, HashTid(ev_.tid)});
      return true;
    }
    if (!Cap(t_->profiler_steps.size() + t_->annotations.size() + t_->collective_ranges.size(), o_.max_annotations,
             "CPU ranges (ProfilerStep, user and nccl: annotations)", "max_annotations")) {
      return false;
    }
    if (step) {
      t_->profiler_steps.push_back({start, end, HashTid(ev_.tid), 0, 0});
      return true;
    }
    if (nccl_annotation) {
      const std::string c = probe::CollectiveFromLabel(ev_.name);
      if (!c.empty()) t_->collective_ranges.push_back({start, end, HashTid(ev_.tid), 0, probe::CollectiveIndex(c)});
    }
    if (user_annotation) {
      const uint32_t id = AnnotationNameId(ev_.name);
      if (!NameBytes(0)) return false;
      t_->annotations.push_back({start, end, HashTid(ev_.tid), id, 0});
      if (step_annotation) t_->step_ranges.push_back({start, end, HashTid(ev_.tid), id, 0});
    }
    return true;
  }

  KinetoTrace* t_;
  const KinetoOptions& o_;
  int depth_ = 0, events_depth_ = -1;
  bool root_object_ = false, in_args_ = false, in_dist_ = false;
  std::string top_key_, dist_key_, dev_key_, dev_name_;
  int64_t dev_id_ = -1, name_bytes_ = 0;
  Field field_ = Field::kNone, array_field_ = Field::kNone;
  Event ev_;
  std::unordered_map<std::string, uint32_t> name_ids_, shape_ids_, annotation_ids_;
  std::vector<KernelCategory> name_category_;  // by name id
  std::vector<uint8_t> name_collective_;       // by name id
  std::string error_;

 public:
  std::unordered_map<int64_t, uint8_t> collective_arg_;  // correlation -> collective from args
};

}  // namespace

absl::StatusOr<int64_t> MicrosTextToNs(const char* text, size_t length) {
  const absl::string_view s(text, length);
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
  int64_t whole = 0;
  size_t digits = 0;
  for (; i < s.size() && absl::ascii_isdigit(static_cast<unsigned char>(s[i])); ++i, ++digits) {
    // whole * 1000 + 999 must stay within kMaxAbsNs (reliability review 2, N13: the bound was
    // checked before the x10 only, and 9,223,372,036,854,779 us overflowed the x1000).
    whole = whole * 10 + (s[i] - '0');
    if (whole > kMaxAbsNs / 1000) {
      return absl::InvalidArgumentError(absl::StrCat("'", s.substr(0, 40), "' us is out of range (|t| <= ", kMaxAbsNs,
                                                     " ns)"));
    }
  }
  int64_t frac_ns = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    int64_t scale = 100;  // the first fractional digit of a microsecond is 100 ns
    bool round_up = false;
    for (size_t f = 0; i < s.size() && absl::ascii_isdigit(static_cast<unsigned char>(s[i])); ++i, ++f, ++digits) {
      if (f < 3) {
        frac_ns += (s[i] - '0') * scale;
        scale /= 10;
      } else if (f == 3) {
        round_up = s[i] >= '5';
      }
    }
    if (round_up) ++frac_ns;
  }
  if (digits == 0) return absl::InvalidArgumentError(absl::StrCat("'", s.substr(0, 40), "' is not a number"));
  if (i < s.size()) {
    // An exponent ("1.5e3"): rare in traces; through double.
    double d = 0;
    if (!absl::SimpleAtod(s, &d) || !std::isfinite(d) || std::fabs(d) * 1000.0 > static_cast<double>(kMaxAbsNs)) {
      return absl::InvalidArgumentError(absl::StrCat("'", s.substr(0, 40), "' is not a finite number of microseconds"));
    }
    return static_cast<int64_t>(std::llround(d * 1000.0));
  }
  const int64_t ns = whole * 1000 + frac_ns;
  if (ns > kMaxAbsNs) {
    return absl::InvalidArgumentError(absl::StrCat("'", s.substr(0, 40), "' us is out of range (|t| <= ", kMaxAbsNs, " ns)"));
  }
  return neg ? -ns : ns;
}

absl::StatusOr<KinetoTrace> ReadKinetoTrace(const std::string& path, const KinetoOptions& options) {
  // Only regular files: a FIFO blocks, /dev/zero never ends, a directory is no trace (reliability
  // review 2, N10 and issue 26).
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": not a regular file (", S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a device or socket",
        "): give the trace file itself"));
  }
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  gzbuffer(f, 1 << 17);
  KinetoTrace t;
  t.path = path;
  t.file_bytes = static_cast<int64_t>(st.st_size);
  Handler h(&t, options);
  GzStream in(f, options, t.file_bytes);
  rapidjson::Reader reader;
  constexpr unsigned kFlags = rapidjson::kParseIterativeFlag | rapidjson::kParseNumbersAsStringsFlag |
                              rapidjson::kParseNanAndInfFlag | rapidjson::kParseTrailingCommasFlag;
  const rapidjson::ParseResult ok = reader.Parse<kFlags>(in, h);
  t.json_bytes = static_cast<int64_t>(in.Tell());
  gzclose(f);
  if (in.failed()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", in.error()));
  if (!ok) {
    if (!h.error().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": byte ", ok.Offset(), ": ", h.error()));
    }
    return absl::InvalidArgumentError(absl::StrCat(path, ": byte ", ok.Offset(), " of the JSON: ",
                                                   rapidjson::GetParseError_En(ok.Code()),
                                                   ok.Code() == rapidjson::kParseErrorDocumentEmpty ||
                                                           ok.Code() == rapidjson::kParseErrorObjectMissCommaOrCurlyBracket ||
                                                           ok.Code() == rapidjson::kParseErrorArrayMissCommaOrSquareBracket
                                                       ? " (truncated file?)"
                                                       : ""));
  }
  if (t.records.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": no GPU kernel, memcpy or memset record (was the profiler run with ProfilerActivity.CUDA?)"));
  }
  std::sort(t.records.begin(), t.records.end(),
            [](const KernelRecord& a, const KernelRecord& b) { return a.start_ns < b.start_ns; });
  std::sort(t.launches.begin(), t.launches.end(),
            [](const Launch& a, const Launch& b) { return a.correlation < b.correlation; });
  auto by_start = [](const CpuRange& a, const CpuRange& b) { return a.start_ns < b.start_ns; };
  std::sort(t.profiler_steps.begin(), t.profiler_steps.end(), by_start);
  std::sort(t.collective_ranges.begin(), t.collective_ranges.end(), by_start);
  std::sort(t.annotations.begin(), t.annotations.end(), by_start);
  {
    // The outermost step-named ranges (forward_step inside train_step is not a step), their names kept.
    std::vector<probe::TimeRange> r;
    for (const CpuRange& c : t.step_ranges) r.push_back({c.start_ns, c.end_ns});
    r = probe::OutermostRanges(std::move(r));
    std::vector<CpuRange> kept;
    std::sort(t.step_ranges.begin(), t.step_ranges.end(), [](const CpuRange& a, const CpuRange& b) {
      return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
    });
    size_t j = 0;
    for (const auto& x : r) {
      while (j < t.step_ranges.size() &&
             (t.step_ranges[j].start_ns != x.start_ns || t.step_ranges[j].end_ns != x.end_ns)) {
        ++j;
      }
      kept.push_back(j < t.step_ranges.size() ? t.step_ranges[j] : CpuRange{x.start_ns, x.end_ns, 0, 0, 0});
    }
    t.step_ranges = std::move(kept);
  }
  // The collective of NCCL SendRecv (and unnamed) kernels, when the trace says what the group
  // was: the kernel's "Collective name" argument, else the nccl:<coll> annotation on the
  // launching thread around the launch (PyTorch's record_function in ProcessGroupNCCL).
  const uint8_t send_recv = probe::CollectiveIndex("send_recv"), other = probe::CollectiveIndex("other");
  for (KernelRecord& r : t.records) {
    if (r.category != KernelCategory::kCommunication || (r.collective != send_recv && r.collective != other)) continue;
    if (auto a = h.collective_arg_.find(r.correlation); a != h.collective_arg_.end()) {
      r.collective = a->second;
      continue;
    }
    auto l = std::lower_bound(t.launches.begin(), t.launches.end(), r.correlation,
                              [](const Launch& x, int64_t c) { return x.correlation < c; });
    if (r.correlation < 0 || l == t.launches.end() || l->correlation != r.correlation) continue;
    // The innermost annotation on the launch's thread that contains it (few exist: linear scan
    // from the last one starting at or before the launch).
    auto it = std::upper_bound(t.collective_ranges.begin(), t.collective_ranges.end(), l->t_ns,
                               [](int64_t v, const CpuRange& c) { return v < c.start_ns; });
    while (it != t.collective_ranges.begin()) {
      --it;
      if (it->tid == l->tid && l->t_ns < it->end_ns) {
        r.collective = it->collective;
        break;
      }
      if (l->t_ns - it->start_ns > int64_t{10'000'000'000}) break;  // 10 s back is enough
    }
  }
  return t;
}

namespace {

using Intervals = std::vector<std::pair<int64_t, int64_t>>;

Intervals Merge(Intervals v) {
  std::sort(v.begin(), v.end());
  Intervals out;
  for (const auto& iv : v) {
    if (!out.empty() && iv.first <= out.back().second) {
      out.back().second = std::max(out.back().second, iv.second);
    } else {
      out.push_back(iv);
    }
  }
  return out;
}
int64_t Length(const Intervals& u) {
  int64_t s = 0;
  for (const auto& iv : u) s += iv.second - iv.first;
  return s;
}
int64_t Intersection(const Intervals& a, const Intervals& b) {
  int64_t s = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const int64_t lo = std::max(a[i].first, b[j].first), hi = std::min(a[i].second, b[j].second);
    if (hi > lo) s += hi - lo;
    (a[i].second < b[j].second) ? ++i : ++j;
  }
  return s;
}

// HTA's temporal breakdown and overlap over the given records.
v1::TraceTemporalBreakdown Whole(const std::vector<const KernelRecord*>& rs) {
  v1::TraceTemporalBreakdown w;
  if (rs.empty()) return w;
  Intervals all, comp, comm, comp_mem;
  int64_t first = INT64_MAX, last = INT64_MIN;
  for (const KernelRecord* r : rs) {
    first = std::min(first, r->start_ns);
    last = std::max(last, r->end_ns);
    all.push_back({r->start_ns, r->end_ns});
    if (r->category == KernelCategory::kCommunication) {
      comm.push_back({r->start_ns, r->end_ns});
    } else {
      comp_mem.push_back({r->start_ns, r->end_ns});
      if (r->category != KernelCategory::kMemory) comp.push_back({r->start_ns, r->end_ns});
    }
  }
  const Intervals u = Merge(std::move(all)), uc = Merge(std::move(comp)), um = Merge(std::move(comm)),
                  ucm = Merge(std::move(comp_mem));
  const int64_t kernel_time = last - first;
  w.set_kernel_time_s(kernel_time * 1e-9);
  w.set_idle_s((kernel_time - Length(u)) * 1e-9);
  w.set_compute_s(Length(uc) * 1e-9);
  w.set_non_compute_s((Length(u) - Length(uc)) * 1e-9);
  w.set_communication_s(Length(um) * 1e-9);
  if (Length(um) > 0) {
    w.set_comm_comp_overlap_pct(100.0 * Intersection(um, uc) / Length(um));
    w.set_comm_overlap_incl_memory_pct(100.0 * Intersection(um, ucm) / Length(um));
  }
  return w;
}

// The file's identity and counts: path, rank, devices, records, launches, streams.
void SetTraceFacts(const KinetoTrace& t, v1::TraceSummary* s) {
  s->set_path(t.path);
  s->set_rank(t.rank);
  s->set_world_size(t.world_size);
  for (const auto& d : t.device_names) s->add_device_names(d);
  s->set_gpu_records(static_cast<int64_t>(t.records.size()));
  s->set_launches(static_cast<int64_t>(t.launches.size()));
  s->set_trace_events(t.trace_events);
  s->set_json_bytes(t.json_bytes);
  std::set<int32_t> streams;
  for (const KernelRecord& r : t.records) streams.insert(r.stream);
  for (int32_t st : streams) s->add_streams(st);
}

// Iteration of each record: the index in `ranges` of the step range holding its launch (found
// through the correlation id), -1 for none. Counts the records whose launch is not in the trace.
std::vector<int32_t> IterationOfRecords(const KinetoTrace& t, const std::vector<CpuRange>& ranges,
                                        int64_t* without_launch) {
  std::vector<int32_t> iteration(t.records.size(), -1);
  *without_launch = 0;
  for (size_t i = 0; i < t.records.size(); ++i) {
    const KernelRecord& r = t.records[i];
    auto l = std::lower_bound(t.launches.begin(), t.launches.end(), r.correlation,
                              [](const Launch& x, int64_t c) { return x.correlation < c; });
    if (r.correlation < 0 || l == t.launches.end() || l->correlation != r.correlation) {
      ++*without_launch;
      continue;
    }
    auto it = std::upper_bound(ranges.begin(), ranges.end(), l->t_ns,
                               [](int64_t v, const CpuRange& c) { return v < c.start_ns; });
    if (it == ranges.begin()) continue;
    --it;
    if (l->t_ns < it->end_ns) iteration[i] = static_cast<int32_t>(it - ranges.begin());
  }
  return iteration;
}

// What marks the steps, named: ProfilerStep#N, else the step annotation(s) taken (issue 24:
// an annotation was taken without saying which).
std::string MarkerName(const KinetoTrace& t, bool by_profiler_step, const std::vector<CpuRange>& ranges) {
  std::string marker = "ProfilerStep";
  if (!by_profiler_step && !ranges.empty()) {
    std::map<std::string, int> taken;
    for (const CpuRange& c : ranges) {
      ++taken[c.name_id < t.annotation_names.size() ? t.annotation_names[c.name_id] : std::string("?")];
    }
    marker.clear();
    for (const auto& [name, n] : taken) {
      absl::StrAppend(&marker, marker.empty() ? "annotation " : ", ", "'", name.substr(0, 80), "' (", n, " ranges)");
    }
  }
  return marker;
}

// TraceSummary.annotations and .contention when the options ask for them.
absl::Status AddBreakdowns(const KinetoTrace& t, const AnalyzeOptions& options, v1::TraceSummary* s) {
  if (options.annotations) {
    for (auto& a : AnnotationBreakdown(t)) *s->add_annotations() = std::move(a);
  }
  if (options.contention) {
    ContentionOptions co;
    co.key = options.contention_key;
    co.min_overlap_fraction = options.min_overlap_fraction;
    co.min_duration_ns = options.min_kernel_ns;
    absl::StatusOr<v1::ContentionReport> c = MeasureContention(t, co);
    if (!c.ok()) return c.status();
    *s->mutable_contention() = *std::move(c);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::TraceSummary> AnalyzeKinetoTrace(const KinetoTrace& t, const AnalyzeOptions& options) {
  v1::TraceSummary s;
  SetTraceFacts(t, &s);
  const bool by_profiler_step = !t.profiler_steps.empty();
  const std::vector<CpuRange>& ranges = by_profiler_step ? t.profiler_steps : t.step_ranges;
  int64_t without_launch = 0;
  const std::vector<int32_t> iteration = IterationOfRecords(t, ranges, &without_launch);
  s.set_records_without_launch(without_launch);
  const std::string marker = MarkerName(t, by_profiler_step, ranges);

  std::vector<int64_t> starts;
  int64_t single_end = 0;          // > 0: one step, [starts[0], single_end)
  int32_t kept_iterations = 0;     // iterations [0, kept) enter the whole-trace figures
  if (options.use_markers && !ranges.empty()) {
    starts = probe::StepStartsFromIterations(t.records, iteration);
    s.set_step_source(absl::StrCat(marker, " (launch correlation)"));
    kept_iterations = static_cast<int32_t>(ranges.size()) - 1;
    if (starts.empty()) s.add_notes(absl::StrCat("no GPU record was launched inside a ", marker, " range"));
    if (!by_profiler_step) {
      s.add_notes(absl::StrCat("no ProfilerStep#N: steps from the ", marker,
                               " (outermost user annotations named like a step; --no-markers for the kernel period)"));
    }
    if (starts.size() == 1) {
      // One iteration with GPU work (one ProfilerStep per file, as a profiler schedule with
      // active=1 writes; or a trace of one inference forward): that iteration is the step, from
      // its first GPU record to the end of its last. No next step marks its end, so the idle time
      // after its last record is not in it.
      int32_t only = -1;
      for (size_t i = 0; i < t.records.size(); ++i) {
        if (iteration[i] < 0) continue;
        only = iteration[i];
        single_end = std::max(single_end == 0 ? INT64_MIN : single_end, t.records[i].end_ns);
      }
      if (single_end <= starts[0]) {
        starts.clear();
        single_end = 0;
      } else {
        s.set_step_source(absl::StrCat("one ", marker, " (launch correlation): its first GPU record to the end of its last"));
        s.add_notes(absl::StrCat(
            "the trace holds one step (", ranges.size(), ranges.size() == 1 ? " range" : " ranges",
            " with GPU work in one): it is measured from its first GPU record to the end of its last, so idle time "
            "after its last kernel and before the next step is not counted"));
        kept_iterations = only + 1;
      }
    }
  }
  if (starts.size() < 2 && single_end == 0) {
    if (options.use_markers) {
      s.add_notes(ranges.empty() ? "no ProfilerStep#N or step annotation: steps from the kernel period"
                                 : "the step markers give no step: steps from the kernel period");
    }
    absl::StatusOr<probe::PeriodResult> p = probe::StepStartsFromPeriod(t.records);
    if (!p.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(t.path, ": ", p.status().message()));
    }
    starts = p->starts;
    s.set_step_source(absl::StrCat("period:", p->period, " on stream ", p->stream));
    kept_iterations = -1;
  }
  if (single_end > 0) starts.push_back(single_end);
  if (starts.size() < 2) {
    return absl::FailedPreconditionError(absl::StrCat(t.path, ": no step found"));
  }
  const probe::RunningIndex index(t.records);
  for (size_t i = 0; i + 1 < starts.size(); ++i) {
    if (static_cast<int>(i) < options.warmup_steps) continue;
    v1::StepMeasurement m = probe::AnalyzeWindow(t.records, index, starts[i], starts[i + 1]);
    m.set_step(static_cast<int32_t>(i));
    *s.add_steps() = std::move(m);
  }
  if (s.steps().empty()) {
    return absl::FailedPreconditionError(absl::StrCat(t.path, ": no step after the ", options.warmup_steps,
                                                      " warm-up steps"));
  }
  *s.mutable_median() = probe::MedianStep(s.steps());
  // Whole-trace figures: the records of every iteration but the last (HTA drops it); one step:
  // its records; without markers, the records inside the measured windows.
  std::vector<const KernelRecord*> kept;
  for (size_t i = 0; i < t.records.size(); ++i) {
    const bool in = kept_iterations >= 0
                        ? iteration[i] >= 0 && iteration[i] < kept_iterations
                        : t.records[i].start_ns >= starts.front() && t.records[i].start_ns < starts.back();
    if (in) kept.push_back(&t.records[i]);
  }
  *s.mutable_whole() = Whole(kept);
  if (absl::Status b = AddBreakdowns(t, options, &s); !b.ok()) return b;
  return s;
}

int MedianLengthStepIndex(const v1::TraceSummary& s) {
  if (s.steps().empty()) return -1;
  std::vector<int> order(static_cast<size_t>(s.steps_size()));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return s.steps(a).step_time_s() < s.steps(b).step_time_s(); });
  return order[(order.size() - 1) / 2];
}

absl::StatusOr<StepTimeline> StepTimelineOf(const KinetoTrace& t, const v1::TraceSummary& s, int step_index) {
  if (step_index < 0 || step_index >= s.steps_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("step_index ", step_index, ": the trace has ", s.steps_size(), " measured steps"));
  }
  const v1::StepMeasurement& m = s.steps(step_index);
  StepTimeline out;
  out.path = t.path;
  out.rank = t.rank;
  out.step = m.step();
  out.steps = s.steps_size();
  out.start_ns = m.start_ns();
  out.end_ns = m.end_ns();
  out.step_time_s = m.step_time_s();
  out.step_source = s.step_source();
  out.names = t.names;
  for (const KernelRecord& r : t.records) {
    if (r.start_ns >= out.end_ns) break;  // records are sorted by start
    const int64_t lo = std::max(r.start_ns, out.start_ns), hi = std::min(r.end_ns, out.end_ns);
    if (hi <= lo) continue;
    out.intervals.push_back({r.stream, lo, hi, r.category, r.name_id});
  }
  return out;
}

absl::StatusOr<v1::TraceReport> AnalyzeKinetoTraces(const std::vector<std::string>& paths,
                                                    const KinetoOptions& read_options,
                                                    const AnalyzeOptions& options, StepTimeline* timeline) {
  if (paths.empty()) return absl::InvalidArgumentError("no trace file given");
  v1::TraceReport report;
  std::vector<v1::ProbeReport> ranks;
  std::vector<RankCollectives> collectives;  // the communication kernels only, for the stragglers
  for (const std::string& p : paths) {
    absl::StatusOr<KinetoTrace> t = ReadKinetoTrace(p, read_options);
    if (!t.ok()) return t.status();
    absl::StatusOr<v1::TraceSummary> s = AnalyzeKinetoTrace(*t, options);
    if (!s.ok()) return s.status();
    if (timeline != nullptr && ranks.empty()) {
      absl::StatusOr<StepTimeline> st = StepTimelineOf(*t, *s, MedianLengthStepIndex(*s));
      if (!st.ok()) return st.status();
      *timeline = *std::move(st);
    }
    v1::ProbeReport r;
    r.set_rank(s->rank() >= 0 ? s->rank() : static_cast<int32_t>(ranks.size()));
    if (paths.size() > 1) {
      collectives.push_back(CollectivesOfRank(*t, *s));
      collectives.back().rank = r.rank();
    }
    r.set_rank_count(1);
    r.set_step_source(s->step_source());
    r.set_warmup_steps(options.warmup_steps);
    *r.mutable_steps() = s->steps();
    *r.mutable_median() = s->median();
    r.set_kernels_seen(s->gpu_records());
    for (const auto& n : s->notes()) r.add_notes(n);
    ranks.push_back(std::move(r));
    *report.add_ranks() = *std::move(s);
  }
  if (ranks.size() == 1) {
    *report.mutable_merged() = ranks[0];
  } else {
    // Steps are numbered per file from its first window; the merge pairs step i of every rank.
    absl::StatusOr<v1::ProbeReport> m = probe::MergeRanks(ranks);
    if (!m.ok()) return m.status();
    *report.mutable_merged() = *std::move(m);
    absl::StatusOr<v1::StragglerReport> w = AttributeCollectiveWaits(collectives);
    if (w.ok()) {
      *report.mutable_stragglers() = *std::move(w);
    } else {
      report.mutable_stragglers()->add_notes(std::string(w.status().message()));
    }
  }
  return report;
}

bool LooksLikeKinetoTrace(const std::string& path) {
  if (absl::EndsWith(path, ".gz") || absl::EndsWith(path, ".pt.trace.json")) return true;
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  char buf[1024];
  const int n = gzread(f, buf, sizeof(buf));
  gzclose(f);
  return n > 0 && absl::StrContains(absl::string_view(buf, static_cast<size_t>(n)), "traceEvents");
}

}  // namespace stepcast::trace
