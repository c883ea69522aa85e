#include "core/search.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/flops.h"
#include "core/gemm_model.h"
#include "core/interval.h"
#include "core/memory.h"
#include "core/step_time.h"

namespace stepcast {

const char* SearchObjectiveName(SearchObjective o) {
  switch (o) {
    case SearchObjective::kStepTime: return "step_time";
    case SearchObjective::kTokensPerSPerGpu: return "tokens_per_s_per_gpu";
    case SearchObjective::kCostPerToken: return "cost_per_token";
    case SearchObjective::kMfu: return "mfu";
    case SearchObjective::kTimeToTrain: return "time_to_train";
    case SearchObjective::kStepTimeP90: return "step_time_p90";
  }
  return "?";
}

absl::StatusOr<SearchObjective> ParseSearchObjective(const std::string& name, const std::string& field) {
  if (name == "time" || name == "step_time") return SearchObjective::kStepTime;
  if (name == "tokens" || name == "tokens_per_s_per_gpu") return SearchObjective::kTokensPerSPerGpu;
  if (name == "cost" || name == "cost_per_token") return SearchObjective::kCostPerToken;
  if (name == "mfu") return SearchObjective::kMfu;
  if (name == "time_to_train" || name == "ttt") return SearchObjective::kTimeToTrain;
  if (name == "time-p90" || name == "time_p90" || name == "step_time_p90") return SearchObjective::kStepTimeP90;
  return absl::InvalidArgumentError(absl::StrCat(
      field, ": '", name, "' is not one of: time (step_time), tokens (tokens_per_s_per_gpu), cost (cost_per_token), ",
      "mfu, time_to_train, time-p90 (step_time_p90)"));
}

// ---------------------------------------------------------------------------------------------
// Layouts as job fields.

Job WithLayout(const Job& base, const Layout& l) {
  Job job = base;
  job.parallelism = l.parallelism;
  job.cluster.gpu_count = l.parallelism.gpu_count();
  job.training.micro_batch_size = l.micro_batch_size;
  job.training.recompute = l.recompute.recompute;
  job.training.recompute_modules = l.recompute.modules;
  job.training.recompute_num_layers = l.recompute.num_layers;
  job.training.sharding = l.sharding;
  job.training.overlap_tp_comm = l.overlap_tp_comm;
  job.training.overlap_dp_comm = l.overlap_dp_comm;
  job.training.precision.gemm = l.gemm;
  job.training.fp8_param_gather = l.fp8_param_gather;
  return job;
}

Layout LayoutOf(const Job& job) {
  Layout l;
  l.parallelism = job.parallelism;
  l.micro_batch_size = job.training.micro_batch_size;
  l.recompute = {job.training.recompute, job.training.recompute_modules, job.training.recompute_num_layers};
  l.sharding = job.training.sharding;
  l.overlap_tp_comm = job.training.overlap_tp_comm;
  l.overlap_dp_comm = job.training.overlap_dp_comm;
  l.gemm = job.training.precision.gemm;
  l.fp8_param_gather = job.training.fp8_param_gather;
  return l;
}

namespace {

std::string RecomputeText(const RecomputeOption& r) {
  switch (r.recompute) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return absl::StrCat("selective(", absl::StrJoin(r.modules, ","), ")");
    case Recompute::kFull:
      return r.num_layers > 0 ? absl::StrCat("full(", r.num_layers, " layers)") : "full";
  }
  return "?";
}

std::string ScheduleText(const Parallelism& p) { return PipelineScheduleName(p.Schedule()); }

}  // namespace

std::string LayoutSummary(const Layout& l) {
  const Parallelism& p = l.parallelism;
  std::string s = absl::StrCat("TP", p.tp, " PP", p.pp);
  if (p.vpp > 1) absl::StrAppend(&s, " VPP", p.vpp);
  if (p.cp > 1) absl::StrAppend(&s, " CP", p.cp);
  if (p.ep > 1) absl::StrAppend(&s, " EP", p.ep);
  if (p.etp > 0 && p.etp != p.tp) absl::StrAppend(&s, " ETP", p.etp);
  absl::StrAppend(&s, " DP", p.dp);
  if (p.SequenceParallelOn()) absl::StrAppend(&s, " SP");
  absl::StrAppend(&s, " mbs", l.micro_batch_size);
  if (l.sharding != Sharding::kNone) {
    absl::StrAppend(&s, " ", ShardingName(l.sharding));
    if (p.dp_replicate > 1) absl::StrAppend(&s, "/hsdp", p.dp_replicate);
  }
  if (l.recompute.recompute != Recompute::kNone) absl::StrAppend(&s, " rc:", RecomputeText(l.recompute));
  if (p.pp > 1 && p.Schedule() != PipelineSchedule::k1F1B && p.Schedule() != PipelineSchedule::kInterleaved1F1B) {
    absl::StrAppend(&s, " ", ScheduleText(p));
  }
  if (l.gemm == DType::kFP8) absl::StrAppend(&s, " fp8");
  if (!l.overlap_dp_comm) absl::StrAppend(&s, " no-dp-overlap");
  return s;
}

std::vector<LayoutChange> LayoutChanges(const Layout& a, const Layout& b) {
  std::vector<LayoutChange> out;
  auto add = [&](const char* field, const std::string& from, const std::string& to, const std::string& flag) {
    if (from != to) out.push_back({field, from, to, flag});
  };
  auto num = [](int64_t v) { return absl::StrCat(v); };
  auto yes = [](bool v) { return std::string(v ? "true" : "false"); };
  const Parallelism &p = a.parallelism, &q = b.parallelism;
  // Megatron-LM arguments (megatron/training/arguments.py).
  add("parallelism.tp", num(p.tp), num(q.tp), absl::StrCat("--tensor-model-parallel-size ", q.tp));
  add("parallelism.pp", num(p.pp), num(q.pp), absl::StrCat("--pipeline-model-parallel-size ", q.pp));
  add("parallelism.vpp", num(p.vpp), num(q.vpp),
      // Megatron-LM has no --virtual-pipeline-model-parallel-size (NeMo's field name; arguments.py).
      q.vpp > 1 ? absl::StrCat("--num-virtual-stages-per-pipeline-rank ", q.vpp)
                : "remove --num-virtual-stages-per-pipeline-rank / --num-layers-per-virtual-pipeline-stage");
  add("parallelism.cp", num(p.cp), num(q.cp), absl::StrCat("--context-parallel-size ", q.cp));
  add("parallelism.ep", num(p.ep), num(q.ep), absl::StrCat("--expert-model-parallel-size ", q.ep));
  if (p.etp > 0 || q.etp > 0) {  // 0: ETP follows TP (Megatron's default)
    add("parallelism.etp", num(p.Etp()), num(q.Etp()), absl::StrCat("--expert-tensor-parallel-size ", q.Etp()));
  }
  add("parallelism.dp", num(p.dp), num(q.dp), "");
  add("parallelism.sequence_parallel", yes(p.SequenceParallelOn()), yes(q.SequenceParallelOn()),
      q.SequenceParallelOn() ? "--sequence-parallel" : "remove --sequence-parallel");
  add("parallelism.dp_replicate", num(p.dp_replicate), num(q.dp_replicate),
      q.dp_replicate > 1 ? absl::StrCat("--num-distributed-optimizer-instances ", q.dp_replicate) : "");
  if (q.pp > 1 || p.pp > 1) {
    add("parallelism.pp_schedule", ScheduleText(p), ScheduleText(q), "");
  }
  add("training.micro_batch_size", num(a.micro_batch_size), num(b.micro_batch_size),
      absl::StrCat("--micro-batch-size ", b.micro_batch_size));
  add("training.recompute", RecomputeName(a.recompute.recompute), RecomputeName(b.recompute.recompute),
      b.recompute.recompute == Recompute::kNone
          ? "remove --recompute-granularity"
          : absl::StrCat("--recompute-granularity ", RecomputeName(b.recompute.recompute),
                         b.recompute.recompute == Recompute::kFull ? " --recompute-method block" : ""));
  if (b.recompute.recompute == Recompute::kSelective) {
    add("training.recompute_modules", absl::StrJoin(a.recompute.modules, ","), absl::StrJoin(b.recompute.modules, ","),
        absl::StrCat("--recompute-modules ", absl::StrJoin(b.recompute.modules, " ")));
  }
  if (b.recompute.recompute == Recompute::kFull) {
    add("training.recompute_num_layers", num(a.recompute.num_layers), num(b.recompute.num_layers),
        b.recompute.num_layers > 0 ? absl::StrCat("--recompute-num-layers ", b.recompute.num_layers) : "");
  }
  add("training.sharding", ShardingName(a.sharding), ShardingName(b.sharding),
      b.sharding == Sharding::kZero1   ? "--use-distributed-optimizer"
      : b.sharding == Sharding::kZero3 ? "--use-torch-fsdp2"
      : b.sharding == Sharding::kNone  ? "remove --use-distributed-optimizer"
                                       : "");
  add("training.overlap_tp_comm", yes(a.overlap_tp_comm), yes(b.overlap_tp_comm),
      b.overlap_tp_comm ? "--tp-comm-overlap" : "remove --tp-comm-overlap");
  add("training.overlap_dp_comm", yes(a.overlap_dp_comm), yes(b.overlap_dp_comm),
      b.overlap_dp_comm ? "--overlap-grad-reduce --overlap-param-gather" : "remove --overlap-grad-reduce");
  add("training.precision.gemm", DTypeName(a.gemm), DTypeName(b.gemm),
      b.gemm == DType::kFP8 ? "--fp8-format hybrid" : "remove --fp8-format");
  add("training.fp8_param_gather", yes(a.fp8_param_gather), yes(b.fp8_param_gather),
      b.fp8_param_gather ? "--fp8-param-gather" : "");
  return out;
}

