#include <csv.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/cli.h"
#include "core/flops.h"
#include "core/interval.h"
#include "core/memory.h"
#include "proto/codec.h"
#include "proto/interval_table.h"
#include "proto/published_runs.h"
#include "yaml-cpp/yaml.h"
#include "absl/strings/str_join.h"

namespace stepcast::cli {
namespace {

using Row = PublishedRow;

struct CsvState {
  std::vector<std::string> header;
  std::vector<std::string> fields;
  std::vector<Row> rows;
  bool have_header = false;
};

void OnField(void* s, size_t len, void* data) {
  auto* st = static_cast<CsvState*>(data);
  st->fields.emplace_back(static_cast<const char*>(s), len);
}
void OnRow(int, void* data) {
  auto* st = static_cast<CsvState*>(data);
  if (!st->have_header) {
    st->header = st->fields;
    st->have_header = true;
  } else if (!(st->fields.size() == 1 && st->fields[0].empty())) {
    Row r;
    for (size_t i = 0; i < st->header.size() && i < st->fields.size(); ++i) {
      r[st->header[i]] = std::string(absl::StripAsciiWhitespace(st->fields[i]));
    }
    st->rows.push_back(std::move(r));
  }
  st->fields.clear();
}

absl::StatusOr<std::vector<Row>> ReadCsv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open file"));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  csv_parser parser;
  if (csv_init(&parser, 0) != 0) return absl::InternalError("csv_init failed");
  CsvState st;
  if (csv_parse(&parser, text.data(), text.size(), OnField, OnRow, &st) != text.size()) {
    std::string err = csv_strerror(csv_error(&parser));
    csv_free(&parser);
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", err));
  }
  csv_fini(&parser, OnField, OnRow, &st);
  csv_free(&parser);
  for (const char* col : {"row_id", "n_layers", "d_model", "n_heads", "gpu", "num_gpus", "tp", "pp",
                          "micro_batch", "global_batch_seqs", "seq_len", "precision"}) {
    if (std::find(st.header.begin(), st.header.end(), col) == st.header.end()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": missing column '", col, "'"));
    }
  }
  return st.rows;
}

std::string Str(const Row& r, const std::string& col) {
  auto it = r.find(col);
  return it == r.end() ? "" : it->second;
}

// The median (the mean of the middle two for an even count); 0 for none.
double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// |error| statistics of a set of rows.
v1::ValidationSummary Summarise(const std::vector<double>& abs_errors, int64_t skipped, int64_t not_fit,
                                const std::map<std::string, std::vector<double>>& experiments) {
  v1::ValidationSummary s;
  s.set_n_rows(static_cast<int64_t>(abs_errors.size()));
  s.set_n_skipped(skipped);
  s.set_n_not_fit(not_fit);
  if (!abs_errors.empty()) {
    std::vector<double> e = abs_errors;
    std::sort(e.begin(), e.end());
    s.set_median_abs_error_pct(Median(e));
    double sum = 0;
    for (double x : e) sum += x;
    s.set_mean_abs_error_pct(sum / e.size());
    s.set_max_abs_error_pct(e.back());
    // Nearest-rank 90th percentile.
    const size_t k = static_cast<size_t>(std::ceil(0.9 * e.size()));
    s.set_p90_abs_error_pct(e[std::min(e.size(), std::max<size_t>(k, 1)) - 1]);
  }
  std::vector<double> per_experiment;
  for (const auto& [id, errs] : experiments) {
    if (!errs.empty()) per_experiment.push_back(Median(errs));
  }
  s.set_n_experiments(static_cast<int64_t>(per_experiment.size()));
  s.set_median_experiment_abs_error_pct(Median(per_experiment));
  return s;
}

// The choices each source informed: a YAML map source id -> list of ModelChoices names.
absl::StatusOr<std::map<std::string, std::vector<std::string>>> ReadInformed(const std::string& path) {
  std::map<std::string, std::vector<std::string>> out;
  if (path.empty()) return out;
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", e.what()));
  }
  if (!root.IsMap()) return absl::InvalidArgumentError(absl::StrCat(path, ": expected a map of source id -> choices"));
  for (const auto& kv : root) {
    const std::string src = kv.first.Scalar();
    if (!kv.second.IsSequence()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", src, ": expected a list of choices"));
    }
    for (const auto& c : kv.second) {
      ModelChoices probe;
      if (!c.IsScalar() || !probe.Disable(c.Scalar())) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": ", src, ": unknown choice '",
                                                       c.IsScalar() ? c.Scalar() : "?", "'; known: ",
                                                       absl::StrJoin(ModelChoices::Names(), ", ")));
      }
      out[src].push_back(c.Scalar());
    }
  }
  return out;
}

