#include "calibrate/import.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
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
  std::vector<std::pair<double, double>> st;
  for (const auto& p : points) st.push_back({p.size_bytes, p.time_s});
  const AlphaBetaFit fit = FitAlphaBeta(st, c, ranks);
  r.alpha_s = fit.alpha_s;
  if (!points.empty()) r.busbw_bytes_per_s = BusBw(c, ranks, points.back().size_bytes, points.back().time_s);
  r.source = source;
  return r;
}

std::vector<CollectiveRate> MergeCollectives(const std::vector<CollectiveRate>& base,
                                             const std::vector<CollectiveRate>& curves) {
  using Key = std::tuple<int, int, int64_t, int64_t>;
  auto key = [](const CollectiveRate& r) -> Key {
    return {static_cast<int>(r.collective), static_cast<int>(r.scope), r.group_size,
            r.scope == Scope::kInterNode ? r.ranks_per_node : 0};
  };
  std::set<Key> replaced;
  std::set<int> intra_with_curve;
  for (const auto& c : curves) {
    replaced.insert(key(c));
    if (c.scope == Scope::kIntraNode) intra_with_curve.insert(static_cast<int>(c.collective));
  }
  std::vector<CollectiveRate> out;
  const std::vector<Collective> order = {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter,
                                         Collective::kAllToAll, Collective::kSendRecv};
  for (Scope s : {Scope::kIntraNode, Scope::kInterNode}) {
    for (Collective c : order) {
      std::vector<CollectiveRate> formula, kept_curves, new_curves;
      for (const auto& b : base) {
        if (b.collective != c || b.scope != s || replaced.count(key(b))) continue;
        if (b.points.size() >= 2) {
          kept_curves.push_back(b);
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

absl::StatusOr<ImportResult> ImportLogTexts(const std::vector<std::pair<std::string, std::string>>& logs,
                                            const Hardware& hw, const RateProfile& base, bool base_is_reference,
                                            const ImportOptions& o) {
  ImportResult result;
  std::vector<NcclTestsLog> nccl;
  std::vector<MamfLog> mamf;
  std::vector<BabelStreamLog> babel;
  std::vector<NvbandwidthLog> nvbw;
  std::vector<std::pair<std::string, std::vector<TraceLensGemm>>> tracelens;
  std::vector<std::string> notes;
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
        absl::StatusOr<NcclTestsLog> l = ParseNcclTestsLog(text, path, no);
        if (!l.ok()) return l.status();
        nccl.push_back(*std::move(l));
        break;
      }
      case LogKind::kMamfFinder: {
        absl::StatusOr<MamfLog> l = ParseMamfFinderLog(text, path);
        if (!l.ok()) return l.status();
        mamf.push_back(*std::move(l));
        break;
      }
      case LogKind::kBabelStream: {
        absl::StatusOr<BabelStreamLog> l = ParseBabelStreamLog(text, path);
        if (!l.ok()) return l.status();
        babel.push_back(*std::move(l));
        break;
      }
      case LogKind::kNvbandwidth: {
        absl::StatusOr<NvbandwidthLog> l = ParseNvbandwidthLog(text, path);
        if (!l.ok()) return l.status();
        nvbw.push_back(*std::move(l));
        break;
      }
      case LogKind::kTraceLensGemm: {
        absl::StatusOr<std::vector<TraceLensGemm>> l = ParseTraceLensGemmCsv(text, path);
        if (!l.ok()) return l.status();
        tracelens.push_back({path, *std::move(l)});
        break;
      }
    }
  }

  RateProfile p = base;
  p.name = o.name.empty() ? (o.hardware.empty() ? std::string("imported") : o.hardware + "-imported") : o.name;
  if (!o.hardware.empty()) p.hardware = o.hardware;
  if (base_is_reference) {
    const std::string pre = absl::StrCat("reference profile (", o.hardware.empty() ? hw.name : o.hardware, "): ");
    for (auto& g : p.gemm) g.source = pre + g.source;
    for (auto& c : p.collectives) c.source = pre + c.source;
    p.hbm_source = pre + p.hbm_source;
    p.attention_source = pre + p.attention_source;
  }

  // Collectives from nccl-tests.
  std::map<std::tuple<int, int, int64_t, int64_t>, std::vector<const NcclTestsLog*>> by_key;
  for (const NcclTestsLog& l : nccl) {
    if (!l.collective) {
      notes.push_back(absl::StrCat(l.path, ": ", l.binary, " parsed (", l.rows.size(),
                                   " sizes); the profile has no rate for this collective"));
      continue;
    }
    if (!l.hardware.empty() && !o.hardware.empty()) {
      absl::StatusOr<std::string> preset = HardwarePresetForGpuName(l.hardware);
      if (preset.ok() && *preset != o.hardware) {
        notes.push_back(absl::StrCat(l.path, ": the log names '", l.hardware, "' (", *preset, "), the profile is for ",
                                     o.hardware));
      }
    }
    const int64_t rpn = l.scope() == Scope::kInterNode ? l.ranks_per_node : 0;
    by_key[{static_cast<int>(*l.collective), static_cast<int>(l.scope()), l.ranks, rpn}].push_back(&l);
  }
  std::vector<CollectiveRate> curves;
  for (const auto& [k, ls] : by_key) {
    const auto [c_int, s_int, ranks, rpn] = k;
    const Collective c = static_cast<Collective>(c_int);
    const Scope s = static_cast<Scope>(s_int);
    std::map<double, std::vector<double>> per_size;  // size -> one value per log
    std::vector<std::string> files;
    for (const NcclTestsLog* l : ls) {
      std::map<double, std::vector<double>> mine;
      for (const NcclTestsRow& r : l->rows) {
        mine[r.size_bytes].push_back(r.out_of_place_time_s);
        if (r.has_in_place) mine[r.size_bytes].push_back(r.in_place_time_s);
      }
      for (const auto& [size, v] : mine) {
        double sum = 0;
        for (double x : v) sum += x;
        per_size[size].push_back(sum / v.size());
      }
      files.push_back(absl::StrCat(l->path, " lines ", l->rows.front().line, "-", l->rows.back().line));
    }
    std::vector<CollectivePoint> pts;
    for (const auto& [size, v] : per_size) pts.push_back({size, Median(v)});
    const NcclTestsLog& first = *ls.front();
    std::string layout = s == Scope::kInterNode
                             ? absl::StrCat(first.nodes, " nodes x ", rpn, " (ranks per node from ", first.ranks_per_node_from, ")")
                             : absl::StrCat("one node (ranks per node from ", first.ranks_per_node_from, ")");
    const std::string source = absl::StrCat(
        "nccl-tests ", first.binary, ": ", absl::StrJoin(files, "; "), "; ", ranks, " ranks (from ", first.ranks_from,
        "), ", layout, "; time = mean of the out-of-place and in-place columns",
        ls.size() > 1 ? absl::StrCat(", median over ", ls.size(), " logs at each size") : "");
    CollectiveRate r = CurveFromPoints(c, s, ranks, rpn, pts, source);
    result.summary.push_back(absl::StrFormat(
        "%s %s x%d%s: %d sizes %s..%s from %d log(s); busbw %.1f GB/s at %s; latency floor %.1f us", CollectiveName(c),
        ScopeName(s), ranks, s == Scope::kInterNode ? absl::StrCat(" (", rpn, " per node)") : "", pts.size(),
        Bytes(pts.front().size_bytes), Bytes(pts.back().size_bytes), ls.size(), r.busbw_bytes_per_s / 1e9,
        Bytes(pts.back().size_bytes), r.alpha_s * 1e6));
    curves.push_back(std::move(r));
  }

  // Send/recv from nvbandwidth's P2P copies, when no nccl-tests sendrecv log gives it.
  bool have_sendrecv_intra = false;
  for (const auto& c : curves) have_sendrecv_intra |= c.collective == Collective::kSendRecv && c.scope == Scope::kIntraNode;
  std::vector<CollectiveRate> base_collectives = p.collectives;
  for (const NvbandwidthLog& l : nvbw) {
    auto it = l.tests.find("device_to_device_memcpy_write_ce");
    if (have_sendrecv_intra || it == l.tests.end() || !(it->second.MedianCellBytesPerS() > 0)) continue;
    for (auto& b : base_collectives) {
      if (b.collective == Collective::kSendRecv && b.scope == Scope::kIntraNode && b.points.size() < 2) {
        b.busbw_bytes_per_s = it->second.MedianCellBytesPerS();
        b.source = absl::StrFormat(
            "busbw: nvbandwidth %s line %d, device_to_device_memcpy_write_ce, median off-diagonal cell %.1f GB/s (a "
            "copy-engine P2P write over the same NVLink); alpha kept: %s",
            l.path, it->second.line, b.busbw_bytes_per_s / 1e9, b.source);
        result.summary.push_back(absl::StrFormat("send_recv intra_node busbw %.1f GB/s from nvbandwidth %s",
                                                 b.busbw_bytes_per_s / 1e9, l.path));
        have_sendrecv_intra = true;
      }
    }
  }
  p.collectives = MergeCollectives(base_collectives, curves);

  // GEMM.
  std::map<std::tuple<int, int64_t, int64_t, int64_t>, std::pair<double, std::vector<std::string>>> mamf_points;
  for (const MamfLog& l : mamf) {
    std::vector<MamfShape> shapes = l.shapes;
    if (shapes.empty()) shapes.push_back(l.headline);
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
                                     v.second.size() > 1 ? "; the slowest of the logs" : "")});
  }
  for (const auto& [path, rows] : tracelens) {
    std::vector<GemmRatePoint> pts = GemmPointsFromTraceLens(rows, path);
    const size_t skipped = rows.size() - pts.size();
    if (skipped > 0) notes.push_back(absl::StrCat(path, ": ", skipped, " rows of a dtype stepcast does not model skipped"));
    imported.insert(imported.end(), pts.begin(), pts.end());
  }
  if (!imported.empty()) {
    std::set<int> dtypes;
    for (const auto& g : imported) dtypes.insert(static_cast<int>(g.dtype));
    std::vector<GemmRatePoint> gemm;
    for (const auto& g : p.gemm) {
      if (!dtypes.count(static_cast<int>(g.dtype))) gemm.push_back(g);
    }
    gemm.insert(gemm.end(), imported.begin(), imported.end());
    p.gemm = std::move(gemm);
    for (int d : dtypes) {
      int count = 0;
      double best = 0;
      for (const auto& g : imported) {
        if (static_cast<int>(g.dtype) == d) {
          ++count;
          best = std::max(best, g.flops_per_s);
        }
      }
      result.summary.push_back(absl::StrFormat("GEMM %s: %d shapes, fastest %.1f TFLOP/s (replace the base's %s rates)",
                                               DTypeName(static_cast<DType>(d)), count, best / 1e12,
                                               DTypeName(static_cast<DType>(d))));
    }
  }

  // HBM.
  double hbm = 0;
  std::vector<std::string> hbm_src;
  for (const BabelStreamLog& l : babel) {
    auto it = l.bytes_per_s.find("copy");
    if (it == l.bytes_per_s.end()) {
      notes.push_back(absl::StrCat(l.path, ": no Copy row (BabelStream --triad-only?): not used for HBM"));
      continue;
    }
    if (hbm == 0 || it->second < hbm) hbm = it->second;
    hbm_src.push_back(absl::StrCat(l.path, " line ", l.line.at("copy"), l.device.empty() ? "" : " (" + l.device + ")"));
  }
  if (hbm > 0) {
    p.hbm_bandwidth_bytes_per_s = hbm;
    p.hbm_source = absl::StrCat("BabelStream Copy (2 arrays moved, fastest run): ", absl::StrJoin(hbm_src, ", "),
                                hbm_src.size() > 1 ? "; the slowest of the logs" : "");
  } else {
    for (const NvbandwidthLog& l : nvbw) {
      auto it = l.tests.find("device_local_copy");
      if (it == l.tests.end()) continue;
      const double v = 2 * it->second.MedianCellBytesPerS();
      if (v > 0 && (hbm == 0 || v < hbm)) {
        hbm = v;
        p.hbm_bandwidth_bytes_per_s = v;
        p.hbm_source = absl::StrFormat(
            "nvbandwidth %s line %d: device_local_copy median %.1f GB/s x 2 (nvbandwidth counts a local copy's "
            "bytes once, nvbandwidth #48; a copy-engine copy, below an SM stream kernel)",
            l.path, it->second.line, v / 2e9);
      }
    }
  }
  if (hbm > 0) result.summary.push_back(absl::StrFormat("HBM %.1f GB/s: %s", hbm / 1e9, p.hbm_source));
  for (const NvbandwidthLog& l : nvbw) {
    for (const char* t : {"host_to_device_memcpy_ce", "device_to_host_memcpy_ce"}) {
      auto it = l.tests.find(t);
      if (it != l.tests.end() && it->second.MedianCellBytesPerS() > 0) {
        notes.push_back(absl::StrFormat("%s line %d: %s %.1f GB/s (not a profile rate)", l.path, it->second.line, t,
                                        it->second.MedianCellBytesPerS() / 1e9));
      }
    }
  }

  for (const auto& [path, text] : logs) p.notes.push_back(absl::StrCat("imported: ", path));
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
