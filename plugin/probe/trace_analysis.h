// File: plugin/probe/trace_analysis.h
//
// What the run probe does with the kernel activity of a training process, as pure functions so
// they are tested on recorded or synthetic streams: classify kernels by name, find the training
// steps, and account each step's time by category with overlap.
#ifndef STEPCAST_PLUGIN_PROBE_TRACE_ANALYSIS_H_
#define STEPCAST_PLUGIN_PROBE_TRACE_ANALYSIS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "stepcast/v1/probe.pb.h"

namespace stepcast::probe {

enum class KernelCategory : uint8_t { kGemm = 0, kAttention, kCommunication, kMemory, kElementwise };
constexpr int kCategoryCount = 5;
const char* CategoryName(KernelCategory c);

// Category of a kernel from its (mangled or demangled) name, as CUDA 13 tools report them:
//   communication  ncclKernel_* / ncclDevKernel_* (HTA's rule)
//   memory         CUPTI memcpy/memset records ("Memcpy ...", "Memset ..."), copy kernels
//   attention      flash_fwd/flash_bwd (FlashAttention 2/3), cuDNN/TE fused attention (sdpa,
//                  fmha, fprop/bprop "flash"), triton _attn_fwd/_attn_bwd, efficient_attention
//   gemm           cuBLAS/cuBLASLt/CUTLASS: nvjet*, *xmma_gemm*, *gemm*, cutlass*tensorop*,
//                  *s16816gemm*, *_gemv*, cublas*
//   elementwise    everything else (norms, activations, optimizer, casts, softmax, ...)
KernelCategory ClassifyKernel(absl::string_view name);
// "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv", "broadcast" or
// "other" for an NCCL kernel name; "" otherwise.
std::string CollectiveOf(absl::string_view name);

// One kernel (or memcpy/memset) on the GPU timeline, nanoseconds.
struct KernelRecord {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t name_id = 0;  // index into the caller's name table
  KernelCategory category = KernelCategory::kElementwise;
  uint8_t collective = 0;  // index into kCollectives + 1 for communication kernels, else 0
};
extern const char* const kCollectives[6];
uint8_t CollectiveIndex(absl::string_view collective);

struct TimeRange {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

// Step starts (GPU ns) from NVTX step ranges: each range's step begins at the first kernel that
// starts at or after the range's start. Assumes the loop synchronises once per step (the loss
// read-back or the optimizer step), so the CPU cannot run a whole step ahead of the GPU.
// `kernels` sorted by start.
std::vector<int64_t> StepStartsFromRanges(const std::vector<KernelRecord>& kernels,
                                          const std::vector<TimeRange>& ranges);

// Step starts from the period of the kernel sequence: the smallest period P >= min_period for
// which at least 90% of the last kernels repeat P positions later; steps start at the kernel,
// within the first period, preceded by the largest idle gap (the step's synchronisation).
// NotFound when no period repeats.
struct PeriodResult {
  int64_t period = 0;
  std::vector<int64_t> starts;
};
absl::StatusOr<PeriodResult> StepStartsFromPeriod(const std::vector<KernelRecord>& kernels, int64_t min_period = 4,
                                                  int64_t max_period = 20000);

// Accounting of the window [start_ns, end_ns): busy (union) seconds per category, exposed
// communication (communication union minus its intersection with the union of all compute
// categories), idle (window minus the union of everything), per-collective busy seconds.
v1::StepMeasurement AnalyzeWindow(const std::vector<KernelRecord>& kernels, int64_t start_ns, int64_t end_ns);

struct ReportOptions {
  int warmup_steps = 2;
};
// Steps between consecutive starts (the last start closes the last step), warm-up steps left
// out, the median filled. `step_source` is recorded as given.
v1::ProbeReport BuildReport(const std::vector<KernelRecord>& kernels, const std::vector<int64_t>& step_starts,
                            const std::string& step_source, const ReportOptions& options);

// Median of each field over the steps.
v1::StepMeasurement MedianStep(const google::protobuf::RepeatedPtrField<v1::StepMeasurement>& steps);

// Ranks merged into one run: step i's time and categories are those of the slowest rank at
// step i (the step ends when the slowest rank does); steps present on every rank only.
absl::StatusOr<v1::ProbeReport> MergeRanks(const std::vector<v1::ProbeReport>& ranks);

}  // namespace stepcast::probe

#endif  // STEPCAST_PLUGIN_PROBE_TRACE_ANALYSIS_H_