// The importer's assumptions (vocabulary from a tokenizer, ...) before the codec's.
std::shared_ptr<const std::vector<AssumedInput>> WithRowAssumptions(
    const std::vector<AssumedInput>& row, const std::shared_ptr<const std::vector<AssumedInput>>& job) {
  auto all = std::make_shared<std::vector<AssumedInput>>(row);
  if (job) all->insert(all->end(), job->begin(), job->end());
  return all;
}

// One row predicted: its job and prediction (skip: why not).
struct RowPrediction {
  std::string skip;
  PublishedRun run;
  Job job;
  Prediction p;
  bool ok() const { return skip.empty(); }
};

// Predicts one row with `choices`.
RowPrediction PredictOne(const PublishedRow& r, const Catalog& catalog, const ModelChoices& choices) {
  RowPrediction out;
  absl::StatusOr<PublishedRun> run = PublishedRunFromRow(r, catalog);
  if (!run.ok()) {
    out.skip = std::string(run.status().message());
    return out;
  }
  out.run = *std::move(run);
  if (!choices.framework_recipes || !choices.attention_limits || !choices.release_expert_layout) {
    // The framework without its per-model recipes, its attention limits or its release-dependent
    // expert layout, inline (the job's stated release is kept: FrameworkRef.release is outside the
    // preset/spec oneof).
    absl::StatusOr<v1::FrameworkSpec> fw = catalog.FindFramework(out.run.spec.framework().preset());
    if (!fw.ok()) {
      out.skip = std::string(fw.status().message());
      return out;
    }
    if (!choices.framework_recipes) fw->clear_recipes();
    if (!choices.attention_limits) fw->clear_attention_limits();
    if (!choices.release_expert_layout) fw->mutable_moe()->clear_folded_from_release();
    *out.run.spec.mutable_framework()->mutable_spec() = *fw;
  }
  absl::StatusOr<Job> job = JobFromSpec(out.run.spec, catalog, "", nullptr);
  if (!job.ok()) {
    out.skip = std::string(job.status().message());
    return out;
  }
  out.job = *std::move(job);
  out.job.choices = choices;
  out.job.assumed = WithRowAssumptions(out.run.assumed, out.job.assumed);
  absl::StatusOr<Prediction> p = Predict(out.job);
  if (!p.ok()) {
    out.skip = std::string(p.status().message());
    return out;
  }
  out.p = *std::move(p);
  return out;
}

double ErrorPct(const RowPrediction& x) {
  return (x.p.step_time_s - x.run.measured_iter_time_s) / x.run.measured_iter_time_s * 100;
}

struct Tally {
  std::vector<double> errors, signed_errors;
  int64_t skipped = 0, not_fit = 0, fallback = 0;
  std::map<std::string, std::vector<double>> experiments;
  // `fits`: the memory verdict is not "does not fit" ("tight" is not a refusal).
  void Add(const RowPrediction& r, bool fits) {
    if (!r.ok()) {
      ++skipped;
      return;
    }
    if (r.run.framework_fallback) ++fallback;  // predicted with the generic preset
    const double signed_e = ErrorPct(r), e = std::fabs(signed_e);
    errors.push_back(e);
    signed_errors.push_back(signed_e);
    experiments[r.run.experiment].push_back(e);
    if (!fits) ++not_fit;
  }
  v1::ValidationSummary Summary() const {
    v1::ValidationSummary s = Summarise(errors, skipped, not_fit, experiments);
    s.set_n_framework_fallback(static_cast<int32_t>(fallback));
    s.set_median_signed_error_pct(Median(signed_errors));
    return s;
  }
};

// A short stable id of a text (FNV-1a 64), for experiment ids of memory runs.
std::string ShortHash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return absl::StrFormat("%016x", h);
}

