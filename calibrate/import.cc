#include "calibrate/import.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "calibrate/fits.h"
#include "calibrate/import_babelstream.h"
#include "calibrate/import_mamf.h"
#include "calibrate/import_nccl_tests.h"
#include "calibrate/import_nvbandwidth.h"
#include "calibrate/import_tracelens.h"
#include "calibrate/log_text.h"
#include "proto/catalog.h"
#include "proto/codec.h"

namespace stepcast::calibrate {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

std::string Bytes(double b) {
  const char* unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (b >= 1024 && i < 4 && std::fmod(b, 1024) == 0) {
    b /= 1024;
    ++i;
  }
  return absl::StrFormat("%g %s", b, unit[i]);
}

}  // namespace

const char* LogKindName(LogKind k) {
  switch (k) {
    case LogKind::kNcclTests: return "nccl-tests";
    case LogKind::kMamfFinder: return "mamf-finder";
    case LogKind::kBabelStream: return "BabelStream";
    case LogKind::kNvbandwidth: return "nvbandwidth";
    case LogKind::kTraceLensGemm: return "TraceLens GEMM.csv";
  }
  return "?";
}

absl::StatusOr<LogKind> DetectLogKind(absl::string_view text, const std::string& path) {
  if (LooksLikeTraceLensGemmCsv(text)) return LogKind::kTraceLensGemm;
  if (LooksLikeNvbandwidth(text)) return LogKind::kNvbandwidth;
  if (LooksLikeBabelStream(text)) return LogKind::kBabelStream;
  if (LooksLikeMamfFinder(text)) return LogKind::kMamfFinder;
  if (LooksLikeNcclTests(text)) return LogKind::kNcclTests;
  std::string first;
  for (const LogLine& l : SplitLines(text)) {
    if (!l.text.empty()) {
      first = std::string(l.text.substr(0, 80));
      break;
    }
  }
  return LogError(path, 1,
                  absl::StrCat("not a log of nccl-tests, mamf-finder, BabelStream or nvbandwidth, nor a TraceLens "
                               "GEMM.csv (first line: '",
                               first, "')"));
}

CollectiveRate CurveFromPoints(Collective c, Scope s, int64_t ranks, int64_t ranks_per_node,
                               const std::vector<CollectivePoint>& points, const std::string& source) {
  CollectiveRate r;
  r.collective = c;
  r.scope = s;
  r.group_size = ranks;
  r.ranks_per_node = s == Scope::kInterNode ? ranks_per_node : 0;
  r.points = points;
  r.alpha_s = 0;
  for (const auto& p : points) {
    if (p.size_bytes <= 4096 && (r.alpha_s == 0 || p.time_s < r.alpha_s)) r.alpha_s = p.time_s;
  }
  if (!points.empty()) {
    r.busbw_bytes_per_s = BusBw(c, ranks, points.back().size_bytes, points.back().time_s);
    r.origin = points.back().origin;
  }
  r.source = source;
  return r;
}

