// stepcast-calibrate import on CPU: the nccl-tests, mamf-finder, BabelStream, nvbandwidth and
// TraceLens readers against real logs (tests/data/real_data/microbench) and the tools' own
// documented outputs; errors that name the file and line; the merge over a reference profile; and
// the collective model on the 16 real nccl-tests logs (their points parsed independently into
// nccl/index.json): every measured point predicted through the written profile, and
// leave-one-out interpolation against the alpha-beta fit.
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "calibrate/fits.h"
#include "calibrate/import.h"
#include "calibrate/import_babelstream.h"
#include "calibrate/import_mamf.h"
#include "calibrate/import_nccl_tests.h"
#include "calibrate/import_nvbandwidth.h"
#include "calibrate/import_tracelens.h"
#include "calibrate/log_text.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "core/interval.h"
#include "gtest/gtest.h"
#include "proto/catalog.h"
#include "proto/codec.h"

namespace stepcast::calibrate {
namespace {

const std::string kData = std::string(STEPCAST_SOURCE_DIR) + "/tests/data/real_data/microbench/";

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> NcclLogs() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(kData + "nccl")) {
    if (e.path().extension() == ".txt") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// index.json: [{"id", "ranks_from_busbw_over_algbw", "points": [[size, out-of-place time s, busbw]]}]
struct IndexEntry {
  int64_t ranks = 0;
  std::vector<std::pair<double, double>> points;
};
std::map<std::string, IndexEntry> ReadIndex() {
  google::protobuf::ListValue list;
  const auto st = google::protobuf::util::JsonStringToMessage(Read(kData + "nccl/index.json"), &list);
  EXPECT_TRUE(st.ok()) << st;
  std::map<std::string, IndexEntry> out;
  for (const auto& v : list.values()) {
    const auto& f = v.struct_value().fields();
    IndexEntry e;
    e.ranks = static_cast<int64_t>(f.at("ranks_from_busbw_over_algbw").number_value());
    for (const auto& p : f.at("points").list_value().values()) {
      e.points.push_back({p.list_value().values(0).number_value(), p.list_value().values(1).number_value()});
    }
    out[f.at("id").string_value()] = e;
  }
  return out;
}

const Hardware& H100() {
  static const Hardware* hw = [] {
    auto c = Catalog::Builtin();
    return new Hardware(*c->FindHardware("h100-sxm"));
  }();
  return *hw;
}

std::string Id(const std::string& path) { return std::filesystem::path(path).stem().string(); }

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(std::floor(q * (v.size() - 1) + 0.5)))];
}

TEST(NcclTestsLog, EveryRealLogParsesToTheIndexPoints) {
  const auto index = ReadIndex();
  ASSERT_EQ(index.size(), 16u);
  for (const std::string& path : NcclLogs()) {
    SCOPED_TRACE(path);
    absl::StatusOr<NcclTestsLog> log = ParseNcclTestsLog(Read(path), path, {});
    ASSERT_TRUE(log.ok()) << log.status();
    const IndexEntry& want = index.at(Id(path));
    EXPECT_EQ(log->ranks, want.ranks);
    ASSERT_EQ(log->rows.size(), want.points.size());
    for (size_t i = 0; i < want.points.size(); ++i) {
      EXPECT_EQ(log->rows[i].size_bytes, want.points[i].first);
      EXPECT_NEAR(log->rows[i].out_of_place_time_s, want.points[i].second, 1e-12);
    }
    EXPECT_TRUE(log->collective.has_value());
  }
}

TEST(NcclTestsLog, LayoutFromTheLogOrItsHeader) {
  struct Case {
    const char* id;
    Collective c;
    int64_t ranks, per_node, nodes;
  };
  const std::vector<Case> cases = {
      {"01_h100x8_nvlink_dgx_allreduce", Collective::kAllReduce, 8, 8, 1},           // "one node"
      {"03_h100x16_nebius_ib_allreduce", Collective::kAllReduce, 16, 8, 2},          // "2 nodes x 8"
      {"06_h100x16_gcp_a3mega_allgather", Collective::kAllGather, 16, 8, 2},
      {"09_gb200x128_oci_2racks_allreduce", Collective::kAllReduce, 128, 4, 32},     // "32 nodes x 4"
      {"11_a100x128_coreweave_ib_allreduce_2022", Collective::kAllReduce, 127, 8, 16},  // preset's 8 per node
      {"15_h100x8_aws_p5_nvlink_allreduce", Collective::kAllReduce, 8, 8, 1},        // "single node"
      {"16_gpux2_aws_efa_small_allreduce", Collective::kAllReduce, 2, 1, 2},         // "1 GPU per node"
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.id);
    const std::string path = kData + "nccl/" + c.id + ".txt";
    absl::StatusOr<NcclTestsLog> log = ParseNcclTestsLog(Read(path), path, {});
    ASSERT_TRUE(log.ok()) << log.status();
    EXPECT_EQ(*log->collective, c.c);
    EXPECT_EQ(log->ranks, c.ranks);
    EXPECT_EQ(log->ranks_per_node, c.per_node);
    EXPECT_EQ(log->nodes, c.nodes);
    EXPECT_EQ(log->scope(), c.nodes > 1 ? Scope::kInterNode : Scope::kIntraNode);
  }
  // Log 14 carries two rows of 0 bytes (nccl-tests' -b 0); they are not curve points.
  const std::string p14 = kData + "nccl/14_h100x16_aws_p5_efa_allreduce.txt";
  EXPECT_EQ(ParseNcclTestsLog(Read(p14), p14, {})->skipped_zero_rows, 2);
}

// A complete two-node log as nccl-tests 2.13 prints it (header, per-rank device lines, both
// column groups, footer), rows from log 08 (OCI A100 x16).
constexpr char kFullLog[] = R"(# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  35491 on inst-node1 device  0 [0x0f] NVIDIA A100-SXM4-40GB
#  Rank  1 Group  0 Pid  35492 on inst-node1 device  1 [0x15] NVIDIA A100-SXM4-40GB
#  Rank  2 Group  0 Pid  35493 on inst-node2 device  0 [0x0f] NVIDIA A100-SXM4-40GB
#  Rank  3 Group  0 Pid  35494 on inst-node2 device  1 [0x15] NVIDIA A100-SXM4-40GB
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    36.47    0.00    0.00      0    34.74    0.00    0.00      0
          16             4     float     sum      -1    38.86    0.00    0.00      0    35.65    0.00    0.00      0
  4294967296    1073741824     float     sum      -1    34176  125.67  188.51      0    34417  124.79  187.19      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 62.5
#
)";

TEST(NcclTestsLog, FullMultiNodeLogWithRankLines) {
  // The binary comes from the file name here (no command line in the log).
  absl::StatusOr<NcclTestsLog> log = ParseNcclTestsLog(kFullLog, "oci/all_reduce_perf.log", {});
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ(log->binary, "all_reduce_perf");
  EXPECT_EQ(log->binary_from, "the file name");
  EXPECT_TRUE(log->full_log);
  EXPECT_EQ(log->ranks, 4);
  EXPECT_EQ(log->ranks_from, "the log's rank lines");
  EXPECT_EQ(log->ranks_per_node, 2);
  EXPECT_EQ(log->nodes, 2);
  EXPECT_EQ(log->scope(), Scope::kInterNode);
  EXPECT_EQ(log->hardware, "NVIDIA A100-SXM4-40GB");
  EXPECT_DOUBLE_EQ(log->avg_busbw_bytes_per_s, 62.5e9);
  ASSERT_EQ(log->rows.size(), 3u);
  EXPECT_DOUBLE_EQ(log->rows[2].in_place_time_s, 34417e-6);
  EXPECT_EQ(log->rows[2].line, 14);
  // The same text with nccl-tests' "Collective test starting" line naming the binary.
  const std::string named = std::string("# Collective test starting: all_reduce_perf\n") + kFullLog;
  absl::StatusOr<NcclTestsLog> n = ParseNcclTestsLog(named, "x.log", {});
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->binary_from, "the log's header");
  // ... and a command line naming the binary (mpirun's, as logs usually start).
  const std::string cmd = std::string("mpirun -np 4 ./build/all_reduce_perf -b 8 -e 8G -f 2\n") + kFullLog;
  n = ParseNcclTestsLog(cmd, "x.log", {});
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->binary_from, "the command line in the log");
  // A header naming a binary whose busbw factor the rows contradict (reduce_scatter's (n-1)/n on
  // all-reduce rows: busbw/algbw 1.5 = 2(n-1)/n for 4 ranks): refused, not imported.
  const std::string wrong = std::string("# Collective test starting: reduce_scatter_perf\n") + kFullLog;
  absl::StatusOr<NcclTestsLog> w = ParseNcclTestsLog(wrong, "x.log", {});
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("x.log:15: busbw 188.51 GB/s is not algbw 125.67 GB/s x 0.7500"),
            std::string::npos)
      << w.status();
}