// The measured peak-memory runs predicted: residuals and per-run checks.
absl::Status PredictMemoryRuns(const std::string& path, const Catalog& catalog, std::vector<MemoryResidualRun>* out,
                               v1::IntervalCoverage* coverage) {
  if (path.empty()) return absl::OkStatus();
  absl::StatusOr<v1::MeasuredMemoryRuns> runs = LoadMeasuredMemoryRuns(path);
  if (!runs.ok()) return runs.status();
  const double gib = 1024.0 * 1024 * 1024;
  for (const v1::MeasuredMemoryRun& m : runs->runs()) {
    v1::MemoryRunCheck* c = coverage->add_memory_runs();
    c->set_id(m.id());
    c->set_source(m.source());
    c->set_metric(m.metric());
    c->set_measured_gib(m.measured_peak_gib());
    absl::StatusOr<Job> job = JobFromSpec(m.job(), catalog, "", nullptr);
    absl::StatusOr<Prediction> p = job.ok() ? Predict(*job) : absl::StatusOr<Prediction>(job.status());
    if (!p.ok()) {
      // A run the model cannot express is reported, not dropped silently.
      c->set_skipped_reason(std::string(p.status().message()));
      continue;
    }
    c->set_predicted_gib(p->memory.total_bytes / gib);
    c->set_family(FrameworkFamilyName(RegimeOf(*job).family));
    c->set_error_pct((p->memory.total_bytes / gib - m.measured_peak_gib()) / m.measured_peak_gib() * 100);
    // A weak-scaling series (the same job but for the data-parallel size, global batch, GPU count
    // and GPU type, whoever measured it) is one experiment.
    v1::JobSpec series = m.job();
    series.mutable_parallelism()->clear_dp();
    series.mutable_cluster()->clear_gpu_count();
    series.mutable_training()->clear_global_batch_size();
    series.clear_hardware();
    series.clear_name();
    out->push_back({m.id(), m.source(), absl::StrCat("job ", ShortHash(series.ShortDebugString())),
                    RegimeOf(*job).family, p->memory.total_bytes, m.measured_peak_gib() * gib});
  }
  return absl::OkStatus();
}

// Coverage of a group of rows.
struct CoverageAcc {
  int rows = 0, covered = 0, unvalidated = 0;
  std::vector<double> half_widths;
  void Add(const v1::ValidationRow& r) {
    ++rows;
    covered += r.loso_covered() ? 1 : 0;
    unvalidated += r.loso_interval().validated() ? 0 : 1;
    const v1::StepTimeInterval& i = r.loso_interval();
    half_widths.push_back((i.high_s() - i.low_s()) / 2 / r.loso_predicted_iter_time_s() * 100);
  }
  void To(const std::string& group, v1::IntervalCoverageGroup* g) const {
    g->set_group(group);
    g->set_rows(rows);
    g->set_covered(covered);
    g->set_coverage(rows > 0 ? static_cast<double>(covered) / rows : 0);
    g->set_median_half_width_pct(Median(half_widths));
    g->set_rows_unvalidated(unvalidated);
  }
};

using InformedChoices = std::map<std::string, std::vector<std::string>>;
using SourceTables = std::map<std::string, std::shared_ptr<const IntervalTable>>;

// Every row predicted with all model choices (`full`), and leave-one-source-out (`loso`: the
// row's source's informed choices off; the same prediction when it informed none).
void PredictRows(const std::vector<Row>& rows, const Catalog& catalog, const InformedChoices& informed,
                 std::vector<RowPrediction>* full, std::vector<RowPrediction>* loso) {
  for (const Row& r : rows) {
    full->push_back(PredictOne(r, catalog, ModelChoices{}));
    auto it = informed.find(Str(r, "source_id"));
    if (it == informed.end() || it->second.empty()) {
      loso->push_back(full->back());
      continue;
    }
    ModelChoices without;
    for (const std::string& c : it->second) without.Disable(c);
    loso->push_back(PredictOne(r, catalog, without));
  }
}