absl::StatusOr<std::vector<int64_t>> GpuCountsInRange(int64_t lo, int64_t hi, int64_t gpus_per_node,
                                                      const std::string& field) {
  if (lo < 1) return absl::InvalidArgumentError(absl::StrCat(field, ": ", lo, " must be >= 1"));
  if (hi < lo) return absl::InvalidArgumentError(absl::StrCat(field, ": ", hi, " is below ", lo));
  if (hi > kSearchMaxGpuCount) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", hi, " is above the layout search's cap of ", kSearchMaxGpuCount, " GPUs"));
  }
  const int64_t node = std::clamp<int64_t>(gpus_per_node, 1, kSearchMaxGpuCount);
  // Counted before the list is built (a 1..2^24 range of one-GPU nodes is 2^24 counts).
  const int64_t first_multiple = std::max(node, (lo + node - 1) / node * node);
  const int64_t multiples = hi >= first_multiple ? (hi - first_multiple) / node + 1 : 0;
  int64_t below_node = 0;
  for (int64_t d = lo; d < node && d <= hi; ++d) below_node += node % d == 0 ? 1 : 0;
  const int64_t n = below_node + multiples;
  if (n == 0) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": no GPU count in ", lo, "..", hi, " is a divisor or a multiple of ",
                                                   node, " GPUs per node"));
  }
  if (n > static_cast<int64_t>(kSearchMaxGpuCounts)) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", lo, "..", hi, " holds ", n,
                                                   " GPU counts; at most ", kSearchMaxGpuCounts, " per search"));
  }
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t d = lo; d < node && d <= hi; ++d) {
    if (node % d == 0) out.push_back(d);
  }
  for (int64_t g = first_multiple; g <= hi; g += node) out.push_back(g);
  return out;
}

// ---------------------------------------------------------------------------------------------
// The search.

namespace {

using Clock = std::chrono::steady_clock;

std::vector<int64_t> Divisors(int64_t n) {
  std::vector<int64_t> lo, hi;
  for (int64_t d = 1; d * d <= n; ++d) {
    if (n % d == 0) {
      lo.push_back(d);
      if (d != n / d) hi.push_back(n / d);
    }
  }
  lo.insert(lo.end(), hi.rbegin(), hi.rend());
  return lo;
}

struct PrecisionOption {
  DType gemm = DType::kBF16;
  bool fp8_param_gather = false;
  double peak_flops_per_s = 0;
};

// One work unit: the dimensions the layer costs depend on (with PP, which the memory lower
// bound also needs); DP is what is left. 32 bits each (every one is at most the GPU count,
// kSearchMaxGpuCount = 2^24): 32 bytes a unit, so a plan of kSearchMaxWorkUnits is 64 MiB.
struct Unit {
  int32_t gpus = 0, tp = 1, cp = 1, pp = 1, ep = 1, etp = 0, dp = 1;
  int32_t precision = 0;
};
static_assert(sizeof(Unit) == 32);

// A layout in the search's own terms (indices into the option lists).
struct Cand {
  int64_t gpus = 0, tp = 1, cp = 1, pp = 1, ep = 1, etp = 0, dp = 1, vpp = 1, dp_replicate = 1, mbs = 1;
  int8_t precision = 0, sharding = 0, recompute = 0, schedule = 0, sp = 0, otp = 0, odp = 0;
  auto Tie() const {
    return std::tie(gpus, precision, tp, cp, pp, ep, etp, vpp, sharding, dp_replicate, mbs, sp, otp, recompute,
                    schedule, odp);
  }
};

struct Entry {
  double key = 0;  // minimised
  double step_time_s = 0;
  double headroom_bytes = 0;
  Cand c;
};

// The ranking: a total order (key, then the layout's fields).
bool Better(const Entry& a, const Entry& b) {
  if (a.key != b.key) return a.key < b.key;
  return a.c.Tie() < b.c.Tie();
}

// Pareto order for one GPU count: faster first, then more headroom, then the layout's fields.
bool ParetoBefore(const Entry& a, const Entry& b) {
  if (a.step_time_s != b.step_time_s) return a.step_time_s < b.step_time_s;
  if (a.headroom_bytes != b.headroom_bytes) return a.headroom_bytes > b.headroom_bytes;
  return a.c.Tie() < b.c.Tie();
}

// The front of (step time, headroom) on one GPU count: sorted by ParetoBefore, headroom strictly
// increasing along it.
void ParetoInsert(std::vector<Entry>& front, const Entry& e) {
  auto it = std::lower_bound(front.begin(), front.end(), e, ParetoBefore);
  if (it != front.begin() && std::prev(it)->headroom_bytes >= e.headroom_bytes) return;  // dominated
  auto end = it;
  while (end != front.end() && end->headroom_bytes <= e.headroom_bytes) ++end;
  it = front.erase(it, end);
  front.insert(it, e);
}

struct Partial {  // one worker's findings
  std::vector<Entry> top;  // a max-heap by Better (the worst on top)
  std::map<int64_t, std::vector<Entry>> fronts;  // by GPU count
  std::map<int64_t, Entry> best;                 // by GPU count
  int64_t enumerated = 0, pruned = 0, evaluated = 0, fitting = 0, over_budget = 0;
  double min_total_bytes = std::numeric_limits<double>::infinity();
  Cand min_total_cand;
  double min_bound_bytes = std::numeric_limits<double>::infinity();
  Cand min_bound_cand;
  double min_run_usd = std::numeric_limits<double>::infinity();  // over budget: the cheapest run
  Cand min_run_cand;
};

struct Plan {
  const Job* base = nullptr;
  SearchOptions opt;
  ModelShape m;
  std::vector<PrecisionOption> precisions;
  std::vector<RecomputeOption> recomputes;
  std::vector<PipelineSchedule> schedules;  // PipelineSchedule::k1F1B stands for the 1F1B family
  std::vector<Sharding> shardings;
  std::vector<bool> sps_tp1, sps;  // sequence parallel options at tp == 1 and tp > 1
  std::vector<bool> otps, odps;
  std::vector<Unit> units;
  std::vector<int64_t> layer_divisors;   // of m.layers, ascending
  std::vector<int64_t> batch_divisors;   // of gbs, ascending
  std::vector<int64_t> expert_divisors;  // of m.moe.routed_experts (MoE), ascending
  std::vector<int64_t> expert_ffn_divisors;  // of m.moe.expert_ffn_hidden_size (ETP searched), ascending
  int64_t max_tp = 0;
  double capacity_bytes = 0;
  double model_flops_per_step = 0;
  double tokens_per_step = 0;
  double steps_per_run = 0;
  double price_per_gpu_hour = 0;
  int64_t gbs = 0;
  // kStepTimeP90: the interval table and the regime features every layout shares.
  const IntervalTable* intervals = nullptr;
  Regime regime;
};

// The upper ratio of the 80% interval of a layout's regime (kStepTimeP90).
double HighRatio(const Plan& plan, int64_t gpus, int precision, int64_t pp, Sharding sharding) {
  Regime r = plan.regime;
  const DType g = plan.precisions[precision].gemm;
  r.precision = g == DType::kFP8 ? PrecisionClass::kFp8
                : (g == DType::kBF16 || g == DType::kFP16) ? PrecisionClass::k16Bit
                                                           : PrecisionClass::kOther;
  r.sharded_weights = sharding == Sharding::kZero3;
  r.pipeline = pp > 1;
  r.scale = ScaleBandOf(gpus);
  return plan.intervals->Resolve(r).high_ratio;
}

// The vpp values of a unit: 1, and interleaving where pp*vpp divides the layers, ascending:
// v = d / pp for each divisor d of the layers that pp divides, d > pp (O(divisors of the layers),
// not O(layers): reliability review 2, N1).
std::vector<int64_t> VppOptions(const Plan& plan, int64_t pp) {
  std::vector<int64_t> out = {1};
  // A hybrid's virtual stages need '|' stage marks in its pattern (Megatron-Core
  // hybrid_layer_allocation.py select_pipeline_segment refuses VPP without them), which the
  // model's even split does not describe: none searched.
  if (pp == 1 || plan.m.Hybrid()) return out;
  for (int64_t d : plan.layer_divisors) {
    if (d <= pp || d % pp != 0) continue;
    const int64_t v = d / pp;
    if (plan.opt.space.max_vpp > 0 && v > plan.opt.space.max_vpp) break;
    out.push_back(v);
  }
  return out;
}

// The schedules of a (pp, vpp): at pp == 1 one (the schedule does nothing); with vpp > 1 the
// interleaving ones (1F1B family, zero-bubble); DualPipe needs an even pp.
std::vector<PipelineSchedule> ScheduleOptions(const Plan& plan, int64_t pp, int64_t vpp) {
  std::vector<PipelineSchedule> out;
  for (PipelineSchedule s : plan.schedules) {
    if (pp == 1) {
      out.push_back(PipelineSchedule::k1F1B);
      break;
    }
    if (vpp > 1 && s != PipelineSchedule::k1F1B && s != PipelineSchedule::kZeroBubble) continue;
    if (s == PipelineSchedule::kDualPipe && pp % 2 != 0) continue;
    out.push_back(s == PipelineSchedule::k1F1B && vpp > 1 ? PipelineSchedule::kInterleaved1F1B : s);
  }
  return out;
}

double ObjectiveKey(const Plan& plan, double step_s, int64_t gpus, int precision, bool* within_budget) {
  const double g = static_cast<double>(gpus);
  *within_budget = true;
  switch (plan.opt.objective) {
    case SearchObjective::kStepTime: return step_s;
    case SearchObjective::kTokensPerSPerGpu: {
      // As Predict's FillRates computes them.
      const double tokens_per_s = plan.tokens_per_step / step_s;
      return -(tokens_per_s / g);
    }
    case SearchObjective::kCostPerToken: {
      const double per_step_usd = g * plan.price_per_gpu_hour * step_s / 3600.0;
      return per_step_usd / plan.tokens_per_step;
    }
    case SearchObjective::kMfu: {
      const double peak = step_s * g * plan.precisions[precision].peak_flops_per_s;
      return -(plan.model_flops_per_step / peak);
    }
    case SearchObjective::kTimeToTrain: {
      const double per_step_usd = g * plan.price_per_gpu_hour * step_s / 3600.0;
      if (plan.opt.budget_usd > 0 && per_step_usd * plan.steps_per_run > plan.opt.budget_usd) *within_budget = false;
      return plan.steps_per_run * step_s;
    }
    case SearchObjective::kStepTimeP90: return step_s;  // times HighRatio, applied by the caller
  }
  return step_s;
}

// Shared state of one search.
struct Shared {
  std::atomic<size_t> next_unit{0};
  std::atomic<int64_t> units_done{0}, evaluated{0}, pruned{0}, fitting{0};
  std::atomic<bool> stop{false};
  std::atomic<int> stop_reason{0};  // 1 deadline, 2 cancelled
  std::mutex mu;
  std::condition_variable cv;
  int workers_left = 0;
};

class Worker {
 public:
  Worker(const Plan& plan, Shared& shared) : plan_(plan), shared_(shared), job_(*plan.base) {
    absl::StatusOr<GemmModel> gm = GemmModel::Create(job_.hardware, job_.profile);
    if (gm.ok()) gemm_.emplace(*std::move(gm));
  }

