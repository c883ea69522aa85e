// Layout search (core/search.h, proto/search_codec.h): the fast evaluation equals Predict, the
// memory lower bound never prunes a layout that fits, the search equals brute force over the
// same space, deadlines give partial answers, bad inputs give clear errors, and the published
// runs' own layouts against the search.
#include "core/search.h"

#include <csv.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/memory.h"
#include "gtest/gtest.h"
#include "proto/megatron_args.h"
#include "proto/published_runs.h"
#include "proto/search_codec.h"
#include "test_util.h"

namespace stepcast {
namespace {

using testing::JobFromYaml;

Job MustJob(const std::string& yaml) {
  absl::StatusOr<Job> j = JobFromYaml(yaml);
  EXPECT_TRUE(j.ok()) << j.status();
  return j.ok() ? *j : Job{};
}

double Rel(double a, double b) { return a == b ? 0.0 : std::fabs(a - b) / std::max(std::fabs(a), std::fabs(b)); }

// A random layout of `base` on `gpus` GPUs that ValidateJob accepts (nullopt after many tries).
std::optional<Job> RandomLayout(std::mt19937_64& rng, const Job& base, int64_t gpus) {
  auto pick = [&](std::initializer_list<int64_t> v) { return *(v.begin() + rng() % v.size()); };
  const bool moe = base.model.moe.enabled();
  for (int attempt = 0; attempt < 2000; ++attempt) {
    Layout l = LayoutOf(base);
    Parallelism& p = l.parallelism;
    p.tp = pick({1, 2, 4, 8});
    p.cp = pick({1, 1, 2, 4});
    p.pp = pick({1, 2, 3, 4, 8, 16});
    if (gpus % (p.tp * p.cp * p.pp) != 0) continue;
    p.dp = gpus / (p.tp * p.cp * p.pp);
    p.ep = moe ? pick({1, 2, 4, 8, 16, 32}) : 1;
    p.etp = moe ? pick({0, 0, 1, 2}) : 0;
    p.vpp = pick({1, 1, 2, 3, 5});
    p.sequence_parallel = rng() % 2;
    p.schedule = static_cast<PipelineSchedule>(rng() % 5);
    l.sharding = static_cast<Sharding>(rng() % 4);
    const int64_t r = pick({1, 1, 2, 4});
    p.dp_replicate = (p.dp * p.cp) % r == 0 ? r : 1;
    l.micro_batch_size = pick({1, 1, 2, 4});
    switch (rng() % 5) {
      case 0: l.recompute = {Recompute::kNone, {}, 0}; break;
      case 1: l.recompute = {Recompute::kSelective, base.framework.selective_recompute_modules, 0}; break;
      case 2: l.recompute = {Recompute::kSelective, {"core_attn", "mlp", "layernorm"}, 0}; break;
      case 3: l.recompute = {Recompute::kFull, {}, 0}; break;
      default: l.recompute = {Recompute::kFull, {}, 1}; break;
    }
    l.overlap_tp_comm = rng() % 2;
    l.overlap_dp_comm = rng() % 2;
    if (base.hardware.PeakFlops(DType::kFP8) > 0 && rng() % 4 == 0) {
      l.gemm = DType::kFP8;
      l.fp8_param_gather = rng() % 2;
    }
    Job job = WithLayout(base, l);
    if (ValidateJob(job).ok()) return job;
  }
  return std::nullopt;
}

struct EvalCase {
  const char* name;
  const char* yaml;
  std::vector<int64_t> gpus;
};

const EvalCase kEvalCases[] = {
    {"llama3-70b", R"(
model: llama3-70b
hardware: h100-sxm
framework: megatron-bridge
cluster: {gpu_count: 64}
parallelism: {tp: 4, pp: 8, vpp: 5, sequence_parallel: true}
training: {seq_length: 8192, global_batch_size: 128, sharding: zero1, dataset_tokens: 15e12})",
     {64, 96, 128}},
    {"gpt3-175b-dropout-unfused", R"(
model: gpt3-175b
hardware: a100-80gb
cluster: {gpu_count: 1024}
parallelism: {tp: 8, pp: 16}
training: {seq_length: 2048, global_batch_size: 1536, dropout: true, flash_attention: false})",
     {512, 1024}},
    {"deepseek-v3", R"(
model: deepseek-v3
hardware: gb200
cluster: {gpu_count: 256}
parallelism: {pp: 4, vpp: 4, ep: 64}
training: {seq_length: 4096, global_batch_size: 4096, sharding: zero1})",
     {256, 512}},
    {"mixtral-torchtitan", R"(
model: mixtral-8x7b
hardware: h100-sxm
framework: torchtitan
cluster: {gpu_count: 32}
parallelism: {tp: 2}
training: {seq_length: 4096, global_batch_size: 256, sharding: zero3})",
     {32, 64}},
};

// The search ranks with LayoutEvaluator's arithmetic: it must equal Predict's fit, memory and
// step time on layouts of every kind (cached layer costs reused across layouts).
TEST(LayoutEvaluator, EqualsPredictOnRandomLayouts) {
  std::mt19937_64 rng(20261124);
  for (const EvalCase& c : kEvalCases) {
    SCOPED_TRACE(c.name);
    const Job base = MustJob(c.yaml);
    LayoutEvaluator ev(base);
    int checked = 0, fitting = 0, identical = 0;
    for (int i = 0; i < 300; ++i) {
      std::optional<Job> job = RandomLayout(rng, base, c.gpus[i % c.gpus.size()]);
      ASSERT_TRUE(job.has_value());
      absl::StatusOr<Prediction> p = Predict(*job);
      ASSERT_TRUE(p.ok()) << p.status();
      const LayoutEvaluator::Result r = ev.Evaluate(*job);
      SCOPED_TRACE(LayoutSummary(LayoutOf(*job)));
      ASSERT_EQ(r.fits, p->memory.fits);
      EXPECT_LE(Rel(r.memory_total_bytes, p->memory.total_bytes), 1e-9);
      EXPECT_LE(Rel(r.headroom_bytes, p->memory.headroom_bytes), 1e-9);
      bool same = r.memory_total_bytes == p->memory.total_bytes;
      if (r.fits) {
        ++fitting;
        EXPECT_LE(Rel(r.step_time_s, p->step_time_s), 1e-9);
        same = same && r.step_time_s == p->step_time_s;
      }
      identical += same;
      ++checked;
    }
    // Both branches exercised, and the equality is in fact bit for bit.
    EXPECT_GT(fitting, 20);
    EXPECT_LT(fitting, checked);
    EXPECT_EQ(identical, checked);
  }
}

