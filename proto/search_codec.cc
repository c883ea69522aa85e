#include "proto/search_codec.h"

#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "absl/strings/str_format.h"
#include "proto/catalog.h"
#include "proto/codec.h"
#include "proto/launch_args.h"

namespace stepcast {

namespace {

v1::Sharding ShardingToProto(Sharding s) {
  switch (s) {
    case Sharding::kNone: return v1::SHARDING_NONE;
    case Sharding::kZero1: return v1::SHARDING_ZERO1;
    case Sharding::kZero2: return v1::SHARDING_ZERO2;
    case Sharding::kZero3: return v1::SHARDING_ZERO3;
  }
  return v1::SHARDING_UNSPECIFIED;
}

v1::Recompute RecomputeToProto(Recompute r) {
  switch (r) {
    case Recompute::kNone: return v1::RECOMPUTE_NONE;
    case Recompute::kSelective: return v1::RECOMPUTE_SELECTIVE;
    case Recompute::kFull: return v1::RECOMPUTE_FULL;
  }
  return v1::RECOMPUTE_UNSPECIFIED;
}

absl::Status Bad(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

}  // namespace

absl::StatusOr<SearchBase> SearchBaseFromSpec(const v1::JobSpec& spec, const Catalog& catalog,
                                              const std::string& base_dir, const RateProfile* profile) {
  SearchBase out;
  const v1::ParallelismSpec& par = spec.parallelism();
  if (spec.cluster().gpu_count() > 0) {
    out.gpu_count = spec.cluster().gpu_count();
  } else if (par.dp() > 0) {
    out.gpu_count = std::max<int64_t>(1, par.tp()) * std::max<int64_t>(1, par.pp()) *
                    std::max<int64_t>(1, par.cp()) * par.dp();
  }
  absl::StatusOr<Job> own = JobFromSpec(spec, catalog, base_dir, profile);
  if (own.ok()) out.submitted = *own;

  v1::JobSpec one = spec;
  v1::ParallelismSpec* p = one.mutable_parallelism();
  p->set_tp(1);
  p->set_pp(1);
  p->set_cp(1);
  p->set_dp(1);
  p->set_ep(1);
  p->set_vpp(1);
  p->set_etp(0);
  p->set_dp_replicate(1);
  one.mutable_cluster()->set_gpu_count(1);
  one.mutable_training()->set_micro_batch_size(1);
  absl::StatusOr<Job> job = JobFromSpec(one, catalog, base_dir, profile);
  if (!job.ok()) {
    // The spec's own error is the clearer one when the spec itself is wrong.
    if (!own.ok()) return own.status();
    return job.status();
  }
  out.job = *std::move(job);
  if (out.submitted) out.job.name = out.submitted->name;
  return out;
}

absl::StatusOr<SearchOptions> SearchOptionsFromProto(const v1::SearchOptions& o, const SearchBase& base) {
  SearchOptions out;
  out.accept = FrameworkStartsLayout;  // only layouts the job's framework starts
  switch (o.objective()) {
    case v1::SEARCH_OBJECTIVE_UNSPECIFIED:
    case v1::SEARCH_OBJECTIVE_STEP_TIME: out.objective = SearchObjective::kStepTime; break;
    case v1::SEARCH_OBJECTIVE_TOKENS_PER_S_PER_GPU: out.objective = SearchObjective::kTokensPerSPerGpu; break;
    case v1::SEARCH_OBJECTIVE_COST_PER_TOKEN: out.objective = SearchObjective::kCostPerToken; break;
    case v1::SEARCH_OBJECTIVE_MFU: out.objective = SearchObjective::kMfu; break;
    case v1::SEARCH_OBJECTIVE_TIME_TO_TRAIN: out.objective = SearchObjective::kTimeToTrain; break;
    case v1::SEARCH_OBJECTIVE_STEP_TIME_P90: out.objective = SearchObjective::kStepTimeP90; break;
    default: return Bad("options.objective", absl::StrCat(static_cast<int>(o.objective()), " is not a known objective"));
  }
  if (o.top_n() < 0 || o.top_n() > 1000) return Bad("options.top_n", absl::StrCat(o.top_n(), " must be in [0, 1000]"));
  out.top_n = o.top_n() == 0 ? 10 : o.top_n();
  if (!(o.budget_usd() >= 0)) return Bad("options.budget_usd", "must be >= 0");
  out.budget_usd = o.budget_usd();
  const v1::SearchSpaceSpec& s = o.space();
  if (s.min_gpus() != 0 || s.max_gpus() != 0) {
    const int64_t lo = s.min_gpus() > 0 ? s.min_gpus() : 1;
    const int64_t hi = s.max_gpus() > 0 ? s.max_gpus() : lo;
    absl::StatusOr<std::vector<int64_t>> counts =
        GpuCountsInRange(lo, hi, base.job.GpusPerNode(), "options.space.max_gpus");
    if (!counts.ok()) return counts.status();
    out.space.gpu_counts = *std::move(counts);
  } else if (base.gpu_count > 0) {
    out.space.gpu_counts = {base.gpu_count};
  } else {
    return Bad("job.cluster.gpu_count", "required (> 0) unless options.space.min_gpus/max_gpus are given");
  }
  for (const auto& [v, name] : {std::pair{s.max_tp(), "max_tp"}, {s.max_pp(), "max_pp"}, {s.max_vpp(), "max_vpp"},
                                {s.max_cp(), "max_cp"}, {s.max_ep(), "max_ep"},
                                {s.max_micro_batch_size(), "max_micro_batch_size"}}) {
    if (v < 0) return Bad(absl::StrCat("options.space.", name), absl::StrCat(v, " must be >= 0 (0: default)"));
  }
  out.space.max_tp = s.max_tp();
  out.space.max_pp = s.max_pp();
  out.space.max_vpp = s.max_vpp();
  out.space.max_cp = s.max_cp();
  out.space.max_ep = s.max_ep();
  out.space.max_micro_batch_size = s.max_micro_batch_size();
  out.space.sequence_parallel = !s.keep_sequence_parallel();
  if (s.shardings_size() > 0) {
    out.space.shardings.clear();
    for (int i = 0; i < s.shardings_size(); ++i) {
      switch (s.shardings(i)) {
        case v1::SHARDING_NONE: out.space.shardings.push_back(Sharding::kNone); break;
        case v1::SHARDING_ZERO1: out.space.shardings.push_back(Sharding::kZero1); break;
        case v1::SHARDING_ZERO2: out.space.shardings.push_back(Sharding::kZero2); break;
        case v1::SHARDING_ZERO3: out.space.shardings.push_back(Sharding::kZero3); break;
        default: return Bad(absl::StrCat("options.space.shardings[", i, "]"), "must be none, zero1, zero2 or zero3");
      }
    }
  }
  out.space.hsdp = !s.no_hsdp();
  for (int i = 0; i < s.recompute_size(); ++i) {
    const v1::RecomputeChoice& r = s.recompute(i);
    RecomputeOption opt;
    switch (r.recompute()) {
      case v1::RECOMPUTE_NONE: opt.recompute = Recompute::kNone; break;
      case v1::RECOMPUTE_SELECTIVE: opt.recompute = Recompute::kSelective; break;
      case v1::RECOMPUTE_FULL: opt.recompute = Recompute::kFull; break;
      default: return Bad(absl::StrCat("options.space.recompute[", i, "].recompute"), "must be none, selective or full");
    }
    opt.modules.assign(r.modules().begin(), r.modules().end());
    if (r.num_layers() < 0) return Bad(absl::StrCat("options.space.recompute[", i, "].num_layers"), "must be >= 0");
    opt.num_layers = r.num_layers();
    out.space.recompute.push_back(std::move(opt));
  }
  out.space.uneven_pipeline = !s.even_pipeline_only();
  out.space.etp = s.search_etp();
  out.space.all_schedules = s.all_schedules();
  out.space.overlap_off = s.overlap_off();
  out.space.fp8 = s.fp8();
  if (!(o.time_limit_s() >= 0)) return Bad("options.time_limit_s", "must be >= 0");
  if (o.time_limit_s() > 0) {
    out.deadline = std::chrono::steady_clock::now() +
                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                       std::chrono::duration<double>(std::min(o.time_limit_s(), 86400.0)));
  }
  return out;
}

v1::SearchObjective SearchObjectiveToProto(SearchObjective o) {
  switch (o) {
    case SearchObjective::kStepTime: return v1::SEARCH_OBJECTIVE_STEP_TIME;
    case SearchObjective::kTokensPerSPerGpu: return v1::SEARCH_OBJECTIVE_TOKENS_PER_S_PER_GPU;
    case SearchObjective::kCostPerToken: return v1::SEARCH_OBJECTIVE_COST_PER_TOKEN;
    case SearchObjective::kMfu: return v1::SEARCH_OBJECTIVE_MFU;
    case SearchObjective::kTimeToTrain: return v1::SEARCH_OBJECTIVE_TIME_TO_TRAIN;
    case SearchObjective::kStepTimeP90: return v1::SEARCH_OBJECTIVE_STEP_TIME_P90;
  }
  return v1::SEARCH_OBJECTIVE_UNSPECIFIED;
}

v1::SearchLayout SearchLayoutToProto(const Layout& l) {
  v1::SearchLayout out;
  const Parallelism& p = l.parallelism;
  v1::ParallelismSpec* ps = out.mutable_parallelism();
  ps->set_tp(p.tp);
  ps->set_pp(p.pp);
  ps->set_dp(p.dp);
  ps->set_cp(p.cp);
  ps->set_ep(p.ep);
  ps->set_vpp(p.vpp);
  ps->set_sequence_parallel(p.sequence_parallel && p.tp > 1);
  ps->set_etp(p.etp);
  ps->set_pp_schedule(PipelineScheduleName(p.Schedule()));
  ps->set_dp_replicate(p.dp_replicate);
  out.set_micro_batch_size(l.micro_batch_size);
  out.mutable_recompute()->set_recompute(RecomputeToProto(l.recompute.recompute));
  for (const std::string& m : l.recompute.modules) out.mutable_recompute()->add_modules(m);
  out.mutable_recompute()->set_num_layers(l.recompute.num_layers);
  out.set_sharding(ShardingToProto(l.sharding));
  out.set_overlap_tp_comm(l.overlap_tp_comm);
  out.set_overlap_dp_comm(l.overlap_dp_comm);
  out.set_gemm(DTypeToProto(l.gemm));
  out.set_fp8_param_gather(l.fp8_param_gather);
  out.set_summary(LayoutSummary(l));
  return out;
}

v1::SearchCandidate SearchCandidateToProto(const RankedLayout& r, const Layout* submitted) {
  v1::SearchCandidate out;
  out.set_rank(r.rank);
  *out.mutable_layout() = SearchLayoutToProto(r.layout);
  out.set_objective_value(r.objective_value);
  PredictionToProto(r.prediction, out.mutable_prediction());
  if (submitted != nullptr) {
    for (const LayoutChange& c : LayoutChanges(*submitted, r.layout)) {
      v1::LayoutChange* x = out.add_changes();
      x->set_field(c.field);
      x->set_before(c.from);
      x->set_after(c.to);
      x->set_megatron_flag(c.megatron_flag);
    }
  }
  return out;
}

namespace {

// FitSearchResult's thinning on indices: every other entry dropped, the first and last kept.
std::vector<size_t> ThinOnce(const std::vector<size_t>& keep) {
  if (keep.size() <= 2) return keep;
  std::vector<size_t> out;
  for (size_t i = 0; i < keep.size(); ++i) {
    if (i % 2 == 0 || i == keep.size() - 1) out.push_back(keep[i]);
  }
  return out;
}

}  // namespace

v1::SearchResult SearchResultToProto(const SearchResult& r, const Job* submitted, size_t max_bytes) {
  v1::SearchResult out;
  std::optional<Layout> own;
  if (submitted != nullptr) own = LayoutOf(*submitted);
  const Layout* from = own ? &*own : nullptr;
  out.set_objective(SearchObjectiveToProto(r.objective));
  for (int64_t g : r.gpu_counts) out.add_gpu_counts(g);
  auto make = [&](const RankedLayout& x) {
    v1::SearchCandidate c = SearchCandidateToProto(x, from);
    if (out.assumed_inputs_size() == 0) *out.mutable_assumed_inputs() = c.prediction().assumed_inputs();
    c.mutable_prediction()->clear_assumed_inputs();
    c.mutable_prediction()->clear_job_name();
    return c;
  };
  v1::SearchStats* s = out.mutable_stats();
  s->set_enumerated(r.stats.enumerated);
  s->set_pruned(r.stats.pruned);
  s->set_evaluated(r.stats.evaluated);
  s->set_fitting(r.stats.fitting);
  s->set_over_budget(r.stats.over_budget);
  s->set_elapsed_s(r.stats.elapsed_s);
  s->set_threads(r.stats.threads);
  s->set_pareto_size(r.stats.pareto_size);
  out.set_partial(r.partial);
  out.set_partial_reason(r.partial_reason);
  out.set_runner_up_reason(r.runner_up_reason);
  out.set_top_outside_validated(r.top_outside_validated);
  out.set_top_below_minimum(r.top_below_minimum);
  if (submitted != nullptr) {
    absl::StatusOr<Prediction> p = Predict(*submitted);
    if (p.ok()) {
      RankedLayout sub;
      sub.layout = *own;
      sub.prediction = *std::move(p);
      sub.objective_value = sub.prediction.step_time_s;
      *out.mutable_submitted() = SearchCandidateToProto(sub, nullptr);
      out.mutable_submitted()->mutable_prediction()->clear_assumed_inputs();
    }
  }
  // A repeated field's entry costs its size, a one-byte tag (fields 1..15) and its length.
  auto entry_bytes = [](const v1::SearchCandidate& c) {
    const size_t n = c.ByteSizeLong();
    return n + 1 + google::protobuf::io::CodedOutputStream::VarintSize64(n);
  };
  // assumed_inputs (from the first candidate) before the budget is counted.
  for (const auto* list : {&r.top, &r.pareto, &r.best_per_gpu_count}) {
    if (!list->empty()) {
      (void)make(list->front());
      break;
    }
  }
  size_t used = out.ByteSizeLong();
  for (const RankedLayout& x : r.top) {
    v1::SearchCandidate c = make(x);
    if (max_bytes > 0 && used + entry_bytes(c) > max_bytes) {
      out.set_lists_thinned(true);  // top cut where the limit is
      break;
    }
    used += entry_bytes(c);
    *out.add_top() = std::move(c);
  }
  // The two other lists share what is left: every candidate is sized first (built and dropped,
  // one at a time), the lists are thinned as FitSearchResult thins them until they fit, then only
  // the kept ones are built.
  const size_t left = max_bytes > used ? max_bytes - used : 0;
  auto sizes_of = [&](const std::vector<RankedLayout>& list) {
    std::vector<size_t> sizes;
    sizes.reserve(list.size());
    for (const RankedLayout& x : list) sizes.push_back(max_bytes > 0 ? entry_bytes(make(x)) : 0);
    return sizes;
  };
  auto total = [](const std::vector<size_t>& sizes, const std::vector<size_t>& keep) {
    size_t t = 0;
    for (size_t i : keep) t += sizes[i];
    return t;
  };
  auto fit = [&](const std::vector<size_t>& sizes, size_t budget) {
    std::vector<size_t> keep(sizes.size());
    for (size_t i = 0; i < keep.size(); ++i) keep[i] = i;
    if (max_bytes == 0) return keep;
    while (total(sizes, keep) > budget) {
      out.set_lists_thinned(true);
      if (keep.size() > 2) {
        keep = ThinOnce(keep);
      } else {
        keep.pop_back();  // not even the first and last fit
      }
    }
    return keep;
  };
  const std::vector<size_t> pareto_sizes = sizes_of(r.pareto), best_sizes = sizes_of(r.best_per_gpu_count);
  const size_t best_all = std::accumulate(best_sizes.begin(), best_sizes.end(), size_t{0});
  const std::vector<size_t> pareto_keep = fit(pareto_sizes, std::max(left / 2, left - std::min(left, best_all)));
  const size_t pareto_used = total(pareto_sizes, pareto_keep);
  const std::vector<size_t> best_keep = fit(best_sizes, left - std::min(left, pareto_used));
  for (size_t i : pareto_keep) *out.add_pareto() = make(r.pareto[i]);
  for (size_t i : best_keep) *out.add_best_per_gpu_count() = make(r.best_per_gpu_count[i]);
  if (max_bytes > 0) FitSearchResult(out, max_bytes);
  return out;
}

void FitSearchResult(v1::SearchResult& r, size_t max_bytes) {
  auto thin = [](google::protobuf::RepeatedPtrField<v1::SearchCandidate>* list) {
    if (list->size() <= 2) return false;
    google::protobuf::RepeatedPtrField<v1::SearchCandidate> kept;
    for (int i = 0; i < list->size(); ++i) {
      if (i % 2 == 0 || i == list->size() - 1) *kept.Add() = std::move((*list)[i]);
    }
    list->Swap(&kept);
    return true;
  };
  while (r.ByteSizeLong() > max_bytes) {
    const bool a = thin(r.mutable_pareto());
    const bool b = thin(r.mutable_best_per_gpu_count());
    if (!a && !b) break;
    r.set_lists_thinned(true);
  }
}

absl::StatusOr<std::optional<v1::LayoutSuggestion>> SuggestLayout(const Job& submitted, const Prediction& prediction,
                                                                   std::chrono::steady_clock::time_point deadline,
                                                                   std::function<bool()> cancelled, int threads) {
  SearchOptions o;
  o.top_n = 1;
  o.accept = FrameworkStartsLayout;
  o.deadline = deadline;
  o.cancelled = std::move(cancelled);
  o.threads = threads;
  o.space.gpu_counts = {submitted.cluster.gpu_count};
  // With the interval table, ranked by the pessimistic end of each layout's 80% interval
  // (docs/VALIDATION.md "Intervals"): a validated layout is preferred, since outside the validated
  // region the interval is that of the runs outside it (or the widest), unless an unvalidated one
  // is better even at that end.
  if (submitted.intervals) o.objective = SearchObjective::kStepTimeP90;
  absl::StatusOr<SearchResult> r = SearchLayouts(submitted, o);
  if (!r.ok()) {
    // Nothing fits on these GPUs, a cap refuses the search, or nothing was found in time (or
    // before the call was cancelled): nothing to suggest.
    if (r.status().code() == absl::StatusCode::kInvalidArgument ||
        r.status().code() == absl::StatusCode::kDeadlineExceeded ||
        r.status().code() == absl::StatusCode::kCancelled) {
      return std::nullopt;
    }
    return r.status();
  }
  if (r->top.empty()) return std::nullopt;
  const RankedLayout* chosen = &r->top.front();
  std::string preference;
  if (chosen->prediction.interval.available) {
    const StepTimeInterval& i = chosen->prediction.interval;
    preference = i.validated
                     ? absl::StrFormat("; ranked by the pessimistic end of its 80%% interval (%.3g s), a validated layout",
                                       i.high_s)
                     : absl::StrFormat("; it lies outside the validated region but is the best at its pessimistic end "
                                       "(%.3g s, %s)",
                                       i.high_s,
                                       i.from_outside_runs ? "the interval of the runs outside the region" : "the widest interval");
  }
  const RankedLayout& best = *chosen;
  const double submitted_s = prediction.step_time_s;
  const double best_s = best.prediction.step_time_s;
  const bool fits = prediction.memory.fits;
  // "At least 10% slower than the best layout with the same GPUs" (docs/SEARCH.md).
  const bool slower = submitted_s >= 1.1 * best_s;
  if (fits && !slower) return std::nullopt;
  v1::LayoutSuggestion s;
  s.set_reason(fits ? "slower" : "does_not_fit");
  const Layout own = LayoutOf(submitted);
  *s.mutable_suggested() = SearchCandidateToProto(best, &own);
  s.set_submitted_step_time_s(submitted_s);
  s.set_suggested_step_time_s(best_s);
  s.set_partial(r->partial);
  const double gib = 1024.0 * 1024 * 1024;
  if (!fits) {
    s.set_message(absl::StrFormat(
        "the submitted layout (%s) needs %.1f GiB per GPU of %.1f; %s fits (%.1f GiB) with a predicted step of %.3g s",
        LayoutSummary(own), prediction.memory.total_bytes / gib, prediction.memory.capacity_bytes / gib,
        LayoutSummary(best.layout), best.prediction.memory.total_bytes / gib, best_s) + preference);
  } else {
    s.set_message(absl::StrFormat("the submitted layout (%s) is predicted %.0f%% slower than %s on the same %d GPUs "
                                  "(%.3g s vs %.3g s per step)",
                                  LayoutSummary(own), 100 * (submitted_s / best_s - 1), LayoutSummary(best.layout),
                                  submitted.cluster.gpu_count, submitted_s, best_s) +
                  preference);
  }
  return s;
}

}  // namespace stepcast