TEST(NcclTestsLog, ErrorsNameTheFileAndLine) {
  std::string text = kFullLog;
  // A row cut short (a truncated write).
  std::string cut = text.substr(0, text.find("0    34417")) + "\n";
  absl::StatusOr<NcclTestsLog> r = ParseNcclTestsLog(cut, "a.log", {.binary = "all_reduce"});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StartsWith(r.status().message(), "a.log:14: truncated nccl-tests row")) << r.status();
  // A complete last row but no footer: the run did not finish.
  std::string no_footer = text.substr(0, text.find("# Out of bounds"));
  r = ParseNcclTestsLog(no_footer, "b.log", {.binary = "all_reduce"});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StartsWith(r.status().message(), "b.log:14: truncated: no '# Avg bus bandwidth'")) << r.status();
  // Wrong elements found by nccl-tests' check.
  std::string wrong = text;
  wrong.replace(wrong.find("188.51      0"), 13, "188.51     12");
  r = ParseNcclTestsLog(wrong, "c.log", {.binary = "all_reduce"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("c.log:14: nccl-tests found 12 wrong elements"), std::string::npos);
  // No way to tell the binary: no header, command line or file name, and rows whose reduction op
  // "none" is all_gather's or alltoall's (the same busbw factor).
  std::string none = text;
  for (size_t at = none.find(" sum "); at != std::string::npos; at = none.find(" sum ")) none.replace(at, 5, " none ");
  r = ParseNcclTestsLog(none, "run7.log", {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("reduction op 'none': all_gather or alltoall"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("pass --collective"), std::string::npos);
  // A 70-digit node count in the "# hardware:" line (fuzz_nccl_tests, 2026-11-27: std::stoll threw).
  r = ParseNcclTestsLog(
      "# hardware: 2 nodes x 66666666666666666666666666666666666666666666666666666666666666668 H100\n" + text, "d.log",
      {.binary = "all_reduce"});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StartsWith(r.status().message(), "d.log:1: hardware: count '666666")) << r.status();
  // An unknown file.
  absl::StatusOr<LogKind> k = DetectLogKind("hello world\nthis is not a log\n", "notes.txt");
  ASSERT_FALSE(k.ok());
  EXPECT_TRUE(absl::StartsWith(k.status().message(), "notes.txt:1: not a log of nccl-tests")) << k.status();
}

TEST(NcclTestsLog, EveryPerfBinaryAndItsBusBwFactor) {
  // nccl-tests doc/PERFORMANCE.md.
  EXPECT_DOUBLE_EQ(NcclTestsBusBwFactor("all_reduce_perf", 8), 1.75);
  EXPECT_DOUBLE_EQ(NcclTestsBusBwFactor("reduce_scatter_perf", 8), 0.875);
  EXPECT_DOUBLE_EQ(NcclTestsBusBwFactor("alltoall_perf", 8), 0.875);
  EXPECT_DOUBLE_EQ(NcclTestsBusBwFactor("gather_perf", 8), 0.875);
  EXPECT_DOUBLE_EQ(NcclTestsBusBwFactor("broadcast_perf", 8), 1.0);
  EXPECT_DOUBLE_EQ(NcclTestsBusBwFactor("sendrecv_perf", 8), 1.0);
  EXPECT_DOUBLE_EQ(NcclTestsBusBwFactor("hypercube_perf", 8), 1.0);
  EXPECT_EQ(NcclTestsBinary("AllReduce"), "all_reduce_perf");
  EXPECT_EQ(NcclTestsBinary("all_to_all"), "alltoall_perf");
  EXPECT_EQ(NcclTestsBinary("broadcast_perf"), "broadcast_perf");
  EXPECT_EQ(NcclTestsBinary("allreduce_bench"), "");
  // broadcast parses (busbw = algbw); the profile has no slot for it (noted by the import).
  std::string bcast = kFullLog;
  bcast.replace(bcast.find("188.51"), 6, "125.67");
  bcast.replace(bcast.find("187.19"), 6, "124.79");
  absl::StatusOr<NcclTestsLog> b = ParseNcclTestsLog(bcast, "x.log", {.binary = "broadcast", .ranks = 4});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_FALSE(b->collective.has_value());
  // Old nccl-tests (no root column, a max-error column): log 10's layout.
  const std::string old = "# collective: all_reduce\n"
                          "           8             2     float     sum    58.23    0.00    0.00  0e+00    56.02    0.00    0.00  0e+00\n"
                          "  8589934592    2147483648     float     sum   143927   59.68  115.64  5e-07   143961   59.67  115.61  5e-07\n";
  absl::StatusOr<NcclTestsLog> o = ParseNcclTestsLog(old, "old.txt", {});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->ranks, 32);  // 115.64 / 59.68 = 1.9377 = 2 (n-1) / n
  EXPECT_DOUBLE_EQ(o->rows[1].out_of_place_time_s, 143927e-6);
}

// The done-when test of the collective model: each of the 16 real logs imported over the H100
// reference, the profile written as JSON and read back, and every measured point (the index's
// independent parse) predicted through RateProfile::FindCollective + EstimateCollective.
TEST(CollectiveModel, EveryRealLogPredictsItsMeasuredPoints) {
  const auto index = ReadIndex();
  for (const std::string& path : NcclLogs()) {
    SCOPED_TRACE(path);
    ImportOptions o;
    o.hardware = "h100-sxm";
    o.allow_other_gpu = true;  // the curves of every log, B200 and A100 ones too, over one reference
    absl::StatusOr<ImportResult> r = ImportLogFiles({path}, H100(), H100().reference_profile, true, o);
    ASSERT_TRUE(r.ok()) << r.status();
    v1::RateProfile back;
    ASSERT_TRUE(ParseMessage(ToJson(r->profile), SpecFormat::kJson, "profile.json", &back).ok());
    absl::StatusOr<RateProfile> prof = RateProfileFromProto(back, "profile");
    ASSERT_TRUE(prof.ok()) << prof.status();
    absl::StatusOr<NcclTestsLog> log = ParseNcclTestsLog(Read(path), path, {});
    const int64_t per_node = log->scope() == Scope::kInterNode ? log->ranks_per_node : 0;
    const CollectiveRate* rate = prof->FindCollective(*log->collective, log->scope(), log->ranks, per_node);
    ASSERT_NE(rate, nullptr);
    EXPECT_GE(rate->points.size(), 2u);
    EXPECT_NE(rate->source.find(path), std::string::npos);
    std::vector<double> err;
    for (const auto& [size, t] : index.at(Id(path)).points) {
      const CollectiveEstimate e = EstimateCollective(*rate, log->ranks, size, per_node);
      EXPECT_FALSE(e.extrapolated) << size << ": " << e.reason;
      err.push_back(std::fabs(e.time_s - t) / t);
    }
    const double median = Quantile(err, 0.5), p90 = Quantile(err, 0.9);
    EXPECT_LE(median, 0.05);
    EXPECT_LE(p90, 0.10);
    std::printf("%-44s median %.2f%%  p90 %.2f%%  (%zu points)\n", Id(path).c_str(), 100 * median, 100 * p90, err.size());
  }
}

// Leave-one-out: each interior point (the mean of its two columns, as the curve stores it)
// predicted from the curve without it, against the profile's
// alpha-beta form (piecewise fit of calibrate/fits.h, alpha from the floor) fitted on the same
// points. The curve's median error must be below the fit's on every log, and the median over the
// logs at most 5%; per log it reaches 5.0% (log 03, whose columns differ by up to 20%) and its p90
// 10-20% on logs whose neighbouring sizes jump at NCCL's protocol switches (e.g. log 04 at
// 512 KiB: 240.7 us between 66.7 and 115.6 us). Figures in docs/CALIBRATION.md.
TEST(CollectiveModel, LeaveOneOutInterpolationBeatsTheAlphaBetaFit) {
  std::vector<double> medians;
  for (const std::string& path : NcclLogs()) {
    SCOPED_TRACE(path);
    absl::StatusOr<NcclTestsLog> log = ParseNcclTestsLog(Read(path), path, {});
    ASSERT_TRUE(log.ok());
    std::vector<CollectivePoint> pts;
    for (const auto& row : log->rows) pts.push_back({row.size_bytes, 0.5 * (row.out_of_place_time_s + row.in_place_time_s)});
    std::vector<double> curve_err, fit_err;
    std::vector<std::pair<double, double>> st;
    for (const auto& p : pts) st.push_back({p.size_bytes, p.time_s});
    const AlphaBetaFit fit = FitAlphaBeta(st, *log->collective, log->ranks);
    for (size_t i = 1; i + 1 < pts.size(); ++i) {
      CollectiveRate r;
      r.collective = *log->collective;
      r.group_size = log->ranks;
      for (size_t j = 0; j < pts.size(); ++j) {
        if (j != i) r.points.push_back(pts[j]);
      }
      const double t = pts[i].time_s;
      curve_err.push_back(std::fabs(EstimateCollective(r, log->ranks, pts[i].size_bytes).time_s - t) / t);
      fit_err.push_back(std::fabs(FitTime(fit, *log->collective, log->ranks, pts[i].size_bytes) - t) / t);
    }
    const double med = Quantile(curve_err, 0.5), p90 = Quantile(curve_err, 0.9), fit_med = Quantile(fit_err, 0.5);
    medians.push_back(med);
    EXPECT_LT(med, fit_med);
    std::printf("%-44s leave-one-out median %.1f%% p90 %.1f%% | alpha-beta fit median %.1f%% p90 %.1f%%\n",
                Id(path).c_str(), 100 * med, 100 * p90, 100 * fit_med, 100 * Quantile(fit_err, 0.9));
  }
  EXPECT_LE(Quantile(medians, 0.5), 0.05);
}