// The residual table of every row's leave-one-source-out residual and the memory runs
// (IntervalTable::Build), and the same without each source (`without_source`), for that
// source's coverage.
std::shared_ptr<const IntervalTable> BuildIntervalTables(const std::vector<Row>& rows,
                                                         const std::vector<RowPrediction>& loso,
                                                         const std::vector<MemoryResidualRun>& memory,
                                                         SourceTables* without_source) {
  std::vector<ResidualRun> residuals;
  for (size_t i = 0; i < rows.size(); ++i) {
    const RowPrediction& x = loso[i];
    if (!x.ok()) continue;
    residuals.push_back({absl::StrCat("row ", Str(rows[i], "row_id")), Str(rows[i], "source_id"), x.run.experiment,
                         RegimeOf(x.job), x.p.step_time_s, x.run.measured_iter_time_s});
  }
  auto table = std::make_shared<const IntervalTable>(IntervalTable::Build(residuals, memory));
  for (const ResidualRun& r : residuals) {
    if (without_source->count(r.source)) continue;
    std::vector<ResidualRun> others;
    for (const ResidualRun& o : residuals) {
      if (o.source != r.source) others.push_back(o);
    }
    (*without_source)[r.source] = std::make_shared<const IntervalTable>(IntervalTable::Build(others, memory));
  }
  return table;
}

// One report row: the row's fields, its full prediction `x` with the memory verdict from
// `table`, and its leave-one-source-out prediction `l` with the interval from the other sources'
// residuals. `fits` / `loso_fits`: the memory verdicts the tallies count (true when not predicted).
void FillRow(const Row& r, const RowPrediction& x, const RowPrediction& l, const IntervalTable& table,
             SourceTables& without_source, v1::ValidationRow* out, bool* fits, bool* loso_fits) {
  out->set_row_id(Str(r, "row_id"));
  out->set_source_id(Str(r, "source_id"));
  out->set_model(Str(r, "model"));
  out->set_gpu(Str(r, "gpu"));
  double gpus = 0;
  if (absl::SimpleAtod(Str(r, "num_gpus"), &gpus) && gpus >= 0 && gpus < 1e9) {
    out->set_gpu_count(static_cast<int32_t>(gpus));
  }
  *fits = true;
  *loso_fits = true;
  if (!x.run.experiment.empty()) {
    out->set_measured_iter_time_s(x.run.measured_iter_time_s);
    out->set_measured_from(x.run.measured_from);
    out->set_experiment(x.run.experiment);
  }
  if (!x.ok()) {
    out->set_skipped_reason(x.skip);
  } else {
    // The memory verdict from the memory interval of the table built here.
    const MemoryInterval mi = EstimateMemoryInterval(x.p.memory.total_bytes, x.p.memory.capacity_bytes,
                                                     RegimeOf(x.job).family, &table, kMemoryUncertainty);
    *fits = mi.verdict != MemoryVerdict::kDoesNotFit;
    out->set_framework(x.job.framework.name);
    out->set_hardware(x.job.hardware.name);
    out->set_framework_fallback(x.run.framework_fallback);
    out->set_predicted_iter_time_s(x.p.step_time_s);
    out->set_predicted_mfu(x.p.mfu);
    out->set_bottleneck(std::string(BottleneckName(x.p.bottleneck.kind)));
    out->set_error_pct(ErrorPct(x));
    out->set_fits(x.p.memory.fits);
    out->set_tight(mi.verdict == MemoryVerdict::kTight);
    out->set_memory_verdict(MemoryVerdictToProto(mi.verdict));
    out->set_memory_total_bytes(x.p.memory.total_bytes);
    out->set_memory_capacity_bytes(x.p.memory.capacity_bytes);
    for (const AssumedInput& a : *x.p.assumed_inputs) {
      auto* y = out->add_assumed_inputs();
      y->set_field(a.field);
      y->set_value(a.value);
      y->set_source(a.source);
    }
  }
  if (l.ok()) {
    *loso_fits = EstimateMemoryInterval(l.p.memory.total_bytes, l.p.memory.capacity_bytes, RegimeOf(l.job).family,
                                        &table, kMemoryUncertainty)
                     .verdict != MemoryVerdict::kDoesNotFit;
    // Its interval from the other sources' residuals.
    const StepTimeInterval iv = EstimateStepTimeInterval(l.job, l.p.step_time_s, *without_source[Str(r, "source_id")]);
    out->set_loso_predicted_iter_time_s(l.p.step_time_s);
    *out->mutable_loso_interval() = StepTimeIntervalToProto(iv);
    out->set_loso_covered(l.run.measured_iter_time_s >= iv.low_s && l.run.measured_iter_time_s <= iv.high_s);
  }
}

