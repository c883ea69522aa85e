#include "cli/search.h"

#include "cli/cli.h"
#include "cli/html.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "proto/launch_args.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "proto/codec.h"
#include "proto/search_codec.h"

namespace stepcast::cli {

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

int Fail(const absl::Status& s) { return FailWithStatus(s); }

std::string Thousands(double v) {
  std::string digits = absl::StrFormat("%.0f", v);
  std::string out;
  const size_t neg = !digits.empty() && digits[0] == '-' ? 1 : 0;
  for (size_t i = neg; i < digits.size(); ++i) {
    out += digits[i];
    const size_t left = digits.size() - i - 1;
    if (left > 0 && left % 3 == 0) out += ',';
  }
  return (neg ? "-" : "") + out;
}

std::string ObjectiveText(const SearchResult& r, const RankedLayout& x) {
  switch (r.objective) {
    case SearchObjective::kCostPerToken: return absl::StrFormat("$%.4g/Mtok", x.objective_value * 1e6);
    case SearchObjective::kTimeToTrain:
      return absl::StrFormat("%.1f days, $%s", x.objective_value / 86400, Thousands(x.prediction.cost.per_run_usd));
    default: return "";
  }
}

// Every field of a layout, for telling two layouts apart (LayoutSummary leaves out settings at
// their usual values, and LayoutChanges has no uneven pipeline split).
std::string LayoutKey(const Layout& l) {
  const Parallelism& p = l.parallelism;
  return absl::StrCat(p.tp, "/", p.pp, "/", p.dp, "/", p.cp, "/", p.ep, "/", p.vpp, "/", p.sequence_parallel, "/",
                      p.Etp(), "/", p.dp_replicate, "/", p.first_stage_layers, "/", p.last_stage_layers, "/",
                      PipelineScheduleName(p.Schedule()), "/", l.micro_batch_size, "/",
                      RecomputeName(l.recompute.recompute), "(", absl::StrJoin(l.recompute.modules, ","), ";",
                      l.recompute.num_layers, ")/", ShardingName(l.sharding), "/", l.overlap_tp_comm, "/",
                      l.overlap_dp_comm, "/", DTypeName(l.gemm), "/", l.fp8_param_gather);
}

// One label per layout: LayoutSummary, and where layouts share that summary but differ, each
// setting it leaves out whose value differs among them (TP communication overlap, fp8 parameter
// all-gather, the uneven pipeline split, HSDP replicas without sharding, the GEMM dtype), so that
// two different layouts never share a label. Layouts equal in every field get the same label.
std::vector<std::string> LayoutLabels(const std::vector<Layout>& layouts) {
  using Setting = std::string (*)(const Layout&);
  static constexpr Setting kOmitted[] = {
      [](const Layout& l) { return std::string(l.overlap_tp_comm ? "tp-overlap" : "no-tp-overlap"); },
      [](const Layout& l) { return std::string(l.fp8_param_gather ? "fp8-param-gather" : "no-fp8-param-gather"); },
      [](const Layout& l) {
        const Parallelism& p = l.parallelism;
        return p.first_stage_layers > 0 || p.last_stage_layers > 0
                   ? absl::StrCat("stage-layers first/last ", p.first_stage_layers, "/", p.last_stage_layers)
                   : std::string("even-stages");
      },
      // LayoutSummary shows HSDP replicas with ZeRO/FSDP sharding only.
      [](const Layout& l) { return absl::StrCat("hsdp", l.parallelism.dp_replicate); },
      [](const Layout& l) { return std::string(DTypeName(l.gemm)); },
  };
  std::vector<std::string> out;
  std::map<std::string, std::vector<size_t>> by_summary;
  for (size_t i = 0; i < layouts.size(); ++i) {
    out.push_back(LayoutSummary(layouts[i]));
    by_summary[out.back()].push_back(i);
  }
  for (const auto& [summary, members] : by_summary) {
    for (Setting value : kOmitted) {
      bool differs = false;
      for (size_t i : members) differs |= value(layouts[i]) != value(layouts[members.front()]);
      if (!differs) continue;
      for (size_t i : members) absl::StrAppend(&out[i], " ", value(layouts[i]));
    }
  }
  // A field none of the above shows (a new Layout field): the full key keeps the labels apart.
  std::map<std::string, std::string> key_of_label;
  for (size_t i = 0; i < layouts.size(); ++i) {
    const std::string key = LayoutKey(layouts[i]);
    auto [it, added] = key_of_label.emplace(out[i], key);
    if (!added && it->second != key) absl::StrAppend(&out[i], " [", key, "]");
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> ParseGpuRange(const std::string& text, int64_t gpus_per_node) {
  if (text.empty()) return std::vector<int64_t>{};
  std::vector<std::string> parts = absl::StrSplit(text, "..");
  int64_t lo = 0, hi = 0;
  if (parts.size() == 1 && absl::SimpleAtoi(parts[0], &lo)) {
    if (lo < 1) return absl::InvalidArgumentError(absl::StrCat("--gpus: ", lo, " must be >= 1"));
    return std::vector<int64_t>{lo};
  }
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &lo) || !absl::SimpleAtoi(parts[1], &hi)) {
    return absl::InvalidArgumentError(absl::StrCat("--gpus: '", text, "' is not N or A..B"));
  }
  return GpuCountsInRange(lo, hi, gpus_per_node, "--gpus");
}

namespace {

// How far the top layouts' intervals are validated (docs/VALIDATION.md "Intervals").
std::string FormatConfidence(const SearchResult& r) {
  std::string out;
  if (r.top.empty() || !r.top[0].prediction.interval.available) return out;
  {
    absl::StrAppendFormat(&out,
                          "\nConfidence: %d of the top %d layouts lie outside the validated region (!: no validated "
                          "run shares their framework family, dense/MoE, sharding, pipeline and scale band; the "
                          "interval of the runs outside the region); %d more are in regimes below the minimum of %.0f validated runs (~: "
                          "interval from a broader regime). runs: validated runs of the layout's regime.\n",
                          r.top_outside_validated, static_cast<int>(r.top.size()), r.top_below_minimum,
                          r.top[0].prediction.interval.minimum_experiments);
    // Each unvalidated layout's first note; layouts sharing a note are listed once ("#1, #3: ...").
    std::vector<std::pair<std::string, std::vector<int>>> notes;
    for (const RankedLayout& x : r.top) {
      if (x.prediction.interval.validated) continue;
      const std::vector<std::string> n = IntervalNotes(x.prediction.interval);
      if (n.empty()) continue;
      auto it = std::find_if(notes.begin(), notes.end(), [&](const auto& e) { return e.first == n.front(); });
      if (it == notes.end()) {
        notes.push_back({n.front(), {x.rank}});
      } else {
        it->second.push_back(x.rank);
      }
    }
    for (const auto& [note, ranks] : notes) {
      absl::StrAppendFormat(&out, "  #%s: %s\n", absl::StrJoin(ranks, ", #"), note);
    }
  }
  return out;
}

// The submitted layout against #1 and the changes that make it #1.
std::string FormatYourLayout(const SearchResult& r, const Job* submitted) {
  std::string out;
  if (submitted != nullptr && !r.top.empty()) {
    absl::StatusOr<Prediction> p = Predict(*submitted);
    if (p.ok()) {
      const Layout own = LayoutOf(*submitted);
      const RankedLayout& best = r.top[0];
      const double pct = 100 * (p->step_time_s / best.prediction.step_time_s - 1);
      absl::StrAppendFormat(&out, "\nYour layout (%s): ", LayoutSummary(own));
      if (!p->memory.fits) {
        absl::StrAppendFormat(&out, "does NOT fit (%.1f of %.1f GiB per GPU)", p->memory.total_bytes / kGiB,
                              p->memory.capacity_bytes / kGiB);
      } else {
        absl::StrAppendFormat(&out, "step %.4g s, %s than #1", p->step_time_s,
                              pct >= 0 ? absl::StrFormat("%.1f%% slower", pct) : absl::StrFormat("%.1f%% faster", -pct));
      }
      out += "\n";
      const std::vector<LayoutChange> changes = LayoutChanges(own, best.layout);
      if (!changes.empty()) {
        out += "To run #1, change:\n";
        for (const LayoutChange& c : changes) {
          absl::StrAppendFormat(&out, "  %-32s %s -> %s%s\n", c.field, c.from, c.to,
                                c.megatron_flag.empty() ? "" : absl::StrCat("   (Megatron: ", c.megatron_flag, ")"));
        }
        // Flags the framework needs to start #1 beyond the changed sizes (Megatron-LM's uneven
        // pipeline split when the layers do not divide by PP x VPP: MegatronAcceptsLayout).
        const LayoutAcceptance acc = FrameworkAcceptsLayout(WithLayout(*submitted, best.layout));
        if (!acc.needs.empty()) absl::StrAppendFormat(&out, "  and, to start it: %s\n", acc.needs);
      }
    }
  }
  return out;
}

// The Pareto front, evenly thinned to 15 rows.
std::string FormatPareto(const SearchResult& r) {
  std::string out;
  if (!r.pareto.empty()) {
    absl::StrAppendFormat(&out, "\nPareto front (step time vs GPUs vs memory headroom): %d layouts%s\n",
                          r.stats.pareto_size,
                          static_cast<int64_t>(r.pareto.size()) < r.stats.pareto_size
                              ? absl::StrCat(", ", r.pareto.size(), " listed evenly along it")
                              : "");
    absl::StrAppendFormat(&out, "  %6s %9s %9s  %s\n", "GPUs", "step s", "headroom", "layout");
    const size_t shown = std::min<size_t>(r.pareto.size(), 15);
    std::vector<Layout> layouts;
    for (size_t i = 0; i < shown; ++i) layouts.push_back(r.pareto[i].layout);
    const std::vector<std::string> labels = LayoutLabels(layouts);
    for (size_t i = 0; i < shown; ++i) {
      const RankedLayout& x = r.pareto[i];
      absl::StrAppendFormat(&out, "  %6d %9.4g %8.1fG  %s\n", x.prediction.gpu_count, x.prediction.step_time_s,
                            x.prediction.memory.headroom_bytes / kGiB, labels[i]);
    }
    if (shown < r.pareto.size()) absl::StrAppendFormat(&out, "  ... %d more (--json lists all)\n", r.pareto.size() - shown);
  }
  return out;
}

}  // namespace

std::string FormatSearchResult(const SearchResult& r, const Job& base, const Job* submitted) {
  std::string out;
  const std::string counts = r.gpu_counts.size() == 1
                                 ? absl::StrCat(r.gpu_counts[0])
                                 : absl::StrCat(r.gpu_counts.front(), "..", r.gpu_counts.back(), " (",
                                                r.gpu_counts.size(), " counts)");
  absl::StrAppendFormat(&out, "Layout search: %s on %s x %s (%s), global batch %d x %d tokens; objective %s\n",
                        base.model.name, counts, base.hardware.name, base.framework.name,
                        base.training.global_batch_size, base.training.seq_length, SearchObjectiveName(r.objective));
  const SearchStats& s = r.stats;
  absl::StrAppendFormat(&out,
                        "%s layouts in %.2f s on %d threads: %s pruned by the memory lower bound, %s evaluated, "
                        "%s fit%s\n",
                        Thousands(static_cast<double>(s.enumerated)), s.elapsed_s, s.threads,
                        Thousands(static_cast<double>(s.pruned)), Thousands(static_cast<double>(s.evaluated)),
                        Thousands(static_cast<double>(s.fitting)),
                        s.over_budget > 0 ? absl::StrCat(" (", Thousands(static_cast<double>(s.over_budget)),
                                                         " over budget)")
                                          : "");
  if (r.partial) absl::StrAppend(&out, "PARTIAL: ", r.partial_reason, "\n");
  out += "\n";
  const bool extra = r.objective == SearchObjective::kCostPerToken || r.objective == SearchObjective::kTimeToTrain;
  absl::StrAppendFormat(&out, "%3s  %-50s %6s %9s %-19s %5s %10s %6s %12s %9s  %-18s%s\n", "#", "layout", "GPUs",
                        "step s", "80% interval s", "runs", "tok/s/GPU", "MFU", "memory GiB", "headroom", "bottleneck",
                        extra ? "  objective" : "");
  std::vector<Layout> top_layouts;
  for (const RankedLayout& x : r.top) top_layouts.push_back(x.layout);
  const std::vector<std::string> labels = LayoutLabels(top_layouts);
  for (const RankedLayout& x : r.top) {
    const Prediction& p = x.prediction;
    // The interval, the validated runs of the layout's regime, and its flag: "!" outside the
    // validated region, "~" below the minimum (docs/VALIDATION.md "Intervals").
    const StepTimeInterval& i = p.interval;
    const std::string interval =
        i.available ? absl::StrFormat("%.4g-%.4g%s", i.low_s, i.high_s, !i.validated ? " !" : i.below_minimum ? " ~" : "")
                    : "-";
    absl::StrAppendFormat(&out, "%3d  %-50s %6d %9.4g %-19s %5s %10s %5.1f%% %5.1f/%-6.1f %9.1f  %-18s%s\n", x.rank,
                          labels[&x - r.top.data()], p.gpu_count, p.step_time_s, interval,
                          i.available ? absl::StrFormat("%.3g", i.region_experiments) : "-",
                          Thousands(p.tokens_per_s_per_gpu), 100 * p.mfu, p.memory.total_bytes / kGiB,
                          p.memory.capacity_bytes / kGiB, p.memory.headroom_bytes / kGiB,
                          BottleneckName(p.bottleneck.kind), extra ? absl::StrCat("  ", ObjectiveText(r, x)) : "");
  }
  out += FormatConfidence(r);
  if (!r.runner_up_reason.empty()) absl::StrAppend(&out, "\nWhy not #2: ", r.runner_up_reason, "\n");
  if (!r.top.empty()) {
    const Prediction& b = r.top[0].prediction;
    absl::StrAppendFormat(&out, "Best: %s (%s)\n", labels[0], b.bottleneck.reason);
  }
  out += FormatYourLayout(r, submitted);
  out += FormatPareto(r);
  return out;
}

std::string FormatSuggestion(const v1::LayoutSuggestion& s) {
  if (s.reason().empty()) return "";
  std::string out = absl::StrCat("  SUGGESTION (", s.reason() == "does_not_fit" ? "does not fit" : "slower", "): ",
                                 s.message(), s.partial() ? " [search cut short: best found so far]" : "", "\n");
  absl::StrAppendFormat(&out, "    suggested: %s, step %.4g s (submitted %.4g s)\n", s.suggested().layout().summary(),
                        s.suggested_step_time_s(), s.submitted_step_time_s());
  for (const v1::LayoutChange& c : s.suggested().changes()) {
    absl::StrAppendFormat(&out, "    %-32s %s -> %s%s\n", c.field(), c.before(), c.after(),
                          c.megatron_flag().empty() ? "" : absl::StrCat("   (Megatron: ", c.megatron_flag(), ")"));
  }
  return out;
}

namespace {

// The search options of the command's flags (errors name the flag).
absl::Status FillSearchOptions(const SearchArgs& a, const SearchBase& base_in, SearchOptions& o) {
  const SearchBase* base = &base_in;
  o.accept = FrameworkStartsLayout;  // only layouts the job's framework starts (docs/SEARCH.md)
  absl::StatusOr<SearchObjective> obj = ParseSearchObjective(a.objective, "--objective");
  if (!obj.ok()) return obj.status();
  o.objective = *obj;
  if (a.top < 1 || a.top > kSearchMaxTopN) {
    return absl::InvalidArgumentError(absl::StrCat("--top: ", a.top, " must be in [1, ", kSearchMaxTopN, "]"));
  }
  o.top_n = a.top;
  o.budget_usd = a.budget_usd;
  // Negative was silently "one per core" (reliability review 2, N13).
  if (a.threads < 0 || a.threads > kSearchMaxThreads) {
    return absl::InvalidArgumentError(
        absl::StrCat("--threads: ", a.threads, " must be in [0, ", kSearchMaxThreads, "] (0: one per core)"));
  }
  o.threads = a.threads;
  // The page must not overwrite the job it was made from (review 2, N12).
  if (!a.html_path.empty()) {
    std::error_code ec;
    if (std::filesystem::equivalent(a.html_path, a.job_path, ec) ||
        (!a.profile_path.empty() && std::filesystem::equivalent(a.html_path, a.profile_path, ec))) {
      return absl::InvalidArgumentError(
          absl::StrCat("--html: ", a.html_path, " is an input of this command; give another file for the page"));
    }
  }
  absl::StatusOr<std::vector<int64_t>> counts = ParseGpuRange(a.gpus, base->job.GpusPerNode());
  if (!counts.ok()) return counts.status();
  o.space.gpu_counts = *counts;
  if (o.space.gpu_counts.empty()) {
    if (base->gpu_count <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(a.job_path, ": cluster.gpu_count: required (> 0) unless --gpus is given"));
    }
    o.space.gpu_counts = {base->gpu_count};
  }
  o.space.max_tp = a.max_tp;
  o.space.max_pp = a.max_pp;
  o.space.max_cp = a.max_cp;
  o.space.max_ep = a.max_ep;
  o.space.max_micro_batch_size = a.max_micro_batch_size;
  if (!a.shardings.empty()) {
    o.space.shardings.clear();
    for (const std::string& s : a.shardings) {
      if (s == "none") o.space.shardings.push_back(Sharding::kNone);
      else if (s == "zero1") o.space.shardings.push_back(Sharding::kZero1);
      else if (s == "zero2") o.space.shardings.push_back(Sharding::kZero2);
      else if (s == "zero3" || s == "fsdp") o.space.shardings.push_back(Sharding::kZero3);
      else return absl::InvalidArgumentError(absl::StrCat("--sharding: '", s, "' is not none, zero1, zero2, zero3 or fsdp"));
    }
  }
  o.space.hsdp = !a.no_hsdp;
  o.space.sequence_parallel = !a.keep_sequence_parallel;
  o.space.uneven_pipeline = !a.even_pipeline_only;
  o.space.etp = a.etp;
  o.space.all_schedules = a.all_schedules;
  o.space.overlap_off = a.overlap_off;
  o.space.fp8 = a.fp8;
  // NaN meant "no limit" and inf or 1e308 overflowed the duration cast into "stop at once"
  // (review 2, N13): a finite number of seconds up to a week.
  constexpr double kMaxTimeLimitS = 7 * 86400;
  if (!(a.time_limit_s >= 0) || a.time_limit_s > kMaxTimeLimitS) {
    return absl::InvalidArgumentError(absl::StrCat("--time-limit: ", a.time_limit_s,
                                                        " must be a number of seconds in [0, ", kMaxTimeLimitS,
                                                        "] (0: none)"));
  }
  if (a.time_limit_s > 0) {
    o.deadline = std::chrono::steady_clock::now() +
                 std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(a.time_limit_s));
  }
  return absl::OkStatus();
}