// `import --base P` (docs/CALIBRATION.md "Importing"): what the new logs do not re-measure keeps
// P's values. The 16 nccl-tests logs make P; importing the six TraceLens GEMM tables over it
// replaces the GEMM rates and keeps every one of P's collective entries, its measured curves
// point for point.
TEST(Import, OverABaseProfileKeepsItsMeasuredCollectiveCurves) {
  ImportOptions o;
  o.hardware = "h100-sxm";
  o.allow_other_gpu = true;
  absl::StatusOr<ImportResult> first = ImportLogFiles(NcclLogs(), H100(), H100().reference_profile, true, o);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<RateProfile> base = RateProfileFromProto(first->profile, "base");
  ASSERT_TRUE(base.ok()) << base.status();
  std::vector<std::string> gemm;
  for (const auto& e : std::filesystem::directory_iterator(kData + "gemm")) {
    if (e.path().extension() == ".csv") gemm.push_back(e.path().string());
  }
  std::sort(gemm.begin(), gemm.end());
  ASSERT_EQ(gemm.size(), 6u);
  o.base_name = "imp.json";
  absl::StatusOr<ImportResult> second = ImportLogFiles(gemm, H100(), *base, false, o);
  ASSERT_TRUE(second.ok()) << second.status();
  absl::StatusOr<RateProfile> p = RateProfileFromProto(second->profile, "profile");
  ASSERT_TRUE(p.ok()) << p.status();
  // The bf16 GEMM rates are the tables' now, not the base's.
  bool bf16_from_tables = false;
  for (const auto& g : p->gemm) {
    if (g.dtype == DType::kBF16) bf16_from_tables = !absl::StartsWith(g.source, "reference profile");
  }
  EXPECT_TRUE(bf16_from_tables);
  // Every collective entry of the base, in the base's order, its curves' points unchanged.
  int curves = 0;
  for (const CollectiveRate& c : base->collectives) curves += c.points.size() >= 2 ? 1 : 0;
  EXPECT_GE(curves, 7);  // the logs' all-reduce, all-gather, reduce-scatter, all-to-all curves
  ASSERT_EQ(p->collectives.size(), base->collectives.size());
  for (size_t i = 0; i < base->collectives.size(); ++i) {
    const CollectiveRate& b = base->collectives[i];
    const CollectiveRate& c = p->collectives[i];
    SCOPED_TRACE(b.source);
    EXPECT_EQ(c.collective, b.collective);
    EXPECT_EQ(c.scope, b.scope);
    EXPECT_EQ(c.group_size, b.group_size);
    ASSERT_EQ(c.points.size(), b.points.size());
    for (size_t k = 0; k < b.points.size(); ++k) {
      EXPECT_DOUBLE_EQ(c.points[k].size_bytes, b.points[k].size_bytes);
      EXPECT_DOUBLE_EQ(c.points[k].time_s, b.points[k].time_s);
    }
  }
}

TEST(Import, AllSixteenLogsOverTheH100Reference) {
  ImportOptions o;
  o.hardware = "h100-sxm";
  o.allow_other_gpu = true;
  absl::StatusOr<ImportResult> r = ImportLogFiles(NcclLogs(), H100(), H100().reference_profile, true, o);
  ASSERT_TRUE(r.ok()) << r.status();
  absl::StatusOr<RateProfile> p = RateProfileFromProto(r->profile, "profile");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->name, "h100-sxm-imported");
  // Intra-node all-reduce x8: logs 01 and 15 merged (median of two = mean) and first in line.
  const CollectiveRate* intra = p->FindCollective(Collective::kAllReduce, Scope::kIntraNode);
  ASSERT_NE(intra, nullptr);
  EXPECT_EQ(intra->group_size, 8);
  EXPECT_NE(intra->source.find("01_h100x8_nvlink_dgx_allreduce.txt"), std::string::npos);
  EXPECT_NE(intra->source.find("15_h100x8_aws_p5_nvlink_allreduce.txt"), std::string::npos);
  // 8 B: log 01 (13.67 + 13.03) / 2, log 15 (12.90 + 12.87) / 2; median of the two.
  EXPECT_NEAR(intra->points.front().time_s, 0.5 * ((13.67 + 13.03) / 2 + (12.90 + 12.87) / 2) * 1e-6, 1e-12);
  // Inter-node: the reference's alpha-beta entry stays first; the curves follow.
  const CollectiveRate* inter = p->FindCollective(Collective::kAllReduce, Scope::kInterNode);
  ASSERT_NE(inter, nullptr);
  EXPECT_TRUE(inter->points.empty());
  EXPECT_TRUE(absl::StartsWith(inter->source, "reference profile (h100-sxm): "));
  const CollectiveRate* c128 = p->FindCollective(Collective::kAllReduce, Scope::kInterNode, 128, 4);
  ASSERT_NE(c128, nullptr);
  EXPECT_NE(c128->source.find("09_gb200x128"), std::string::npos);
  // A log of other hardware is noted.
  bool noted = false;
  for (const auto& n : p->notes) {
    noted |= absl::StrContains(n, "(gb200), the profile is for h100-sxm; imported anyway (--allow-other-gpu)");
  }
  EXPECT_TRUE(noted);
  // What was not imported keeps the reference, marked.
  EXPECT_TRUE(absl::StartsWith(p->hbm_source, "reference profile (h100-sxm): "));
  EXPECT_TRUE(absl::StartsWith(p->gemm[0].source, "reference profile (h100-sxm): "));
}

TEST(TraceLens, FiftySixH100ShapesAndTheirRates) {
  std::vector<TraceLensGemm> all;
  for (const auto& e : std::filesystem::directory_iterator(kData + "gemm")) {
    absl::StatusOr<std::vector<TraceLensGemm>> rows = ReadTraceLensGemmCsv(e.path().string());
    ASSERT_TRUE(rows.ok()) << rows.status();
    all.insert(all.end(), rows->begin(), rows->end());
  }
  ASSERT_EQ(all.size(), 56u);
  int bf16 = 0;
  for (const TraceLensGemm& g : all) {
    bf16 += g.dtype_known && g.dtype == DType::kBF16;
    // 2BMNK / median time against TraceLens's own median TFLOP/s, which adds the bias (MN) and
    // takes the median of per-call rates: within 1/(2K) (the bias) + 2%.
    const double tl = g.tracelens_median_flops_per_s;
    if (tl > 0 && g.MedianFlopsPerS() > 1e9) {
      EXPECT_NEAR(g.MedianFlopsPerS(), tl, tl * ((g.bias ? 1.0 / (2 * g.k) : 0) + 0.02))
          << g.op << " " << g.m << "x" << g.n << "x" << g.k;
    }
  }
  EXPECT_EQ(bf16, 55);  // one fp32 bmm (Qwen)
  // Wan2.1 addmm 32256 x 8960 x 1536: 1148.374 us -> 773.4 TFLOP/s in the report.
  auto it = std::find_if(all.begin(), all.end(), [](const TraceLensGemm& g) { return g.m == 32256 && g.n == 8960; });
  ASSERT_NE(it, all.end());
  EXPECT_NEAR(it->MedianFlopsPerS() / 1e12, 2.0 * 32256 * 8960 * 1536 / it->median_kernel_time_s / 1e12, 1e-9);
  EXPECT_NEAR(it->MedianFlopsPerS() / 1e12, 773.4, 773.4 * 0.01);
  // Batched rows fold the batch into m.
  std::vector<GemmRatePoint> pts = GemmPointsFromTraceLens(all, "x.csv");
  EXPECT_EQ(pts.size(), 56u);
  auto bmm = std::find_if(pts.begin(), pts.end(), [](const GemmRatePoint& p) { return p.m == 96 * 3137 && p.k == 64; });
  ASSERT_NE(bmm, pts.end());
  EXPECT_NE(bmm->source.find("batch folded into m"), std::string::npos);
}

