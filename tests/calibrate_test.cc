// Calibration math on CPU: sample summaries, nccl-tests bandwidths, the piecewise alpha-beta fit
// and the GEMM size fit against synthetic samples with known parameters, stragglers, sweeps.
#include <random>

#include "calibrate/collective_harness.h"
#include "calibrate/fits.h"
#include "calibrate/iterations.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"

namespace stepcast::calibrate {
namespace {

TEST(Summarize, MedianPercentilesBest) {
  const v1::SampleSummary s = Summarize({5, 1, 4, 2, 3, 10, 6, 7, 8, 9});
  EXPECT_EQ(s.count(), 10);
  EXPECT_DOUBLE_EQ(s.median_s(), 5.5);
  EXPECT_DOUBLE_EQ(s.best_s(), 1);
  EXPECT_DOUBLE_EQ(s.p10_s(), 2);
  EXPECT_DOUBLE_EQ(s.p90_s(), 9);
}

TEST(Bandwidth, NcclTestsDefinitions) {
  // nccl-tests doc/PERFORMANCE.md: all-reduce of 1 GiB per rank on 8 ranks in 5 ms:
  // algbw = S/t = 214.7 GB/s, busbw = algbw x 2(n-1)/n = 375.8 GB/s.
  const double S = 1 << 30, t = 5e-3;
  EXPECT_NEAR(AlgBw(S, t) / 1e9, 214.748, 1e-3);
  EXPECT_NEAR(BusBw(Collective::kAllReduce, 8, S, t) / 1e9, 214.748 * 1.75, 1e-3);
  // all-gather / reduce-scatter / all-to-all: (n-1)/n of the total size; send/recv: 1.
  EXPECT_NEAR(BusBw(Collective::kAllGather, 8, S, t) / AlgBw(S, t), 0.875, 1e-12);
  EXPECT_NEAR(BusBw(Collective::kSendRecv, 2, S, t) / AlgBw(S, t), 1.0, 1e-12);
}

TEST(AlphaBeta, RecoversAPiecewiseModelFromNoisySamples) {
  // Known truth: a 12 us floor; below 64 KiB busbw 20 GB/s; 64 KiB-4 MiB 25 us + 150 GB/s;
  // above, 40 us + 360 GB/s; 2% multiplicative noise.
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(1.0, 0.02);
  const int n = 8;
  auto truth = [&](double S) {
    const double f = BusBwFactor(Collective::kAllReduce, n);
    if (S < 64 * 1024) return 12e-6 + S * f / 20e9;
    if (S < 4 * 1024 * 1024) return 25e-6 + S * f / 150e9;
    return 40e-6 + S * f / 360e9;
  };
  std::vector<std::pair<double, double>> st;
  for (double S = 8; S <= 8.0 * (1 << 30); S *= 2) st.push_back({S, truth(S) * noise(rng)});
  const AlphaBetaFit fit = FitAlphaBeta(st, Collective::kAllReduce, n);
  EXPECT_NEAR(fit.alpha_s, 12e-6, 0.05 * 12e-6);
  ASSERT_EQ(fit.segments.size(), 3u);
  EXPECT_NEAR(fit.segments[1].busbw_bytes_per_s(), 150e9, 0.05 * 150e9);
  EXPECT_NEAR(fit.segments[2].busbw_bytes_per_s(), 360e9, 0.03 * 360e9);
  EXPECT_NEAR(fit.segments[2].alpha_s(), 40e-6, 20e-6);
  EXPECT_NEAR(fit.busbw_bytes_per_s, 360e9, 0.03 * 360e9);
  EXPECT_LT(fit.median_relative_error, 0.03);
  EXPECT_NEAR(FitTime(fit, Collective::kAllReduce, n, 1 << 30), truth(1 << 30), 0.03 * truth(1 << 30));
}

TEST(GemmFit, RecoversTheSaturationCurve) {
  const double r_max = 720e12, f_half = 4e10;
  std::vector<std::pair<double, double>> fr;
  for (double m : {256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0}) {
    const double f = 2 * m * m * m;
    fr.push_back({f, r_max * f / (f + f_half)});
  }
  const GemmSizeFit fit = FitGemmRate(fr);
  EXPECT_NEAR(fit.r_max_flops_per_s, r_max, 1e-6 * r_max);
  EXPECT_NEAR(fit.f_half_flops, f_half, 1e-6 * f_half);
  EXPECT_NEAR(fit.Rate(2.0 * 3000 * 3000 * 3000), r_max * 5.4e10 / (5.4e10 + f_half), 1e6);
}

// The H200's --quick bf16 sweep (2026-11-27, docs/CALIBRATION.md): 26 GEMMs from 137 to 7,697
// GFLOP, all past the knee, the larger ones at lower clocks under the power cap, so the rate does
// not rise with size and the fit has no knee. The summary says so; the full sweep's fit has one.
TEST(GemmFit, SummaryLineSaysWhenTheSweepHasNoKnee) {
  const std::vector<std::pair<double, double>> quick = {
      {137.4e9, 669.9e12}, {137.4e9, 786.6e12}, {171.8e9, 713.9e12}, {481.0e9, 711.9e12},
      {962.1e9, 674.4e12}, {1099.5e9, 675.2e12}, {1374.4e9, 698.1e12}, {3848.3e9, 666.2e12},
      {7696.6e9, 670.4e12}};
  const GemmSizeFit fit = FitGemmRate(quick);
  EXPECT_EQ(fit.f_half_flops, 0.0);
  v1::GemmSizeFit record;
  record.set_dtype(v1::D_TYPE_BF16);
  record.set_r_max_flops_per_s(fit.r_max_flops_per_s);
  record.set_f_half_flops(fit.f_half_flops);
  record.set_median_relative_error(0.03);
  EXPECT_EQ(DescribeGemmFit(record),
            absl::StrFormat("GEMM bf16 by size: r_max %.1f TF, no small-GEMM knee in the measured sizes (the rate "
                            "does not fall below them) (fit error 3.0%%)",
                            fit.r_max_flops_per_s / 1e12));
  record.set_r_max_flops_per_s(691.3e12);
  record.set_f_half_flops(4.04e9);
  record.set_median_relative_error(0.023);
  EXPECT_EQ(DescribeGemmFit(record), "GEMM bf16 by size: r_max 691.3 TF, half rate at 4.04 GFLOP per GEMM (fit error 2.3%)");
}

// Worked by hand from the defaults (30 timed / 10 warm-up at most, 0.15 s / 0.05 s budgets, at
// least 5 timed and 2 warm-up runs).
TEST(Iterations, LongRunsGetFewerIterationsWithinTheBudget) {
  const BenchOptions o;
  EXPECT_EQ(TimedIterations(o, 1e-3), 30);   // 150 wanted, capped
  EXPECT_EQ(WarmupIterations(o, 1e-3), 10);  // 50 wanted, capped
  EXPECT_EQ(TimedIterations(o, 10e-3), 15);
  EXPECT_EQ(WarmupIterations(o, 10e-3), 5);
  EXPECT_EQ(TimedIterations(o, 90e-3), 5);   // 1.7 wanted, floor of 5
  EXPECT_EQ(WarmupIterations(o, 90e-3), 2);
  const BenchOptions quick{5, 15};
  EXPECT_EQ(TimedIterations(quick, 1e-3), 15);
  EXPECT_EQ(WarmupIterations(quick, 1e-3), 5);
}

TEST(Sweep, SizesByFactorsOfTwoSplittable) {
  const auto s = SweepSizes(Collective::kReduceScatter, 8, 4.0 * (1ull << 30), 8);
  EXPECT_EQ(s.front(), 32);  // 8 bytes rounded up to 8 ranks x 4-byte floats
  EXPECT_EQ(s.back(), 4.0 * (1ull << 30));
  for (size_t i = 1; i < s.size(); ++i) EXPECT_EQ(std::fmod(s[i], 32), 0);
  EXPECT_EQ(s.size(), 28u);  // 32 B .. 4 GiB
}

TEST(Sweep, FitsBecomeProfileRatesTheModelUses) {
  std::vector<v1::CollectiveSample> samples;
  for (double S = 1024; S <= (1 << 26); S *= 2) {
    v1::CollectiveSample s;
    s.set_collective(v1::COLLECTIVE_ALL_GATHER);
    s.set_scope(v1::SCOPE_INTRA_NODE);
    s.set_ranks(4);
    s.set_size_bytes(S);
    s.mutable_time()->set_median_s(10e-6 + S * 0.75 / 100e9);
    s.set_backend("synthetic");
    samples.push_back(s);
  }
  const SweepFits f = FitSweep(samples, 0);
  ASSERT_EQ(f.rates.size(), 1u);
  const CollectiveRate& r = f.rates[0];
  EXPECT_EQ(r.group_size, 4);
  EXPECT_EQ(r.points.size(), 17u);
  // busbw of the largest size: 64 MiB x 0.75 / (10 us + 64 MiB x 0.75 / 100 GB/s).
  const double big = 1 << 26;
  EXPECT_NEAR(r.busbw_bytes_per_s, big * 0.75 / (10e-6 + big * 0.75 / 100e9), 1e3);
  EXPECT_NEAR(r.alpha_s, 10e-6 + 1024 * 0.75 / 100e9, 1e-9);
  // The core model reads the measured curve back at this group size.
  EXPECT_NEAR(CollectiveTime(r, 4, 1 << 20), 10e-6 + (1 << 20) * 0.75 / 100e9, 1e-9);
}

}  // namespace
}  // namespace stepcast::calibrate