// Every row into the report, and the summaries: all rows, and by source (all choices and
// leave-one-source-out, with the choices the source informed).
void AddRowsAndSummaries(const std::vector<Row>& rows, const std::vector<RowPrediction>& full,
                         const std::vector<RowPrediction>& loso, const InformedChoices& informed,
                         const IntervalTable& table, SourceTables& without_source, v1::ValidationReport* report) {
  Tally all;
  std::map<std::string, Tally> by_source, loso_by_source, by_kind, by_hardware;
  for (size_t i = 0; i < rows.size(); ++i) {
    v1::ValidationRow* out = report->add_rows();
    bool fits = true, loso_fits = true;
    FillRow(rows[i], full[i], loso[i], table, without_source, out, &fits, &loso_fits);
    all.Add(full[i], fits);
    by_source[out->source_id()].Add(full[i], fits);
    loso_by_source[out->source_id()].Add(loso[i], loso_fits);
    if (full[i].ok()) {
      by_kind[full[i].job.model.moe.enabled() ? "MoE" : "dense"].Add(full[i], fits);
      by_hardware[full[i].job.hardware.name].Add(full[i], fits);
    }
  }
  *report->mutable_summary() = all.Summary();
  for (const auto& [kind, tally] : by_kind) {
    v1::GroupSummary* g = report->add_by_model_kind();
    g->set_group(kind);
    *g->mutable_summary() = tally.Summary();
  }
  for (const auto& [hw, tally] : by_hardware) {
    v1::GroupSummary* g = report->add_by_hardware();
    g->set_group(hw);
    *g->mutable_summary() = tally.Summary();
  }
  for (const auto& [id, tally] : by_source) {
    v1::SourceSummary* s = report->add_by_source();
    s->set_source_id(id);
    *s->mutable_summary() = tally.Summary();
    *s->mutable_leave_one_source_out() = loso_by_source[id].Summary();
    auto it = informed.find(id);
    if (it != informed.end()) {
      for (const std::string& c : it->second) s->add_choices_informed(c);
    }
  }
}

// The memory intervals by framework family (ratios measured / predicted: exp of the conformal
// bounds on the log ratio, IntervalTable).
void AddMemoryCoverage(const IntervalTable& table, v1::IntervalCoverage* cov) {
  for (int f = 0; f < 5; ++f) {
    const FrameworkFamily family = static_cast<FrameworkFamily>(f);
    if (table.memory_rows(family) == 0) continue;
    const ConformalBounds& b = table.memory_bounds(family);
    v1::MemoryIntervalGroup* g = cov->add_memory_by_family();
    g->set_family(FrameworkFamilyName(family));
    g->set_runs(b.weight);
    g->set_rows(table.memory_rows(family));
    g->set_available(b.finite);
    if (b.finite) {
      g->set_low_ratio(std::exp(b.lo));
      g->set_high_ratio(std::exp(b.hi));
    }
  }
}

// Coverage of the leave-one-source-out step-time intervals: overall, by regime (framework family
// / dense-MoE, and with the sharding), by source; and the table's validated regions.
void AddStepTimeCoverage(const v1::ValidationReport& report, const std::vector<RowPrediction>& loso,
                         const IntervalTable& table, v1::IntervalCoverage* cov) {
  CoverageAcc total;
  std::map<std::string, CoverageAcc> regimes, sources;
  std::vector<std::string> regime_order;
  // Regimes at two levels: framework family / dense-MoE, then with the sharding.
  for (int level : {6, 5}) {
    for (size_t i = 0; i < loso.size(); ++i) {
      const v1::ValidationRow& r = report.rows(static_cast<int>(i));
      if (!r.has_loso_interval()) continue;
      const std::string g = RegimeText(RegimeOf(loso[i].job), level);
      if (!regimes.count(g)) regime_order.push_back(g);
      regimes[g].Add(r);
      if (level == 6) {
        total.Add(r);
        sources[r.source_id()].Add(r);
      }
    }
  }
  for (const IntervalTable::Node& n : table.nodes()) {
    if (n.level < kValidatedRegionLevel) continue;
    v1::RegimeIntervalEntry* e = cov->add_table();
    e->set_regime(RegimeText(Regime::FromKey(n.key), n.level));
    e->set_level(n.level);
    e->set_runs(n.experiments);
    e->set_rows(n.rows);
    e->set_sources(n.sources);
    e->set_finite(n.bounds.finite);
    if (n.bounds.finite) {
      e->set_low_ratio(std::exp(n.bounds.lo));
      e->set_high_ratio(std::exp(n.bounds.hi));
    }
  }
  cov->set_rows(total.rows);
  cov->set_covered(total.covered);
  cov->set_coverage(total.rows > 0 ? static_cast<double>(total.covered) / total.rows : 0);
  cov->set_median_half_width_pct(Median(total.half_widths));
  for (const std::string& g : regime_order) regimes[g].To(g, cov->add_by_regime());
  for (const auto& [id, acc] : sources) acc.To(id, cov->add_by_source());
}

}  // namespace