TEST(TraceLens, ImportedShapesRoundTripThroughTheProfileJson) {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(kData + "gemm")) files.push_back(e.path().string());
  ImportOptions o;
  o.hardware = "h100-sxm";
  absl::StatusOr<ImportResult> r = ImportLogFiles(files, H100(), H100().reference_profile, true, o);
  ASSERT_TRUE(r.ok()) << r.status();
  v1::RateProfile back;
  ASSERT_TRUE(ParseMessage(ToJson(r->profile), SpecFormat::kJson, "p.json", &back).ok());
  absl::StatusOr<RateProfile> p = RateProfileFromProto(back, "profile");
  ASSERT_TRUE(p.ok()) << p.status();
  int bf16 = 0, fp32 = 0;
  for (const auto& g : p->gemm) {
    if (g.dtype == DType::kBF16) {
      ++bf16;
      EXPECT_GT(g.m, 0);  // the reference's flat bf16 rate is replaced
      EXPECT_TRUE(absl::StrContains(g.source, "TraceLens GEMM.csv"));
    }
    fp32 += g.dtype == DType::kFP32;
  }
  EXPECT_EQ(bf16, 55);
  EXPECT_EQ(fp32, 1);
  for (const auto& g : p->gemm) {
    if (g.dtype == DType::kFP8) {
      EXPECT_TRUE(absl::StartsWith(g.source, "reference profile (h100-sxm): "));
    }
  }
}

// mamf-finder's summary as its finish() prints it (ml-engineering mamf-finder.py), with the
// numbers of the H100 SXM row of its results table (794.5 TFLOPS at 2048x2048x13312).
constexpr char kMamfOld[] = R"(
Benchmark started on 2025-05-03 06:17:43

** Command line:
/usr/bin/python ./mamf-finder.py --dtype bfloat16 --m_range 0 16384 1024 --n_range 0 16384 1024 --k_range 0 16384 1024

** Dtype: torch.bfloat16

** Platform/Device info:
- Linux node 6.8.0 #1 SMP x86_64
- _CudaDeviceProperties(name='NVIDIA H100 80GB HBM3', major=9, minor=0, total_memory=81090MB, multi_processor_count=132)

Warming up the accelerator for 30 secs ... accelerator warmup finished
     1 |  702.1(mean)  703.0(median)  710.4(max) @ 1024x1024x1024      | best:  702.1(mean)  703.0(median)  710.4(max) TFLOPS
     2 |  794.5(mean)  795.0(median)  801.0(max) @ 2048x2048x13312    | best:  794.5(mean)  795.0(median)  801.0(max) TFLOPS

Tried  2 shapes => the best outcomes were:
mean:   794.5 TFLOPS @ 2048x2048x13312 (MxNxK)
median: 795.0 TFLOPS @ 2048x2048x13312 (MxNxK)
max:    801.0 TFLOPS @ 2048x2048x13312 (MxNxK)

geomean: 746.9 TFLOPS for 2 shapes in range: m=[0, 16384, 1024] | n=[0, 16384, 1024] | k=[0, 16384, 1024]

Legend: TFLOPS = 10**12 FLOPS
Elapsed time: 0:01:10
)";

// The later summary (the H200 example of the benchmarks README).
constexpr char kMamfNew[] = R"(** Dtype: torch.float8_e4m3fn
Grid search: sweeping 24 shapes (scout 20 iters / 8 warmup), then confirm ...
     #  MxNxK                mean median    max   best     W   MHz
    18  3072x2816x20480     828.4  828.6  831.6  828.4   506  1980  <- best mean
Tried 24 shapes => the best outcomes were:
MAMF (max achievable,  boost burst): 842 TFLOPS @ 3072x2816x20480 (MxNxK)  172W 1980MHz
MSMF (max sustainable, saturated):   722 TFLOPS @ 3072x2816x8192 (MxNxK)  681W 1612MHz
)";

TEST(MamfFinder, RowsSummaryAndDtype) {
  absl::StatusOr<MamfLog> a = ParseMamfFinderLog(kMamfOld, "gpu0.txt");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->dtype, DType::kBF16);
  ASSERT_EQ(a->shapes.size(), 2u);
  EXPECT_EQ(a->shapes[1].k, 13312);
  EXPECT_DOUBLE_EQ(a->shapes[1].mean_flops_per_s, 794.5e12);
  EXPECT_EQ(a->headline_kind, "mean");
  EXPECT_DOUBLE_EQ(a->headline.mean_flops_per_s, 794.5e12);
  EXPECT_NE(a->device.find("H100 80GB HBM3"), std::string::npos);
  absl::StatusOr<MamfLog> b = ParseMamfFinderLog(kMamfNew, "h200.txt");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->dtype, DType::kFP8);
  ASSERT_EQ(b->shapes.size(), 1u);
  EXPECT_DOUBLE_EQ(b->shapes[0].mean_flops_per_s, 828.4e12);
  EXPECT_EQ(b->headline_kind, "MSMF");  // the sustained figure, not the boost burst
  EXPECT_EQ(b->headline.k, 8192);
  // No dtype: an error naming the file.
  std::string no_dtype = kMamfOld;
  no_dtype.replace(no_dtype.find("** Dtype: torch.bfloat16"), 24, "");
  no_dtype.replace(no_dtype.find("--dtype bfloat16"), 16, "");
  EXPECT_TRUE(absl::StartsWith(ParseMamfFinderLog(no_dtype, "g.txt").status().message(), "g.txt: no '** Dtype:'"));
  // A rate or a dimension that is not a number in range: an error naming the line (std::stod /
  // std::stoll threw before).
  for (const char* row : {"  0 | .(mean) 1(median) 1(max) @ 8192x8192x8192\n",
                          "  0 | 1.2.3(mean) 1(median) 1(max) @ 8192x8192x8192\n",
                          "  0 | 1(mean) 1(median) 1(max) @ 99999999999999999999999x8192x8192\n"}) {
    absl::StatusOr<MamfLog> bad = ParseMamfFinderLog(absl::StrCat("** Dtype: torch.bfloat16\n", row), "m.txt");
    ASSERT_FALSE(bad.ok()) << row;
    EXPECT_TRUE(absl::StartsWith(bad.status().message(), "m.txt:2: ")) << bad.status();
  }
  // Two GPUs: the slowest GPU's rate per shape goes into the profile.
  std::string slower = kMamfOld;
  slower.replace(slower.find("794.5(mean)"), 11, "780.0(mean)");
  ImportOptions o;
  o.hardware = "h100-sxm";
  absl::StatusOr<ImportResult> r =
      ImportLogTexts({{"gpu0.txt", kMamfOld}, {"gpu1.txt", slower}}, H100(), H100().reference_profile, true, o);
  ASSERT_TRUE(r.ok()) << r.status();
  bool found = false;
  for (const auto& g : r->profile.gemm()) {
    if (g.k() == 13312) {
      found = true;
      EXPECT_DOUBLE_EQ(g.flops_per_s(), 780.0e12);
      EXPECT_NE(g.source().find("gpu0.txt line 15, gpu1.txt line 15"), std::string::npos) << g.source();
    }
  }
  EXPECT_TRUE(found);
}

// Over a reference whose compute rates only bound its part's (the 500 W HBM2e H100:
// compute_rate_low_fraction 835/989), the imported GEMM points are the part's own: the profile
// keeps the bound for what it took from the reference, and the interval's slow end
// (ComputeRatesScaled) scales the reference's points and not the imported ones.
TEST(MamfFinder, ImportedPointsOverABoundedReferenceAreNotScaled) {
  auto c = Catalog::Builtin();
  absl::StatusOr<Hardware> hw = c->FindHardware("h100-sxm-96gb");
  ASSERT_TRUE(hw.ok()) << hw.status();
  std::string log = kMamfOld;
  log.replace(log.find("H100 80GB HBM3"), 14, "H100 SXM 96GB HBM2e");
  ImportOptions o;
  o.hardware = "h100-sxm-96gb";
  absl::StatusOr<ImportResult> r = ImportLogTexts({{"gpu0.txt", log}}, *hw, hw->reference_profile, true, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->profile.compute_rate_low_fraction(), 835.0 / 989.0, 0.0005);
  EXPECT_TRUE(absl::StartsWith(r->profile.compute_rate_low_source(), "reference profile (")) << r->profile.compute_rate_low_source();
  absl::StatusOr<RateProfile> p = RateProfileFromProto(r->profile, "p");
  ASSERT_TRUE(p.ok()) << p.status();
  Job job;
  job.profile = *p;
  const Job slow = ComputeRatesScaled(job, 0.5);
  int imported = 0, reference = 0;
  for (size_t i = 0; i < job.profile.gemm.size(); ++i) {
    const GemmRatePoint& g = job.profile.gemm[i];
    if (g.origin == RateOrigin::kImported) {
      ++imported;
      EXPECT_EQ(slow.profile.gemm[i].flops_per_s, g.flops_per_s);
    } else {
      ++reference;
      EXPECT_EQ(slow.profile.gemm[i].flops_per_s, 0.5 * g.flops_per_s);
    }
  }
  EXPECT_GT(imported, 0);
  EXPECT_GT(reference, 0);
  EXPECT_EQ(slow.profile.attention_flops_per_s, 0.5 * job.profile.attention_flops_per_s);  // from the reference
}

