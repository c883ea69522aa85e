// File: calibrate/fits.h
//
// Plain C++ (tested on CPU): summaries of repeated timings, nccl-tests bandwidths, the piecewise
// alpha-beta fit of collective sweeps, the GEMM rate-by-size fit, and straggler detection.
#ifndef STEPCAST_CALIBRATE_FITS_H_
#define STEPCAST_CALIBRATE_FITS_H_

#include <string>
#include <utility>
#include <vector>

#include "core/hardware.h"
#include "stepcast/v1/calibration.pb.h"

namespace stepcast::calibrate {

// median, p10, p90 (nearest rank) and best (minimum) of timings in seconds.
v1::SampleSummary Summarize(std::vector<double> times_s);
// The GEMM's times alone and beside the competitor into a contention sample (calibration.proto
// ContentionSample): both summarized, slowdown = median beside / median alone - 1.
void SetContentionTimes(std::vector<double> alone_s, std::vector<double> beside_s, v1::ContentionSample* c);

// nccl-tests (doc/PERFORMANCE.md): algbw = S / t with S as nccl-tests counts it (per-rank
// buffer for all-reduce; the total for all-gather, reduce-scatter, all-to-all; the message for
// send/recv); busbw = algbw x BusBwFactor(c, n).
double AlgBw(double size_bytes, double time_s);
double BusBw(Collective c, int64_t ranks, double size_bytes, double time_s);

// Piecewise alpha-beta fit of a collective's sweep (sizes ascending, median times):
//   alpha (the latency floor) = the smallest median time among sizes <= 4 KiB (or the first
//   four sizes), as the calibration methods recommend, not a large-size intercept;
//   segments split at 64 KiB and 4 MiB (NCCL's LL / LL128 / Simple regimes): each fits
//   time = a + S x factor / busbw by least squares on relative error (weights 1/t^2); the first
//   segment keeps a = alpha; a negative intercept is refitted with a = alpha.
struct AlphaBetaFit {
  double alpha_s = 0;
  double busbw_bytes_per_s = 0;  // of the largest-size segment
  std::vector<v1::AlphaBetaSegment> segments;
  double median_relative_error = 0;
};
AlphaBetaFit FitAlphaBeta(const std::vector<std::pair<double, double>>& size_time, Collective c, int64_t ranks);
// Time of a size from a fit (the segment holding it; the last beyond the sweep).
double FitTime(const AlphaBetaFit& fit, Collective c, int64_t ranks, double size_bytes);

// GEMM rate by size: rate(F) = r_max x F / (F + f_half), F = 2mnk FLOPs (small GEMMs pay a fixed
// cost worth f_half FLOPs). Least squares of 1/rate = 1/r_max + (f_half / r_max) / F, weighted by
// relative error. Used to fill shapes between and beyond the measured ones.
struct GemmSizeFit {
  double r_max_flops_per_s = 0;
  double f_half_flops = 0;
  double Rate(double flops) const { return r_max_flops_per_s * flops / (flops + f_half_flops); }
};
GemmSizeFit FitGemmRate(const std::vector<std::pair<double, double>>& flops_rate);
// The run summary's line for one dtype's fit, e.g. "GEMM bf16 by size: r_max 691.3 TF, half rate
// at 4.04 GFLOP per GEMM (fit error 2.3%)". A fit without a knee (f_half 0: every measured GEMM
// past it, as in --quick's sweep, whose smallest bf16 GEMM is 137 GFLOP) says so instead of
// printing "half rate at 0.00 GFLOP".
std::string DescribeGemmFit(const v1::GemmSizeFit& fit);

// One GPU's figure (higher is better) and which GPU it is.
struct GpuValue {
  v1::GpuId id;
  double value = 0;
};
// GPUs whose value is more than `threshold` below the median of all of them (mamf-finder: >= 5%
// spread within a node; a synchronous job runs at its slowest GPU), named by host, CUDA index,
// PCI bus id and UUID, never by their position in a list. Fewer than 2 GPUs: none.
std::vector<v1::Straggler> FindStragglers(const std::vector<GpuValue>& per_gpu, const std::string& metric,
                                          double threshold = 0.05);

// Whether a CUPTI kernel time and a CUDA-event time of the same runs disagree beyond what the
// events' resolution (0.5 us, CUDA programming guide) and the launch gap between two kernels
// (~2 us) explain: |a - b| / b > 2% + 2.5 us / b.
bool CuptiDisagrees(double cupti_s, double event_s);

}  // namespace stepcast::calibrate

#endif  // STEPCAST_CALIBRATE_FITS_H_
