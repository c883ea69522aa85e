// File: plugin/probe/trace_analysis.h
//
// What stepcast does with the GPU activity of a training process, whether it comes from the
// run probe (CUPTI records) or from a Kineto / torch.profiler trace: classify kernels by name,
// find the training steps, and account each step's time by category with overlap. Pure
// functions, tested on recorded (tests/data/real_data/traces) and synthetic streams.
#ifndef STEPCAST_PLUGIN_PROBE_TRACE_ANALYSIS_H_
#define STEPCAST_PLUGIN_PROBE_TRACE_ANALYSIS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
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
// it. The rule table, first match wins, is kKernelFamilies (each family with the library and
// version its names were read from); checked against the 540 real names of
// tests/data/real_data/traces/kernel_names_classified.tsv (with the corrections of
// kernel_names_corrections.tsv) and the names of the newer traces in kernel_names_new_traces.tsv:
//   memory_copy    CUPTI/Kineto memcpy and memset records ("Memcpy ...", "Memset ...") only; copy
//                  *kernels* (dtype casts, index_copy) are elementwise work (HTA counts only the
//                  Memcpy/Memset records as memory: hta/common/trace_parser.py is_memory_kernel)
//   communication  NCCL/RCCL (nccl*Kernel*, ncclDevKernel*), PyTorch symmetric-memory/custom all-reduce
//                  (multimem_all_reduce, two_shot_all_reduce, one_shot_all_reduce,
//                  cross_device_reduce), DeepEP dispatch/combine/notify (deep_ep::, dpsk::ep::; not
//                  its local get_dispatch_layout), NVSHMEM, Transformer Engine userbuffers
//   elementwise    fbgemm_gpu / TorchRec embedding, permute, bucketize and quantize kernels ("fbgemm"
//                  holds "gemm"), GEMM libraries' transpose and TMA-descriptor helpers
//   attention      FlashAttention 2/3 (flash_fwd/flash_bwd, flash::), cuDNN/TE fused attention
//                  (sdpa, fmha, fused_attn), xformers/PyTorch efficient_attention, Triton and ROCm
//                  attn_fwd/_attn_fwd/attn_bwd, SageAttention sage_fwd, CK/aiter fmha and mha_fwd,
//                  FlashInfer, paged/KV-cache attention (reshape_and_cache, paged_attention)
//   convolution    cuDNN and CUTLASS convolutions: implicit-GEMM fprop/dgrad/wgrad (xmma,
//                  cutlass s1688fprop/dgrad/wgrad, ImplicitGemmConvolution), scudnn, winograd,
//                  fft convolutions, cudnn dgrad/wgrad engines and their offset/reduction helpers;
//                  MIOpen igemm_{fwd,bwd,wrw}_*, naive_conv; CK grouped_conv_* and
//                  batched_gemm_xdlops_bwd_weight
//   gemm           cuBLAS/cuBLASLt/CUTLASS GEMMs (nvjet, *gemm*, gemv, s16816/s1688 tensorop, xmma),
//                  split-K reductions, Inductor/Triton matmul templates (triton_tem_*mm*, *_mm_*),
//                  MoE grouped GEMMs (fused_moe_kernel, grouped_gemm, DeepGEMM, moe finalize),
//                  hipBLASLt/Tensile Cijk_*, cuBLAS epilogues
//   elementwise    everything else (norms, activations, optimizer, casts, reductions, softmax)
KernelCategory ClassifyKernel(absl::string_view name);

// One row of the classifier's rule table, for documentation and `stepcast trace --kernel-rules`:
// the category, the kernel families (library and version) the rule was written from, an example.
struct KernelFamily {
  KernelCategory category;
  const char* families;
  const char* example;
};
extern const KernelFamily kKernelFamilies[];
extern const size_t kKernelFamilyCount;

// The kind of a communication kernel for contention and overlap reports: DeepEP's
// "deepep_dispatch" (dispatch, notify_dispatch), "deepep_combine" and "deepep_notify"
// (cached_notify: the buffer clean and barrier before a cached dispatch or a combine), else the
// collective (CollectiveName(collective): "all_reduce", "all_gather", ..., "other").
std::string CommunicationKind(absl::string_view name, uint8_t collective);

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
  uint32_t shape_id = 0;     // launch configuration (Kineto args grid and block): index into the
                             // caller's table, 0 unknown
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
// scans back that far for each window). Each window scans every record of the lookback: with
// one long record and many windows that is quadratic; use the RunningIndex overload instead.
v1::StepMeasurement AnalyzeWindow(const std::vector<KernelRecord>& kernels, int64_t start_ns, int64_t end_ns,
                                  int64_t lookback_ns = int64_t{60'000'000'000});

// The records that started before a time and still run at it, found without scanning back:
// a max-end tree over blocks of 64 records (records sorted by start). Memory: 16 bytes per 64
// records; a query costs O((k + 1) x (log n + 64)) for k records found (reliability review 2,
// N6: one long memcpy made every window scan from the trace's start, 1.8 s -> 39 s).
class RunningIndex {
 public:
  explicit RunningIndex(const std::vector<KernelRecord>& kernels);
  // Calls fn(i), in increasing i, for every i < limit with kernels[i].end_ns > t. `kernels` is
  // the vector the index was built from.
  void ForEachEndingAfter(const std::vector<KernelRecord>& kernels, size_t limit, int64_t t,
                          const std::function<void(size_t)>& fn) const;

 private:
  static constexpr size_t kBlock = 64;
  size_t n_ = 0, leaves_ = 1;
  std::vector<int64_t> max_end_;  // 1-based segment tree over blocks
};

// AnalyzeWindow with the records running at start_ns found through `index` (built from the same
// `kernels`): the same figures, linear in the records of the window.
v1::StepMeasurement AnalyzeWindow(const std::vector<KernelRecord>& kernels, const RunningIndex& index,
                                  int64_t start_ns, int64_t end_ns);

// The accounting of AnalyzeWindow over the given records (each clipped to the window; a record
// counts in kernel_count when it starts inside the window).
v1::StepMeasurement AnalyzeRecords(const std::vector<const KernelRecord*>& records, int64_t start_ns, int64_t end_ns);

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