// BabelStream 5.0's table with the A100-SXM4-40GB (ALCF Polaris) figures of
// tests/data/real_data/microbench/gemm_hbm_results.md (Copy 1400.3 GB/s).
constexpr char kBabel[] = R"(BabelStream
Version: 5.0
Implementation: CUDA
Running kernels 100 times
Precision: double
Array size: 268.4 MB (=0.3 GB)
Total size: 805.3 MB (=0.8 GB)
Using CUDA device NVIDIA A100-SXM4-40GB
Driver: 12020
Memory: DEFAULT
Init: 0.074212 s (=10851.405716 MBytes/sec)
Read: 0.193847 s (=4154.305017 MBytes/sec)
Function    MBytes/sec  Min (sec)   Max         Average
Copy        1400303.062 0.00038     0.00039     0.00039
Mul         1360403.129 0.00039     0.00040     0.00040
Add         1369640.305 0.00059     0.00059     0.00059
Triad       1377522.103 0.00058     0.00059     0.00059
Dot         1353500.231 0.00040     0.00046     0.00045
)";

TEST(BabelStream, TableCsvAndTriadOnly) {
  absl::StatusOr<BabelStreamLog> a = ParseBabelStreamLog(kBabel, "polaris.txt");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_NEAR(a->bytes_per_s.at("copy"), 1400.303062e9, 1);
  EXPECT_NEAR(a->bytes_per_s.at("triad"), 1377.522103e9, 1);
  EXPECT_EQ(a->line.at("copy"), 14);
  EXPECT_EQ(a->device, "NVIDIA A100-SXM4-40GB");
  // The same run with --csv --mibibytes.
  const char* csv = "function,num_times,n_elements,sizeof,max_mibytes_per_sec,min_runtime,max_runtime,avg_runtime\n"
                    "Copy,100,33554432,8,1335433.4,0.00038,0.00039,0.00039\n";
  absl::StatusOr<BabelStreamLog> b = ParseBabelStreamLog(csv, "c.csv");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NEAR(b->bytes_per_s.at("copy"), 1335433.4 * 1048576, 1);
  absl::StatusOr<BabelStreamLog> c = ParseBabelStreamLog("BabelStream\nRunning triad 100 times\nBandwidth (GB/s):  1377.522\n", "t.txt");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_NEAR(c->bytes_per_s.at("triad"), 1377.522e9, 1);
  // A row cut short.
  std::string cut = kBabel;
  cut = cut.substr(0, cut.find(" 0.00059     0.00059\nDot"));
  EXPECT_TRUE(absl::StartsWith(ParseBabelStreamLog(cut, "p.txt").status().message(), "p.txt:17: truncated BabelStream row"));
  // Into the profile: HBM from Copy.
  ImportOptions o;
  o.hardware = "a100-40gb";
  auto hw = Catalog::Builtin()->FindHardware("a100-40gb");
  absl::StatusOr<ImportResult> r = ImportLogTexts({{"polaris.txt", kBabel}}, *hw, hw->reference_profile, true, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->profile.hbm_bandwidth_bytes_per_s(), 1400.303062e9, 1);
  EXPECT_NE(r->profile.hbm_source().find("polaris.txt line 14"), std::string::npos);
}

// nvbandwidth's output in its format (README): one slow link (150.05 GB/s); SUM = the sum of the cells.
constexpr char kNvbw[] = R"(nvbandwidth Version: v0.8
Built from Git version: v0.8

NOTE: This tool reports current measured bandwidth on your system.
Running device_to_device_memcpy_write_ce.
memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)
          0         1         2         3
0       N/A    276.07    276.36    276.14
1    276.19       N/A    276.29    276.29
2    276.30    150.05       N/A    276.11
3    276.21    276.19    276.09       N/A

SUM device_to_device_memcpy_write_ce 3188.29

Running device_local_copy.
memcpy local GPU(column) bandwidth (GB/s)
           0         1
 0    612.40    598.72

SUM device_local_copy 1211.12
)";

TEST(Nvbandwidth, MatricesSumsAndTheProfile) {
  absl::StatusOr<NvbandwidthLog> a = ParseNvbandwidthLog(kNvbw, "nvbw.txt");
  ASSERT_TRUE(a.ok()) << a.status();
  const NvbandwidthTest& d2d = a->tests.at("device_to_device_memcpy_write_ce");
  ASSERT_EQ(d2d.matrix.size(), 4u);
  double sum = 0;
  for (const auto& row : d2d.matrix)
    for (const auto& c : row) sum += c.value_or(0);
  EXPECT_NEAR(sum, *d2d.sum, 0.01);  // nvbandwidth's own SUM line
  EXPECT_NEAR(d2d.MedianCellBytesPerS(), 276.19e9, 1e6);
  EXPECT_NEAR(a->tests.at("device_local_copy").MedianCellBytesPerS(), 605.56e9, 1e6);
  // A test that never finishes.
  std::string cut = kNvbw;
  cut = cut.substr(0, cut.find("SUM device_local_copy"));
  EXPECT_NE(ParseNvbandwidthLog(cut, "n.txt").status().message().find("never printed its SUM line"), std::string::npos);
  // Into the profile: HBM = 2 x the local copy (counted once); send/recv intra-node from the P2P copies.
  ImportOptions o;
  o.hardware = "h100-sxm";
  absl::StatusOr<ImportResult> r = ImportLogTexts({{"nvbw.txt", kNvbw}}, H100(), H100().reference_profile, true, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->profile.hbm_bandwidth_bytes_per_s(), 2 * 605.56e9, 1e6);
  bool sendrecv = false;
  for (const auto& c : r->profile.collectives()) {
    if (c.collective() == v1::COLLECTIVE_SEND_RECV && c.scope() == v1::SCOPE_INTRA_NODE) {
      sendrecv = true;
      EXPECT_NEAR(c.busbw_bytes_per_s(), 276.19e9, 1e6);
      EXPECT_NE(c.source().find("nvbw.txt line 5"), std::string::npos) << c.source();
    }
  }
  EXPECT_TRUE(sendrecv);
}


// ---------------------------------------------------------------------------------------------
// Round 3 (gpu code review 2; reliability review 2 N4, N9): the six public logs of
// tests/data/real_data/microbench/logs_2026_11_27 (SOURCES.md there) and the reliability
// reproducers of tests/data/reliability_inputs_2.

const std::string kNew = kData + "logs_2026_11_27/";
const std::string kHostile = std::string(STEPCAST_SOURCE_DIR) + "/tests/data/reliability_inputs_2/";

// The log's own rows, read independently of the importer: every line that is not a comment and
// has 13 whitespace cells; (size, out-of-place time s, out-of-place busbw B/s).
struct OwnRow {
  double size, time_s, busbw;
};
std::vector<OwnRow> OwnRows(const std::string& text) {
  std::vector<OwnRow> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<std::string> c;
    for (std::string w; ls >> w;) c.push_back(w);
    if (c.size() != 13 || c[0][0] == '#') continue;
    out.push_back({std::stod(c[0]), std::stod(c[5]) * 1e-6, std::stod(c[7]) * 1e9});
  }
  return out;
}