absl::StatusOr<v1::ValidationReport> Validate(const std::string& csv_path, const Catalog& catalog,
                                              const std::string& informed_path, const std::string& memory_runs_path,
                                              std::shared_ptr<const IntervalTable>* table_out) {
  absl::StatusOr<std::vector<Row>> rows = ReadCsv(csv_path);
  if (!rows.ok()) return rows.status();
  absl::StatusOr<InformedChoices> informed = ReadInformed(informed_path);
  if (!informed.ok()) return informed.status();
  v1::ValidationReport report;
  v1::IntervalCoverage* cov = report.mutable_interval_coverage();
  std::vector<MemoryResidualRun> memory;
  if (absl::Status s = PredictMemoryRuns(memory_runs_path, catalog, &memory, cov); !s.ok()) return s;

  std::vector<RowPrediction> full, loso;
  PredictRows(*rows, catalog, *informed, &full, &loso);
  SourceTables without_source;
  const std::shared_ptr<const IntervalTable> table = BuildIntervalTables(*rows, loso, memory, &without_source);
  if (table_out != nullptr) *table_out = table;
  AddRowsAndSummaries(*rows, full, loso, *informed, *table, without_source, &report);

  // Coverage of the leave-one-source-out intervals.
  cov->set_target(table->coverage());
  cov->set_minimum_runs(MinimumWeight(table->coverage()));
  AddMemoryCoverage(*table, cov);
  AddStepTimeCoverage(report, loso, *table, cov);
  return report;
}

std::string IntervalTableFile(const IntervalTable& table, const std::string& command) {
  return IntervalTableYaml(IntervalTableToSpec(table, command));
}

absl::StatusOr<std::string> ExplainRow(const std::string& csv_path, const Catalog& catalog, const std::string& row_id,
                                       bool json) {
  absl::StatusOr<std::vector<Row>> rows = ReadCsv(csv_path);
  if (!rows.ok()) return rows.status();
  for (const Row& r : *rows) {
    if (Str(r, "row_id") != row_id) continue;
    absl::StatusOr<PublishedRun> run = PublishedRunFromRow(r, catalog);
    if (!run.ok()) return run.status();
    absl::StatusOr<Job> job = JobFromSpec(run->spec, catalog, "", nullptr);
    if (!job.ok()) return job.status();
    job->assumed = WithRowAssumptions(run->assumed, job->assumed);
    absl::StatusOr<Prediction> p = Predict(*job);
    if (!p.ok()) return p.status();
    const double err = (p->step_time_s - run->measured_iter_time_s) / run->measured_iter_time_s * 100;
    if (json) {
      // One JSON object, its keys in a fixed order: the row, the measured step time, the error,
      // the job spec as the row was read (a job file), the prediction; strings escaped by the
      // codec's JsonString, numbers finite (a measured time is > 0, Predict's results are checked).
      absl::StatusOr<std::string> spec_json = JobSpecToJson(run->spec);
      if (!spec_json.ok()) return spec_json.status();
      std::string out = "{\n\"row_id\": ";
      JsonString(row_id, out);
      absl::StrAppend(&out, ",\n\"measured_iter_time_s\": ", absl::StrFormat("%.17g", run->measured_iter_time_s),
                      ",\n\"measured_from\": ");
      JsonString(run->measured_from, out);
      absl::StrAppend(&out, ",\n\"error_pct\": ", absl::StrFormat("%.17g", err), ",\n\"spec\": ", *spec_json,
                      ",\n\"prediction\": ", ToJson(PredictionToProto(*p)), "}\n");
      return out;
    }
    return absl::StrCat(FormatReport(*job, *p),
                        absl::StrFormat("\n  measured   %.4f s (%s): predicted %+.1f%%\n", run->measured_iter_time_s,
                                        run->measured_from, err));
  }
  return absl::NotFoundError(absl::StrCat("--explain: no row with row_id '", row_id, "' in ", csv_path));
}