  void Run() {
    for (;;) {
      if (shared_.stop.load(std::memory_order_relaxed)) break;
      const size_t i = shared_.next_unit.fetch_add(1);
      if (i >= plan_.units.size()) break;
      RunUnit(plan_.units[i]);
      Flush();
      if (!stopped_) shared_.units_done.fetch_add(1);
    }
    Flush();
  }

  Partial& result() { return out_; }

 private:
  void Flush() {
    shared_.evaluated.fetch_add(out_.evaluated - flushed_evaluated_);
    shared_.pruned.fetch_add(out_.pruned - flushed_pruned_);
    shared_.fitting.fetch_add(out_.fitting - flushed_fitting_);
    flushed_evaluated_ = out_.evaluated;
    flushed_pruned_ = out_.pruned;
    flushed_fitting_ = out_.fitting;
  }

  // Called at every loop level: a clock read every 256 calls, the shared stop flag (set by the
  // calling thread on cancellation or the deadline) with it.
  bool CheckStop() {
    if (stopped_) return true;
    if (++since_check_ < 256) return false;
    since_check_ = 0;
    if (shared_.stop.load(std::memory_order_relaxed)) {
      stopped_ = true;
    } else if (Clock::now() > plan_.opt.deadline) {
      shared_.stop_reason.store(1);
      shared_.stop.store(true);
      stopped_ = true;
    }
    if (out_.evaluated - flushed_evaluated_ > 4096) Flush();
    return stopped_;
  }

  void SetRecompute(int r) {
    if (r == applied_recompute_) return;
    const RecomputeOption& o = plan_.recomputes[r];
    job_.training.recompute = o.recompute;
    job_.training.recompute_modules = o.modules;
    job_.training.recompute_num_layers = o.num_layers;
    applied_recompute_ = r;
  }

  void Offer(const Entry& e) {
    // With a framework filter, 4x as many are kept: the ones it rejects are dropped at the merge.
    const size_t top_n = static_cast<size_t>(std::max(1, plan_.opt.top_n));
    const size_t n = plan_.opt.accept ? std::max(4 * top_n, top_n + 32) : top_n;
    std::vector<Entry>& top = out_.top;
    if (top.size() < n) {
      top.push_back(e);
      std::push_heap(top.begin(), top.end(), Better);
    } else if (Better(e, top.front())) {
      std::pop_heap(top.begin(), top.end(), Better);
      top.back() = e;
      std::push_heap(top.begin(), top.end(), Better);
    }
    auto [it, inserted] = out_.best.try_emplace(e.c.gpus, e);
    if (!inserted && Better(e, it->second)) it->second = e;
    ParetoInsert(out_.fronts[e.c.gpus], e);
  }

  void RunUnit(const Unit& u);