ImportResult ImportOne(const std::string& path, const std::string& hardware = "h100-sxm") {
  auto hw = Catalog::Builtin()->FindHardware(hardware);
  ImportOptions o;
  o.hardware = hardware;
  absl::StatusOr<ImportResult> r = ImportLogFiles({path}, *hw, hw->reference_profile, true, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : ImportResult{};
}

RateProfile ThroughJson(const ImportResult& r) {
  v1::RateProfile back;
  EXPECT_TRUE(ParseMessage(ToJson(r.profile), SpecFormat::kJson, "profile.json", &back).ok());
  absl::StatusOr<RateProfile> p = RateProfileFromProto(back, "profile");
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : RateProfile{};
}

// gpu code review 2, N1: a partial-range log (256 MiB-2 GiB, 512 MiB-8 GiB, 32 KiB-32 MiB)
// replaced the reference's full curve; the model then held its smallest time below it (a 1 MiB
// all-reduce over 8 H100s 40x too slow, +15% step time for TP 8). Now the curve is the union: the
// log's points where it measured (each within 3% of the log's own busbw), the reference's points
// unchanged outside, every point marked with its origin. Before the fix the 1 MiB time through
// the n05 profile was 1118.6 us (the 256 MiB time) against the reference's 27.8 us.
TEST(Merge, PartialRangeLogsKeepTheReferenceOutsideTheirSizes) {
  struct Case {
    const char* file;
    Scope scope;
    int64_t ranks, per_node;
  };
  for (const Case& c : {Case{"n05_h100x8_nvlink_allreduce_256M_2G.txt", Scope::kIntraNode, 8, 0},
                        Case{"n06_h100x16_k8s_ib_allreduce_512M_8G.txt", Scope::kInterNode, 16, 8},
                        Case{"n08_x8_allreduce_headerless_excerpt.txt", Scope::kIntraNode, 8, 0}}) {
    SCOPED_TRACE(c.file);
    const std::vector<OwnRow> rows = OwnRows(Read(kNew + c.file));
    ASSERT_GE(rows.size(), 4u);
    const RateProfile p = ThroughJson(ImportOne(kNew + c.file));
    const CollectiveRate* merged = p.FindCollective(Collective::kAllReduce, c.scope, c.ranks, c.per_node);
    const CollectiveRate* ref =
        H100().reference_profile.FindCollective(Collective::kAllReduce, c.scope, c.ranks, c.per_node);
    ASSERT_NE(merged, nullptr);
    ASSERT_NE(ref, nullptr);
    ASSERT_GE(ref->points.size(), 2u);
    // At the log's sizes: its own busbw (nccl-tests: busbw = S / t x 2(n-1)/n) within 3%.
    const double factor = 2.0 * (c.ranks - 1) / c.ranks;
    std::vector<double> dev;
    for (const OwnRow& r : rows) {
      const CollectiveEstimate e = EstimateCollective(*merged, c.ranks, r.size, c.per_node);
      EXPECT_FALSE(e.extrapolated) << r.size << ": " << e.reason;
      EXPECT_NEAR(r.size / e.time_s * factor / r.busbw, 1.0, 0.03) << r.size;
      dev.push_back(std::fabs(r.size / e.time_s * factor / r.busbw - 1));
    }
    int imported = 0;
    for (const auto& q : merged->points) imported += q.origin == RateOrigin::kImported;
    std::printf("%-42s %zu rows; merged %zu points (%d imported); busbw vs the log's column: max %.2f%% median %.2f%%\n",
                c.file, rows.size(), merged->points.size(), imported, 100 * Quantile(dev, 1.0), 100 * Quantile(dev, 0.5));
    // Outside them: the reference's points, unchanged, and marked as the reference's.
    const double lo = rows.front().size, hi = rows.back().size;
    int outside = 0;
    for (const CollectivePoint& q : merged->points) {
      if (q.size_bytes >= lo && q.size_bytes <= hi) {
        EXPECT_EQ(q.origin, RateOrigin::kImported) << q.size_bytes;
        continue;
      }
      ++outside;
      EXPECT_EQ(q.origin, RateOrigin::kReference) << q.size_bytes;
      const auto it = std::find_if(ref->points.begin(), ref->points.end(),
                                   [&](const CollectivePoint& x) { return x.size_bytes == q.size_bytes; });
      ASSERT_NE(it, ref->points.end()) << q.size_bytes;
      EXPECT_DOUBLE_EQ(q.time_s, it->time_s) << q.size_bytes;
    }
    // Every reference size outside the log's range is still there (nothing dropped on these logs).
    int ref_outside = 0;
    for (const CollectivePoint& q : ref->points) ref_outside += q.size_bytes < lo || q.size_bytes > hi;
    EXPECT_EQ(outside, ref_outside);
    // The sizes of TP all-reduces below the log (1, 16, 64 MiB): the reference's time exactly,
    // where the log does not reach (the review's figure: 1118.6 us at 1 MiB before).
    for (double s : {1.0 * (1 << 20), 16.0 * (1 << 20), 64.0 * (1 << 20)}) {
      if (s >= lo) continue;
      EXPECT_DOUBLE_EQ(EstimateCollective(*merged, c.ranks, s, c.per_node).time_s,
                       EstimateCollective(*ref, c.ranks, s, c.per_node).time_s)
          << s;
    }
    // alpha: the floor of the sizes <= 4 KiB (the reference's), never a 256 MiB time.
    EXPECT_LT(merged->alpha_s, 100e-6);
  }
  // The n05 figure of the review: 1 MiB through the profile is the reference's 27.8 us.
  const RateProfile p = ThroughJson(ImportOne(kNew + "n05_h100x8_nvlink_allreduce_256M_2G.txt"));
  const CollectiveRate* r = p.FindCollective(Collective::kAllReduce, Scope::kIntraNode, 8, 0);
  EXPECT_NEAR(EstimateCollective(*r, 8, 1 << 20).time_s, 27.8e-6, 0.1e-6);
}

// MergeCollectives on hand-made curves: a base curve faster than the log above its range is
// dropped at the junction (a larger message never takes less time on one cluster), up to the
// first base point that agrees; without a base curve of the group, the base's alpha-beta estimate
// is sampled at factors of 2 outside the log's sizes (time = alpha + S x 2(n-1)/n / busbw).
TEST(Merge, JunctionsAndTheAlphaBetaBase) {
  CollectiveRate base;
  base.collective = Collective::kAllReduce;
  base.scope = Scope::kIntraNode;
  base.group_size = 8;
  base.origin = RateOrigin::kReference;
  base.points = {{1e6, 10e-6, RateOrigin::kReference},
                 {2e6, 20e-6, RateOrigin::kReference},
                 {16e6, 30e-6, RateOrigin::kReference},   // faster than the log's 8e6 point: dropped
                 {32e6, 40e-6, RateOrigin::kReference},   // still not above 50 us: dropped
                 {64e6, 80e-6, RateOrigin::kReference}};  // agrees: kept
  CollectiveRate log = base;
  log.origin = RateOrigin::kImported;
  log.points = {{4e6, 25e-6, RateOrigin::kImported}, {8e6, 50e-6, RateOrigin::kImported}};
  std::vector<std::string> notes;
  std::vector<CollectiveRate> out = MergeCollectives({base}, {log}, &notes);
  ASSERT_EQ(out.size(), 1u);
  std::vector<double> sizes;
  for (const auto& q : out[0].points) sizes.push_back(q.size_bytes);
  EXPECT_EQ(sizes, (std::vector<double>{1e6, 2e6, 4e6, 8e6, 64e6}));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("dropped 0 below and 2 above"), std::string::npos) << notes[0];
  // With the log's own repeat spread as tolerance (here 70%: 30 us is within 50 x (1 - 0.7)),
  // the junction points are kept.
  out = MergeCollectives({base}, {log}, nullptr, {0.7});
  EXPECT_EQ(out[0].points.size(), 7u);

  // An alpha-beta base (no curve): alpha 20 us, busbw 100 GB/s; a log of 4-8 MB.
  CollectiveRate ab;
  ab.collective = Collective::kAllGather;
  ab.scope = Scope::kIntraNode;
  ab.group_size = 8;
  ab.alpha_s = 20e-6;
  ab.busbw_bytes_per_s = 100e9;
  ab.origin = RateOrigin::kReference;
  CollectiveRate ag = log;
  ag.collective = Collective::kAllGather;
  ag.points = {{4194304, 60e-6, RateOrigin::kImported}, {8388608, 100e-6, RateOrigin::kImported}};
  out = MergeCollectives({ab}, {ag});
  ASSERT_EQ(out.size(), 1u);  // intra-node: the curve replaces the alpha-beta entry...
  const CollectiveRate& m = out[0];
  EXPECT_EQ(m.points.front().size_bytes, 8);  // ...and covers what it covered: 8 B ...
  EXPECT_EQ(m.points.back().size_bytes, 16.0 * (1ull << 30));  // ... to 16 GiB
  for (const auto& q : m.points) {
    if (q.origin == RateOrigin::kImported) continue;
    EXPECT_EQ(q.origin, RateOrigin::kReference);
    // all-gather over 8: busbw factor 7/8 (nccl-tests doc/PERFORMANCE.md).
    EXPECT_NEAR(q.time_s, 20e-6 + q.size_bytes * 0.875 / 100e9, 1e-15) << q.size_bytes;
  }
  EXPECT_DOUBLE_EQ(m.alpha_s, 20e-6 + 8 * 0.875 / 100e9);  // the floor of the sizes <= 4 KiB
  // A curve without a size <= 4 KiB and no base: no latency floor is made up (0, "not measured").
  EXPECT_EQ(CurveFromPoints(Collective::kAllReduce, Scope::kIntraNode, 8, 0, log.points, "x").alpha_s, 0);
}

