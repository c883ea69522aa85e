// File: core/hardware.h
//
// Hardware (datasheet figures) and rate profiles (usable rates measured by microbenchmarks).
// The model runs on a RateProfile; Hardware supplies peaks (for MFU), capacity, node size,
// power and price. Units: bytes, seconds, FLOP/s, bytes/s, watts, USD.
#ifndef STEPCAST_CORE_HARDWARE_H_
#define STEPCAST_CORE_HARDWARE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/dtype.h"

namespace stepcast {

enum class Collective { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kSendRecv };
enum class Scope { kIntraNode, kInterNode };

const char* CollectiveName(Collective c);
const char* ScopeName(Scope s);

// Where a rate in a profile came from (hardware.proto RateOrigin): measured by stepcast-calibrate
// on this cluster, imported from a benchmark log of this cluster, or kept from a hardware preset's
// reference profile (published figures). kUnknown: a profile written before origins were recorded.
enum class RateOrigin { kUnknown, kMeasured, kImported, kReference };
const char* RateOriginName(RateOrigin o);  // "unknown", "measured", "imported", "reference"

// One measured GEMM rate. m = n = k = 0 means a flat rate for every shape.
struct GemmRatePoint {
  DType dtype = DType::kBF16;
  int64_t m = 0, n = 0, k = 0;
  double flops_per_s = 0;
  std::string source;
  RateOrigin origin = RateOrigin::kUnknown;
};

struct CollectivePoint {
  double size_bytes = 0;
  double time_s = 0;
  RateOrigin origin = RateOrigin::kUnknown;
};

// A collective's cost in one scope, at one group size (and, across nodes, ranks per node).
//   measured form: the curve `points` (time per size, measured at group_size ranks with
//     ranks_per_node ranks on each node), interpolated between measured sizes (EstimateCollective);
//   alpha-beta form (Hockney; nccl-tests busbw): time(S, n) = alpha_s + S * BusBwFactor(c, n) / busbw,
//     used where there is no curve, and to extrapolate a curve to sizes and group sizes it does
//     not cover.
// busbw_bytes_per_s: with points, the nccl-tests busbw of the largest measured size; without, the
// rate of the alpha-beta form (across nodes in the reference profiles: per GPU NIC, which the
// step model stripes over the group's members per node).
struct CollectiveRate {
  Collective collective = Collective::kAllReduce;
  Scope scope = Scope::kIntraNode;
  int64_t group_size = 0;
  int64_t ranks_per_node = 0;  // of the measured points (inter-node); 0 = not known
  double alpha_s = 0;
  double busbw_bytes_per_s = 0;
  std::vector<CollectivePoint> points;
  std::string source;
  RateOrigin origin = RateOrigin::kUnknown;  // of alpha_s and busbw_bytes_per_s
};

// What a profile was made from (hardware.proto ProfileProvenance): machine-readable, beside the
// free-text sources. Empty strings and zero counts: not known.
struct ProfileProvenance {
  std::string tool;          // "stepcast-calibrate", "stepcast-calibrate import"
  std::string tool_version;  // the stepcast version that wrote it
  std::string created_utc;   // RFC 3339, e.g. "2026-11-27T10:00:00Z"
  std::string gpu_name;      // e.g. "NVIDIA H100 80GB HBM3"
  int64_t gpu_count = 0;     // GPUs measured (or the most ranks in the imported logs)
  int64_t host_count = 0;    // hosts measured (or the most nodes in the imported logs)
  std::vector<std::string> hosts;
  std::string driver_version, cuda_version, nccl_version;
  std::string base;                         // what unmeasured rates were kept from
  std::vector<std::string> imported_files;  // import: the logs, in order
};

// The profile schema version this stepcast writes (RateProfile.format_version). 1: profiles
// written before the field existed (format_version absent or 0); 2: provenance and rate origins.
// A reader accepts every version up to this one and refuses a newer one.
inline constexpr int kRateProfileFormatVersion = 2;

// A collective's estimated time, and whether (and why) it left the measured curve.
struct CollectiveEstimate {
  double time_s = 0;
  bool extrapolated = false;  // not between two measured points of this group size and layout
  std::string reason;         // empty when interpolated; otherwise what was assumed
};

// Usable rates of one cluster.
struct RateProfile {
  std::string name;
  std::string hardware;
  std::vector<GemmRatePoint> gemm;
  double attention_flops_per_s = 0;  // fused attention fwd+bwd; 0: use the GEMM rate
  std::string attention_source;
  double hbm_bandwidth_bytes_per_s = 0;
  std::string hbm_source;
  std::vector<CollectiveRate> collectives;
  std::vector<std::string> notes;
  // fp8 GEMMs with split accumulation (Transformer Engine's and torchao's dgrad and wgrad) run
  // at this fraction of the flat fp8 rate (fast accumulation, the forward's); 0: not known (1).
  // Used only where the profile has no measured fp8 shapes (core/gemm_model.h GemmShape).
  double fp8_split_accumulation_fraction = 0;
  std::string fp8_split_accumulation_source;
  // Where the GEMM and attention rates are an upper bound for the part (a variant whose clocks
  // are not published, e.g. a power-limited SKU given the full-power part's rates): the lowest
  // fraction of them it may sustain, in [0.1, 1]; 0: the rates are the part's own. Applies to the
  // rates not measured on the part (origin other than kMeasured / kImported) and the framework's
  // attention table; widens the step-time interval (core/interval.cc), never the point estimate.
  // hardware.proto field 13.
  double compute_rate_low_fraction = 0;
  std::string compute_rate_low_source;
  // The Mamba-2 SSD chunk scan's sustained rate (a hybrid's Mamba layers, core/step_time.cc
  // MambaMixer); 0: kSsdPeakFraction of the dense bf16 peak (core/step_time.h). Not measured by
  // stepcast-calibrate (no calibration kernel yet); given here, the interval does not widen for it
  // (else it holds the step at kSsdTritonShare of the default). hardware.proto field 15-16.
  double ssd_flops_per_s = 0;
  std::string ssd_source;
  // The host's own seconds per call of what a framework issues from a C++ loop, measured on this
  // profile's hosts (stepcast-calibrate's host-call pass, calibrate/gpu_bench.h BenchHostCalls):
  // a bare kernel launch, and a GEMM as Transformer Engine's cublas_gemm issues it per expert
  // (descriptors, heuristic query, cublasLtMatmul). Replace FrameworkSpec.launch's
  // looped_launch_overhead_s and gemm_call_overhead_s (core/step_time.cc LaunchFloor), unscaled by
  // Hardware::host_overhead_ratio; 0: the preset's. hardware.proto fields 17-19.
  double host_launch_call_s = 0;
  double host_gemm_call_s = 0;
  std::string host_calls_source;
  RateOrigin attention_origin = RateOrigin::kUnknown;
  RateOrigin hbm_origin = RateOrigin::kUnknown;
  int format_version = 0;  // as read (0: absent, a version-1 profile); written as kRateProfileFormatVersion
  ProfileProvenance provenance;
  // Measured overlap efficiencies by mechanism ("tp_comm", ...): replace the framework's.
  struct Overlap {
    std::string mechanism;
    double efficiency = 0;
    std::string source;
  };
  std::vector<Overlap> overlaps;
  // Measured slowdown of compute beside communication (hardware.proto ComputeContention):
  // duration(overlapped) / duration(alone) - 1.
  struct Contention {
    std::string compute;        // "gemm", "attention"
    std::string communication;  // "nccl", "deepep", "any"
    double slowdown = 0;
    int64_t samples = 0;
    std::string source;
  };
  std::vector<Contention> contention;
  // The slowdown of `compute` beside `communication`: the exact pair, else the pair with
  // communication "any", else 0 (none measured; found = false).
  struct ContentionLookup {
    double slowdown = 0;
    bool found = false;
  };
  ContentionLookup FindContention(std::string_view compute, std::string_view communication) const;

