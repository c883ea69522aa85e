// File: core/gemm_model.h
//
// Time of one GEMM on one GPU from its shape: tiles, waves, the HBM roofline, alignment, a
// per-kernel floor, and (where the rate profile has one) a table of measured shapes.
// Pure functions of the shape, the hardware and the rate profile: no I/O, no logging, no
// allocation per estimate (the table is built once, with the model).
//
// The analytic model (docs/MODEL.md "GEMM by shape" has the sources of every constant and the
// measured errors):
//   flops F = 2 B m n k;  bytes U = B ((m k + k n) e_in + m n e_out)   (A, B read once, C written
//     once; tile re-reads are L2 hits)
//   kernel: GEMV when m == 1 or n == 1 (cuBLAS gemv/dot kernels); otherwise a tiled tensor-core
//     kernel when n e_in and k e_in are multiples of 16 bytes (TMA's global-stride rule, cuBLAS's
//     alignment rule for tensor-core kernels), else an unaligned fallback kernel (the
//     cutlass_75/80 "align1"/"align2" kernels of the H100 traces)
//   tile (tm x tn): among 128x128, 256x128, 128x256 (and 128x64, 64x128, 64x64 when the
//     128x128 grid is under one wave or m or n < 128) the one with the least quantized work
//     waves * tm * tn, ties to the larger tile; fallback kernels 128x128
//   waves w = ceil(B ceil(m/tm) ceil(n/tn) / sm_count)
//   T_c = w * 2 tm tn k / (R / sm_count)      R: the profile's flat ("large GEMM") rate for dtype
//   T_m = U / (BW * f)                        BW: the profile's HBM bandwidth; f = 1, or
//                                             unaligned_bandwidth_fraction for fallback kernels
//   time = floor_s + (T_c^p + T_m^p)^(1/p)     p = overlap_exponent (p -> inf is the roofline max)
// With a table of measured shapes: a shape in the table takes its measured time; another shape
// takes the analytic time times the geometric mean of measured/analytic over its 3 nearest
// measured shapes (same dtype, same kernel kind where the table has one; distance: Euclidean in
// log2 m, log2 n, log2 k, log2 B), flagged outside_table when any of those four lies outside the
// measured range or the kernel kind had to be borrowed.
#ifndef STEPCAST_CORE_GEMM_MODEL_H_
#define STEPCAST_CORE_GEMM_MODEL_H_

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "core/dtype.h"
#include "core/hardware.h"