// gpu code review 2, N3: BabelStream and mamf-finder logs of another GPU were imported into an
// H100 profile without a word (b03: HBM 547.8 GB/s of an RTX 2080 Ti; m01: an AMD Radeon's
// GEMM table). Now refused naming both; imported with --allow-other-gpu, noted. Before the fix
// all three imported with exit 0.
TEST(GpuCheck, LogsOfAnotherGpuAreRefusedNamingBoth) {
  struct Case {
    const char* file;
    const char* gpu;
  };
  for (const Case& c : {Case{"b03_rtx2080ti_babelstream_v4.txt", "NVIDIA GeForce RTX 2080 Ti"},
                        Case{"m01_gfx1151_mamf_bf16_v2.txt", "AMD Radeon Graphics"},
                        Case{"m03_rtx5090_mamf_bf16_outputfile_excerpt.txt", "NVIDIA GeForce RTX 5090"}}) {
    SCOPED_TRACE(c.file);
    ImportOptions o;
    o.hardware = "h100-sxm";
    absl::StatusOr<ImportResult> r = ImportLogFiles({kNew + c.file}, H100(), H100().reference_profile, true, o);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(absl::StrCat("'", c.gpu, "'")), std::string::npos) << r.status();
    EXPECT_NE(r.status().message().find("the profile is for h100-sxm"), std::string::npos) << r.status();
    o.allow_other_gpu = true;
    r = ImportLogFiles({kNew + c.file}, H100(), H100().reference_profile, true, o);
    ASSERT_TRUE(r.ok()) << r.status();
    bool noted = false;
    for (const auto& n : r->profile.notes()) noted |= absl::StrContains(n, "imported anyway (--allow-other-gpu)");
    EXPECT_TRUE(noted);
  }
  // An nccl-tests log of other hardware (its rank lines' GPU, or its header's).
  ImportOptions o;
  o.hardware = "h100-sxm";
  absl::StatusOr<ImportResult> r = ImportLogFiles({kData + "nccl/04_b200x16_lambda_ib_allreduce.txt"}, H100(),
                                                  H100().reference_profile, true, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("(b200), but the profile is for h100-sxm"), std::string::npos) << r.status();
  // The same GPU passes: the n05 rank lines name an H100 80GB HBM3.
  EXPECT_TRUE(ImportLogFiles({kNew + "n05_h100x8_nvlink_allreduce_256M_2G.txt"}, H100(), H100().reference_profile,
                             true, o)
                  .ok());
}

// gpu code review 2, N2: mamf-finder prints each row with end="\r". A terminal copy (m01) keeps
// only the last row, and the importer took it (25.6 TF at 13312x15360x6144) over the summary
// (35.1 TF at 15360x3072x1024); a stdout capture joins every row with "\r" on one line and the
// importer read only the first. Now rows split at "\r", and the summary is used when the log
// holds fewer rows than the "Tried N shapes" it reports.
TEST(MamfFinder, SummaryOfATerminalCopyAndRowsJoinedByCarriageReturns) {
  absl::StatusOr<MamfLog> m01 = ParseMamfFinderLog(Read(kNew + "m01_gfx1151_mamf_bf16_v2.txt"), "m01");
  ASSERT_TRUE(m01.ok()) << m01.status();
  EXPECT_EQ(m01->tried_shapes, 3375);
  EXPECT_EQ(m01->shapes.size(), 1u);
  EXPECT_TRUE(m01->use_summary);
  EXPECT_EQ(m01->device_name, "AMD Radeon Graphics");
  ImportOptions o;
  o.hardware = "h100-sxm";
  o.allow_other_gpu = true;
  absl::StatusOr<ImportResult> r =
      ImportLogFiles({kNew + "m01_gfx1151_mamf_bf16_v2.txt"}, H100(), H100().reference_profile, true, o);
  ASSERT_TRUE(r.ok()) << r.status();
  int bf16 = 0;
  for (const auto& g : r->profile.gemm()) {
    if (g.dtype() != v1::D_TYPE_BF16) continue;
    ++bf16;
    EXPECT_DOUBLE_EQ(g.flops_per_s(), 35.1e12);  // the summary's "mean: 35.1 TFLOPS @ 15360x3072x1024"
    EXPECT_EQ(g.m(), 15360);
    EXPECT_EQ(g.n(), 3072);
    EXPECT_EQ(g.k(), 1024);
  }
  EXPECT_EQ(bf16, 1);
  // m03's three rows as stdout holds them: one line, joined by "\r" (mamf-finder.py:501).
  std::string m03 = Read(kNew + "m03_rtx5090_mamf_bf16_outputfile_excerpt.txt");
  std::string joined;
  for (absl::string_view line : absl::StrSplit(m03, '\n')) {
    const bool row = !line.empty() && absl::ascii_isdigit(static_cast<unsigned char>(line[0]));
    joined += std::string(line);
    joined += row ? "\r" : "\n";
  }
  absl::StatusOr<MamfLog> cr = ParseMamfFinderLog(joined, "m03_stdout");
  ASSERT_TRUE(cr.ok()) << cr.status();
  ASSERT_EQ(cr->shapes.size(), 3u);
  EXPECT_DOUBLE_EQ(cr->shapes[0].mean_flops_per_s, 93.5e12);
  EXPECT_DOUBLE_EQ(cr->shapes[2].mean_flops_per_s, 141.8e12);
  EXPECT_FALSE(cr->use_summary);  // no summary: the rows
  EXPECT_EQ(cr->device_name, "NVIDIA GeForce RTX 5090");
}

// gpu code review 2, N12: logs without nccl-tests' header and with a neutral file name were
// refused (5 of 8 public logs); a file of two runs was refused. Now the binary comes from the
// rows (reduction op, root, busbw/algbw), every run of a file is read, and the ranks of a
// single-process log come from its "# nThread 1 nGpus 8" header.
TEST(NcclTestsLog, HeaderlessMultiRunAndSingleProcessLogs) {
  const std::string n08 = Read(kNew + "n08_x8_allreduce_headerless_excerpt.txt");
  absl::StatusOr<NcclTestsLog> a = ParseNcclTestsLog(n08, "log.txt", {});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->binary, "all_reduce_perf");
  EXPECT_EQ(a->binary_from, "the rows (reduction op 'sum', busbw/algbw)");
  EXPECT_EQ(a->ranks, 8);  // 300.51 / 171.72 = 1.750 = 2 (n-1) / n
  // Two runs in one file: n05's then n06's (a job log that appends each run).
  const std::string two = Read(kNew + "n05_h100x8_nvlink_allreduce_256M_2G.txt") +
                          "./build/all_reduce_perf -b 512M -e 8G -f 2 -g 1\n" +
                          Read(kNew + "n06_h100x16_k8s_ib_allreduce_512M_8G.txt");
  absl::StatusOr<std::vector<NcclTestsLog>> runs = ParseNcclTestsLogs(two, "job.log", {});
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[0].ranks, 8);
  EXPECT_EQ((*runs)[0].nodes, 1);
  EXPECT_EQ((*runs)[1].ranks, 16);
  EXPECT_EQ((*runs)[1].nodes, 2);
  EXPECT_EQ((*runs)[1].Name(), "job.log (run 2)");
  EXPECT_EQ((*runs)[1].rows.size(), 5u);
  // The one-run reader says where the second run starts.
  absl::StatusOr<NcclTestsLog> one = ParseNcclTestsLog(two, "job.log", {});
  ASSERT_FALSE(one.ok());
  EXPECT_NE(one.status().message().find("2 runs in one log"), std::string::npos) << one.status();
  // Two headerless runs pasted together (the size goes down): both read; imported as two logs of
  // one key, the median at each size.
  absl::StatusOr<std::vector<NcclTestsLog>> pasted = ParseNcclTestsLogs(n08 + n08, "pasted.txt", {});
  ASSERT_TRUE(pasted.ok()) << pasted.status();
  EXPECT_EQ(pasted->size(), 2u);
  // sendrecv (busbw = algbw for any n) from one process: nThread 1 x nGpus 8.
  const std::string sr = "# nThread 1 nGpus 8 minBytes 134217728 maxBytes 268435456 step: 2(factor) warmup iters: 5 "
                         "iters: 20 agg iters: 1 validation: 1 graph: 0\n"
                         "#\n"
                         "   134217728      33554432     float     sum      -1    687.2  195.31  195.31      0    687.0  195.37  195.37      0\n"
                         "   268435456      67108864     float     sum      -1   1374.0  195.37  195.37      0   1373.9  195.38  195.38      0\n"
                         "# Avg bus bandwidth    : 195.36\n";
  absl::StatusOr<NcclTestsLog> s = ParseNcclTestsLog(sr, "sendrecv_perf.log", {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->ranks, 8);
  EXPECT_EQ(s->ranks_from, "the '# nThread' header (one process: nThread x nGpus)");
  EXPECT_EQ(s->nodes, 1);
  // Rows only, after the command line "-g 8" (gpu code review 2, N12: n04 needed --ranks).
  const std::string rows_only = "./build/sendrecv_perf -b 128M -e 256M -f 2 -g 8\n" + sr.substr(sr.find("   134217728"));
  absl::StatusOr<NcclTestsLog> g8 = ParseNcclTestsLog(rows_only, "x.log", {});
  ASSERT_TRUE(g8.ok()) << g8.status();
  EXPECT_EQ(g8->ranks, 8);
  EXPECT_EQ(g8->ranks_from, "the command line's -t x -g (one process)");
  // The same under mpirun: the header's nGpus is per process, so the ranks are not known.
  absl::StatusOr<NcclTestsLog> m = ParseNcclTestsLog("mpirun -np 8 ./sendrecv_perf -g 1\n" + sr, "x.log", {});
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("pass --ranks"), std::string::npos) << m.status();
  // Rows whose busbw equals algbw with a reduction: sendrecv, or all_reduce over 2 ranks.
  absl::StatusOr<NcclTestsLog> amb = ParseNcclTestsLog(sr, "x.log", {});
  ASSERT_FALSE(amb.ok());
  EXPECT_NE(amb.status().message().find("sendrecv, or all_reduce over 2 ranks"), std::string::npos) << amb.status();
}