  const Plan& plan_;
  Shared& shared_;
  Job job_;
  std::optional<GemmModel> gemm_;
  Partial out_;
  int since_check_ = 0;
  bool stopped_ = false;
  int applied_recompute_ = -1;
  int64_t flushed_evaluated_ = 0, flushed_pruned_ = 0, flushed_fitting_ = 0;
};

// What a candidate layout keeps of the job, shared by the search's worker (which evaluates it)
// and ToLayout (which reports it), so the two cannot differ: the job's uneven first / last stage
// only on the job's own pipeline (other pipelines split evenly), and TP overlap only with TP > 1
// and SP (Megatron-LM's validate_args asserts it; at TP 1 there is nothing to overlap).
bool KeepsOwnStageSplit(const Plan& plan, int64_t pp, int64_t vpp) {
  return pp == plan.base->parallelism.pp && vpp == plan.base->parallelism.vpp;
}
bool TpOverlapOn(bool requested, int64_t tp, bool sp) { return requested && tp > 1 && sp; }

void Worker::RunUnit(const Unit& u) {
  const Plan& P = plan_;
  Parallelism& par = job_.parallelism;
  TrainingConfig& t = job_.training;
  par.tp = u.tp;
  par.cp = u.cp;
  par.pp = u.pp;
  par.ep = u.ep;
  par.etp = u.etp;
  par.dp = u.dp;
  job_.cluster.gpu_count = u.gpus;
  const PrecisionOption& prec = P.precisions[u.precision];
  t.precision.gemm = prec.gemm;
  t.fp8_param_gather = prec.fp8_param_gather;

  // Micro-batch sizes: divisors of the global batch per DP rank (the divisors of the global
  // batch that divide it).
  const int64_t per_dp = P.gbs / u.dp;
  std::vector<int64_t> mbs_all;
  for (int64_t d : P.batch_divisors) {
    if (d > per_dp || (P.opt.space.max_micro_batch_size > 0 && d > P.opt.space.max_micro_batch_size)) break;
    if (per_dp % d == 0) mbs_all.push_back(d);
  }
  const std::vector<bool>& sps = u.tp > 1 ? P.sps : P.sps_tp1;
  // Layer costs and activation terms of this unit, by (mbs, sp, otp) and (mbs, sp, recompute).
  std::map<std::tuple<int64_t, bool, bool>, std::shared_ptr<const StepLayerCosts>> layer_cache;
  std::map<std::tuple<int64_t, bool, int>, LayerActivationTerms> act_cache;

  for (int64_t vpp : VppOptions(P, u.pp)) {
    if (CheckStop()) return;
    par.vpp = vpp;
    // As ToLayout reports it (until 2026-11-29 the job's split stayed on every pipeline here, so a
    // PP 2 layout of a PP 16 recipe with 4 / 1 layers on its end stages was evaluated with 5 of its
    // 61 layers, "fit", and was reported, whole, as a layout that does not: row 230).
    const bool own_pipeline = KeepsOwnStageSplit(P, u.pp, vpp);
    par.first_stage_layers = own_pipeline ? P.base->parallelism.first_stage_layers : 0;
    par.last_stage_layers = own_pipeline ? P.base->parallelism.last_stage_layers : 0;
    const std::vector<PipelineSchedule> schedules = ScheduleOptions(P, u.pp, vpp);
    std::vector<int64_t> mbs_list;
    for (int64_t b : mbs_all) {
      if (vpp > 1 && (P.gbs / (b * u.dp)) % u.pp != 0) continue;  // interleaving: m % pp == 0
      mbs_list.push_back(b);
    }
    if (mbs_list.empty() || schedules.empty()) continue;
    const int64_t children = static_cast<int64_t>(mbs_list.size() * sps.size() * P.recomputes.size() *
                                                  schedules.size() * P.otps.size() * P.odps.size());
    for (size_t si = 0; si < P.shardings.size(); ++si) {
      if (CheckStop()) return;
      const Sharding sh = P.shardings[si];
      t.sharding = sh;
      std::vector<int64_t> replicas = {1};
      if (sh != Sharding::kNone && P.opt.space.hsdp) replicas = Divisors(u.dp * u.cp);
      for (int64_t r : replicas) {
        if (CheckStop()) return;
        par.dp_replicate = r;
        out_.enumerated += children;
        Cand c;
        c.gpus = u.gpus; c.tp = u.tp; c.cp = u.cp; c.pp = u.pp; c.ep = u.ep; c.etp = u.etp; c.dp = u.dp;
        c.vpp = vpp; c.dp_replicate = r; c.precision = static_cast<int8_t>(u.precision);
        c.sharding = static_cast<int8_t>(si);
        // The memory lower bound of every child (docs/SEARCH.md): everything but activations.
        {
          t.micro_batch_size = mbs_list.front();
          par.sequence_parallel = sps.front();
          par.schedule = schedules.front();
          SetRecompute(0);
          const MemoryEstimate lb = EstimateMemory(job_, LayerActivationTerms{});
          const double bound = lb.weights_bytes + lb.gradients_bytes + lb.optimizer_states_bytes + 0.0 +
                               lb.communication_buffers_bytes + lb.cuda_context_bytes + lb.workspace_bytes;
          if (bound < out_.min_bound_bytes) {
            out_.min_bound_bytes = bound;
            out_.min_bound_cand = c;
          }
          if (P.opt.prune && bound > P.capacity_bytes) {
            out_.pruned += children;
            continue;
          }
        }
        for (int64_t mbs : mbs_list) {
          if (CheckStop()) return;
          t.micro_batch_size = mbs;
          c.mbs = mbs;
          for (size_t spi = 0; spi < sps.size(); ++spi) {
            const bool sp = sps[spi];
            par.sequence_parallel = sp;
            // The index into the plan's list, as ToLayout reads it (until 2026-11-29 the value: with
            // the job's SP kept on, the list is {true} and index 1 was read past its end, so a
            // layout evaluated with SP was reported without it).
            c.sp = static_cast<int8_t>(spi);
            for (int ri = 0; ri < static_cast<int>(P.recomputes.size()); ++ri) {
              if (CheckStop()) return;
              SetRecompute(ri);
              c.recompute = static_cast<int8_t>(ri);
              auto [ait, anew] = act_cache.try_emplace({mbs, sp, ri});
              if (anew) ait->second = ComputeLayerActivationTerms(job_);
              const LayerActivationTerms& terms = ait->second;
              for (size_t k = 0; k < schedules.size(); ++k) {
                par.schedule = schedules[k];
                c.schedule = static_cast<int8_t>(k);
                if (CheckStop()) return;
                const MemoryEstimate mem = EstimateMemory(job_, terms);
                const int64_t variants = static_cast<int64_t>(P.otps.size() * P.odps.size());
                out_.evaluated += variants;
                if (!mem.fits) {
                  if (mem.total_bytes < out_.min_total_bytes) {
                    out_.min_total_bytes = mem.total_bytes;
                    out_.min_total_cand = c;
                  }
                  continue;
                }
                for (size_t oi = 0; oi < P.otps.size(); ++oi) {
                  const bool otp = P.otps[oi];
                  t.overlap_tp_comm = TpOverlapOn(otp, u.tp, sp);  // as ToLayout reports it
                  c.otp = static_cast<int8_t>(oi);
                  auto [lit, lnew] = layer_cache.try_emplace({mbs, sp, otp});
                  if (lnew) lit->second = ComputeStepLayerCosts(job_, gemm_ ? &*gemm_ : nullptr);
                  for (size_t di = 0; di < P.odps.size(); ++di) {
                    t.overlap_dp_comm = P.odps[di];
                    c.odp = static_cast<int8_t>(di);
                    const double step = EstimateStepTime(job_, *lit->second).step_time_s;
                    ++out_.fitting;
                    bool ok = true;
                    Entry e;
                    e.key = ObjectiveKey(P, step, u.gpus, u.precision, &ok);
                    if (P.opt.objective == SearchObjective::kStepTimeP90) {
                      e.key *= HighRatio(P, u.gpus, u.precision, u.pp, sh);
                    }
                    if (!ok) {
                      ++out_.over_budget;
                      const double run_usd = static_cast<double>(u.gpus) * P.price_per_gpu_hour * step / 3600.0 *
                                             P.steps_per_run;
                      if (run_usd < out_.min_run_usd) {
                        out_.min_run_usd = run_usd;
                        out_.min_run_cand = c;
                      }
                      continue;
                    }
                    e.step_time_s = step;
                    e.headroom_bytes = mem.headroom_bytes;
                    e.c = c;
                    Offer(e);
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}

Layout ToLayout(const Plan& plan, const Cand& c) {
  Layout l;
  Parallelism& p = l.parallelism;
  p = plan.base->parallelism;
  p.tp = c.tp; p.cp = c.cp; p.pp = c.pp; p.ep = c.ep; p.etp = c.etp; p.dp = c.dp; p.vpp = c.vpp;
  p.dp_replicate = c.dp_replicate;
  if (!KeepsOwnStageSplit(plan, c.pp, c.vpp)) p.first_stage_layers = p.last_stage_layers = 0;
  // .at: an index past the list is a defect of the worker (it once recorded the value: M136).
  p.sequence_parallel = c.tp > 1 ? plan.sps.at(c.sp) : plan.sps_tp1.at(c.sp);
  p.schedule = ScheduleOptions(plan, c.pp, c.vpp)[c.schedule];
  l.micro_batch_size = c.mbs;
  l.recompute = plan.recomputes[c.recompute];
  l.sharding = plan.shardings[c.sharding];
  l.overlap_tp_comm = TpOverlapOn(plan.otps[c.otp], c.tp, p.sequence_parallel);
  l.overlap_dp_comm = plan.odps[c.odp];
  l.gemm = plan.precisions[c.precision].gemm;
  l.fp8_param_gather = plan.precisions[c.precision].fp8_param_gather;
  return l;
}

absl::Status Bad(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

// The largest step-time term difference between the best and the runner-up.
std::string RunnerUpReason(const SearchResult& r) {
  if (r.top.size() < 2) return "";
  const Prediction& a = r.top[0].prediction;
  const Prediction& b = r.top[1].prediction;
  const StepBreakdown &x = a.breakdown, &y = b.breakdown;
  const std::pair<const char*, double> d[] = {
      {"gemm", y.gemm_s - x.gemm_s},
      {"attention", y.attention_s - x.attention_s},
      {"elementwise", y.elementwise_s - x.elementwise_s},
      {"recompute", y.recompute_s - x.recompute_s},
      {"tp_comm", y.tp_comm_s - x.tp_comm_s},
      {"cp_comm", y.cp_comm_s - x.cp_comm_s},
      {"ep_comm", y.ep_comm_s - x.ep_comm_s},
      {"pp_comm", y.pp_comm_s - x.pp_comm_s},
      {"dp_comm", y.dp_comm_s - x.dp_comm_s},
      {"pipeline_bubble", y.pipeline_bubble_s - x.pipeline_bubble_s},
      {"optimizer", y.optimizer_s - x.optimizer_s},
      {"launch_overhead", y.launch_overhead_s - x.launch_overhead_s},
  };
  const auto* worst = &d[0];
  for (const auto& e : d) {
    if (e.second > worst->second) worst = &e;
  }
  const double pct = 100 * (b.step_time_s - a.step_time_s) / a.step_time_s;
  std::string s = absl::StrFormat("#2 (%s) ", LayoutSummary(r.top[1].layout));
  if (r.objective == SearchObjective::kStepTime || b.gpu_count == a.gpu_count) {
    // Two constant formats (clang 14's absl checks that a format string is constexpr).
    if (std::fabs(pct) < 0.1) {
      absl::StrAppendFormat(&s, "has a %.3f%% %s step", std::fabs(pct), pct >= 0 ? "longer" : "shorter");
    } else {
      absl::StrAppendFormat(&s, "has a %.1f%% %s step", std::fabs(pct), pct >= 0 ? "longer" : "shorter");
    }
  } else {
    absl::StrAppendFormat(&s, "ranks lower on %s (%d GPUs vs %d; step %+.1f%%)", SearchObjectiveName(r.objective),
                          b.gpu_count, a.gpu_count, pct);
  }
  if (worst->second > 0) {
    absl::StrAppendFormat(&s, ": the largest difference is %s, %+.4g s per step", worst->first, worst->second);
  } else {
    absl::StrAppend(&s, ": no step-time term is larger");
  }
  return s;
}

}  // namespace

absl::Status CheckSearchCaps(const Job& base, const SearchOptions& options) {
  const ModelShape m = base.model.Resolved();
  const SearchSpace& sp = options.space;
  auto cap = [](const char* field, int64_t v, int64_t max) -> absl::Status {
    if (v <= max) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", v, " is above the layout search's cap of ", max));
  };
  if (absl::Status s = cap("model.shape.layers", m.layers, kSearchMaxLayers); !s.ok()) return s;
  if (absl::Status s = cap("training.global_batch_size", base.training.global_batch_size, kSearchMaxGlobalBatchSize);
      !s.ok()) {
    return s;
  }
  if (m.moe.enabled()) {
    if (absl::Status s = cap("model.shape.moe.routed_experts", m.moe.routed_experts, kSearchMaxExpertCount); !s.ok()) {
      return s;
    }
    if (sp.etp) {
      if (absl::Status s =
              cap("model.shape.moe.expert_ffn_hidden_size", m.moe.expert_ffn_hidden_size, kSearchMaxFfnHiddenSize);
          !s.ok()) {
        return s;
      }
    }
  }
  if (sp.gpu_counts.size() > kSearchMaxGpuCounts) {
    return absl::InvalidArgumentError(absl::StrCat("cluster.gpu_count: ", sp.gpu_counts.size(),
                                                   " GPU counts; at most ", kSearchMaxGpuCounts, " per search"));
  }
  if (options.top_n > kSearchMaxTopN) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_n: ", options.top_n, " is above the layout search's cap of ", kSearchMaxTopN));
  }
  if (options.threads < 0 || options.threads > kSearchMaxThreads) {
    return absl::InvalidArgumentError(
        absl::StrCat("threads: ", options.threads, " must be in [0, ", kSearchMaxThreads, "] (0: one per core)"));
  }
  return absl::OkStatus();
}

namespace {

// ---------------------------------------------------------------------------------------------
// SearchLayouts' steps: the checks and the plan, the enumeration of work units, the workers'
// run, the merge and pruning of their findings, and the ranking of what is reported.

// The options, and the base job's own fields checked on a one-GPU layout (ValidateJob), then the
// inputs that drive the enumeration's work against their caps (CheckSearchCaps: reliability
// review 2, N1).
absl::Status CheckSearchOptions(const Job& base, const SearchOptions& options) {
  const SearchSpace& sp = options.space;
  if (options.top_n < 1) return Bad("top_n", absl::StrCat(options.top_n, " must be >= 1"));
  if (options.max_pareto < 0) return Bad("max_pareto", "must be >= 0");
  for (const auto& [v, name] : {std::pair{sp.max_tp, "max_tp"}, {sp.max_pp, "max_pp"}, {sp.max_vpp, "max_vpp"},
                                {sp.max_cp, "max_cp"}, {sp.max_ep, "max_ep"},
                                {sp.max_micro_batch_size, "max_micro_batch_size"}}) {
    if (v < 0) return Bad(absl::StrCat("space.", name), absl::StrCat(v, " must be >= 0 (0: default)"));
  }
  if (sp.shardings.empty()) return Bad("space.shardings", "give at least one sharding");
  if (!(options.budget_usd >= 0)) return Bad("budget_usd", "must be >= 0");
  {
    Job probe = base;
    probe.parallelism = Parallelism{};
    probe.parallelism.schedule = PipelineSchedule::k1F1B;
    probe.cluster.gpu_count = 1;
    probe.training.micro_batch_size = 1;
    if (absl::Status s = ValidateJob(probe); !s.ok()) return s;
  }
  return CheckSearchCaps(base, options);
}

// The plan's job-wide inputs: the divisors the enumeration walks, the figures the objectives
// need (tokens and model FLOPs per step: ModelFlopsPerStep; steps per run: dataset_tokens /
// tokens per step, else train_iters), the objective's own checks, and TP's cap (the node).
absl::Status PlanInputs(const Job& base, const SearchOptions& options, Plan* plan) {
  const SearchSpace& sp = options.space;
  plan->m = base.model.Resolved();
  plan->gbs = base.training.global_batch_size;
  {
    const ModelShape& m = plan->m;
    plan->layer_divisors = Divisors(m.layers);
    plan->batch_divisors = Divisors(plan->gbs);
    if (m.moe.enabled()) {
      plan->expert_divisors = Divisors(m.moe.routed_experts);
      if (sp.etp) plan->expert_ffn_divisors = Divisors(m.moe.expert_ffn_hidden_size);
    }
  }
  plan->capacity_bytes = base.hardware.hbm_capacity_bytes;
  plan->tokens_per_step = base.TokensPerStep();
  plan->model_flops_per_step =
      ModelFlopsPerStep(base.model, base.training.seq_length, static_cast<double>(base.training.global_batch_size));
  plan->price_per_gpu_hour = base.PricePerGpuHourUsd();
  plan->steps_per_run = base.training.dataset_tokens > 0 ? base.training.dataset_tokens / plan->tokens_per_step
                                                         : static_cast<double>(base.training.train_iters);
  if (options.objective == SearchObjective::kTimeToTrain && !(plan->steps_per_run > 0)) {
    return Bad("training.dataset_tokens", "the time_to_train objective needs dataset_tokens or train_iters");
  }
  if (options.budget_usd > 0 && options.objective != SearchObjective::kTimeToTrain) {
    return Bad("budget_usd", "applies to the time_to_train objective only");
  }
  if (options.objective == SearchObjective::kStepTimeP90) {
    if (!base.intervals) {
      return Bad("objective", "step_time_p90 needs the interval table (presets/intervals.yaml), which this job has not");
    }
    plan->intervals = base.intervals.get();
    plan->regime = RegimeOf(base);
  }
  const int64_t gpn = base.GpusPerNode();
  plan->max_tp = sp.max_tp > 0 ? sp.max_tp : std::max<int64_t>(1, gpn);
  return absl::OkStatus();
}

// The option lists a layout picks from: precisions (the job's, and FP8 where the hardware has an
// FP8 peak and the profile an FP8 GEMM rate), recomputation, schedules (the job's family first),
// shardings, sequence parallelism and communication overlap.
absl::Status PlanOptionLists(const Job& base, const SearchSpace& sp, Plan* plan) {
  plan->precisions.push_back({base.training.precision.gemm, base.training.fp8_param_gather,
                              base.hardware.PeakFlops(base.training.precision.gemm)});
  if (sp.fp8 && base.training.precision.gemm != DType::kFP8 && base.hardware.PeakFlops(DType::kFP8) > 0 &&
      base.profile.GemmRate(DType::kFP8, 4096, 4096, 4096).found) {
    plan->precisions.push_back({DType::kFP8, base.training.fp8_param_gather, base.hardware.PeakFlops(DType::kFP8)});
  }
  plan->recomputes = sp.recompute;
  if (plan->recomputes.empty()) {
    plan->recomputes = {{Recompute::kNone, {}, 0},
                        {Recompute::kSelective, base.framework.selective_recompute_modules, 0},
                        {Recompute::kFull, {}, 0}};
  }
  for (size_t i = 0; i < plan->recomputes.size(); ++i) {
    RecomputeOption& r = plan->recomputes[i];
    if (r.recompute == Recompute::kSelective && r.modules.empty()) r.modules = base.framework.selective_recompute_modules;
    if (r.recompute != Recompute::kSelective) r.modules.clear();
    if (r.num_layers < 0) return Bad(absl::StrCat("space.recompute[", i, "].num_layers"), "must be >= 0");
    if (r.recompute != Recompute::kFull) r.num_layers = 0;
  }
  // The job's schedule family first, then (on request) the others.
  {
    const PipelineSchedule own = base.parallelism.Schedule() == PipelineSchedule::kInterleaved1F1B
                                     ? PipelineSchedule::k1F1B
                                     : base.parallelism.Schedule();
    plan->schedules.push_back(own);
    if (sp.all_schedules) {
      for (PipelineSchedule s : {PipelineSchedule::k1F1B, PipelineSchedule::kGPipe, PipelineSchedule::kZeroBubble,
                                 PipelineSchedule::kDualPipe}) {
        if (s != own) plan->schedules.push_back(s);
      }
    }
  }
  plan->shardings = sp.shardings;
  plan->sps_tp1 = {false};
  plan->sps = sp.sequence_parallel ? std::vector<bool>{false, true} : std::vector<bool>{base.parallelism.sequence_parallel};
  const bool tp_overlap = base.framework.overlap.tp_comm.supported;
  plan->otps = sp.overlap_off && tp_overlap ? std::vector<bool>{false, true} : std::vector<bool>{tp_overlap};
  plan->odps = sp.overlap_off ? std::vector<bool>{false, true} : std::vector<bool>{true};
  return absl::OkStatus();
}

// The GPU counts searched, ascending and distinct (the job's own when none given), each in
// [1, kSearchMaxGpuCount].
absl::StatusOr<std::vector<int64_t>> SearchGpuCounts(const Job& base, const SearchSpace& sp) {
  std::vector<int64_t> counts = sp.gpu_counts;
  if (counts.empty()) counts.push_back(base.cluster.gpu_count);
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  for (int64_t g : counts) {
    if (g < 1 || g > kSearchMaxGpuCount) {
      return Bad("cluster.gpu_count", absl::StrCat(g, " must be in [1, 2^24]"));  // kSearchMaxGpuCount
    }
  }
  return counts;
}

// Enumeration: the work units (GPU count x precision x TP x CP x PP x (EP, ETP), DP what is
// left) into plan.units. TP divides the attention heads and the FFN (and the KV heads, or they
// it, without MLA); CP needs seq_length % (2 CP) == 0 (Megatron-LM's load-balanced CP splits
// each sequence into 2 CP chunks); PP at most the layers (dividing them unless uneven pipelines
// are searched); DP divides the global batch; EP divides the routed experts and ETP x EP the
// expert-parallel group. The deadline and cancellation are checked here too (a wide space over
// 4096 GPU counts takes a while to enumerate), and the plan's size is capped. `any_structure`:
// some TP x CP x PP x DP before the batch split; `stop_reason`: 1 deadline, 2 cancelled.
absl::Status EnumerateUnits(const Job& base, const SearchOptions& options, const std::vector<int64_t>& counts,
                            Plan& plan, bool* any_structure_out, int* stop_reason_out) {
  const SearchSpace& sp = options.space;
  const ModelShape& m = plan.m;
  bool any_structure = false;  // some TP x CP x PP x DP before the batch split
  int enum_checks = 0;
  int stop_reason = 0;  // 1 deadline, 2 cancelled (while enumerating)
  auto enumeration_stopped = [&]() {
    if (stop_reason != 0) return true;
    if (++enum_checks % 1024 != 0) return false;
    if (Clock::now() > options.deadline) stop_reason = 1;
    else if (options.cancelled && options.cancelled()) stop_reason = 2;
    return stop_reason != 0;
  };
  for (int64_t g : counts) {
    if (enumeration_stopped()) break;
    const std::vector<int64_t> g_divisors = Divisors(g);
    for (int pi = 0; pi < static_cast<int>(plan.precisions.size()); ++pi) {
      for (int64_t tp : g_divisors) {
        if (enumeration_stopped()) break;
        if (tp > plan.max_tp) break;
        if (m.attention_heads % tp != 0 || m.ffn_hidden_size % tp != 0) continue;
        if (!m.mla.enabled() && m.kv_heads % tp != 0 && tp % m.kv_heads != 0) continue;
        // Mamba-2 layers: whole heads and groups per TP rank (mamba_mixer.py), no CP (ValidateJob).
        const bool mamba = m.Hybrid() && m.HybridCounts().mamba > 0;
        if (mamba && (m.mamba.num_heads % tp != 0 || m.mamba.num_groups % tp != 0)) continue;
        for (int64_t cp : g_divisors) {
          if (enumeration_stopped()) break;
          if ((g / tp) % cp != 0) continue;
          if (cp > g / tp || (sp.max_cp > 0 && cp > sp.max_cp)) break;
          if (cp > 1 && base.training.seq_length % (2 * cp) != 0) continue;
          if (cp > 1 && mamba) break;
          for (int64_t pp : g_divisors) {
            if (enumeration_stopped()) break;
            if ((g / (tp * cp)) % pp != 0) continue;
            if (pp > g / (tp * cp) || pp > m.layers || (sp.max_pp > 0 && pp > sp.max_pp)) break;
            if (!sp.uneven_pipeline && m.layers % pp != 0) continue;
            const int64_t dp = g / (tp * cp * pp);
            any_structure = true;
            if (plan.gbs % dp != 0) continue;
            std::vector<std::pair<int64_t, int64_t>> expert;  // (ep, etp)
            if (!m.moe.enabled()) {
              expert.push_back({1, 0});
            } else {
              std::vector<int64_t> etps = {0};
              if (sp.etp) {
                etps.clear();
                for (int64_t e : plan.expert_ffn_divisors) {
                  if (e > tp * cp * dp) break;
                  etps.push_back(e == tp ? 0 : e);
                }
              }
              for (int64_t etp : etps) {
                if (enumeration_stopped()) break;
                const int64_t etp_v = etp > 0 ? etp : tp;
                for (int64_t ep : plan.expert_divisors) {
                  if (sp.max_ep > 0 && ep > sp.max_ep) break;
                  if ((tp * cp * dp) % (etp_v * ep) != 0) continue;
                  if (ep > 1 && m.moe.expert_ffn_hidden_size % etp_v != 0) continue;
                  if (ep == 1 && etp > 0 && m.moe.expert_ffn_hidden_size % etp_v != 0) continue;
                  expert.push_back({ep, etp});
                }
              }
            }
            if (plan.units.size() + expert.size() > kSearchMaxWorkUnits) {
              return Bad("cluster.gpu_count",
                         absl::StrCat("the search space holds more than ", kSearchMaxWorkUnits,
                                      " work units (GPU count x TP x CP x PP x EP); search fewer GPU counts (",
                                      counts.size(), " given) or bound it with max_tp/max_pp/max_cp/max_ep"));
            }
            for (const auto& [ep, etp] : expert) {
              plan.units.push_back({static_cast<int32_t>(g), static_cast<int32_t>(tp), static_cast<int32_t>(cp),
                                    static_cast<int32_t>(pp), static_cast<int32_t>(ep), static_cast<int32_t>(etp),
                                    static_cast<int32_t>(dp), pi});
            }
          }
        }
      }
    }
  }
  *any_structure_out = any_structure;
  *stop_reason_out = stop_reason;
  return absl::OkStatus();
}

// Why the enumeration left nothing to run: stopped by the deadline or cancellation, no DP that
// divides the global batch, or no valid TP x CP x PP at all. OK when there are work units.
absl::Status CheckEnumeration(const Job& base, const Plan& plan, bool any_structure, int stop_reason,
                              const std::string& counts_text) {
  if (stop_reason != 0) {
    const std::string why = absl::StrCat("search stopped (", stop_reason == 2 ? "cancelled" : "deadline reached",
                                         " while enumerating the layouts, ", plan.units.size(),
                                         " work units so far) before any layout that fits");
    return stop_reason == 2 ? absl::CancelledError(why) : absl::DeadlineExceededError(why);
  }
  if (!plan.units.empty()) return absl::OkStatus();
  const ModelShape& m = plan.m;
  if (any_structure) {
    return Bad("training.global_batch_size",
               absl::StrCat(plan.gbs, " sequences cannot be split over ", counts_text,
                            " GPUs: no data-parallel size of a valid TP x CP x PP layout divides it"));
  }
  return Bad("cluster.gpu_count",
             absl::StrCat(counts_text, " GPUs admit no valid layout of ", base.model.name.empty() ? "the model" : base.model.name,
                          ": TP (at most ", plan.max_tp, ") must divide attention_heads ", m.attention_heads,
                          ", kv_heads ", m.kv_heads, " and ffn_hidden_size ", m.ffn_hidden_size,
                          "; CP must divide seq_length/2; PP at most layers ", m.layers));
}

// Runs the work units on `threads` workers (options.threads, else one per core; at most one per
// unit) and waits for them: every 100 ms, or at the deadline when it comes sooner, it stops them
// past the deadline or when cancelled, and reports progress. Returns the thread count.
int RunWorkers(const Plan& plan, const SearchOptions& options, Clock::time_point start, Shared& shared,
               std::vector<std::unique_ptr<Worker>>& workers) {
  const int hw_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = std::max(1, std::min<int>(options.threads > 0 ? options.threads : hw_threads,
                                                static_cast<int>(plan.units.size())));
  shared.workers_left = threads;
  for (int i = 0; i < threads; ++i) workers.push_back(std::make_unique<Worker>(plan, shared));
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&, i] {
      workers[i]->Run();
      std::lock_guard<std::mutex> lock(shared.mu);
      if (--shared.workers_left == 0) shared.cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lock(shared.mu);
    while (shared.workers_left > 0) {
      // Every 100 ms, or at the deadline when it comes sooner; once stopped, every 100 ms again
      // while the workers finish (no busy wait past the deadline: review 2, N1).
      const Clock::time_point now = Clock::now();
      auto wake = now + std::chrono::milliseconds(100);
      if (!shared.stop.load() && options.deadline > now && options.deadline < wake) wake = options.deadline;
      shared.cv.wait_until(lock, wake);
      if (shared.workers_left == 0) break;
      if (Clock::now() > options.deadline && !shared.stop.load()) {
        shared.stop_reason.store(1);
        shared.stop.store(true);
      }
      lock.unlock();
      if (options.cancelled && options.cancelled() && !shared.stop.load()) {
        shared.stop_reason.store(2);
        shared.stop.store(true);
      }
      if (options.progress) {
        SearchProgress pr;
        pr.units_done = shared.units_done.load();
        pr.units_total = static_cast<int64_t>(plan.units.size());
        pr.evaluated = shared.evaluated.load();
        pr.pruned = shared.pruned.load();
        pr.fitting = shared.fitting.load();
        pr.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
        options.progress(pr);
      }
      lock.lock();
    }
  }
  for (std::thread& th : pool) th.join();
  return threads;
}

// The workers' findings merged: every worker's top entries (unsorted), the Pareto fronts by GPU
// count (ParetoInsert), the best by GPU count (Better), the counters and the smallest memory /
// cheapest run for the errors (ties broken by the layout's fields).
void MergeWorkers(std::vector<std::unique_ptr<Worker>>& workers, std::vector<Entry>* top,
                  std::map<int64_t, std::vector<Entry>>* fronts, std::map<int64_t, Entry>* best, Partial* total) {
  for (auto& w : workers) {
    Partial& p = w->result();
    top->insert(top->end(), p.top.begin(), p.top.end());
    for (auto& [g, f] : p.fronts) {
      for (const Entry& e : f) ParetoInsert((*fronts)[g], e);
    }
    for (auto& [g, e] : p.best) {
      auto [it, inserted] = best->try_emplace(g, e);
      if (!inserted && Better(e, it->second)) it->second = e;
    }
    total->enumerated += p.enumerated;
    total->pruned += p.pruned;
    total->evaluated += p.evaluated;
    total->fitting += p.fitting;
    total->over_budget += p.over_budget;
    if (p.min_total_bytes < total->min_total_bytes ||
        (p.min_total_bytes == total->min_total_bytes && p.min_total_cand.Tie() < total->min_total_cand.Tie())) {
      total->min_total_bytes = p.min_total_bytes;
      total->min_total_cand = p.min_total_cand;
    }
    if (p.min_run_usd < total->min_run_usd) {
      total->min_run_usd = p.min_run_usd;
      total->min_run_cand = p.min_run_cand;
    }
    if (p.min_bound_bytes < total->min_bound_bytes) {
      total->min_bound_bytes = p.min_bound_bytes;
      total->min_bound_cand = p.min_bound_cand;
    }
  }
}

// Pruning by options.accept (the framework's launch rules): the top_n best it starts (an error
// when it starts none of the sorted `top`), and the best by GPU count and the fronts it starts;
// then `top` cut to top_n.
absl::Status KeepAccepted(const Job& base, const Plan& plan, const SearchOptions& options, std::vector<Entry>* top,
                          std::map<int64_t, std::vector<Entry>>* fronts, std::map<int64_t, Entry>* best,
                          SearchResult* result) {
  auto accepted = [&](const Entry& e) {
    return !options.accept || options.accept(WithLayout(base, ToLayout(plan, e.c)));
  };
  std::string first_rejected;  // the best layout the framework refused, for the error below
  if (options.accept) {
    std::vector<Entry> kept;
    int64_t rejected = 0;
    for (const Entry& e : *top) {
      if (kept.size() >= static_cast<size_t>(options.top_n)) break;
      if (accepted(e)) {
        kept.push_back(e);
      } else {
        if (first_rejected.empty()) first_rejected = LayoutSummary(ToLayout(plan, e.c));
        ++rejected;
      }
    }
    result->stats.rejected_by_framework = rejected;
    if (kept.empty() && !top->empty()) {
      return Bad("framework", absl::StrFormat("the framework starts none of the %d best layouts that fit (the best, %s, "
                                              "among them); its launch rules refuse them",
                                              static_cast<int>(top->size()), first_rejected));
    }
    *top = std::move(kept);
    for (auto it = best->begin(); it != best->end();) it = accepted(it->second) ? std::next(it) : best->erase(it);
    for (auto& [g, f] : *fronts) f.erase(std::remove_if(f.begin(), f.end(), [&](const Entry& e) { return !accepted(e); }), f.end());
  }
  if (top->size() > static_cast<size_t>(options.top_n)) top->resize(options.top_n);
  return absl::OkStatus();
}

// Why no layout is reported: the search stopped first, none within the budget (the cheapest run
// named), none fits the memory (the smallest evaluated named), or the memory lower bound
// (weights, gradients and optimizer states) rules out every layout (the smallest bound named).
absl::Status NoLayoutError(const Job& base, const Plan& plan, const SearchOptions& options, const Partial& total,
                           const SearchResult& result, int stop_reason, const std::string& counts_text) {
  if (result.partial) {
    const std::string why = absl::StrCat("search stopped (", result.partial_reason, ") before any layout that fits");
    return stop_reason == 2 ? absl::CancelledError(why) : absl::DeadlineExceededError(why);
  }
  const double gib = 1024.0 * 1024 * 1024;
  const std::string where = absl::StrCat(counts_text, " x ", base.hardware.name, " (",
                                         absl::StrFormat("%.1f", plan.capacity_bytes / gib), " GiB per GPU)");
  if (total.fitting > 0) {
    return Bad("budget_usd",
               absl::StrFormat("no layout on %s trains within $%.0f: %d layouts fit, the cheapest run costs $%.0f (%s)",
                               where, options.budget_usd, total.fitting, total.min_run_usd,
                               LayoutSummary(ToLayout(plan, total.min_run_cand))));
  }
  const std::string model_name = base.model.name.empty() ? "the model" : base.model.name;
  if (total.evaluated > 0) {
    const Layout l = ToLayout(plan, total.min_total_cand);
    return Bad("cluster.gpu_count",
               absl::StrFormat("no layout of %s fits on %s: the smallest needs %.1f GiB per GPU (%s); "
                               "use more GPUs or GPUs with more memory",
                               model_name, where, total.min_total_bytes / gib, LayoutSummary(l)));
  }
  const Layout l = ToLayout(plan, total.min_bound_cand);
  return Bad("cluster.gpu_count",
             absl::StrFormat("no layout of %s fits on %s: weights, gradients and optimizer states alone need "
                             "at least %.1f GiB per GPU (%s); use more GPUs or GPUs with more memory",
                             model_name, where, total.min_bound_bytes / gib, LayoutSummary(l)));
}

// Pareto across GPU counts: drop points another dominates with fewer GPUs (some o with
// o.gpus < e.gpus, o.step_time_s <= e.step_time_s, o.headroom_bytes >= e.headroom_bytes). One
// sweep by GPU count over a staircase of the points with fewer GPUs (step time ascending,
// headroom strictly ascending: the most headroom at or below each step time), O(n log n)
// instead of the O(n^2) pairs over up to 4096 counts' fronts; the same points, in the same order.
std::vector<Entry> ParetoAcrossCounts(const std::map<int64_t, std::vector<Entry>>& fronts) {
  std::vector<Entry> front;
  std::map<double, double> stair;  // step_time_s -> the most headroom at or below it
  for (auto& [g, f] : fronts) {    // by GPUs, then step time
    for (const Entry& e : f) {
      auto it = stair.upper_bound(e.step_time_s);
      const bool dominated = it != stair.begin() && std::prev(it)->second >= e.headroom_bytes;
      if (!dominated) front.push_back(e);
    }
    for (const Entry& e : f) {  // now "fewer GPUs" for the counts that follow
      auto it = stair.upper_bound(e.step_time_s);
      if (it != stair.begin() && std::prev(it)->second >= e.headroom_bytes) continue;  // adds nothing
      it = stair.insert_or_assign(e.step_time_s, e.headroom_bytes).first;
      auto next = std::next(it);
      while (next != stair.end() && next->second <= e.headroom_bytes) next = stair.erase(next);
    }
  }
  return front;
}

// A reported layout: its full prediction (Predict) and the objective's value (the key, its sign
// turned back for the objectives maximised).
absl::StatusOr<RankedLayout> Ranked(const Job& base, const Plan& plan, const SearchOptions& options, const Entry& e,
                                    int rank) {
  RankedLayout r;
  r.rank = rank;
  r.layout = ToLayout(plan, e.c);
  r.objective_value = e.key;
  if (options.objective == SearchObjective::kTokensPerSPerGpu || options.objective == SearchObjective::kMfu) {
    r.objective_value = -e.key;
  }
  absl::StatusOr<Prediction> p = Predict(WithLayout(base, r.layout));
  if (!p.ok()) {
    return absl::InternalError(absl::StrCat("search produced an invalid layout (", LayoutSummary(r.layout),
                                            "): ", p.status().message()));
  }
  r.prediction = *std::move(p);
  return r;
}

// Ranking: full predictions of what is reported (the top layouts ranked 1.., the Pareto front
// across GPU counts, evenly along it up to max_pareto, and the best on each GPU count), the
// runner-up's reason and the top layouts' interval flags.
absl::Status FillRanked(const Job& base, const Plan& plan, const SearchOptions& options, const std::vector<Entry>& top,
                        const std::map<int64_t, std::vector<Entry>>& fronts, const std::map<int64_t, Entry>& best,
                        SearchResult* result) {
  for (size_t i = 0; i < top.size(); ++i) {
    absl::StatusOr<RankedLayout> r = Ranked(base, plan, options, top[i], static_cast<int>(i) + 1);
    if (!r.ok()) return r.status();
    result->top.push_back(*std::move(r));
  }
  const std::vector<Entry> front = ParetoAcrossCounts(fronts);
  result->stats.pareto_size = static_cast<int64_t>(front.size());
  const size_t listed = options.max_pareto > 0 ? std::min<size_t>(front.size(), options.max_pareto) : front.size();
  for (size_t i = 0; i < listed; ++i) {
    // Evenly along the front, its first and last kept.
    const size_t k = listed == 1 ? 0 : (i * (front.size() - 1) + (listed - 1) / 2) / (listed - 1);
    absl::StatusOr<RankedLayout> r = Ranked(base, plan, options, front[k], 0);
    if (!r.ok()) return r.status();
    result->pareto.push_back(*std::move(r));
  }
  for (auto& [g, e] : best) {
    absl::StatusOr<RankedLayout> r = Ranked(base, plan, options, e, 0);
    if (!r.ok()) return r.status();
    result->best_per_gpu_count.push_back(*std::move(r));
  }
  result->runner_up_reason = RunnerUpReason(*result);
  for (const RankedLayout& r : result->top) {
    const StepTimeInterval& i = r.prediction.interval;
    if (!i.available) continue;
    result->top_outside_validated += i.validated ? 0 : 1;
    result->top_below_minimum += i.below_minimum ? 1 : 0;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SearchResult> SearchLayouts(const Job& base, const SearchOptions& options) {
  const Clock::time_point start = Clock::now();
  Plan plan;
  plan.base = &base;
  plan.opt = options;
  if (absl::Status s = CheckSearchOptions(base, options); !s.ok()) return s;
  if (absl::Status s = PlanInputs(base, options, &plan); !s.ok()) return s;
  if (absl::Status s = PlanOptionLists(base, options.space, &plan); !s.ok()) return s;
  absl::StatusOr<std::vector<int64_t>> counts = SearchGpuCounts(base, options.space);
  if (!counts.ok()) return counts.status();

  // Enumeration.
  bool any_structure = false;
  int stop_reason = 0;
  if (absl::Status s = EnumerateUnits(base, options, *counts, plan, &any_structure, &stop_reason); !s.ok()) return s;
  SearchResult result;
  result.objective = options.objective;
  result.gpu_counts = *counts;
  const std::string counts_text = counts->size() == 1 ? absl::StrCat((*counts)[0])
                                                      : absl::StrCat(counts->front(), "..", counts->back());
  if (absl::Status s = CheckEnumeration(base, plan, any_structure, stop_reason, counts_text); !s.ok()) return s;

  // Run, then merge and prune.
  Shared shared;
  std::vector<std::unique_ptr<Worker>> workers;
  const int threads = RunWorkers(plan, options, start, shared, workers);
  std::vector<Entry> top;
  std::map<int64_t, std::vector<Entry>> fronts;
  std::map<int64_t, Entry> best;
  Partial total;
  MergeWorkers(workers, &top, &fronts, &best, &total);
  std::sort(top.begin(), top.end(), Better);
  if (absl::Status s = KeepAccepted(base, plan, options, &top, &fronts, &best, &result); !s.ok()) return s;

  result.partial = shared.stop.load();
  if (result.partial) {
    result.partial_reason = absl::StrCat(
        shared.stop_reason.load() == 2 ? "cancelled" : "deadline reached", " after ", shared.units_done.load(), " of ",
        plan.units.size(), " work units (", total.evaluated, " layouts evaluated): the best found so far");
  }
  result.stats.enumerated = total.enumerated;
  result.stats.pruned = total.pruned;
  result.stats.evaluated = total.evaluated;
  result.stats.fitting = total.fitting;
  result.stats.over_budget = total.over_budget;
  result.stats.threads = threads;
  if (top.empty()) {
    return NoLayoutError(base, plan, options, total, result, shared.stop_reason.load(), counts_text);
  }

  // Ranking.
  if (absl::Status s = FillRanked(base, plan, options, top, fronts, best, &result); !s.ok()) return s;
  result.stats.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

// ---------------------------------------------------------------------------------------------
// LayoutEvaluator.

struct LayoutEvaluator::Impl {
  std::optional<GemmModel> gemm;
  // Cache keys: every input the cached parts read besides the fixed model, hardware, profile,
  // framework and choices (core/step_time.h, core/memory.h).
  using LayerKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, bool, int, int, bool, bool, bool,
                              int64_t, int64_t, bool>;
  using ActKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, bool, int, int, bool, bool, int,
                            std::vector<std::string>, int64_t, int64_t>;
  std::map<LayerKey, std::shared_ptr<const StepLayerCosts>> layers;
  std::map<ActKey, LayerActivationTerms> acts;
};

LayoutEvaluator::LayoutEvaluator(const Job& base) : impl_(new Impl) {
  absl::StatusOr<GemmModel> gm = GemmModel::Create(base.hardware, base.profile);
  if (gm.ok()) impl_->gemm.emplace(*std::move(gm));
}

LayoutEvaluator::~LayoutEvaluator() { delete impl_; }

LayoutEvaluator::Result LayoutEvaluator::Evaluate(const Job& job) {
  const Parallelism& p = job.parallelism;
  const TrainingConfig& t = job.training;
  const bool sp = p.SequenceParallelOn();
  const Impl::ActKey ak{p.tp, p.cp, p.Etp(), t.micro_batch_size, t.seq_length, sp,
                        static_cast<int>(t.precision.gemm), static_cast<int>(t.precision.params), t.flash_attention,
                        t.dropout, static_cast<int>(t.recompute), t.recompute_modules, t.recompute_num_layers, 0};
  auto [ait, anew] = impl_->acts.try_emplace(ak);
  if (anew) ait->second = ComputeLayerActivationTerms(job);
  const MemoryEstimate mem = EstimateMemory(job, ait->second);
  Result r;
  r.fits = mem.fits;
  r.memory_total_bytes = mem.total_bytes;
  r.headroom_bytes = mem.headroom_bytes;
  if (!mem.fits) return r;
  const Impl::LayerKey lk{p.tp, p.cp, p.ep, p.Etp(), t.micro_batch_size, t.seq_length, sp, t.overlap_tp_comm,
                          static_cast<int>(t.precision.gemm), static_cast<int>(t.precision.params), t.flash_attention,
                          t.dropout, t.cuda_graphs, job.GpusPerNode(), 0, t.fp8_param_gather};
  auto [lit, lnew] = impl_->layers.try_emplace(lk);
  if (lnew) lit->second = ComputeStepLayerCosts(job, impl_->gemm ? &*impl_->gemm : nullptr);
  r.step_time_s = EstimateStepTime(job, *lit->second).step_time_s;
  return r;
}

double LayoutEvaluator::MemoryLowerBoundBytes(const Job& job) {
  // Per stage, the memory without activations; the estimate is the larger stage's total, which is
  // at least that stage's static part, so the larger static part bounds it from below.
  auto static_bytes = [&](bool last_stage) {
    const MemoryEstimate lb = EstimateStageMemory(job, last_stage, LayerActivationTerms{});
    return lb.weights_bytes + lb.gradients_bytes + lb.optimizer_states_bytes + lb.communication_buffers_bytes +
           lb.cuda_context_bytes + lb.workspace_bytes;
  };
  const double first = static_bytes(false);
  return job.parallelism.pp == 1 ? first : std::max(first, static_bytes(true));
}

}  // namespace stepcast