namespace stepcast {

// One GEMM: `batch` independent products C[m, n] = A[m, k] B[k, n] in `dtype` (inputs; the output
// is bf16 for fp8, int32 for int8, the input type otherwise). Row-major as PyTorch lays them out:
// the leading dimensions are k (A) and n (B, C), so n and k decide alignment; m never does.
// Dimensions may be fractional (averages); a fractional n or k counts as aligned.
struct GemmShape {
  DType dtype = DType::kBF16;
  double batch = 1;
  double m = 0, n = 0, k = 0;
  // fp8 with split (full-precision) accumulation instead of fast accumulation: how Transformer
  // Engine runs dgrad and wgrad (recipe MMParams use_split_accumulator=True for fp8_gemm_dgrad /
  // fp8_gemm_wgrad, False for fprop; linear.py _2X_ACC_FPROP = False, _2X_ACC_DGRAD = _2X_ACC_WGRAD
  // = True) and torchao Float8Linear's default grad_input / grad_weight GemmConfig (use_fast_accum
  // False; output True). Costed at RateProfile::fp8_split_accumulation_fraction of the flat fp8
  // rate when the profile has no measured fp8 shapes (a calibration sweep measures the backward
  // shapes this way already). Ignored for other dtypes.
  bool split_accumulation = false;
  // Bytes of C read plus D written per output element; 0: the output dtype's, written once. A
  // wgrad that accumulates into the main gradient (Megatron-Core gradient_accumulation_fusion,
  // TE fuse_wgrad_accumulation: beta = 1) reads and writes the gradient dtype: 2 x its bytes.
  double c_bytes_per_element = 0;
  // fp8 with MXFP8 block scaling (1x32 E8M0 scales on both operands; Transformer Engine
  // MXFP8BlockScaling, Blackwell): costed at kMxfp8GemmRateFraction of the per-tensor fp8 time's
  // compute term (a measured per-tensor shape: its time over that fraction). Ignored for other
  // dtypes.
  bool mx_block_scaled = false;
  // fp8 with row-wise scales (torchao's "rowwise" forward GEMM: torch._scaled_mm with per-row
  // scales, a CUTLASS kernel): kRowwiseGemmRateFraction of the per-tensor fp8 time's compute term,
  // as mx_block_scaled. Ignored for other dtypes.
  bool row_scaled = false;
};

// Row-wise-scaled fp8 GEMMs' throughput as a fraction of per-tensor (cuBLAS) fp8 GEMMs' on H100:
// the geometric mean over the three shapes of pytorch/FBGEMM PR #2764 (median microseconds, cuBLAS
// tensorwise / row-wise: 4176x12288x4096 310.3 / 317.5, 4176x4096x12288 330.4 / 363.5,
// 3456x6144x4096 131.9 / 132.1) = 0.9608; PyTorch's row-wise kernel came from it (pytorch/pytorch
// #147971: "most shapes within 90-100% of tensor-wise efficiency"). Taken for every GPU (Blackwell's
// CUTLASS row-wise template is called not optimal, pytorch/pytorch #153555; no same-run figure).
inline constexpr double kRowwiseGemmRateFraction = 0.9608;  // cbrt of the three ratios' product

// MXFP8 GEMMs' throughput as a fraction of per-tensor-scaled fp8 GEMMs', the kernels alone:
// Transformer Engine docs/examples/gemm_profiling/gemm_profiling.rst (NVIDIA/TransformerEngine
// @d0067d0, benchmarks/gemm/benchmark_gemm.py --pre-quantize on an NVIDIA B300, a 5B model's 12
// GEMMs of a layer at M = 15,872 tokens, hidden 4096, MLP 16384): per-layer FP8 current scaling
// 6.812 ms, MXFP8 7.161 ms -> 6.812 / 7.161 = 0.9513.
inline constexpr double kMxfp8GemmRateFraction = 6.812 / 7.161;

// The share of the per-tensor fp8 rate `s`'s scaling runs at: kMxfp8GemmRateFraction with
// mx_block_scaled, kRowwiseGemmRateFraction with row_scaled, 1 otherwise (and for every other
// dtype). One place for the analytic model, a measured shape and the flat-rate fallback.
inline double Fp8ScalingRateFraction(const GemmShape& s) {
  if (s.dtype != DType::kFP8) return 1.0;
  return (s.mx_block_scaled ? kMxfp8GemmRateFraction : 1.0) * (s.row_scaled ? kRowwiseGemmRateFraction : 1.0);
}

enum class GemmKernel : uint8_t {
  kTiled,              // tensor-core tiled kernel (sm90_xmma / CUTLASS), 16-byte aligned
  kUnalignedFallback,  // n or k not a multiple of 16 bytes: align1/align2 fallback kernels
  kGemv,               // m == 1 or n == 1: cuBLAS gemv / dot kernels
};
enum class GemmBound : uint8_t { kCompute, kMemory, kLatency };

const char* GemmKernelName(GemmKernel k);
const char* GemmBoundName(GemmBound b);

// The estimate of one GEMM. time_s is the answer; the rest says why.
struct GemmEstimate {
  double time_s = 0;
  double flops_per_s = 0;  // 2 B m n k / time_s
  double compute_s = 0;    // T_c: wave-quantized tile work at the flat rate (analytic, also in
                           // table mode)
  double memory_s = 0;     // T_m: A, B, C traffic at the HBM bandwidth (at BW x f when unaligned)
  double floor_s = 0;      // the per-kernel floor included in time_s
  double waves = 0;        // ceil'd waves of tiles (0: sm_count unknown, no quantization)
  int32_t tile_m = 0, tile_n = 0;  // 0 for GEMV
  GemmKernel kernel = GemmKernel::kTiled;
  GemmBound bound = GemmBound::kCompute;  // the larger of T_c, T_m, or the floor when larger
  bool dtype_borrowed = false;      // rate (or table points) of another dtype (bf16 <-> fp16 twin,
                                    // or another dtype's flat rate scaled by the peak ratio)
  bool outside_table = false;       // table mode: shape outside the measured range / kind
  bool unaligned_fallback = false;  // kernel == kUnalignedFallback
  bool from_table = false;          // table mode: this exact shape was measured
  bool table_scaled = false;        // table mode: analytic time x nearest measured ratio
  bool extrapolated() const { return dtype_borrowed || outside_table || unaligned_fallback; }
};

// The model's constants. Defaults: fitted on the 56 H100 shapes of
// tests/data/real_data/microbench/gemm/ (TraceLens perf reports) by the grid search of
// tests/gemm_model_test.cc (GemmModel.DefaultConstantsAreTheMicrobenchmarkFit), which also
// reports every shape predicted with constants fitted without it (leave-one-out).
struct GemmConstants {
  // Per-kernel floor: launch-to-end time of a GEMM kernel doing almost nothing (kernel launch,
  // prologue, one tile's load latency, epilogue, the ~0.8 us memset before each sm90 cuBLAS
  // kernel in the H100 traces).
  double floor_s = 4.7e-6;
  // p of the p-norm joining T_c and T_m: 1 = no overlap (sum), infinity = the roofline max.
  double overlap_exponent = 2.5;
  // Fraction of the HBM bandwidth the unaligned fallback kernels sustain (measured 0.81-1.16
  // TB/s of 2.9 on H100: no TMA, no 16-byte cp.async, 2-4 byte accesses).
  double unaligned_bandwidth_fraction = 0.40;
};

// A measured GEMM: a profile's per-shape point or a microbenchmark row.
struct GemmMeasurement {
  GemmShape shape;
  double time_s = 0;
};

class GemmModel {
 public:
  // From the hardware (sm_count, peaks, HBM bandwidth as a fallback) and the rate profile (flat
  // rates m = n = k = 0, per-shape points, HBM bandwidth). The profile's per-shape points become
  // the table (batch 1, time = 2 m n k / flops_per_s); a dtype with points but no flat rate takes
  // its best measured point as its flat rate (as mamf-finder reports a best shape). A dtype with
  // neither borrows: its bf16/fp16 twin, else another dtype's flat rate x peak ratio (flagged).
  // Errors (InvalidArgument, naming the field): no GEMM rate at all, no HBM bandwidth, a
  // negative sm_count, constants out of range.
  static absl::StatusOr<GemmModel> Create(const Hardware& hw, const RateProfile& profile,
                                          const GemmConstants& constants = {});