// reliability review 2, N4 and N9 (tests/data/reliability_inputs_2): std::regex over untrusted
// text crashed (a 30 KB word, 100 KB of whitespace or a 100 KB --dtype: SIGSEGV) or took 33 s (a
// 25 KB "# hardware:" of digits); impossible logs were imported with exit 0; /dev/zero was read
// to the memory limit and a FIFO blocked. Each is now read or refused for its reason.
TEST(Hostile, ReproducersAreReadOrRefusedForTheirReason) {
  struct Case {
    const char* file;
    const char* error;  // nullptr: imported
  };
  const std::vector<Case> cases = {
      {"nccl_long_word_30k.txt", "truncated: no '# Avg bus bandwidth' footer"},  // SIGSEGV before
      {"nccl_hw_digits_25k.txt", nullptr},                                      // 33.5 s before
      {"mamf_ws_100k.txt", nullptr},                                            // SIGSEGV before
      {"mamf_dtype_long_100k.txt", "is not one stepcast models"},               // SIGSEGV before
      {"babel_copy_tiny.txt", "below 1% of h100-sxm's datasheet"},  // (an A100 log: --allow-other-gpu)
      {"nccl_ranks_header_huge.txt", "99999999999 is not a collective's group"},
      {"nccl_ranks_one.txt", "ranks (from header line 3): 1 is not a collective's group"},
      {"mamf_dims_huge.txt", "not a shape that ran"},
      {"nccl_time_1e308.txt", "is not size / time"},
      {"nccl_size_huge.txt", "size '999999999999999999999999999999' is out of range"},
      {"nvbw_ragged.txt", "a matrix row of 11 cells under 2 column indices"},
      {"nccl_one_row.txt", nullptr},
      {"babel_xss_device.txt", "'<script>alert(1)</script>' (no hardware preset matches it)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    ImportOptions o;
    o.hardware = "h100-sxm";
    o.allow_other_gpu = std::string(c.file) == "babel_copy_tiny.txt";
    absl::StatusOr<ImportResult> r = ImportLogFiles({kHostile + c.file}, H100(), H100().reference_profile, true, o);
    if (c.error == nullptr) {
      EXPECT_TRUE(r.ok()) << r.status();
    } else {
      ASSERT_FALSE(r.ok());
      EXPECT_NE(r.status().message().find(c.error), std::string::npos) << r.status();
    }
  }
  // One row (16 GiB): merged into the reference curve; the latency floor stays the reference's
  // 8 B-4 KiB floor (it was the 16 GiB time, 62.6 ms).
  ImportOptions o;
  o.hardware = "h100-sxm";
  absl::StatusOr<ImportResult> one =
      ImportLogFiles({kHostile + "nccl_one_row.txt"}, H100(), H100().reference_profile, true, o);
  ASSERT_TRUE(one.ok()) << one.status();
  const RateProfile p = ThroughJson(*one);
  const CollectiveRate* r = p.FindCollective(Collective::kAllReduce, Scope::kIntraNode, 8, 0);
  ASSERT_NE(r, nullptr);
  EXPECT_LT(r->alpha_s, 20e-6);
  EXPECT_EQ(r->points.back().origin, RateOrigin::kImported);
  // Not regular files: refused before reading (a FIFO would block, /dev/zero never ends).
  for (const char* path : {"/dev/zero", "/dev/null"}) {
    absl::StatusOr<ImportResult> z = ImportLogFiles({path}, H100(), H100().reference_profile, true, o);
    ASSERT_FALSE(z.ok());
    EXPECT_NE(z.status().message().find("not a regular file"), std::string::npos) << z.status();
  }
  const std::string fifo = ::testing::TempDir() + "/calib_fifo";
  std::filesystem::remove(fifo);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  absl::StatusOr<ImportResult> f = ImportLogFiles({fifo}, H100(), H100().reference_profile, true, o);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("not a regular file"), std::string::npos) << f.status();
  std::filesystem::remove(fifo);
  // A file above the limit.
  const std::string big = ::testing::TempDir() + "/calib_big.txt";
  {
    std::ofstream out(big);
    out << std::string(kMaxLogBytes + 1, '#');
  }
  absl::StatusOr<ImportResult> b = ImportLogFiles({big}, H100(), H100().reference_profile, true, o);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("limit"), std::string::npos) << b.status();
  std::filesystem::remove(big);
}

// gpu code review 2, N9 / issue 25 item 4: the profile has a schema version and its provenance as
// fields; the reader accepts older versions (no format_version: version 1) and refuses newer ones
// naming both versions; per-rate origins round-trip; a malformed origins list names its field.
TEST(Schema, VersionProvenanceAndOrigins) {
  const ImportResult r = ImportOne(kNew + "n05_h100x8_nvlink_allreduce_256M_2G.txt");
  EXPECT_EQ(r.profile.format_version(), kRateProfileFormatVersion);
  const v1::ProfileProvenance& v = r.profile.provenance();
  EXPECT_EQ(v.tool(), "stepcast-calibrate import");
  EXPECT_FALSE(v.tool_version().empty());
  EXPECT_EQ(v.created_utc().size(), 20u);  // "2026-11-27T10:00:00Z"
  EXPECT_EQ(v.gpu_name(), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(v.gpu_count(), 8);
  EXPECT_EQ(v.host_count(), 1);
  EXPECT_EQ(v.base(), "reference profile h100-sxm");
  ASSERT_EQ(v.imported_files_size(), 1);
  EXPECT_EQ(r.profile.gemm_origins_size(), r.profile.gemm_size());
  EXPECT_EQ(r.profile.gemm_origins(0), v1::RATE_ORIGIN_REFERENCE);
  EXPECT_EQ(r.profile.hbm_origin(), v1::RATE_ORIGIN_REFERENCE);
  const RateProfile p = ThroughJson(r);
  EXPECT_EQ(p.format_version, kRateProfileFormatVersion);
  EXPECT_EQ(p.provenance.gpu_count, 8);
  EXPECT_EQ(p.collectives[0].points[0].origin, RateOrigin::kReference);
  EXPECT_EQ(p.collectives[0].points.back().origin, RateOrigin::kReference);
  int imported = 0;
  for (const auto& q : p.collectives[0].points) imported += q.origin == RateOrigin::kImported;
  EXPECT_EQ(imported, 4);
  // Older: the committed example profiles (written before the version field) read as version 1.
  absl::StatusOr<RateProfile> old =
      LoadRateProfile(std::string(STEPCAST_SOURCE_DIR) + "/examples/profiles/h100-sxm-device-2026-11-25.json");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->format_version, 0);
  EXPECT_EQ(old->gemm[0].origin, RateOrigin::kUnknown);
  // Newer, with a field this stepcast does not know: the version is named, not the field.
  std::string json = ToJson(r.profile);
  ASSERT_NE(json.find("\"format_version\": 2,"), std::string::npos);
  json.replace(json.find("\"format_version\": 2,"), 20, "\"format_version\": 3, \"measured_by\": \"x\",");
  const std::string path = ::testing::TempDir() + "/newer_profile.json";
  {
    std::ofstream out(path);
    out << json;
  }
  absl::StatusOr<RateProfile> newer = LoadRateProfile(path);
  ASSERT_FALSE(newer.ok());
  EXPECT_NE(newer.status().message().find(
                "format_version: 3 is newer than this stepcast reads (profile schema versions 1 to 2)"),
            std::string::npos)
      << newer.status();
  std::filesystem::remove(path);
  // Newer without unknown fields (the service's PutProfile, a binary proto): the same refusal.
  v1::RateProfile proto = r.profile;
  proto.set_format_version(3);
  absl::StatusOr<RateProfile> n2 = RateProfileFromProto(proto, "profile");
  ASSERT_FALSE(n2.ok());
  EXPECT_TRUE(absl::StartsWith(n2.status().message(), "profile.format_version: 3 is newer")) << n2.status();
  // Origins that do not match the rates they describe.
  proto = r.profile;
  proto.add_gemm_origins(v1::RATE_ORIGIN_MEASURED);
  absl::StatusOr<RateProfile> bad = RateProfileFromProto(proto, "profile");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StartsWith(bad.status().message(), "profile.gemm_origins: ")) << bad.status();
}

}  // namespace
}  // namespace stepcast::calibrate
