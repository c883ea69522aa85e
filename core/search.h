// File: core/search.h
//
// Layout search: every valid parallel layout of a job's model, batch, hardware and framework on
// a GPU count (or several), the ones that fit in memory ranked by an objective; the top N, the
// Pareto front of speed, GPUs and memory headroom, and the best layout of each GPU count, each
// with its full Prediction. docs/SEARCH.md describes the space, the pruning bound and its proof.
//
// Exact: every layout of the space is either evaluated with the same functions Predict uses
// (EstimateMemory's fit, EstimateStepTime's step time: bit for bit, with the layer costs that do
// not depend on PP/VPP/DP/sharding/recompute computed once per TP/CP/EP/ETP/micro-batch/SP), or
// pruned because a lower bound of its memory (its weights, gradients, optimizer states,
// communication buffers, CUDA context and workspaces: everything but activations) already
// exceeds the GPU's capacity, so it cannot fit. The ranking is a total order (objective, then a
// fixed order of the layout's fields), so the answer does not depend on the thread count.
#ifndef STEPCAST_CORE_SEARCH_H_
#define STEPCAST_CORE_SEARCH_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/job.h"
#include "core/predict.h"

namespace stepcast {

enum class SearchObjective {
  kStepTime,          // minimise the step time
  kTokensPerSPerGpu,  // maximise tokens/s per GPU
  kCostPerToken,      // minimise USD per token (GPU-hour price x GPUs x step time / tokens)
  kMfu,               // maximise MFU (PaLM App. B; against the peak of the layout's GEMM dtype)
  kTimeToTrain,       // minimise the run's time to train, among layouts whose run cost <= budget
  // Minimise the pessimistic end of the step time: step x the upper ratio of the 80% interval of
  // the layout's regime (core/interval.h; needs the job's interval table). The ranking reads the
  // table only: the widening for low-confidence overlap values is in each ranked layout's
  // prediction, not in the key.
  kStepTimeP90,
};
const char* SearchObjectiveName(SearchObjective o);  // "step_time", "tokens_per_s_per_gpu", ...
// "time" / "step_time", "tokens" / "tokens_per_s_per_gpu", "cost" / "cost_per_token", "mfu",
// "time_to_train", "time-p90" / "step_time_p90"; InvalidArgument naming `field` otherwise.
absl::StatusOr<SearchObjective> ParseSearchObjective(const std::string& name, const std::string& field);

// One recompute setting searched: none, selective with the listed modules (Megatron
// --recompute-modules names; empty: the framework's selective set), or full recompute of
// `num_layers` layers per pipeline chunk (0: every layer).
struct RecomputeOption {
  Recompute recompute = Recompute::kNone;
  std::vector<std::string> modules;
  int64_t num_layers = 0;
};

// The space. Searched by default: TP (divisors of the GPU count up to GPUs per node: Narayanan
// et al. 2021 Sec. 3.3 Takeaway #1 keeps TP inside the NVLink domain), PP (every divisor up to
// the layer count, uneven splits included: the slowest stage carries ceil(layers / pp)), VPP
// (interleaving where pp*vpp divides the layers, as Megatron requires), CP, EP (MoE), DP (the
// rest), micro-batch size (every divisor of global batch / DP), sequence parallelism off and on
// (TP > 1), recompute none / selective (the framework's modules) / full, sharding none / ZeRO-1
// / ZeRO-2 / ZeRO-3 (FSDP) with HSDP replicas (every divisor of DP x CP), and the framework's
// overlaps on where it supports them. On request: ETP, other pipeline schedules, overlap off,
// fp8 GEMMs, more recompute settings. Every layout also passes ValidateJob.
struct SearchSpace {
  // GPU counts searched; empty: the job's cluster.gpu_count.
  std::vector<int64_t> gpu_counts;
  // Upper bounds; 0: the default (TP: GPUs per node; the others: none beyond validity).
  int64_t max_tp = 0, max_pp = 0, max_vpp = 0, max_cp = 0, max_ep = 0, max_micro_batch_size = 0;
  // Sequence parallelism: false keeps the job's setting instead of searching off and on.
  bool sequence_parallel = true;
  std::vector<Sharding> shardings = {Sharding::kNone, Sharding::kZero1, Sharding::kZero2, Sharding::kZero3};
  bool hsdp = true;  // dp_replicate over the divisors of dp*cp (ZeRO-1/2/3)
  // Empty: none, selective (the framework's modules), full.
  std::vector<RecomputeOption> recompute;
  bool uneven_pipeline = true;  // PP that does not divide the layers (VPP 1 only)
  // On request.
  bool etp = false;             // expert TP over the divisors of the expert FFN (default: etp = tp)
  bool all_schedules = false;   // GPipe, zero-bubble, DualPipe beside the job's schedule family
  bool overlap_off = false;     // also each overlap off (never predicted faster than on)
  bool fp8 = false;             // also fp8 GEMMs where the hardware has an fp8 peak and rate
};

// The fields one layout sets on a job.
struct Layout {
  Parallelism parallelism;
  int64_t micro_batch_size = 1;
  RecomputeOption recompute;
  Sharding sharding = Sharding::kNone;
  bool overlap_tp_comm = false;
  bool overlap_dp_comm = true;
  DType gemm = DType::kBF16;
  bool fp8_param_gather = false;
};
// The job with `layout` applied (cluster.gpu_count follows the layout).
Job WithLayout(const Job& base, const Layout& layout);
// The layout of a job.
Layout LayoutOf(const Job& job);
// "TP 4 PP 8 VPP 5 DP 2 SP mbs 1 zero1 ..." (the fields that are not the trivial default).
std::string LayoutSummary(const Layout& layout);

// A job field the layout changes: field path as in a job file, old and new value as written
// there, and the Megatron-LM argument that sets it (empty where there is none).
struct LayoutChange {
  std::string field, from, to, megatron_flag;
};
std::vector<LayoutChange> LayoutChanges(const Layout& from, const Layout& to);

struct RankedLayout {
  int rank = 0;  // 1-based in `top`; 0 elsewhere
  Layout layout;
  double objective_value = 0;  // in the objective's own terms (s, tokens/s/GPU, USD/token, MFU, s)
  Prediction prediction;       // Predict(WithLayout(base, layout))
};

struct SearchStats {
  int64_t enumerated = 0;  // layouts of the space
  int64_t pruned = 0;      // by the memory lower bound (never evaluated)
  int64_t evaluated = 0;   // memory fit decided (EstimateMemory)
  int64_t fitting = 0;     // of those, fitting: step time estimated and ranked
  int64_t over_budget = 0; // fitting but over the budget (time-to-train objective)
  int64_t pareto_size = 0; // points on the Pareto front (before thinning to max_pareto)
  int64_t rejected_by_framework = 0;  // of the best kept, refused by SearchOptions::accept
  double elapsed_s = 0;
  int threads = 0;
};

struct SearchProgress {
  int64_t units_done = 0, units_total = 0;  // work units: (GPU count, dtype, TP, CP, PP, EP, ETP)
  int64_t evaluated = 0, pruned = 0, fitting = 0;
  double elapsed_s = 0;
};

struct SearchOptions {
  SearchSpace space;
  SearchObjective objective = SearchObjective::kStepTime;
  double budget_usd = 0;  // kTimeToTrain: only runs costing at most this (0: no limit)
  int top_n = 10;
  int threads = 0;        // 0: std::thread::hardware_concurrency()
  // Past the deadline the search stops and returns the best layouts found so far, marked partial.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // Called from the calling thread about every 100 ms while the search runs.
  std::function<void(const SearchProgress&)> progress;
  // Polled with the progress; true stops the search (partial), e.g. a cancelled RPC.
  std::function<bool()> cancelled;
  // Prune with the memory lower bound (off only to test the bound).
  bool prune = true;
  // Layouts the job's framework can start (e.g. proto/launch_args.h FrameworkAcceptsLayout:
  // Megatron-LM's validate_args rules); unset: every layout the model accepts. Checked on the
  // candidates that would be reported (the top N, the best per GPU count, the Pareto points),
  // not on every evaluated layout; a rejected one is replaced by the next accepted one among the
  // 4 x top_n best kept.
  std::function<bool(const Job&)> accept;
  // Pareto points listed: a longer front is thinned to this many, evenly along its order (GPUs,
  // then step time), its first and last kept; 0: all.
  int max_pareto = 100;
};

struct SearchResult {
  SearchObjective objective = SearchObjective::kStepTime;
  std::vector<int64_t> gpu_counts;
  std::vector<RankedLayout> top;                 // best first
  std::vector<RankedLayout> pareto;              // by GPUs, then step time
  std::vector<RankedLayout> best_per_gpu_count;  // the objective's best on each GPU count that has one
  SearchStats stats;
  bool partial = false;  // stopped at the deadline or cancelled: the best found so far
  std::string partial_reason;
  // Why the runner-up ranks second: the step-time term with the largest difference.
  std::string runner_up_reason;
  // Of `top`: layouts outside the validated region (no validated run shares their framework
  // family, dense/MoE, sharding, pipeline and scale band: the out-of-region interval), and layouts whose
  // regime has fewer validated runs than the minimum (flagged; core/interval.h).
  int top_outside_validated = 0;
  int top_below_minimum = 0;
};

// Caps on the inputs that drive a search's work (reliability review 2, N1): past them a search
// is refused before it starts, InvalidArgument naming the field and the cap. Each is far above
// any real job: the largest published dense and MoE models have under 200 layers (Llama 3.1
// 405B: 126, Dubey et al. 2024 Table 3; DeepSeek-V3: 61 layers, 256 routed experts, DeepSeek-AI
// 2024 Sec. 4.2), and the largest published global batches are a few thousand sequences (16M
// tokens of 8K for Llama 3.1 405B). They bound the divisor enumerations (O(sqrt n) each) and the
// pipeline options (every divisor of the layers) so that a typo such as `layers: 1e10` cannot
// make the search run for ever.
constexpr int64_t kSearchMaxLayers = 1 << 16;               // model.shape.layers
constexpr int64_t kSearchMaxGlobalBatchSize = 1 << 24;      // training.global_batch_size (sequences)
constexpr int64_t kSearchMaxExpertCount = 1 << 16;          // model.shape.moe.routed_experts
constexpr int64_t kSearchMaxFfnHiddenSize = int64_t{1} << 24;  // model.shape.moe.expert_ffn_hidden_size (ETP)
constexpr int kSearchMaxTopN = 1000;                        // top_n
constexpr size_t kSearchMaxGpuCounts = 4096;                // GPU counts in one search
constexpr int64_t kSearchMaxGpuCount = int64_t{1} << 24;    // each GPU count
// Work units (GPU count x precision x TP x CP x PP x EP x ETP) in one search: 32 bytes of plan
// each, so at most 64 MiB of plan per search. The widest space of the examples (DeepSeek-V3 on
// H100 over 8..32768 GPUs with ETP, every schedule, overlap off and fp8) has 1,028,988.
constexpr size_t kSearchMaxWorkUnits = size_t{1} << 21;
constexpr int kSearchMaxThreads = 256;                      // threads

// The caps above on `base` and `options` (no other check): OK, or InvalidArgument naming the
// field and the cap. SearchLayouts checks them first; a caller that runs several searches (plan)
// can check once.
absl::Status CheckSearchCaps(const Job& base, const SearchOptions& options);

// Searches the layouts of `base` (its model, hardware, profile, framework, model choices,
// training batch, sequence length, precision and optimizer; its own layout is ignored).
// Errors (InvalidArgument naming the field): a base job whose other fields ValidateJob rejects;
// an empty or non-positive GPU count; no valid layout at all ("training.global_batch_size: 7
// sequences cannot be split over 8 GPUs ..."); no layout that fits on any GPU count searched
// ("cluster.gpu_count: no layout of ... fits ..."; with the smallest memory seen); the
// time-to-train objective without dataset_tokens or train_iters; an input above one of the caps
// above ("model.shape.layers: 10000000000 is above the layout search's cap of 65536"). A search
// stopped before it found any fitting layout returns DeadlineExceeded / Cancelled.
// Deadline and cancellation (options.deadline, options.cancelled) are checked at every loop
// level: while the work units are enumerated, in every loop of a unit, and by the calling
// thread about every 100 ms; past the deadline the search returns within milliseconds of the
// current layout's evaluation (no busy wait), with what it found so far.
absl::StatusOr<SearchResult> SearchLayouts(const Job& base, const SearchOptions& options);

// The GPU counts of a range [lo, hi]: every multiple of the node size in the range, and below
// one node every divisor of the node size. InvalidArgument naming `field` for lo < 1, hi < lo, no
// count in the range, or more than 4096 counts.
absl::StatusOr<std::vector<int64_t>> GpuCountsInRange(int64_t lo, int64_t hi, int64_t gpus_per_node,
                                                      const std::string& field);

// The per-layout evaluation the search ranks with, for tests and benchmarks: memory fit and
// (when it fits) step time of `job`, from EstimateMemory / EstimateStepTime with layer costs
// cached across calls. Equal, bit for bit, to Predict(job)'s memory.fits, memory.total_bytes
// and step_time_s. Requires ValidateJob(job).ok() and the same model, hardware, profile,
// framework and choices as `base`.
class LayoutEvaluator {
 public:
  explicit LayoutEvaluator(const Job& base);
  ~LayoutEvaluator();
  LayoutEvaluator(const LayoutEvaluator&) = delete;
  LayoutEvaluator& operator=(const LayoutEvaluator&) = delete;
  struct Result {
    bool fits = false;
    double memory_total_bytes = 0;
    double headroom_bytes = 0;
    double step_time_s = 0;  // 0 when it does not fit
  };
  Result Evaluate(const Job& job);
  // The memory lower bound of a job's layout (weights, gradients, optimizer states,
  // communication buffers, CUDA context, workspaces): <= EstimateMemory(job).total_bytes for
  // every micro-batch size, sequence parallelism, recompute, schedule and overlap setting.
  double MemoryLowerBoundBytes(const Job& job);

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace stepcast

#endif  // STEPCAST_CORE_SEARCH_H_
