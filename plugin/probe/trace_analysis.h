// File: plugin/probe/trace_analysis.h
//
// What stepcast does with the GPU activity of a training process, whether it comes from the
// run probe (CUPTI records) or from a Kineto / torch.profiler trace: classify kernels by name,
// find the training steps, and account each step's time by category with overlap. Pure
// functions, tested on recorded (tests/data/real_data/traces) and synthetic streams.
#ifndef STEPCAST_PLUGIN_PROBE_TRACE_ANALYSIS_H_
#define STEPCAST_PLUGIN_PROBE_TRACE_ANALYSIS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "stepcast/v1/probe.pb.h"

namespace stepcast::probe {

enum class KernelCategory : uint8_t {
  kGemm = 0,
  kAttention,
  kCommunication,
  kMemory,
  kElementwise,
  kConvolution,
};
constexpr int kCategoryCount = 6;
// "gemm", "attention", "communication", "memory_copy", "elementwise", "convolution".
const char* CategoryName(KernelCategory c);

// Category of a kernel from its (mangled or demangled) name as CUPTI, Kineto and Nsight report
// it. Rules, first match wins (each checked against the 540 real names of
// tests/data/real_data/traces/kernel_names_classified.tsv):
//   memory_copy    CUPTI/Kineto memcpy and memset records ("Memcpy ...", "Memset ...") only; copy
//                  *kernels* (dtype casts, index_copy) are elementwise work (HTA counts only the
//                  Memcpy/Memset records as memory: hta/common/trace_parser.py is_memory_kernel)
//   communication  NCCL (nccl*Kernel*, ncclDevKernel*), PyTorch symmetric-memory/custom all-reduce
//                  (multimem_all_reduce, two_shot_all_reduce, one_shot_all_reduce,
//                  cross_device_reduce), DeepEP dispatch/combine
//   attention      FlashAttention 2/3 (flash_fwd/flash_bwd, flash::), cuDNN/TE fused attention
//                  (sdpa, fmha, fused_attn), xformers/PyTorch efficient_attention, triton
//                  _attn_fwd/_attn_bwd, paged/KV-cache attention (reshape_and_cache, paged_attention)
//   convolution    cuDNN and CUTLASS convolutions: implicit-GEMM fprop/dgrad/wgrad (xmma,
//                  cutlass s1688fprop/dgrad/wgrad, ImplicitGemmConvolution), scudnn, winograd,
//                  fft convolutions, cudnn dgrad/wgrad engines and their offset/reduction helpers
//   gemm           cuBLAS/cuBLASLt/CUTLASS GEMMs (nvjet, *gemm*, gemv, s16816/s1688 tensorop, xmma),
//                  split-K reductions, Inductor/Triton matmul templates (triton_tem_*mm*, *_mm_*),
//                  MoE grouped GEMMs (fused_moe_kernel, grouped_gemm, moe finalize), cuBLAS epilogues
//   elementwise    everything else (norms, activations, optimizer, casts, reductions, softmax)
KernelCategory ClassifyKernel(absl::string_view name);

// "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv", "broadcast" or
// "other" for a communication kernel name; "" otherwise. NCCL runs an all-to-all as a group of
// send/recv, so an NCCL SendRecv kernel reads "send_recv" here; the trace reader relabels it
// "all_to_all" when the trace says so (see CollectiveFromLabel).
std::string CollectiveOf(absl::string_view name);
// The collective named by a framework label: PyTorch's record_function "nccl:all_to_all",
// "nccl:_all_gather_base", or Kineto's kernel argument "Collective name" ("_allgather_base",
// "all_to_all_single", "allreduce"). "" when the label names no known collective.
std::string CollectiveFromLabel(absl::string_view label);

extern const char* const kCollectives[6];
// 1 + index into kCollectives; 7 for "other"; 0 for "".
uint8_t CollectiveIndex(absl::string_view collective);
// Inverse of CollectiveIndex for 1..7.
const char* CollectiveName(uint8_t index);

// One kernel (or memcpy/memset) on the GPU timeline, nanoseconds.
struct KernelRecord {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t name_id = 0;  // index into the caller's name table
  KernelCategory category = KernelCategory::kElementwise;
  uint8_t collective = 0;  // CollectiveIndex for communication kernels, else 0
  int32_t stream = -1;     // CUDA stream id (CUPTI streamId; Kineto args.stream); -1 unknown
  int32_t device = -1;     // CUDA device index; -1 unknown
  int64_t correlation = -1;  // CUPTI correlation id of the launch; -1 unknown
};

struct TimeRange {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

// Step starts from iteration labels: `iteration[i]` is the step index of kernels[i] (the
// ProfilerStep / NVTX step range that contains its launch, found through the launch's
// correlation id; < 0 for none). Step j starts at the first GPU record of iteration j (HTA's
// rule: hta/common/trace.py add_iteration gives a GPU event the iteration of its correlated CPU
// launch). Returns one start per iteration that has a GPU record, in iteration order; iterations
// with no GPU record are skipped.
std::vector<int64_t> StepStartsFromIterations(const std::vector<KernelRecord>& kernels,
                                              const std::vector<int32_t>& iteration);

// Step starts from NVTX step ranges by timestamp (the fallback when the launches' correlation
// is not known): each range's step begins at the first kernel that starts at or after the
// range's start. Only right when the loop synchronises once per step. `kernels` sorted by start.
std::vector<int64_t> StepStartsFromRanges(const std::vector<KernelRecord>& kernels,
                                          const std::vector<TimeRange>& ranges);

// The outermost ranges of a set of possibly nested ranges (a range inside another is dropped),
// sorted by start. Step ranges are the outermost ones whose name matches, so "forward_step" /
// "backward_step" inside "train_step" are not steps (reliability review M4).
std::vector<TimeRange> OutermostRanges(std::vector<TimeRange> ranges);

// Whether an NVTX / record_function range name marks a training step: the name equals the
// pattern, or (when the pattern is "step", the default) is a ProfilerStep#N or ends in "step"
// as a word ("train_step", "training step", "step 12") without being a known sub-step
// ("forward_step", "backward_step", "optimizer_step", "micro_step"). Case-insensitive.
bool IsStepRangeName(absl::string_view name, absl::string_view pattern);

// Step starts from the period of the kernel sequence, without markers.
//   Stream: the CUDA stream with the most kernels (the compute stream); with several streams
//   their kernels interleave differently each step, so only one stream's order repeats.
//   Period: the candidate P in [min_period, max_period] whose share of matches
//   name[i] == name[i + P] over the last two thirds of that stream is highest (ties and values
//   within 1 point go to the smallest P that divides the best, so a multiple of the step is not
//   taken); at least 90% must match. The work is bounded: each candidate is judged on at most
//   max_comparisons / candidates sampled positions (reliability review M5).
//   Phase: the position within one period that follows the longest idle gap of the whole GPU
//   (all streams) in every period (the step's synchronisation); steps then start at that
//   position and at every P kernels from it (found within +-P/10 by a 32-kernel context, so a
//   warm-up step with extra kernels does not shift the rest).
// NotFound when no period repeats.
struct PeriodResult {
  int64_t period = 0;       // kernels per step on `stream`
  int32_t stream = -1;      // the stream whose sequence repeats
  std::vector<int64_t> starts;
};
struct PeriodOptions {
  int64_t min_period = 4;
  int64_t max_period = 20000;
  int64_t max_comparisons = 20'000'000;
};
absl::StatusOr<PeriodResult> StepStartsFromPeriod(const std::vector<KernelRecord>& kernels,
                                                  const PeriodOptions& options = {});

// Accounting of the window [start_ns, end_ns) (records clipped to it):
//   busy            union seconds per category;
//   exposed communication (HTA's definition, hta/analyzers/communication_analysis.py:
//                   communication time not overlapped by *computation* kernels, i.e. GEMM,
//                   attention, convolution and elementwise; memcpy/memset do not hide it),
//   exposed communication incl. memory: not overlapped by any other GPU work (computation or
//                   memcpy/memset; the probe's earlier figure, kept beside it),
//   idle            window minus the union of every record,
//   per collective: busy and exposed (HTA's definition) seconds.
// `kernels` sorted by start. Records that start up to `lookback_ns` before the window are
// clipped into it: pass MaxDurationNs(kernels) when measuring many windows (the default, 60 s,
// scans back that far for each window).
v1::StepMeasurement AnalyzeWindow(const std::vector<KernelRecord>& kernels, int64_t start_ns, int64_t end_ns,
                                  int64_t lookback_ns = int64_t{60'000'000'000});
// The longest record (end - start), ns; 0 for none.
int64_t MaxDurationNs(const std::vector<KernelRecord>& kernels);

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

// Picks one report per rank from reports that may include several processes of the same rank
// (helper processes that loaded the probe, reliability of gpu_code_review item 7): per rank, the
// report with the most steps, then the most kernels. Reports with no kernel and no step are
// dropped.
std::vector<v1::ProbeReport> OneReportPerRank(const std::vector<v1::ProbeReport>& reports);

}  // namespace stepcast::probe

#endif  // STEPCAST_PLUGIN_PROBE_TRACE_ANALYSIS_H_