  struct GemmLookup {
    double flops_per_s = 0;
    bool extrapolated = false;  // outside the measured range of shapes, or dtype borrowed
    bool found = false;
    bool flat = false;  // a shape-independent rate (reference profiles)
  };
  // GEMM rate for dtype and an m x k by k x n product. Points of the dtype are interpolated
  // piecewise-linearly in log10(2mnk); outside their range the nearest end is used and the
  // lookup is marked extrapolated. BF16 and FP16 stand in for each other (same tensor-core
  // rate on every listed GPU), marked extrapolated.
  GemmLookup GemmRate(DType dtype, double m, double n, double k) const;

  // The rate entry for (collective, scope), or nullptr (the first such entry).
  const CollectiveRate* FindCollective(Collective c, Scope s) const;
  // The entry that best describes a group of n ranks with members_per_node on each node
  // (0 = not known): a measured curve at exactly n ranks (and, across nodes, the same ranks per
  // node) first; then an entry without a curve (the alpha-beta form, which the caller may stripe);
  // then the curve whose group size is nearest to n in log2 (extrapolated by EstimateCollective).
  // nullptr when the profile has no entry for (c, s).
  const CollectiveRate* FindCollective(Collective c, Scope s, int64_t n, int64_t members_per_node) const;
};

// Checks a profile: positive rates, known dtypes. Errors name "<prefix>.<field>".
absl::Status ValidateRateProfile(const RateProfile& p, const std::string& prefix);

// nccl-tests bus-bandwidth factor (doc/PERFORMANCE.md): busbw = algbw * factor, where algbw = S/t
// and S is the per-rank buffer for all-reduce, the total (gathered) size for all-gather,
// reduce-scatter and all-to-all. all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all
// (n-1)/n; send/recv 1.
double BusBwFactor(Collective c, int64_t n);

// Ring steps of a collective over n ranks: all-reduce 2(n-1), all-gather / reduce-scatter /
// all-to-all n-1, send/recv 1 (Thakur, Rabenseifner, Gropp 2005; NCCL tuning.cc).
double RingSteps(Collective c, int64_t n);
// Latency term for n ranks: alpha_s measured at group_size ranks, scaled by the ring steps
// (NCCL's latency model is per step); alpha_s itself when group_size is 0 or 1.
double AlphaForGroup(const CollectiveRate& rate, int64_t n);

// Estimated time of one collective over n ranks moving S bytes (S as nccl-tests counts it: the
// per-rank buffer for all-reduce, the total for all-gather / reduce-scatter / all-to-all, the
// message for send/recv), with members_per_node of the n ranks on each node (0 = not known).
//  * n <= 1 or S <= 0: 0.
//  * A curve (>= 2 points) at this group size (group_size 0 = any) and, across nodes, the same
//    ranks per node (or either not known): between two measured sizes, linear in S (each segment
//    of a measured curve is an alpha-beta line, Hockney: exact for an affine segment, which log-log
//    interpolation underestimates by up to 1.5% between sizes a factor of 2 apart); below the smallest size, that size's time (the latency
//    floor), flagged; above the largest, the last time plus the extra bytes at the curve's busbw
//    (nccl-tests busbw factor), flagged.
//  * A curve at another group size or layout: latency and bandwidth parts are scaled from it,
//    flagged: time = a0 x RingSteps(n)/RingSteps(g0) + max(0, T0(S x f(n)/f(g0)) - a0) x r0/m,
//    where T0 is the curve (as above), a0 its floor (its smallest time), f the nccl-tests busbw
//    factor (so busbw is held: nccl-tests doc/PERFORMANCE.md), RingSteps the per-step latency
//    count (NCCL src/graph/tuning.cc), and r0/m the NICs in use across nodes (r0 ranks per node
//    measured, m asked; only for inter-node curves with both known).
//  * No curve: the alpha-beta form with AlphaForGroup, flagged ("no measured curve").
// `explain` false leaves `reason` empty (the model's hot path asks for it once, for a warning);
// when explaining, `reason` starts with `reason_prefix` (the warning's own words, so that the
// warning is built in one string).
CollectiveEstimate EstimateCollective(const CollectiveRate& rate, int64_t n, double size_bytes,
                                      int64_t members_per_node = 0, bool explain = true,
                                      absl::string_view reason_prefix = {});

// EstimateCollective(rate, n, size_bytes).time_s (members per node not known).
double CollectiveTime(const CollectiveRate& rate, int64_t n, double size_bytes);

// Wave quantization of an m x n output on `sm_count` SMs (NVIDIA, "Matrix Multiplication
// Background User's Guide", wave and tile quantization): with 256 x 128 output tiles in the
// better of the two orientations (CUTLASS/cuBLAS's large tile on SM80/SM90), a GEMM of w waves
// keeps w / ceil(w) of the machine busy; below one wave split-K fills the SMs (1.0). Returns 1
// when sm_count <= 0. Applied only to flat rates, which are measured on well-quantized shapes
// (mamf-finder's best A100 shape, 1024 x 10240, is 2.96 waves; 8192^2 is 18.96).
double WaveEfficiency(double m, double n, int64_t sm_count);

// Datasheet figures of one accelerator and its usual node.
struct Hardware {
  std::string name;
  double peak_bf16_flops_per_s = 0;
  double peak_fp16_flops_per_s = 0;
  double peak_fp8_flops_per_s = 0;
  double peak_tf32_flops_per_s = 0;
  double peak_fp32_flops_per_s = 0;
  double hbm_capacity_bytes = 0;
  double hbm_bandwidth_bytes_per_s = 0;
  double intra_node_bandwidth_bytes_per_s = 0;
  double intra_node_latency_s = 0;
  double inter_node_bandwidth_bytes_per_s = 0;
  double inter_node_latency_s = 0;
  int64_t gpus_per_node = 8;
  int64_t sm_count = 0;  // 0: no wave quantization
  std::string architecture;  // GPU generation ("hopper", "cdna3", ...; HardwareSpec field 15); "" unknown
  // The host CPU's time per framework op relative to an x86 DGX H100 host (HardwareSpec field 16);
  // scales the framework's launch overheads (StepModel::LaunchFloor).
  double host_overhead_ratio = 1.0;
  double power_w = 0;
  double price_per_gpu_hour_usd = 0;
  std::vector<std::string> sources;
  RateProfile reference_profile;

  // Peak dense FLOP/s for a GEMM dtype (0 if the hardware has no such path, e.g. FP8 on A100).
  double PeakFlops(DType d) const;
};

absl::Status ValidateHardware(const Hardware& hw, const std::string& prefix);

}  // namespace stepcast

#endif  // STEPCAST_CORE_HARDWARE_H_