namespace {

constexpr double kSmallestSampleBytes = 8;                  // nccl-tests' -b default, its smallest message
constexpr double kLargestSampleBytes = 16.0 * (1ull << 30);  // the reference curves' largest size (logs 01, 15)

using CurveKey = std::tuple<int, int, int64_t, int64_t>;
CurveKey KeyOf(const CollectiveRate& r) {
  return {static_cast<int>(r.collective), static_cast<int>(r.scope), r.group_size,
          r.scope == Scope::kInterNode ? r.ranks_per_node : 0};
}

// The base entry whose estimate outside a curve's sizes the merged curve keeps, and whether it is
// the curve of the same key (its points are kept as they are).
const CollectiveRate* BaseFor(const std::vector<CollectiveRate>& base, const CollectiveRate& x, bool* exact) {
  *exact = false;
  for (const auto& b : base) {
    if (b.points.size() >= 2 && KeyOf(b) == KeyOf(x)) {
      *exact = true;
      return &b;
    }
  }
  if (x.scope == Scope::kInterNode) return nullptr;
  // As core/step_time.cc StepModel::Comm reads a profile: the first entry of (c, s) when it has no
  // curve; else the entry FindCollective picks for the group (or that first entry).
  RateProfile p;
  p.collectives = base;
  const CollectiveRate* first = p.FindCollective(x.collective, x.scope);
  if (first == nullptr) return nullptr;
  const CollectiveRate* use = first;
  if (!first->points.empty()) {
    const CollectiveRate* best = p.FindCollective(x.collective, x.scope, x.group_size, 0);
    if (best != nullptr && !best->points.empty()) use = best;
  }
  return &base[static_cast<size_t>(use - p.collectives.data())];
}

std::string SizeText(double b) {
  const char* unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (b >= 1024 && i < 4 && std::fmod(b, 1024) == 0) {
    b /= 1024;
    ++i;
  }
  return absl::StrFormat("%g %s", b, unit[i]);
}

CollectiveRate MergeOne(const std::vector<CollectiveRate>& base, const CollectiveRate& x, double tolerance,
                        std::vector<std::string>* notes) {
  if (x.points.empty()) return x;
  bool exact = false;
  const CollectiveRate* b = BaseFor(base, x, &exact);
  const std::string name = absl::StrCat(CollectiveName(x.collective), " ", ScopeName(x.scope), " x", x.group_size,
                                        x.scope == Scope::kInterNode ? absl::StrCat(" (", x.ranks_per_node, " per node)") : "");
  if (b == nullptr) {
    if (notes) {
      notes->push_back(absl::StrCat(name, ": no base curve of this group and layout to merge with; outside ",
                                    SizeText(x.points.front().size_bytes), "..", SizeText(x.points.back().size_bytes),
                                    " the model extrapolates the measured curve"));
    }
    return x;
  }
  const double lo = x.points.front().size_bytes, hi = x.points.back().size_bytes;
  const double t_lo = x.points.front().time_s, t_hi = x.points.back().time_s;
  const int64_t rpn = x.scope == Scope::kInterNode ? x.ranks_per_node : 0;
  std::vector<CollectivePoint> below, above;
  int dropped_below = 0, dropped_above = 0;
  auto consider = [&](const CollectivePoint& p) {
    if (p.size_bytes < lo) below.push_back(p);
    if (p.size_bytes > hi) above.push_back(p);
  };
  if (exact) {
    for (const auto& p : b->points) {
      CollectivePoint q = p;
      if (q.origin == RateOrigin::kUnknown) q.origin = b->origin;
      consider(q);
    }
  } else {
    std::vector<double> sizes;
    for (double s = lo / 2; s >= kSmallestSampleBytes; s /= 2) sizes.push_back(s);
    std::reverse(sizes.begin(), sizes.end());
    for (double s = hi * 2; s <= kLargestSampleBytes; s *= 2) sizes.push_back(s);
    for (double s : sizes) {
      consider({s, EstimateCollective(*b, x.group_size, s, rpn, false).time_s, b->origin});
    }
  }
  // The junctions: from the curve outwards, base points that contradict it are dropped until the
  // first that does not (points further out are the base's own business, spikes included).
  while (!below.empty() && below.back().time_s > t_lo * (1 + tolerance)) {
    below.pop_back();
    ++dropped_below;
  }
  size_t first_above = 0;
  while (first_above < above.size() && above[first_above].time_s < t_hi * (1 - tolerance)) ++first_above;
  dropped_above = static_cast<int>(first_above);
  above.erase(above.begin(), above.begin() + first_above);
  std::vector<CollectivePoint> pts = below;
  pts.insert(pts.end(), x.points.begin(), x.points.end());
  pts.insert(pts.end(), above.begin(), above.end());
  const double base_lo = EstimateCollective(*b, x.group_size, lo, rpn, false).time_s;
  const double base_hi = EstimateCollective(*b, x.group_size, hi, rpn, false).time_s;
  std::string kept = absl::StrCat(below.size(), " below ", SizeText(lo), ", ", above.size(), " above ", SizeText(hi));
  std::string dropped;
  if (dropped_below + dropped_above > 0) {
    dropped = absl::StrFormat(
        "; dropped %d below and %d above whose time would not grow with size across the junction by more than the "
        "log's own repeat spread (%.1f%%): the base is another cluster's",
        dropped_below, dropped_above, 100 * tolerance);
  }
  const std::string from = exact ? "the base curve of this group" : "the base's estimate for this group, sampled at factors of 2";
  CollectiveRate out = CurveFromPoints(x.collective, x.scope, x.group_size, x.ranks_per_node, pts,
                                       absl::StrCat(x.source, "; outside its sizes ", from, " (", kept, dropped, "): ",
                                                    b->source));
  if (notes) {
    notes->push_back(absl::StrFormat(
        "%s: merged with %s: %s%s; at %s the log is %.2fx the base, at %s %.2fx; %d points %s..%s", name, from, kept,
        dropped, SizeText(lo), base_lo > 0 ? t_lo / base_lo : 0.0, SizeText(hi), base_hi > 0 ? t_hi / base_hi : 0.0,
        out.points.size(), SizeText(out.points.front().size_bytes), SizeText(out.points.back().size_bytes)));
  }
  return out;
}

// A log's GPU against the profile's hardware: OK, an error naming both, or a note.
absl::Status CheckGpu(const std::string& path, const char* tool, const std::string& name, bool is_device_name,
                      const ImportOptions& o, std::vector<std::string>* notes) {
  if (o.hardware.empty()) return absl::OkStatus();
  if (name.empty()) {
    notes->push_back(absl::StrCat(path, ": the ", tool, " log does not name its GPU: not checked against ", o.hardware));
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> preset = HardwarePresetForGpuName(name);
  if (preset.ok() && *preset == o.hardware) return absl::OkStatus();
  if (!preset.ok() && !is_device_name) {
    notes->push_back(absl::StrCat(path, ": the log's hardware line '", name.substr(0, 200),
                                  "' names no GPU a preset matches: not checked against ", o.hardware));
    return absl::OkStatus();
  }
  const std::string theirs = preset.ok() ? absl::StrCat("'", name, "' (", *preset, ")")
                                         : absl::StrCat("'", name.substr(0, 200), "' (no hardware preset matches it)");
  if (o.allow_other_gpu) {
    notes->push_back(absl::StrCat(path, ": the log names ", theirs, ", the profile is for ", o.hardware,
                                  "; imported anyway (--allow-other-gpu)"));
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      path, ": a ", tool, " log of ", theirs, ", but the profile is for ", o.hardware,
      ": another GPU's rates would be written into it; import the log with its own --hardware, or pass "
      "--allow-other-gpu"));
}

}  // namespace