// `--html`: the heat map PP x TP over the ranked layouts (the top, the Pareto front and the best
// per GPU count, each layout once), the best outlined; the counts of the search beside them.
absl::Status WriteSearchPage(const SearchArgs& a, const SearchResult& r, const Job& job) {
  std::vector<const RankedLayout*> ranked;
  std::set<std::string> seen;
  for (const auto* list : {&r.top, &r.pareto, &r.best_per_gpu_count}) {
    for (const RankedLayout& l : *list) {
      if (seen.insert(LayoutKey(l.layout)).second) ranked.push_back(&l);
    }
  }
  std::vector<Layout> layouts;
  for (const RankedLayout* l : ranked) layouts.push_back(l->layout);
  const std::vector<std::string> labels = LayoutLabels(layouts);
  std::vector<html::SearchCandidate> cands;
  for (size_t i = 0; i < ranked.size(); ++i) {
    const RankedLayout& l = *ranked[i];
    html::SearchCandidate c;
    c.row = absl::StrCat("PP=", l.layout.parallelism.pp);
    c.column = absl::StrCat("TP=", l.layout.parallelism.tp);
    c.layout = labels[i];
    c.step_time_s = l.prediction.step_time_s;
    c.mfu = l.prediction.mfu;
    c.fits = l.prediction.memory.fits;
    cands.push_back(std::move(c));
  }
  const html::SearchCandidate chosen = r.top.empty() ? html::SearchCandidate{} : cands.front();
  html::SearchCounts counts;
  counts.enumerated = r.stats.enumerated;
  counts.pruned = r.stats.pruned;
  counts.evaluated = r.stats.evaluated;
  counts.fitting = r.stats.fitting;
  counts.listed = static_cast<int64_t>(r.top.size() + r.pareto.size() + r.best_per_gpu_count.size());
  const std::string title = absl::StrCat("Layout search: ", job.name);
  return html::WritePage(a.html_path, html::SearchPage(title, cands, chosen, r.objective == SearchObjective::kMfu, &counts));
}

}  // namespace