// The bound (docs/SEARCH.md): weights + gradients + optimizer states + buffers + context +
// workspaces, the same for every micro-batch size, SP, recompute, schedule and overlap, and never
// above the memory EstimateMemory reports.
TEST(MemoryLowerBound, NeverAboveTheMemoryAndIndependentOfTheInnerDimensions) {
  std::mt19937_64 rng(7);
  for (const EvalCase& c : kEvalCases) {
    SCOPED_TRACE(c.name);
    const Job base = MustJob(c.yaml);
    LayoutEvaluator ev(base);
    for (int i = 0; i < 200; ++i) {
      std::optional<Job> job = RandomLayout(rng, base, c.gpus[i % c.gpus.size()]);
      ASSERT_TRUE(job.has_value());
      const double bound = ev.MemoryLowerBoundBytes(*job);
      EXPECT_LE(bound, EstimateMemory(*job).total_bytes) << LayoutSummary(LayoutOf(*job));
      // A child with other inner settings has the same bound.
      Job other = *job;
      other.training.micro_batch_size = 1;
      other.parallelism.sequence_parallel = !job->parallelism.sequence_parallel;
      other.training.recompute = Recompute::kNone;
      other.training.recompute_modules.clear();
      other.training.overlap_tp_comm = !job->training.overlap_tp_comm;
      other.parallelism.schedule = job->parallelism.vpp > 1 ? PipelineSchedule::kInterleaved1F1B : PipelineSchedule::kGPipe;
      EXPECT_EQ(ev.MemoryLowerBoundBytes(other), bound);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Brute force: every combination of integers for each dimension, ValidateJob, Predict.

struct Brute {
  double key = 0;
  double step_time_s = 0, headroom_bytes = 0;
  int64_t gpus = 0;
  std::string summary;
};

double KeyOf(const Prediction& p, SearchObjective o) {
  switch (o) {
    case SearchObjective::kStepTime: return p.step_time_s;
    case SearchObjective::kTokensPerSPerGpu: return -p.tokens_per_s_per_gpu;
    case SearchObjective::kCostPerToken: return p.cost.per_step_usd / p.tokens_per_step;
    case SearchObjective::kMfu: return -p.mfu;
    case SearchObjective::kTimeToTrain: return p.cost.time_to_train_s;
  }
  return 0;
}

struct BruteResult {
  std::vector<Brute> fitting;  // sorted by key
  int64_t valid = 0;
};

// The search space's rules (core/search.h) written out: TP at most GPUs per node; VPP > 1 only
// where pp*vpp divides the layers; SP only matters with TP > 1; HSDP replicas only with
// sharding; the job's schedule family; the framework's overlaps on; expert TP on request.
BruteResult BruteForce(const Job& base, const std::vector<int64_t>& counts, SearchObjective obj, bool etp_search) {
  BruteResult out;
  const ModelShape m = base.model.Resolved();
  const int64_t gpn = base.GpusPerNode();
  const std::vector<RecomputeOption> recomputes = {{Recompute::kNone, {}, 0},
                                                   {Recompute::kSelective, base.framework.selective_recompute_modules, 0},
                                                   {Recompute::kFull, {}, 0}};
  const int64_t gbs = base.training.global_batch_size;
  for (int64_t g : counts) {
    for (int64_t tp = 1; tp <= std::min(g, gpn); ++tp) {
      for (int64_t cp = 1; tp * cp <= g; ++cp) {
        for (int64_t pp = 1; tp * cp * pp <= g; ++pp) {
          if (g % (tp * cp * pp) != 0) continue;
          const int64_t dp = g / (tp * cp * pp);
          const int64_t max_ep = m.moe.enabled() ? m.moe.routed_experts : 1;
          for (int64_t ep = 1; ep <= max_ep; ++ep) {
            const int64_t max_etp = etp_search && m.moe.enabled() ? tp * cp * dp : 0;
            for (int64_t etp = 0; etp <= max_etp; ++etp) {
              if (etp == tp) continue;  // the same as 0
              // The search's rule for an explicit ETP (ValidateJob checks it only with EP > 1):
              // ETP x EP tiles TP x CP x DP and ETP divides the expert FFN (Megatron-Core MoE
              // parallel folding).
              if (etp > 0 && ((tp * cp * dp) % (etp * ep) != 0 || m.moe.expert_ffn_hidden_size % etp != 0)) continue;
              for (int64_t vpp = 1; pp * vpp <= m.layers; ++vpp) {
                if (vpp > 1 && m.layers % (pp * vpp) != 0) continue;
                for (int64_t mbs = 1; mbs <= gbs; ++mbs) {
                  if (gbs % (mbs * dp) != 0) continue;  // ValidateJob's rule, checked early for speed
                  for (int sp = 0; sp <= (tp > 1 ? 1 : 0); ++sp) {
                    for (const RecomputeOption& rc : recomputes) {
                      for (int sh = 0; sh < 4; ++sh) {
                        for (int64_t r = 1; r <= dp * cp; ++r) {
                          if (r > 1 && sh == 0) continue;
                          Layout l;
                          l.parallelism = base.parallelism;
                          Parallelism& p = l.parallelism;
                          p.tp = tp; p.cp = cp; p.pp = pp; p.dp = dp; p.ep = ep; p.etp = etp; p.vpp = vpp;
                          p.sequence_parallel = sp;
                          p.dp_replicate = r;
                          p.schedule = vpp > 1 ? PipelineSchedule::kInterleaved1F1B : PipelineSchedule::k1F1B;
                          l.micro_batch_size = mbs;
                          l.recompute = rc;
                          l.sharding = static_cast<Sharding>(sh);
                          l.overlap_tp_comm = base.framework.overlap.tp_comm.supported;
                          l.overlap_dp_comm = true;
                          l.gemm = base.training.precision.gemm;
                          l.fp8_param_gather = base.training.fp8_param_gather;
                          const Job job = WithLayout(base, l);
                          if (!ValidateJob(job).ok()) continue;
                          ++out.valid;
                          absl::StatusOr<Prediction> pr = Predict(job);
                          EXPECT_TRUE(pr.ok()) << pr.status();
                          if (!pr.ok() || !pr->memory.fits) continue;
                          out.fitting.push_back(
                              {KeyOf(*pr, obj), pr->step_time_s, pr->memory.headroom_bytes, g, LayoutSummary(l)});
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
    }
  }
  std::sort(out.fitting.begin(), out.fitting.end(), [](const Brute& a, const Brute& b) { return a.key < b.key; });
  return out;
}

// (GPUs, step time, headroom) of the points no other fitting layout dominates.
std::set<std::tuple<int64_t, double, double>> BruteFront(const std::vector<Brute>& all) {
  std::set<std::tuple<int64_t, double, double>> out;
  for (const Brute& e : all) {
    bool dominated = false;
    for (const Brute& o : all) {
      const bool le = o.gpus <= e.gpus && o.step_time_s <= e.step_time_s && o.headroom_bytes >= e.headroom_bytes;
      const bool strict = o.gpus < e.gpus || o.step_time_s < e.step_time_s || o.headroom_bytes > e.headroom_bytes;
      if (le && strict) {
        dominated = true;
        break;
      }
    }
    if (!dominated) out.insert({e.gpus, e.step_time_s, e.headroom_bytes});
  }
  return out;
}

void ExpectSearchEqualsBruteForce(const Job& base, const std::vector<int64_t>& counts, SearchObjective obj,
                                  bool etp_search) {
  const BruteResult brute = BruteForce(base, counts, obj, etp_search);
  ASSERT_FALSE(brute.fitting.empty());
  SearchOptions o;
  o.objective = obj;
  o.space.gpu_counts = counts;
  o.space.etp = etp_search;
  o.top_n = 10;
  o.max_pareto = 0;  // all of it
  absl::StatusOr<SearchResult> r = SearchLayouts(base, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->partial);
  // The same space: as many layouts, as many fitting.
  EXPECT_EQ(r->stats.enumerated, brute.valid);
  EXPECT_EQ(r->stats.fitting, static_cast<int64_t>(brute.fitting.size()));
  EXPECT_EQ(r->stats.enumerated, r->stats.pruned + r->stats.evaluated);
  // The best and the top 10, value for value.
  ASSERT_EQ(r->top.size(), std::min<size_t>(10, brute.fitting.size()));
  const bool negated = obj == SearchObjective::kTokensPerSPerGpu || obj == SearchObjective::kMfu;
  for (size_t i = 0; i < r->top.size(); ++i) {
    const RankedLayout& x = r->top[i];
    EXPECT_EQ(negated ? -x.objective_value : x.objective_value, brute.fitting[i].key) << "rank " << i + 1;
    EXPECT_EQ(KeyOf(x.prediction, obj), brute.fitting[i].key) << "rank " << i + 1;
  }
  // The best layout is one of the brute force's best (ties have the same key).
  bool among = false;
  for (const Brute& b : brute.fitting) {
    if (b.key != brute.fitting.front().key) break;
    among |= b.summary == LayoutSummary(r->top.front().layout) && b.gpus == r->top.front().prediction.gpu_count;
  }
  EXPECT_TRUE(among) << LayoutSummary(r->top.front().layout);
  // The Pareto front.
  std::set<std::tuple<int64_t, double, double>> front;
  for (const RankedLayout& x : r->pareto) {
    front.insert({x.prediction.gpu_count, x.prediction.step_time_s, x.prediction.memory.headroom_bytes});
  }
  EXPECT_EQ(front, BruteFront(brute.fitting));
  EXPECT_EQ(front.size(), r->pareto.size());  // no duplicates
  // The best per GPU count.
  for (const RankedLayout& x : r->best_per_gpu_count) {
    double best = std::numeric_limits<double>::infinity();
    for (const Brute& b : brute.fitting) {
      if (b.gpus == x.prediction.gpu_count) best = std::min(best, b.key);
    }
    EXPECT_EQ(KeyOf(x.prediction, obj), best);
  }
}

constexpr char kGpt7B[] = R"(
model: gpt-7.5b
hardware: a100-40gb
cluster: {gpu_count: 8}
parallelism: {tp: 8}
training: {seq_length: 2048, global_batch_size: 16, dataset_tokens: 1e9})";

TEST(Search, EqualsBruteForceDenseStepTime) {
  ExpectSearchEqualsBruteForce(MustJob(kGpt7B), {8}, SearchObjective::kStepTime, false);
}

TEST(Search, EqualsBruteForceDenseOtherObjectivesOverTwoCounts) {
  const Job base = MustJob(kGpt7B);
  for (SearchObjective o : {SearchObjective::kCostPerToken, SearchObjective::kMfu, SearchObjective::kTokensPerSPerGpu,
                            SearchObjective::kTimeToTrain}) {
    SCOPED_TRACE(SearchObjectiveName(o));
    ExpectSearchEqualsBruteForce(base, {4, 8}, o, false);
  }
}

TEST(Search, EqualsBruteForceMoeWithExpertTp) {
  const Job base = MustJob(R"(
model: mixtral-8x7b
hardware: h200
cluster: {gpu_count: 8}
parallelism: {tp: 8}
training: {seq_length: 4096, global_batch_size: 8, sharding: zero1})");
  ExpectSearchEqualsBruteForce(base, {8}, SearchObjective::kStepTime, true);
}

// The bound prunes, and what it prunes never fits: the same answer with pruning off.
TEST(Search, PruningNeverDropsAFittingLayout) {
  const Job base = MustJob(R"(
model: gpt3-175b
hardware: a100-80gb
cluster: {gpu_count: 128}
parallelism: {tp: 8, pp: 16}
training: {seq_length: 2048, global_batch_size: 256})");
  SearchOptions o;
  absl::StatusOr<SearchResult> pruned = SearchLayouts(base, o);
  o.prune = false;
  absl::StatusOr<SearchResult> full = SearchLayouts(base, o);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_GT(pruned->stats.pruned, pruned->stats.enumerated / 4);
  EXPECT_EQ(full->stats.pruned, 0);
  EXPECT_EQ(pruned->stats.enumerated, full->stats.enumerated);
  EXPECT_EQ(pruned->stats.fitting, full->stats.fitting);
  ASSERT_EQ(pruned->top.size(), full->top.size());
  for (size_t i = 0; i < pruned->top.size(); ++i) {
    EXPECT_EQ(LayoutSummary(pruned->top[i].layout), LayoutSummary(full->top[i].layout));
    EXPECT_EQ(pruned->top[i].objective_value, full->top[i].objective_value);
  }
  EXPECT_EQ(pruned->pareto.size(), full->pareto.size());
}

// A job whose own pipeline puts fewer layers on its end stages (Megatron-Core
// --decoder-first/last-pipeline-num-layers, a recipe's PP 4 with 2 + 14 + 14 + 2 of 32 layers):
// other pipelines split evenly, in the search's evaluation as in the layouts it reports
// (ToLayout). Every reported layout is what Predict says of it: it fits, at the step time it was
// ranked by. Until 2026-11-29 the worker kept the job's 2 / 2 on every pipeline, so a PP 2 layout
// was ranked with 4 of its 32 layers (Megatron-Bridge's DeepSeek-V3 on 256 B200, row 230, had a
// best that needed 554 GiB).
TEST(Search, UnevenStagesOfTheJobsPipelineStayWithIt) {
  const Job base = MustJob(R"(
model: llama3-8b
hardware: h100-sxm
framework: megatron-core
cluster: {gpu_count: 8}
parallelism: {pp: 4, first_stage_layers: 2, last_stage_layers: 2}
training: {seq_length: 8192, global_batch_size: 32})");
  SearchOptions o;
  o.top_n = 20;
  absl::StatusOr<SearchResult> r = SearchLayouts(base, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE(r->top.empty());
  for (const RankedLayout& l : r->top) {
    EXPECT_TRUE(l.prediction.memory.fits) << LayoutSummary(l.layout);
    EXPECT_NEAR(l.objective_value, l.prediction.step_time_s, 1e-9 * l.prediction.step_time_s) << LayoutSummary(l.layout);
  }
}

// With the job's sequence parallelism kept (`--keep-sp`, SearchSpace.sequence_parallel false) and
// on (torchtitan's TP runs SP norms), the SP list is {true}: every TP layout is evaluated with SP and
// must be reported with it, at the time it was ranked by. Until 2026-11-29 the worker recorded the
// SP value where ToLayout reads an index, so the layouts were reported without SP and 6-21% slower
// than they had been ranked (the second review's torchtitan finding).
TEST(Search, KeptSequenceParallelismIsReportedAsEvaluated) {
  const Job base = MustJob(R"(
model: llama3-8b
hardware: a100-80gb
framework: torchtitan
cluster: {gpu_count: 64}
training: {seq_length: 8192, global_batch_size: 64, micro_batch_size: 1})");
  SearchOptions o;
  o.top_n = 40;
  o.space.sequence_parallel = false;
  o.space.max_tp = 4;
  absl::StatusOr<SearchResult> r = SearchLayouts(base, o);
  ASSERT_TRUE(r.ok()) << r.status();
  int tp_layouts = 0;
  for (const RankedLayout& l : r->top) {
    EXPECT_NEAR(l.objective_value, l.prediction.step_time_s, 1e-9 * l.prediction.step_time_s) << LayoutSummary(l.layout);
    if (l.layout.parallelism.tp > 1) {
      ++tp_layouts;
      EXPECT_EQ(l.layout.parallelism.sequence_parallel, base.parallelism.sequence_parallel) << LayoutSummary(l.layout);
    }
  }
  EXPECT_GT(tp_layouts, 0);
}

// A long front is listed thinned, evenly, its ends kept; the count says how long it is.
TEST(Search, ParetoFrontIsThinnedToMaxPareto) {
  const Job base = MustJob(kEvalCases[0].yaml);
  SearchOptions o;
  o.max_pareto = 0;
  absl::StatusOr<SearchResult> all = SearchLayouts(base, o);
  o.max_pareto = 7;
  absl::StatusOr<SearchResult> few = SearchLayouts(base, o);
  ASSERT_TRUE(all.ok() && few.ok());
  ASSERT_GT(all->pareto.size(), 7u);
  EXPECT_EQ(all->stats.pareto_size, static_cast<int64_t>(all->pareto.size()));
  EXPECT_EQ(few->stats.pareto_size, all->stats.pareto_size);
  ASSERT_EQ(few->pareto.size(), 7u);
  EXPECT_EQ(LayoutSummary(few->pareto.front().layout), LayoutSummary(all->pareto.front().layout));
  EXPECT_EQ(LayoutSummary(few->pareto.back().layout), LayoutSummary(all->pareto.back().layout));
}

TEST(Search, ThreadCountDoesNotChangeTheAnswer) {
  const Job base = MustJob(kEvalCases[0].yaml);
  SearchOptions o;
  o.top_n = 20;
  o.threads = 1;
  absl::StatusOr<SearchResult> one = SearchLayouts(base, o);
  o.threads = 3;
  absl::StatusOr<SearchResult> three = SearchLayouts(base, o);
  ASSERT_TRUE(one.ok() && three.ok());
  EXPECT_EQ(one->stats.threads, 1);
  EXPECT_EQ(three->stats.threads, 3);
  ASSERT_EQ(one->top.size(), three->top.size());
  for (size_t i = 0; i < one->top.size(); ++i) {
    EXPECT_EQ(LayoutSummary(one->top[i].layout), LayoutSummary(three->top[i].layout));
  }
  ASSERT_EQ(one->pareto.size(), three->pareto.size());
  for (size_t i = 0; i < one->pareto.size(); ++i) {
    EXPECT_EQ(LayoutSummary(one->pareto[i].layout), LayoutSummary(three->pareto[i].layout));
  }
  EXPECT_FALSE(one->runner_up_reason.empty());
}

// Every reported result carries its full prediction, and its layout is valid.
TEST(Search, ResultsCarryTheirPrediction) {
  const Job base = MustJob(kEvalCases[0].yaml);
  absl::StatusOr<SearchResult> r = SearchLayouts(base, {});
  ASSERT_TRUE(r.ok());
  for (const RankedLayout& x : r->top) {
    const Job job = WithLayout(base, x.layout);
    ASSERT_TRUE(ValidateJob(job).ok());
    absl::StatusOr<Prediction> p = Predict(job);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->step_time_s, x.prediction.step_time_s);
    EXPECT_TRUE(x.prediction.memory.fits);
    EXPECT_GT(x.prediction.mfu, 0);
    EXPECT_FALSE(x.prediction.bottleneck.reason.empty());
  }
  for (size_t i = 1; i < r->top.size(); ++i) {
    EXPECT_LE(r->top[i - 1].objective_value, r->top[i].objective_value);
  }
}

// ---------------------------------------------------------------------------------------------
// Deadlines.

constexpr char kGpt3_1024[] = R"(
model: gpt3-175b
hardware: a100-80gb
cluster: {gpu_count: 1024}
parallelism: {tp: 8, pp: 16}
training: {seq_length: 2048, global_batch_size: 1536})";

// A search of minutes (8..16384 GPUs, one thread) given a deadline 400 ms away returns, OK, the
// best layout found by then, marked partial (docs/SEARCH.md "Deadlines"). Skipped where the whole
// search finishes before the deadline (a much faster machine), since then nothing is checked.
TEST(Search, DeadlineReturnsTheBestFoundSoFarMarkedPartial) {
  const Job base = MustJob(kGpt3_1024);
  SearchOptions o;
  o.threads = 1;
  o.space.gpu_counts = *GpuCountsInRange(8, 16384, 8, "gpus");
  const auto t0 = std::chrono::steady_clock::now();
  o.deadline = t0 + std::chrono::milliseconds(400);
  absl::StatusOr<SearchResult> r = SearchLayouts(base, o);
  const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.ok()) << r.status();
  if (!r->partial) GTEST_SKIP() << "the whole search finished in " << elapsed_s << " s, before its deadline";
  EXPECT_TRUE(absl::StrContains(r->partial_reason, "deadline")) << r->partial_reason;
  EXPECT_LT(elapsed_s, 3.0);  // stops at the deadline (polled every 100 ms), not minutes later
  // The best so far is a real, fitting layout.
  ASSERT_FALSE(r->top.empty());
  EXPECT_TRUE(r->top.front().prediction.memory.fits);
  EXPECT_GT(r->stats.evaluated, 0);
}

// A cancelled call stops the search (docs/SEARCH.md: "a cancelled call stops the search"): the
// cancel flag turns true 200 ms into a search of minutes; the answer is a partial result marked
// "cancelled" (or kCancelled when nothing was found yet), and it comes seconds before the 20 s
// deadline that bounds a search ignoring the flag.
TEST(Search, CancelledStopsThePollingSearch) {
  const Job base = MustJob(kGpt3_1024);
  SearchOptions o;
  o.threads = 1;
  o.space.gpu_counts = *GpuCountsInRange(8, 16384, 8, "gpus");
  const auto t0 = std::chrono::steady_clock::now();
  int polls = 0;
  o.cancelled = [&] {
    ++polls;
    return std::chrono::steady_clock::now() - t0 > std::chrono::milliseconds(200);
  };
  o.deadline = t0 + std::chrono::seconds(20);  // a bound for the mutant that ignores cancellation
  absl::StatusOr<SearchResult> r = SearchLayouts(base, o);
  const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (r.ok() && !r->partial && elapsed_s < 0.2) {
    GTEST_SKIP() << "the whole search finished in " << elapsed_s << " s, before the cancellation";
  }
  EXPECT_GT(polls, 0);
  if (r.ok()) {
    EXPECT_TRUE(r->partial);
    EXPECT_TRUE(absl::StrContains(r->partial_reason, "cancelled")) << r->partial_reason;
  } else {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  }
  EXPECT_LT(elapsed_s, 3.0);  // polled every 100 ms: not the 20 s deadline nor minutes
}

// ---------------------------------------------------------------------------------------------
// Errors.

TEST(Search, NoGpuCountFitsTheModelIsAClearError) {
  const Job base = MustJob(R"(
model: gpt3-175b
hardware: a100-40gb
cluster: {gpu_count: 8}
parallelism: {tp: 8}
training: {seq_length: 2048, global_batch_size: 64})");
  SearchOptions o;
  o.space.gpu_counts = {4, 8};
  absl::StatusOr<SearchResult> r = SearchLayouts(base, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "cluster.gpu_count: no layout of GPT-3 175B fits on 4..8"))
      << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "GiB per GPU")) << r.status();
}

TEST(Search, ABatchThatCannotBeSplitIsAClearError) {
  Job base = MustJob(kGpt7B);
  base.training.global_batch_size = 7;
  SearchOptions o;
  o.space.max_tp = 1;
  o.space.max_pp = 1;
  o.space.max_cp = 1;
  absl::StatusOr<SearchResult> r = SearchLayouts(base, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "training.global_batch_size: 7 sequences cannot be split over 8 GPUs: no data-parallel size of a valid "
            "TP x CP x PP layout divides it");
}

TEST(Search, InvalidOptionsAreClearErrors) {
  const Job base = MustJob(kGpt7B);
  struct Case {
    std::function<void(SearchOptions&, Job&)> set;
    std::string want;
  } cases[] = {
      {[](SearchOptions& o, Job&) { o.top_n = 0; }, "top_n: 0 must be >= 1"},
      {[](SearchOptions& o, Job&) { o.space.gpu_counts = {0}; }, "cluster.gpu_count: 0 must be in [1, 2^24]"},
      {[](SearchOptions& o, Job&) { o.space.max_cp = -1; }, "space.max_cp: -1 must be >= 0"},
      {[](SearchOptions& o, Job& j) {
         o.objective = SearchObjective::kTimeToTrain;
         j.training.dataset_tokens = 0;
       },
       "training.dataset_tokens: the time_to_train objective needs dataset_tokens or train_iters"},
      {[](SearchOptions& o, Job&) { o.budget_usd = 100; }, "budget_usd: applies to the time_to_train objective only"},
      {[](SearchOptions& o, Job& j) { j.training.seq_length = 0; }, "training.seq_length: must be > 0"},
      {[](SearchOptions& o, Job&) {
         o.objective = SearchObjective::kTimeToTrain;
         o.budget_usd = 0.01;
       },
       "budget_usd: no layout on 8 x A100-SXM4-40GB"},
  };
  for (const Case& c : cases) {
    SearchOptions o;
    Job job = base;
    c.set(o, job);
    absl::StatusOr<SearchResult> r = SearchLayouts(job, o);
    ASSERT_FALSE(r.ok()) << c.want;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StartsWith(r.status().message(), c.want)) << r.status() << " want " << c.want;
  }
}

TEST(Search, GpuCountsInRange) {
  EXPECT_EQ(*GpuCountsInRange(1, 32, 8, "gpus"), (std::vector<int64_t>{1, 2, 4, 8, 16, 24, 32}));
  EXPECT_EQ(*GpuCountsInRange(60, 90, 8, "gpus"), (std::vector<int64_t>{64, 72, 80, 88}));
  EXPECT_EQ(GpuCountsInRange(0, 8, 8, "--gpus").status().message(), "--gpus: 0 must be >= 1");
  EXPECT_EQ(GpuCountsInRange(16, 8, 8, "--gpus").status().message(), "--gpus: 8 is below 16");
  EXPECT_EQ(GpuCountsInRange(9, 15, 8, "--gpus").status().message(),
            "--gpus: no GPU count in 9..15 is a divisor or a multiple of 8 GPUs per node");
  EXPECT_EQ(GpuCountsInRange(8, 1 << 20, 8, "--gpus").status().message(),
            "--gpus: 8..1048576 holds 131072 GPU counts; at most 4096 per search");
}

TEST(Search, ParseObjective) {
  EXPECT_EQ(*ParseSearchObjective("time", "--objective"), SearchObjective::kStepTime);
  EXPECT_EQ(*ParseSearchObjective("cost", "--objective"), SearchObjective::kCostPerToken);
  EXPECT_EQ(*ParseSearchObjective("mfu", "--objective"), SearchObjective::kMfu);
  EXPECT_TRUE(absl::StartsWith(ParseSearchObjective("fast", "--objective").status().message(),
                               "--objective: 'fast' is not one of"));
}

// ---------------------------------------------------------------------------------------------
// Layouts as job fields, the codec and the pre-flight suggestion.

TEST(Layout, ChangesNameTheFieldsAndMegatronFlags) {
  const Job base = MustJob(kEvalCases[0].yaml);
  Layout a = LayoutOf(base);
  a.recompute = {Recompute::kNone, {}, 0};
  Layout b = a;
  b.parallelism.pp = 4;
  b.parallelism.dp = 4;
  b.recompute = {Recompute::kSelective, {"core_attn"}, 0};
  const std::vector<LayoutChange> ch = LayoutChanges(a, b);
  ASSERT_EQ(ch.size(), 4u);
  EXPECT_EQ(ch[0].field, "parallelism.pp");
  EXPECT_EQ(ch[0].from, "8");
  EXPECT_EQ(ch[0].to, "4");
  EXPECT_EQ(ch[0].megatron_flag, "--pipeline-model-parallel-size 4");
  EXPECT_EQ(ch[1].field, "parallelism.dp");
  EXPECT_EQ(ch[2].field, "training.recompute");
  EXPECT_EQ(ch[2].megatron_flag, "--recompute-granularity selective");
  EXPECT_EQ(ch[3].field, "training.recompute_modules");
  EXPECT_EQ(ch[3].megatron_flag, "--recompute-modules core_attn");
  EXPECT_TRUE(LayoutChanges(a, a).empty());
  // Every flag named is one Megatron-LM's arguments.py defines (presets/launchers/
  // megatron_args.txt): VPP is --num-virtual-stages-per-pipeline-rank, NeMo's
  // virtual_pipeline_model_parallel_size is no Megatron-LM flag.
  Layout v = a;
  v.parallelism.vpp = 2;
  std::vector<LayoutChange> all = LayoutChanges(a, v);
  for (const LayoutChange& c : LayoutChanges(v, a)) all.push_back(c);
  for (const LayoutChange& c : ch) all.push_back(c);
  ASSERT_GE(all.size(), 6u);
  for (const LayoutChange& c : all) {
    for (absl::string_view tok : absl::StrSplit(c.megatron_flag, absl::ByAnyChar(" /;"), absl::SkipEmpty())) {
      if (absl::StartsWith(tok, "--")) EXPECT_TRUE(IsMegatronArgument(std::string(tok))) << c.field << ": " << tok;
    }
  }
  // WithLayout and LayoutOf are inverse.
  EXPECT_EQ(LayoutSummary(LayoutOf(WithLayout(base, b))), LayoutSummary(b));
  EXPECT_EQ(WithLayout(base, b).cluster.gpu_count, 64);
}

TEST(SearchCodec, BaseFromASpecWithoutAValidLayout) {
  v1::JobSpec spec;
  ASSERT_TRUE(ParseMessage(R"(
model: gpt3-175b
hardware: a100-80gb
cluster: {gpu_count: 1024}
training: {seq_length: 2048, global_batch_size: 1536})",
                           SpecFormat::kYaml, "t.yaml", &spec)
                  .ok());
  absl::StatusOr<SearchBase> b = SearchBaseFromSpec(spec, testing::BuiltinCatalog(), "", nullptr);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->gpu_count, 1024);
  EXPECT_FALSE(b->submitted.has_value());  // dp 1024 does not divide 1536
  v1::SearchOptions o;
  o.set_objective(v1::SEARCH_OBJECTIVE_MFU);
  o.set_top_n(3);
  absl::StatusOr<SearchOptions> so = SearchOptionsFromProto(o, *b);
  ASSERT_TRUE(so.ok());
  EXPECT_EQ(so->space.gpu_counts, std::vector<int64_t>{1024});
  absl::StatusOr<SearchResult> r = SearchLayouts(b->job, *so);
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::SearchResult pr = SearchResultToProto(*r, nullptr);
  EXPECT_EQ(pr.top_size(), 3);
  EXPECT_EQ(pr.objective(), v1::SEARCH_OBJECTIVE_MFU);
  EXPECT_EQ(pr.top(0).prediction().mfu(), pr.top(0).objective_value());
  EXPECT_EQ(pr.top(0).layout().summary(), LayoutSummary(r->top[0].layout));
  EXPECT_EQ(pr.stats().enumerated(), r->stats.enumerated);
  // JSON round trip.
  v1::SearchResult back;
  ASSERT_TRUE(ParseMessage(ToJson(pr), SpecFormat::kJson, "r.json", &back).ok());
  EXPECT_EQ(back.top(0).layout().parallelism().tp(), r->top[0].layout.parallelism.tp);
  // The job's assumed inputs once, not per candidate.
  EXPECT_EQ(pr.top(0).prediction().assumed_inputs_size(), 0);
  EXPECT_GT(pr.assumed_inputs_size(), 0);
  // Thinned to fit a size limit: the top intact, first and last Pareto points kept.
  v1::SearchResult small = pr;
  const size_t before = small.ByteSizeLong();
  const std::string last = small.pareto(small.pareto_size() - 1).layout().summary();
  FitSearchResult(small, before / 3);
  EXPECT_TRUE(small.lists_thinned());
  EXPECT_LE(small.ByteSizeLong(), before / 3);
  EXPECT_EQ(small.top_size(), 3);
  EXPECT_LT(small.pareto_size(), pr.pareto_size());
  EXPECT_EQ(small.pareto(0).layout().summary(), pr.pareto(0).layout().summary());
  EXPECT_EQ(small.pareto(small.pareto_size() - 1).layout().summary(), last);
  // Bad options name the field.
  o.mutable_space()->set_min_gpus(16);
  o.mutable_space()->set_max_gpus(8);
  EXPECT_EQ(SearchOptionsFromProto(o, *b).status().message(), "options.space.max_gpus: 8 is below 16");
}

TEST(Suggest, ALayoutThatDoesNotFitGetsOneThatFits) {
  const Job job = MustJob(R"(
model: llama3-70b
hardware: h100-sxm
cluster: {gpu_count: 64}
parallelism: {tp: 1, pp: 1}
training: {seq_length: 8192, global_batch_size: 128})");
  absl::StatusOr<Prediction> p = Predict(job);
  ASSERT_TRUE(p.ok());
  ASSERT_FALSE(p->memory.fits);
  auto s = SuggestLayout(job, *p, std::chrono::steady_clock::time_point::max());
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(s->has_value());
  const v1::LayoutSuggestion& x = **s;
  EXPECT_EQ(x.reason(), "does_not_fit");
  EXPECT_TRUE(x.suggested().prediction().memory().fits());
  EXPECT_EQ(x.suggested().prediction().gpu_count(), 64);
  EXPECT_GT(x.suggested().changes_size(), 0);
  EXPECT_EQ(x.suggested_step_time_s(), x.suggested().prediction().step_time_s());
  EXPECT_TRUE(absl::StrContains(x.message(), "fits")) << x.message();
}

TEST(Suggest, SlowerByTenPercentGetsOneAndTheBestGetsNone) {
  const Job job = MustJob(kEvalCases[0].yaml);
  absl::StatusOr<Prediction> p = Predict(job);
  ASSERT_TRUE(p.ok());
  absl::StatusOr<SearchResult> r = SearchLayouts(job, {});
  ASSERT_TRUE(r.ok());
  const double best = r->top.front().prediction.step_time_s;
  auto s = SuggestLayout(job, *p, std::chrono::steady_clock::time_point::max());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->has_value(), p->step_time_s >= 1.1 * best);
  if (s->has_value()) {
    EXPECT_EQ((*s)->reason(), "slower");
    EXPECT_EQ((*s)->suggested_step_time_s(), best);
  }
  // The best layout itself: no suggestion.
  const Job top = WithLayout(job, r->top.front().layout);
  absl::StatusOr<Prediction> tp = Predict(top);
  auto none = SuggestLayout(top, *tp, std::chrono::steady_clock::time_point::max());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

// ---------------------------------------------------------------------------------------------
// Published runs: where their own layouts rank.

std::vector<PublishedRow> ReadRows(const std::string& path) {
  struct State {
    std::vector<std::string> header, fields;
    std::vector<PublishedRow> rows;
    bool have_header = false;
  } st;
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  csv_parser parser;
  csv_init(&parser, 0);
  auto on_field = [](void* s, size_t len, void* data) {
    static_cast<State*>(data)->fields.emplace_back(static_cast<const char*>(s), len);
  };
  auto on_row = [](int, void* data) {
    auto* st = static_cast<State*>(data);
    if (!st->have_header) {
      st->header = st->fields;
      st->have_header = true;
    } else if (!(st->fields.size() == 1 && st->fields[0].empty())) {
      PublishedRow r;
      for (size_t i = 0; i < st->header.size() && i < st->fields.size(); ++i) {
        r[st->header[i]] = std::string(absl::StripAsciiWhitespace(st->fields[i]));
      }
      st->rows.push_back(std::move(r));
    }
    st->fields.clear();
  };
  csv_parse(&parser, text.data(), text.size(), on_field, on_row, &st);
  csv_fini(&parser, on_field, on_row, &st);
  csv_free(&parser);
  return st.rows;
}

// Whether a layout lies in the default search space of its own job (core/search.h).
bool InDefaultSpace(const Job& job) {
  const Parallelism& p = job.parallelism;
  const TrainingConfig& t = job.training;
  const ModelShape m = job.model.Resolved();
  if (p.tp > job.GpusPerNode()) return false;
  if (p.vpp > 1 && m.layers % (p.pp * p.vpp) != 0) return false;
  if (p.etp != 0 && p.etp != p.tp) return false;
  if (t.overlap_tp_comm != job.framework.overlap.tp_comm.supported || !t.overlap_dp_comm) return false;
  if (t.recompute == Recompute::kSelective && t.recompute_modules != job.framework.selective_recompute_modules) return false;
  if (t.recompute == Recompute::kFull && t.recompute_num_layers != 0) return false;
  if (t.sharding == Sharding::kNone && p.dp_replicate > 1) return false;
  return true;
}

// Report (no tuning): how often the published layout is in the search's top 10 or within 10% of
// its best predicted step time. Checked: the search answers every row, and never ranks a layout
// of its space below the best when that layout fits (exactness).
TEST(PublishedRuns, SearchIsNoSlowerThanEveryPublishedLayoutInItsSpace) {
  const std::vector<PublishedRow> rows = ReadRows(STEPCAST_PUBLISHED_RUNS);
  ASSERT_GT(rows.size(), 100u);
  int rows_with_layout = 0, searched = 0, nothing_fits = 0, in_space = 0, published_not_fit = 0;
  int in_top10 = 0, within10 = 0, either = 0;
  std::string detail;
  for (const PublishedRow& row : rows) {
    auto col = [&](const char* c) { auto it = row.find(c); return it == row.end() ? std::string() : it->second; };
    if (col("tp").empty() || col("pp").empty()) continue;
    absl::StatusOr<PublishedRun> run = PublishedRunFromRow(row, testing::BuiltinCatalog());
    if (!run.ok()) continue;
    absl::StatusOr<Job> job = JobFromSpec(run->spec, testing::BuiltinCatalog(), "", nullptr);
    if (!job.ok()) continue;
    ++rows_with_layout;
    absl::StatusOr<Prediction> own = Predict(*job);
    ASSERT_TRUE(own.ok()) << own.status();
    SearchOptions o;
    o.top_n = 10;
    absl::StatusOr<SearchResult> r = SearchLayouts(*job, o);
    const bool space = InDefaultSpace(*job);
    if (!r.ok()) {
      // Only when nothing fits: then the published layout does not fit either (if in the space).
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << col("row_id") << ": " << r.status();
      if (space) {
        EXPECT_FALSE(own->memory.fits) << col("row_id") << ": " << r.status();
      }
      ++nothing_fits;
      continue;
    }
    ++searched;
    in_space += space;
    const double best = r->top.front().prediction.step_time_s;
    if (!own->memory.fits) {
      ++published_not_fit;
      continue;
    }
    if (space) {
      EXPECT_LE(best, own->step_time_s) << "row " << col("row_id") << ": exactness";
    }
    // In the top 10: fewer than 10 layouts are faster than it.
    const bool top10 = r->top.size() < 10 || own->step_time_s <= r->top.back().prediction.step_time_s;
    const bool close = own->step_time_s <= 1.1 * best;
    in_top10 += top10;
    within10 += close;
    either += top10 || close;
    absl::StrAppendFormat(&detail, "  row %s %s: published %s %.3g s, best %s %.3g s (%+.0f%%)%s\n", col("row_id"),
                          job->model.name, LayoutSummary(LayoutOf(*job)), own->step_time_s,
                          LayoutSummary(r->top.front().layout), best, 100 * (own->step_time_s / best - 1),
                          top10 ? " top10" : "");
  }
  const int fitting = searched - published_not_fit;
  const std::string summary = absl::StrFormat(
      "%d rows with a layout: %d searched (%d published layouts inside the default space), %d where nothing fits; "
      "of the %d published layouts that fit: %d in the top 10, %d within 10%% of the best, %d either, %d neither "
      "(%d do not fit as published)",
      rows_with_layout, searched, in_space, nothing_fits, fitting, in_top10, within10, either, fitting - either,
      published_not_fit);
  std::cout << summary << "\n" << detail;
  RecordProperty("published_runs", summary);
  EXPECT_GT(rows_with_layout, 100);
  EXPECT_GT(searched, 90);
}

}  // namespace
}  // namespace stepcast