std::vector<CollectiveRate> MergeCollectives(const std::vector<CollectiveRate>& base,
                                             const std::vector<CollectiveRate>& in_curves,
                                             std::vector<std::string>* notes, const std::vector<double>& tolerance) {
  std::vector<CollectiveRate> curves;
  for (size_t i = 0; i < in_curves.size(); ++i) {
    curves.push_back(MergeOne(base, in_curves[i], i < tolerance.size() ? tolerance[i] : 0.0, notes));
  }
  std::set<CurveKey> replaced;
  std::set<int> intra_with_curve;
  for (const auto& c : curves) {
    replaced.insert(KeyOf(c));
    if (c.scope == Scope::kIntraNode) intra_with_curve.insert(static_cast<int>(c.collective));
  }
  std::vector<CollectiveRate> out;
  const std::vector<Collective> order = {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter,
                                         Collective::kAllToAll, Collective::kSendRecv};
  for (Scope s : {Scope::kIntraNode, Scope::kInterNode}) {
    for (Collective c : order) {
      std::vector<CollectiveRate> formula, kept_curves, new_curves;
      for (const auto& b : base) {
        if (b.collective != c || b.scope != s) continue;
        if (b.points.size() >= 2) {
          if (!replaced.count(KeyOf(b))) kept_curves.push_back(b);
        } else if (!(s == Scope::kIntraNode && intra_with_curve.count(static_cast<int>(c)))) {
          formula.push_back(b);
        }
      }
      for (const auto& x : curves) {
        if (x.collective == c && x.scope == s) new_curves.push_back(x);
      }
      if (s == Scope::kIntraNode) {
        for (auto* v : {&new_curves, &kept_curves, &formula}) out.insert(out.end(), v->begin(), v->end());
      } else {
        for (auto* v : {&formula, &new_curves, &kept_curves}) out.insert(out.end(), v->begin(), v->end());
      }
    }
  }
  return out;
}