std::string FormatValidation(const v1::ValidationReport& r) {
  std::string o = absl::StrFormat("%-5s %-4s %-26s %-16s %-9s %6s %11s %11s %8s  %-6s %-18s %s\n", "row", "src", "model",
                                  "framework", "gpu", "gpus", "measured_s", "predicted_s", "error", "memory",
                                  "bottleneck", "80% interval (LOSO)");
  for (const auto& row : r.rows()) {
    const std::string gpu = row.gpu().substr(0, 9);
    const std::string model = row.model().substr(0, 26);
    if (!row.skipped_reason().empty()) {
      absl::StrAppendFormat(&o, "%-5s %-4s %-26s %-16s %-9s %6d  cannot predict: %s\n", row.row_id(), row.source_id(),
                            model, row.framework(), gpu, row.gpu_count(), row.skipped_reason());
      continue;
    }
    const char* memory = row.memory_verdict() == v1::MEMORY_VERDICT_TIGHT         ? "TIGHT"
                         : row.memory_verdict() == v1::MEMORY_VERDICT_DOES_NOT_FIT ? "NO FIT"
                                                                                   : "fits";
    std::string interval;
    if (row.has_loso_interval()) {
      const v1::StepTimeInterval& i = row.loso_interval();
      interval = absl::StrFormat("%.3f-%.3f %s%s", i.low_s(), i.high_s(), row.loso_covered() ? "in" : "OUT",
                                 i.validated() ? (i.below_minimum() ? " (broader)" : "") : " (unvalidated)");
    }
    absl::StrAppendFormat(&o, "%-5s %-4s %-26s %-16s %-9s %6d %11.3f %11.3f %+7.1f%%  %-6s %-18s %s\n", row.row_id(),
                          row.source_id(), model, row.framework_fallback() ? row.framework() + " (fallback)" : row.framework(),
                          gpu, row.gpu_count(), row.measured_iter_time_s(),
                          row.predicted_iter_time_s(), row.error_pct(), memory, row.bottleneck(), interval);
  }
  auto line = [&](const std::string& label, const v1::ValidationSummary& s) {
    absl::StrAppendFormat(&o, "%-12s n=%-3d median %5.1f%%  p90 %5.1f%%  mean %5.1f%%  max %6.1f%%  experiments %2d "
                              "(median %5.1f%%)%s%s\n",
                          label, s.n_rows(), s.median_abs_error_pct(), s.p90_abs_error_pct(), s.mean_abs_error_pct(),
                          s.max_abs_error_pct(), s.n_experiments(), s.median_experiment_abs_error_pct(),
                          s.n_skipped() ? absl::StrFormat("  %d not predicted", s.n_skipped()) : "",
                          s.n_not_fit() ? absl::StrFormat("  %d predicted NOT TO FIT", s.n_not_fit()) : "");
    if (s.n_framework_fallback() > 0) {
      o.pop_back();
      absl::StrAppendFormat(&o, "  %d on the generic preset (framework not named)\n", s.n_framework_fallback());
    }
  };
  o += "\n|error| of predicted step time (not-fit rows count as failures; a weak-scaling series is one experiment)\n";
  for (const auto& s : r.by_source()) line("source " + s.source_id(), s.summary());
  line("all rows", r.summary());
  // The lean of each model kind and GPU: the median signed error (negative: predicted too fast).
  auto lean = [&](const std::string& label, const v1::ValidationSummary& s) {
    absl::StrAppendFormat(&o, "%-26s n=%-3d median |error| %5.1f%%  p90 %5.1f%%  median signed error %+6.1f%%\n", label,
                          s.n_rows(), s.median_abs_error_pct(), s.p90_abs_error_pct(), s.median_signed_error_pct());
  };
  if (r.by_model_kind_size() > 0 || r.by_hardware_size() > 0) {
    o += "\nby model kind and by GPU (signed error: predicted / measured - 1; negative = predicted too fast)\n";
    for (const auto& g : r.by_model_kind()) lean(g.group(), g.summary());
    for (const auto& g : r.by_hardware()) lean(g.group(), g.summary());
  }
  bool any_loso = false;
  for (const auto& s : r.by_source()) any_loso |= s.choices_informed_size() > 0;
  if (any_loso) {
    o += "\nleave-one-source-out: each source with the model choices its rows informed switched off\n";
    for (const auto& s : r.by_source()) {
      line("source " + s.source_id(), s.leave_one_source_out());
      if (s.choices_informed_size() > 0) {
        absl::StrAppendFormat(&o, "             without: %s\n", absl::StrJoin(s.choices_informed(), ", "));
      }
    }
  }
  const v1::IntervalCoverage& c = r.interval_coverage();
  if (c.rows() > 0) {
    absl::StrAppendFormat(&o,
                          "\n%.0f%% intervals, leave-one-source-out: each row's interval from the other sources' "
                          "residuals (regimes need %.0f runs; a weak-scaling series counts once)\n",
                          100 * c.target(), c.minimum_runs());
    auto group = [&](const v1::IntervalCoverageGroup& g) {
      // A share of fewer rows than the minimum is no measurement of an 80% coverage.
      absl::StrAppendFormat(&o, "%-58s rows %3d  covered %3d  coverage %5.1f%%  median half-width %5.1f%%%s%s\n",
                            g.group(), g.rows(), g.covered(), 100 * g.coverage(), g.median_half_width_pct(),
                            g.rows_unvalidated() ? absl::StrFormat("  (%d unvalidated)", g.rows_unvalidated()) : "",
                            g.rows() < c.minimum_runs() ? "  [fewer rows than the minimum]" : "");
    };
    for (const auto& g : c.by_regime()) group(g);
    for (const auto& g : c.by_source()) {
      v1::IntervalCoverageGroup x = g;
      x.set_group("source " + g.group());
      group(x);
    }
    absl::StrAppendFormat(&o, "%-58s rows %3d  covered %3d  coverage %5.1f%%  median half-width %5.1f%%\n", "all rows",
                          c.rows(), c.covered(), 100 * c.coverage(), c.median_half_width_pct());
  }
  if (c.table_size() > 0) {
    absl::StrAppendFormat(&o, "\nthe interval table of every row (regimes with the minimum of %.0f runs give the "
                              "interval; ratios measured / predicted)\n",
                          c.minimum_runs());
    for (const auto& e : c.table()) {
      absl::StrAppendFormat(&o, "  %-72s runs %5.1f  rows %3d  sources %d  %s\n", e.regime(), e.runs(), e.rows(),
                            e.sources(),
                            e.finite() ? absl::StrFormat("80%% %.3f-%.3f", e.low_ratio(), e.high_ratio())
                                       : std::string("below the minimum"));
    }
  }
  if (c.memory_runs_size() > 0) {
    o += "\nmemory per GPU against measured peaks, by framework family\n";
    for (const auto& g : c.memory_by_family()) {
      if (g.available()) {
        absl::StrAppendFormat(&o, "  %-22s %4.1f runs (%d rows): %.0f%% interval of measured / predicted %.3f-%.3f\n",
                              g.family(), g.runs(), g.rows(), 100 * c.target(), g.low_ratio(), g.high_ratio());
      } else {
        absl::StrAppendFormat(&o, "  %-22s %4.1f runs (%d rows): below the minimum of %.0f, no interval\n", g.family(),
                              g.runs(), g.rows(), c.minimum_runs());
      }
    }
    for (const auto& m : c.memory_runs()) {
      if (!m.skipped_reason().empty()) {
        absl::StrAppendFormat(&o, "  %-44s cannot predict: %s\n", m.id(), m.skipped_reason());
        continue;
      }
      absl::StrAppendFormat(&o, "  %-44s measured %7.2f GiB  predicted %7.2f GiB  %+6.1f%%  (%s)\n", m.id(),
                            m.measured_gib(), m.predicted_gib(), m.error_pct(), m.metric());
    }
  }
  return o;
}

}  // namespace stepcast::cli