int Search(const SearchArgs& a, const Catalog& catalog) {
  if (a.job_path.empty()) return Fail(absl::InvalidArgumentError("search: give a job file"));
  std::optional<RateProfile> profile;
  if (!a.profile_path.empty()) {
    absl::StatusOr<RateProfile> p = LoadRateProfile(a.profile_path);
    if (!p.ok()) return Fail(p.status());
    profile = *std::move(p);
  }
  v1::JobSpec spec;
  if (absl::Status s = ParseMessageFile(a.job_path, &spec); !s.ok()) return Fail(s);
  const std::string dir = std::filesystem::path(a.job_path).parent_path().string();
  absl::StatusOr<SearchBase> base = SearchBaseFromSpec(spec, catalog, dir, profile ? &*profile : nullptr);
  if (!base.ok()) {
    return Fail(absl::Status(base.status().code(), absl::StrCat(a.job_path, ": ", base.status().message())));
  }
  if (base->job.name.empty()) base->job.name = std::filesystem::path(a.job_path).stem().string();

  SearchOptions o;
  if (absl::Status s = FillSearchOptions(a, *base, o); !s.ok()) return Fail(s);
  bool printed = false;
  if (!a.quiet) {
    o.progress = [&printed](const SearchProgress& p) {
      if (p.elapsed_s < 1.0) return;
      std::fprintf(stderr, "\rstepcast: searching %lld/%lld work units, %s layouts evaluated, %s fit, %s pruned (%.1f s)",
                   static_cast<long long>(p.units_done), static_cast<long long>(p.units_total),
                   Thousands(static_cast<double>(p.evaluated)).c_str(), Thousands(static_cast<double>(p.fitting)).c_str(),
                   Thousands(static_cast<double>(p.pruned)).c_str(), p.elapsed_s);
      std::fflush(stderr);
      printed = true;
    };
  }
  absl::StatusOr<SearchResult> r = SearchLayouts(base->job, o);
  if (printed) std::fprintf(stderr, "\n");
  if (!r.ok()) return Fail(r.status());
  const Job* submitted = base->submitted ? &*base->submitted : nullptr;
  if (!a.html_path.empty()) {
    if (absl::Status s = WriteSearchPage(a, *r, base->job); !s.ok()) return Fail(s);
  }
  if (a.json) {
    std::cout << ToJson(SearchResultToProto(*r, submitted));
  } else {
    std::cout << FormatSearchResult(*r, base->job, submitted);
  }
  // A full disk or a closed pipe is an error, not exit 0 (review 2, N12).
  std::cout.flush();
  if (!std::cout) return Fail(absl::UnavailableError("writing the result to stdout failed"));
  return 0;
}

}  // namespace stepcast::cli