namespace {

// ImportLogTexts in steps, in the order it runs them; each step's messages go to `notes` (said
// after the values, and kept in the profile) or to the result's summary (one line per imported
// value), in the order the steps run.

// The logs of one import, parsed, by tool.
struct ParsedLogs {
  std::vector<NcclTestsLog> nccl;
  std::vector<MamfLog> mamf;
  std::vector<BabelStreamLog> babel;
  std::vector<NvbandwidthLog> nvbw;
  std::vector<std::pair<std::string, std::vector<TraceLensGemm>>> tracelens;
  std::string gpu_name;  // the first GPU the logs name
};

// Step 1: each log parsed by the kind its content shows (DetectLogKind), with its tool's importer
// (import_nccl_tests.h, import_mamf.h, import_babelstream.h, import_nvbandwidth.h,
// import_tracelens.h), and the GPU it names checked against --hardware (CheckGpu). The first log
// that cannot be read, or names another GPU, is the error.
absl::StatusOr<ParsedLogs> ParseLogs(const std::vector<std::pair<std::string, std::string>>& logs, const Hardware& hw,
                                     const ImportOptions& o, std::vector<std::string>* notes) {
  ParsedLogs parsed;
  NcclTestsOptions no;
  no.binary = o.collective;
  no.ranks = o.ranks;
  no.ranks_per_node = o.ranks_per_node;
  no.default_ranks_per_node = hw.gpus_per_node;
  for (const auto& [path, text] : logs) {
    absl::StatusOr<LogKind> kind = DetectLogKind(text, path);
    if (!kind.ok()) return kind.status();
    switch (*kind) {
      case LogKind::kNcclTests: {
        absl::StatusOr<std::vector<NcclTestsLog>> l = ParseNcclTestsLogs(text, path, no);
        if (!l.ok()) return l.status();
        for (NcclTestsLog& x : *l) {
          if (absl::Status s = CheckGpu(x.Name(), "nccl-tests", x.hardware, x.hardware_is_gpu_name, o, notes); !s.ok()) {
            return s;
          }
          if (x.hardware_is_gpu_name && parsed.gpu_name.empty()) parsed.gpu_name = x.hardware;
          parsed.nccl.push_back(std::move(x));
        }
        break;
      }
      case LogKind::kMamfFinder: {
        absl::StatusOr<MamfLog> l = ParseMamfFinderLog(text, path);
        if (!l.ok()) return l.status();
        if (absl::Status s = CheckGpu(path, "mamf-finder", l->device_name, true, o, notes); !s.ok()) return s;
        if (parsed.gpu_name.empty()) parsed.gpu_name = l->device_name;
        parsed.mamf.push_back(*std::move(l));
        break;
      }
      case LogKind::kBabelStream: {
        absl::StatusOr<BabelStreamLog> l = ParseBabelStreamLog(text, path);
        if (!l.ok()) return l.status();
        if (absl::Status s = CheckGpu(path, "BabelStream", l->device, true, o, notes); !s.ok()) return s;
        if (parsed.gpu_name.empty()) parsed.gpu_name = l->device;
        parsed.babel.push_back(*std::move(l));
        break;
      }
      case LogKind::kNvbandwidth: {
        absl::StatusOr<NvbandwidthLog> l = ParseNvbandwidthLog(text, path);
        if (!l.ok()) return l.status();
        parsed.nvbw.push_back(*std::move(l));
        break;
      }
      case LogKind::kTraceLensGemm: {
        absl::StatusOr<std::vector<TraceLensGemm>> l = ParseTraceLensGemmCsv(text, path);
        if (!l.ok()) return l.status();
        parsed.tracelens.push_back({path, *std::move(l)});
        break;
      }
    }
  }
  return parsed;
}

// Step 2: the profile the logs update: the base, named (--name, else "<hardware>-imported"), for
// --hardware; a preset's reference profile has every value's source prefixed "reference profile
// (<hardware>): " and its origin set to reference (core/hardware.h RateOrigin), and no provenance.
RateProfile StartProfile(const RateProfile& base, bool base_is_reference, const ImportOptions& o,
                         const std::string& hw_name) {
  RateProfile p = base;
  p.name = o.name.empty() ? (o.hardware.empty() ? std::string("imported") : o.hardware + "-imported") : o.name;
  if (!o.hardware.empty()) p.hardware = o.hardware;
  if (base_is_reference) {
    const std::string pre = absl::StrCat("reference profile (", hw_name, "): ");
    for (auto& g : p.gemm) {
      g.source = pre + g.source;
      g.origin = RateOrigin::kReference;
    }
    for (auto& c : p.collectives) {
      c.source = pre + c.source;
      c.origin = RateOrigin::kReference;
      for (auto& pt : c.points) pt.origin = RateOrigin::kReference;
    }
    p.hbm_source = pre + p.hbm_source;
    p.attention_source = pre + p.attention_source;
    p.hbm_origin = p.attention_origin = RateOrigin::kReference;
    // A bound on the part's compute rates stays for the rates kept from the reference; imported
    // GEMM points are the part's own (core/interval.h ComputeRatesScaled skips them).
    if (p.compute_rate_low_fraction > 0) p.compute_rate_low_source = pre + p.compute_rate_low_source;
    if (!p.host_calls_source.empty()) p.host_calls_source = pre + p.host_calls_source;
    p.provenance = ProfileProvenance{};
  }
  return p;
}

// The nccl-tests curves of step 3, with what MergeCollectives and the summary need of each.
struct NcclCurves {
  std::vector<CollectiveRate> curves;
  std::vector<double> spreads;           // per curve: its logs' own repeat spread (MergeCollectives' tolerance)
  std::vector<std::string> curve_lines;  // per curve: its summary line
  int64_t most_ranks = 0, most_nodes = 0;  // over the logs, for the provenance
};

// One curve from the logs of one (collective, scope, ranks, ranks per node): a point's time is the
// mean of its out-of-place and in-place columns (both time the same collective at that size), the
// median over the logs at each size (import.h). `spread` receives the largest relative difference
// of a row's two columns, `line` the curve's summary line.
CollectiveRate CurveFromNcclLogs(Collective c, Scope s, int64_t ranks, int64_t rpn,
                                 const std::vector<const NcclTestsLog*>& ls, double* spread, std::string* line) {
  std::map<double, std::vector<double>> per_size;  // size -> one value per log
  std::vector<std::string> files;
  *spread = 0;  // the logs' own repeat spread: out-of-place vs in-place time of one size
  for (const NcclTestsLog* l : ls) {
    std::map<double, std::vector<double>> mine;
    for (const NcclTestsRow& r : l->rows) {
      mine[r.size_bytes].push_back(r.out_of_place_time_s);
      if (r.has_in_place) {
        mine[r.size_bytes].push_back(r.in_place_time_s);
        *spread = std::max(*spread, std::fabs(r.out_of_place_time_s - r.in_place_time_s) /
                                        std::min(r.out_of_place_time_s, r.in_place_time_s));
      }
    }
    for (const auto& [size, v] : mine) {
      double sum = 0;
      for (double x : v) sum += x;
      per_size[size].push_back(sum / v.size());
    }
    files.push_back(absl::StrCat(l->path, " lines ", l->rows.front().line, "-", l->rows.back().line));
  }
  std::vector<CollectivePoint> pts;
  for (const auto& [size, v] : per_size) pts.push_back({size, Median(v), RateOrigin::kImported});
  const NcclTestsLog& first = *ls.front();
  std::string layout = s == Scope::kInterNode
                           ? absl::StrCat(first.nodes, " nodes x ", rpn, " (ranks per node from ", first.ranks_per_node_from, ")")
                           : absl::StrCat("one node (ranks per node from ", first.ranks_per_node_from, ")");
  const std::string source = absl::StrCat(
      "nccl-tests ", first.binary, " (from ", first.binary_from, "): ", absl::StrJoin(files, "; "), "; ", ranks,
      " ranks (from ", first.ranks_from, "), ", layout, "; time = mean of the out-of-place and in-place columns",
      ls.size() > 1 ? absl::StrCat(", median over ", ls.size(), " logs at each size") : "");
  CollectiveRate r = CurveFromPoints(c, s, ranks, rpn, pts, source);
  *line = absl::StrFormat("%s %s x%d%s: %d sizes %s..%s from %d log(s) (binary from %s); busbw %.1f GB/s at %s",
                          CollectiveName(c), ScopeName(s), ranks,
                          s == Scope::kInterNode ? absl::StrCat(" (", rpn, " per node)") : "", pts.size(),
                          Bytes(pts.front().size_bytes), Bytes(pts.back().size_bytes), ls.size(), first.binary_from,
                          r.busbw_bytes_per_s / 1e9, Bytes(pts.back().size_bytes));
  return r;
}

// Step 3: the collectives of the nccl-tests logs: the logs grouped by (collective, scope, ranks,
// ranks per node, inter-node only), one curve per group (CurveFromNcclLogs); a log of a binary the
// profile has no rate for (broadcast_perf, ...) is noted.
NcclCurves CurvesFromNcclTests(const std::vector<NcclTestsLog>& nccl, std::vector<std::string>* notes) {
  NcclCurves out;
  std::map<std::tuple<int, int, int64_t, int64_t>, std::vector<const NcclTestsLog*>> by_key;
  for (const NcclTestsLog& l : nccl) {
    if (!l.collective) {
      notes->push_back(absl::StrCat(l.Name(), ": ", l.binary, " parsed (", l.rows.size(),
                                    " sizes); the profile has no rate for this collective"));
      continue;
    }
    out.most_ranks = std::max(out.most_ranks, l.ranks);
    out.most_nodes = std::max(out.most_nodes, l.nodes);
    const int64_t rpn = l.scope() == Scope::kInterNode ? l.ranks_per_node : 0;
    by_key[{static_cast<int>(*l.collective), static_cast<int>(l.scope()), l.ranks, rpn}].push_back(&l);
  }
  for (const auto& [k, ls] : by_key) {
    const auto [c_int, s_int, ranks, rpn] = k;
    double spread = 0;
    std::string line;
    out.curves.push_back(
        CurveFromNcclLogs(static_cast<Collective>(c_int), static_cast<Scope>(s_int), ranks, rpn, ls, &spread, &line));
    out.curve_lines.push_back(std::move(line));
    out.spreads.push_back(spread);
  }
  return out;
}

// Step 4: the intra-node send/recv rate from nvbandwidth's device_to_device_memcpy_write_ce (the
// median off-diagonal cell: a copy-engine P2P write over the same NVLink), when no nccl-tests
// sendrecv log gives a curve: it replaces the busbw of the base's intra-node send/recv alpha-beta
// entry, whose alpha is kept. Returns the base's collectives so updated.
std::vector<CollectiveRate> SendRecvFromNvbandwidth(const std::vector<CollectiveRate>& base,
                                                    const std::vector<NvbandwidthLog>& nvbw,
                                                    const std::vector<CollectiveRate>& curves,
                                                    std::vector<std::string>* summary) {
  bool have_sendrecv_intra = false;
  for (const auto& c : curves) have_sendrecv_intra |= c.collective == Collective::kSendRecv && c.scope == Scope::kIntraNode;
  std::vector<CollectiveRate> base_collectives = base;
  for (const NvbandwidthLog& l : nvbw) {
    auto it = l.tests.find("device_to_device_memcpy_write_ce");
    if (have_sendrecv_intra || it == l.tests.end() || !(it->second.MedianCellBytesPerS() > 0)) continue;
    for (auto& b : base_collectives) {
      if (b.collective == Collective::kSendRecv && b.scope == Scope::kIntraNode && b.points.size() < 2) {
        b.busbw_bytes_per_s = it->second.MedianCellBytesPerS();
        b.origin = RateOrigin::kImported;
        b.source = absl::StrFormat(
            "busbw: nvbandwidth %s line %d, device_to_device_memcpy_write_ce, median off-diagonal cell %.1f GB/s (a "
            "copy-engine P2P write over the same NVLink); alpha kept: %s",
            l.path, it->second.line, b.busbw_bytes_per_s / 1e9, b.source);
        summary->push_back(absl::StrFormat("send_recv intra_node busbw %.1f GB/s from nvbandwidth %s",
                                           b.busbw_bytes_per_s / 1e9, l.path));
        have_sendrecv_intra = true;
      }
    }
  }
  return base_collectives;
}

// Step 5a: the GEMM points of the mamf-finder logs (mean TFLOPS of torch.mm, 2mnk FLOPs; the
// slowest of several logs of one shape: a synchronous job runs at its slowest GPU; a log whose
// rows a terminal copy cut gives its summary's best shape only) and of the TraceLens GEMM.csv
// files (import_tracelens.h; rows of a dtype stepcast does not model are skipped, noted).
std::vector<GemmRatePoint> GemmPointsFromLogs(const ParsedLogs& parsed, std::vector<std::string>* notes) {
  std::map<std::tuple<int, int64_t, int64_t, int64_t>, std::pair<double, std::vector<std::string>>> mamf_points;
  for (const MamfLog& l : parsed.mamf) {
    std::vector<MamfShape> shapes = l.use_summary ? std::vector<MamfShape>{l.headline} : l.shapes;
    if (l.use_summary && !l.shapes.empty()) {
      notes->push_back(absl::StrFormat(
          "%s: %d of the %d shapes tried are in the log (a terminal copy keeps the last row only): the summary's "
          "best shape (%s, line %d) used, not the rows",
          l.path, l.shapes.size(), l.tried_shapes, l.headline_kind, l.headline.line));
    }
    for (const MamfShape& x : shapes) {
      auto& [rate, srcs] = mamf_points[{static_cast<int>(l.dtype), x.m, x.n, x.k}];
      rate = rate == 0 ? x.mean_flops_per_s : std::min(rate, x.mean_flops_per_s);
      srcs.push_back(absl::StrCat(l.path, " line ", x.line));
    }
  }
  std::vector<GemmRatePoint> imported;
  for (const auto& [k, v] : mamf_points) {
    const auto [d, m, n, kk] = k;
    imported.push_back({static_cast<DType>(d), m, n, kk, v.first,
                        absl::StrCat("mamf-finder ", absl::StrJoin(v.second, ", "),
                                     ": mean TFLOPS (torch.mm, 2mnk FLOPs)",
                                     v.second.size() > 1 ? "; the slowest of the logs" : ""),
                        RateOrigin::kImported});
  }
  for (const auto& [path, rows] : parsed.tracelens) {
    std::vector<GemmRatePoint> pts = GemmPointsFromTraceLens(rows, path);
    const size_t skipped = rows.size() - pts.size();
    if (skipped > 0) notes->push_back(absl::StrCat(path, ": ", skipped, " rows of a dtype stepcast does not model skipped"));
    for (auto& g : pts) g.origin = RateOrigin::kImported;
    imported.insert(imported.end(), pts.begin(), pts.end());
  }
  return imported;
}

// Step 5b: impossible GEMM rates refused (import.h; reliability review 2, N9): above the
// datasheet's dense peak of the dtype (x 1.02), or operands (m k + k n + m n elements, 1 byte each
// at least) larger than the GPU's memory.
absl::Status CheckGemmPoints(const std::vector<GemmRatePoint>& imported, const Hardware& hw,
                             const std::string& hw_name) {
  for (const auto& g : imported) {
    const double peak = hw.PeakFlops(g.dtype);
    if (peak > 0 && g.flops_per_s > 1.02 * peak) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: %.1f TFLOP/s %s at %dx%dx%d is above %s's dense %s peak %.1f TFLOP/s: not a measurement of this GPU",
          g.source.substr(0, 300), g.flops_per_s / 1e12, DTypeName(g.dtype), g.m, g.n, g.k, hw_name,
          DTypeName(g.dtype), peak / 1e12));
    }
    const double operand_bytes =
        static_cast<double>(g.m) * g.k + static_cast<double>(g.k) * g.n + static_cast<double>(g.m) * g.n;
    if (hw.hbm_capacity_bytes > 0 && operand_bytes > hw.hbm_capacity_bytes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: a %dx%dx%d GEMM's operands hold %.3g elements, more than %s's %.0f GB of memory holds at 1 byte each: "
          "not a shape that ran",
          g.source.substr(0, 300), g.m, g.n, g.k, operand_bytes, hw_name, hw.hbm_capacity_bytes / 1e9));
    }
  }
  return absl::OkStatus();
}