  // A copy of this model whose table is `points` (replacing the profile's). Errors name
  // "points[i]" (non-positive dimension or time). Allocates once.
  absl::StatusOr<GemmModel> WithTable(std::span<const GemmMeasurement> points) const;

  // The time of one GEMM (the table, if any, then the analytic model). Errors (InvalidArgument,
  // naming gemm.m / gemm.n / gemm.k / gemm.batch / gemm.dtype): a dimension that is not a finite
  // number > 0,
  // no rate for the dtype on this hardware (e.g. fp8 on A100). No allocation on success.
  absl::StatusOr<GemmEstimate> Estimate(const GemmShape& shape) const;
  // The same without a Status, for hot paths that only need to know whether the shape was
  // estimable: false (and `*out` untouched) exactly where Estimate() returns an error.
  bool TryEstimate(const GemmShape& shape, GemmEstimate* out) const;

  // The analytic model alone (ignores the table).
  absl::StatusOr<GemmEstimate> EstimateAnalytic(const GemmShape& shape) const;

  const GemmConstants& constants() const { return constants_; }
  double flat_flops_per_s(DType d) const { return flat_[static_cast<int>(d)]; }
  // The profile's fp8 split-accumulation fraction as used (1 when absent, or when the profile
  // has measured fp8 shapes, which carry it).
  double fp8_split_accumulation_fraction() const { return 1.0 / inv_fp8_split_; }
  double hbm_bytes_per_s() const { return hbm_bytes_per_s_; }
  int64_t sm_count() const { return sm_count_; }
  size_t table_size() const { return table_.size(); }

 private:
  static constexpr int kDTypes = 6;
  static constexpr int kKinds = 3;
  static constexpr int kCombineSteps = 256;
  struct TablePoint {
    float f[4] = {0, 0, 0, 0};  // log2 m, n, k, batch
    float log_ratio = 0;        // ln(measured / analytic)
    uint8_t dtype = 0, kernel = 0;
    GemmShape shape;
    double time_s = 0;
  };
  // Feature range of the points of one dtype (kind == kKinds: any kind).
  struct Range {
    int32_t count = 0;
    float lo[4], hi[4];
  };
  GemmEstimate Analytic(const GemmShape& s) const {  // shape and rate already checked
    GemmEstimate e;
    AnalyticInto(s, &e);
    return e;
  }
  void AnalyticInto(const GemmShape& s, GemmEstimate* out) const;  // *out reset and filled
  void Estimated(const GemmShape& s, GemmEstimate* out) const;  // Estimate() after the checks
  absl::Status Check(const GemmShape& s) const;
  // (1 + r^p)^(1/p) for r in [0, 1], linear between kCombineSteps + 1 samples.
  double CombineFactor(double r) const {
    const double x = r * kCombineSteps;
    const int i = static_cast<int>(x);
    const CombineTable& t = *combine_;
    return t[i] + (x - i) * (t[i + 1] - t[i]);
  }

  GemmConstants constants_;
  std::array<double, kDTypes> flat_{};  // flat rate per dtype (0: none)
  std::array<bool, kDTypes> flat_borrowed_{};
  std::array<double, kDTypes> inv_flat_{};  // 1 / flat_ (0: none)
  double inv_fp8_split_ = 1;          // 1 / the fraction in use (1: none, or fp8 shapes measured)
  double inv_fp8_split_profile_ = 1;  // 1 / the profile's fp8_split_accumulation_fraction (1: none)
  double hbm_bytes_per_s_ = 0;
  double inv_hbm_ = 0, inv_hbm_unaligned_ = 0, inv_sms_ = 0;
  int64_t sm_count_ = 0;
  using CombineTable = std::array<double, kCombineSteps + 2>;
  // Shared: the default exponent's table is built once per process; copying a model is cheap.
  std::shared_ptr<const CombineTable> combine_;
  std::vector<TablePoint> table_;
  std::array<std::array<Range, kKinds + 1>, kDTypes> ranges_{};
};

}  // namespace stepcast

#endif  // STEPCAST_CORE_GEMM_MODEL_H_