// Step 5c: the imported GEMM points merged into the profile's (import.h, "merge, never shrink"):
// they join the base's points of their dtype, replacing a point of the same shape, or the base's
// flat rate of the dtype (m = n = k = 0, which would answer every shape); one summary line per
// dtype.
void MergeGemmPoints(const std::vector<GemmRatePoint>& imported, RateProfile* p, std::vector<std::string>* summary) {
  if (imported.empty()) return;
  std::set<int> dtypes;
  std::set<std::tuple<int, int64_t, int64_t, int64_t>> shapes;
  for (const auto& g : imported) {
    dtypes.insert(static_cast<int>(g.dtype));
    shapes.insert({static_cast<int>(g.dtype), g.m, g.n, g.k});
  }
  std::set<int> flat_dtypes;
  for (const auto& g : p->gemm) {
    if (g.m == 0 && g.n == 0 && g.k == 0) flat_dtypes.insert(static_cast<int>(g.dtype));
  }
  std::map<int, int> kept, replaced;
  std::vector<GemmRatePoint> gemm;
  for (const auto& g : p->gemm) {
    const int d = static_cast<int>(g.dtype);
    if (dtypes.count(d) && (flat_dtypes.count(d) || shapes.count({d, g.m, g.n, g.k}))) {
      ++replaced[d];
      continue;
    }
    if (dtypes.count(d)) ++kept[d];
    gemm.push_back(g);
  }
  gemm.insert(gemm.end(), imported.begin(), imported.end());
  p->gemm = std::move(gemm);
  for (int d : dtypes) {
    int count = 0;
    double best = 0;
    for (const auto& g : imported) {
      if (static_cast<int>(g.dtype) == d) {
        ++count;
        best = std::max(best, g.flops_per_s);
      }
    }
    const char* dn = DTypeName(static_cast<DType>(d));
    std::string how;
    if (flat_dtypes.count(d)) {
      how = absl::StrCat("the base's flat ", dn, " rate replaced (it would answer every shape)");
    } else {
      how = absl::StrCat("merged with the base's ", kept[d], " other ", dn, " shapes (", replaced[d],
                         " of the same shape replaced)");
    }
    summary->push_back(absl::StrFormat("GEMM %s: %d shapes, fastest %.1f TFLOP/s; %s", dn, count, best / 1e12, how));
  }
}

// Step 6: the HBM bandwidth: BabelStream's Copy (2 arrays moved, its fastest run; the slowest of
// several logs), else nvbandwidth's device_local_copy median x 2 (nvbandwidth counts a local
// copy's bytes once, nvbandwidth #48). Refused when above the datasheet (x 1.02: the arrays fit in
// a cache, BabelStream's README) or below 1% of it (import.h). Then nvbandwidth's host copies,
// noted (not a profile rate).
absl::Status ImportHbm(const ParsedLogs& parsed, const Hardware& hw, const std::string& hw_name, RateProfile* p,
                       std::vector<std::string>* summary, std::vector<std::string>* notes) {
  double hbm = 0;
  std::vector<std::string> hbm_src;
  for (const BabelStreamLog& l : parsed.babel) {
    auto it = l.bytes_per_s.find("copy");
    if (it == l.bytes_per_s.end()) {
      notes->push_back(absl::StrCat(l.path, ": no Copy row (BabelStream --triad-only?): not used for HBM"));
      continue;
    }
    if (hbm == 0 || it->second < hbm) hbm = it->second;
    hbm_src.push_back(absl::StrCat(l.path, " line ", l.line.at("copy"), l.device.empty() ? "" : " (" + l.device + ")"));
  }
  std::string hbm_source;
  if (hbm > 0) {
    hbm_source = absl::StrCat("BabelStream Copy (2 arrays moved, fastest run): ", absl::StrJoin(hbm_src, ", "),
                              hbm_src.size() > 1 ? "; the slowest of the logs" : "");
  } else {
    for (const NvbandwidthLog& l : parsed.nvbw) {
      auto it = l.tests.find("device_local_copy");
      if (it == l.tests.end()) continue;
      const double v = 2 * it->second.MedianCellBytesPerS();
      if (v > 0 && (hbm == 0 || v < hbm)) {
        hbm = v;
        hbm_source = absl::StrFormat(
            "nvbandwidth %s line %d: device_local_copy median %.1f GB/s x 2 (nvbandwidth counts a local copy's "
            "bytes once, nvbandwidth #48; a copy-engine copy, below an SM stream kernel)",
            l.path, it->second.line, v / 2e9);
      }
    }
  }
  if (hbm > 0) {
    const double spec = hw.hbm_bandwidth_bytes_per_s;
    if (spec > 0 && (hbm > 1.02 * spec || hbm < 0.01 * spec)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: HBM %.4g GB/s is %s %s's datasheet %.1f GB/s: %s", hbm_source.substr(0, 400), hbm / 1e9,
          hbm > spec ? "above" : "below 1% of", hw_name, spec / 1e9,
          hbm > spec ? "the arrays fit in a cache (BabelStream's README: arrays far larger than the caches)"
                     : "not a memory measurement (a unit, or a broken run)"));
    }
    p->hbm_bandwidth_bytes_per_s = hbm;
    p->hbm_source = hbm_source;
    p->hbm_origin = RateOrigin::kImported;
    summary->push_back(absl::StrFormat("HBM %.1f GB/s: %s", hbm / 1e9, p->hbm_source));
  }
  for (const NvbandwidthLog& l : parsed.nvbw) {
    for (const char* t : {"host_to_device_memcpy_ce", "device_to_host_memcpy_ce"}) {
      auto it = l.tests.find(t);
      if (it != l.tests.end() && it->second.MedianCellBytesPerS() > 0) {
        notes->push_back(absl::StrFormat("%s line %d: %s %.1f GB/s (not a profile rate)", l.path, it->second.line, t,
                                         it->second.MedianCellBytesPerS() / 1e9));
      }
    }
  }
  return absl::OkStatus();
}

// Step 7: the provenance (core/hardware.h ProfileProvenance): the tool, its version, the date, the
// logs' GPU, ranks and nodes (the most of any log, or the base's when more), the base, and every
// imported file, also listed in the profile's notes.
void RecordProvenance(const std::vector<std::pair<std::string, std::string>>& logs, const ParsedLogs& parsed,
                      const NcclCurves& nccl, bool base_is_reference, const ImportOptions& o,
                      const std::string& hw_name, RateProfile* p) {
  ProfileProvenance& prov = p->provenance;
  prov.tool = "stepcast-calibrate import";
  prov.tool_version = STEPCAST_VERSION;
  prov.created_utc = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());
  if (prov.gpu_name.empty()) prov.gpu_name = parsed.gpu_name;
  prov.gpu_count = std::max(prov.gpu_count, nccl.most_ranks);
  prov.host_count = std::max(prov.host_count, nccl.most_nodes);
  if (base_is_reference || prov.base.empty()) {
    prov.base = base_is_reference ? absl::StrCat("reference profile ", hw_name) : o.base_name;
  }
  for (const auto& [path, text] : logs) {
    p->notes.push_back(absl::StrCat("imported: ", path));
    prov.imported_files.push_back(path);
  }
}

}  // namespace

absl::StatusOr<ImportResult> ImportLogTexts(const std::vector<std::pair<std::string, std::string>>& logs,
                                            const Hardware& hw, const RateProfile& base, bool base_is_reference,
                                            const ImportOptions& o) {
  ImportResult result;
  std::vector<std::string> notes;
  absl::StatusOr<ParsedLogs> parsed = ParseLogs(logs, hw, o, &notes);
  if (!parsed.ok()) return parsed.status();
  const std::string hw_name = o.hardware.empty() ? hw.name : o.hardware;
  RateProfile p = StartProfile(base, base_is_reference, o, hw_name);

  // Collectives: the nccl-tests curves and nvbandwidth's send/recv, merged over the base's.
  const NcclCurves nccl = CurvesFromNcclTests(parsed->nccl, &notes);
  const std::vector<CollectiveRate> base_collectives =
      SendRecvFromNvbandwidth(p.collectives, parsed->nvbw, nccl.curves, &result.summary);
  std::vector<std::string> merge_lines;
  p.collectives = MergeCollectives(base_collectives, nccl.curves, &merge_lines, nccl.spreads);
  for (size_t i = 0; i < nccl.curve_lines.size(); ++i) {
    result.summary.push_back(nccl.curve_lines[i]);
    if (i < merge_lines.size()) result.summary.push_back("  " + merge_lines[i]);
  }

  // GEMM.
  const std::vector<GemmRatePoint> imported = GemmPointsFromLogs(*parsed, &notes);
  if (absl::Status s = CheckGemmPoints(imported, hw, hw_name); !s.ok()) return s;
  MergeGemmPoints(imported, &p, &result.summary);

  // HBM.
  if (absl::Status s = ImportHbm(*parsed, hw, hw_name, &p, &result.summary, &notes); !s.ok()) return s;

  RecordProvenance(logs, *parsed, nccl, base_is_reference, o, hw_name, &p);
  p.notes.insert(p.notes.end(), notes.begin(), notes.end());
  result.summary.insert(result.summary.end(), notes.begin(), notes.end());
  result.profile = RateProfileToProto(p);
  if (absl::StatusOr<RateProfile> check = RateProfileFromProto(result.profile, "profile"); !check.ok()) {
    return check.status();
  }
  return result;
}

absl::StatusOr<ImportResult> ImportLogFiles(const std::vector<std::string>& paths, const Hardware& hw,
                                            const RateProfile& base, bool base_is_reference,
                                            const ImportOptions& options) {
  if (paths.empty()) return absl::InvalidArgumentError("import: no log files given");
  std::vector<std::pair<std::string, std::string>> logs;
  for (const std::string& path : paths) {
    std::string text;
    if (absl::Status s = ReadWholeFile(path, &text); !s.ok()) return s;
    logs.push_back({path, std::move(text)});
  }
  return ImportLogTexts(logs, hw, base, base_is_reference, options);
}

}  // namespace stepcast::calibrate
