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
#include "proto/codec.h"
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

// |error| statistics of a set of rows.
v1::ValidationSummary Summarise(const std::vector<double>& abs_errors, int64_t skipped, int64_t not_fit,
                                const std::map<std::string, std::vector<double>>& experiments) {
  v1::ValidationSummary s;
  s.set_n_rows(static_cast<int64_t>(abs_errors.size()));
  s.set_n_skipped(skipped);
  s.set_n_not_fit(not_fit);
  auto median = [](std::vector<double> e) {
    std::sort(e.begin(), e.end());
    const size_t n = e.size();
    return n == 0 ? 0.0 : (n % 2 ? e[n / 2] : 0.5 * (e[n / 2 - 1] + e[n / 2]));
  };
  if (!abs_errors.empty()) {
    std::vector<double> e = abs_errors;
    std::sort(e.begin(), e.end());
    s.set_median_abs_error_pct(median(e));
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
    if (!errs.empty()) per_experiment.push_back(median(errs));
  }
  s.set_n_experiments(static_cast<int64_t>(per_experiment.size()));
  s.set_median_experiment_abs_error_pct(median(per_experiment));
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

struct RowResult {
  bool predicted = false;
  double abs_error_pct = 0;
  bool fits = true;
  bool framework_fallback = false;  // predicted with the generic preset
};

// Predicts one row with `choices`; fills `out` when non-null.
RowResult PredictRow(const PublishedRow& r, const Catalog& catalog, const ModelChoices& choices,
                     v1::ValidationRow* out, std::string* experiment) {
  RowResult res;
  auto skip = [&](const absl::Status& s) {
    if (out != nullptr) out->set_skipped_reason(std::string(s.message()));
    return res;
  };
  absl::StatusOr<PublishedRun> run = PublishedRunFromRow(r, catalog);
  if (!run.ok()) return skip(run.status());
  *experiment = run->experiment;
  if (out != nullptr) {
    out->set_measured_iter_time_s(run->measured_iter_time_s);
    out->set_measured_from(run->measured_from);
    out->set_experiment(run->experiment);
  }
  if (!choices.framework_recipes) {
    // The framework without its per-model recipes, inline.
    absl::StatusOr<v1::FrameworkSpec> fw = catalog.FindFramework(run->spec.framework().preset());
    if (!fw.ok()) return skip(fw.status());
    fw->clear_recipes();
    *run->spec.mutable_framework()->mutable_spec() = *fw;
  }
  absl::StatusOr<Job> job = JobFromSpec(run->spec, catalog, "", nullptr);
  if (!job.ok()) return skip(job.status());
  job->choices = choices;
  job->assumed = WithRowAssumptions(run->assumed, job->assumed);
  absl::StatusOr<Prediction> p = Predict(*job);
  if (!p.ok()) return skip(p.status());
  res.predicted = true;
  res.framework_fallback = run->framework_fallback;
  res.fits = p->memory.fits || p->memory.tight;  // "tight" is not a refusal
  const double err = (p->step_time_s - run->measured_iter_time_s) / run->measured_iter_time_s * 100;
  res.abs_error_pct = std::fabs(err);
  if (out != nullptr) {
    out->set_framework(job->framework.name);
    out->set_framework_fallback(run->framework_fallback);
    out->set_predicted_iter_time_s(p->step_time_s);
    out->set_predicted_mfu(p->mfu);
    out->set_bottleneck(std::string(BottleneckName(p->bottleneck.kind)));
    out->set_error_pct(err);
    out->set_fits(p->memory.fits);
    out->set_tight(p->memory.tight);
    out->set_memory_total_bytes(p->memory.total_bytes);
    out->set_memory_capacity_bytes(p->memory.capacity_bytes);
    for (const AssumedInput& a : *p->assumed_inputs) {
      auto* x = out->add_assumed_inputs();
      x->set_field(a.field);
      x->set_value(a.value);
      x->set_source(a.source);
    }
  }
  return res;
}

struct Tally {
  std::vector<double> errors;
  int64_t skipped = 0, not_fit = 0, fallback = 0;
  std::map<std::string, std::vector<double>> experiments;
  void Add(const RowResult& r, const std::string& experiment) {
    if (!r.predicted) {
      ++skipped;
      return;
    }
    if (r.framework_fallback) ++fallback;
    errors.push_back(r.abs_error_pct);
    experiments[experiment].push_back(r.abs_error_pct);
    if (!r.fits) ++not_fit;
  }
  v1::ValidationSummary Summary() const {
    v1::ValidationSummary s = Summarise(errors, skipped, not_fit, experiments);
    s.set_n_framework_fallback(static_cast<int32_t>(fallback));
    return s;
  }
};

}  // namespace

absl::StatusOr<v1::ValidationReport> Validate(const std::string& csv_path, const Catalog& catalog,
                                              const std::string& informed_path) {
  absl::StatusOr<std::vector<Row>> rows = ReadCsv(csv_path);
  if (!rows.ok()) return rows.status();
  absl::StatusOr<std::map<std::string, std::vector<std::string>>> informed = ReadInformed(informed_path);
  if (!informed.ok()) return informed.status();
  v1::ValidationReport report;
  Tally all;
  std::map<std::string, Tally> by_source;
  for (const Row& r : *rows) {
    v1::ValidationRow* out = report.add_rows();
    out->set_row_id(Str(r, "row_id"));
    out->set_source_id(Str(r, "source_id"));
    out->set_model(Str(r, "model"));
    out->set_gpu(Str(r, "gpu"));
    double gpus = 0;
    if (absl::SimpleAtod(Str(r, "num_gpus"), &gpus) && gpus >= 0 && gpus < 1e9) {
      out->set_gpu_count(static_cast<int32_t>(gpus));
    }
    std::string experiment;
    const RowResult res = PredictRow(r, catalog, ModelChoices{}, out, &experiment);
    all.Add(res, experiment);
    by_source[out->source_id()].Add(res, experiment);
  }
  *report.mutable_summary() = all.Summary();
  for (const auto& [id, tally] : by_source) {
    v1::SourceSummary* s = report.add_by_source();
    s->set_source_id(id);
    *s->mutable_summary() = tally.Summary();
    // Leave-one-source-out: this source's rows with the choices its rows informed switched off.
    auto it = informed->find(id);
    if (it == informed->end() || it->second.empty()) {
      *s->mutable_leave_one_source_out() = tally.Summary();
      continue;
    }
    ModelChoices without;
    for (const std::string& c : it->second) {
      without.Disable(c);
      s->add_choices_informed(c);
    }
    Tally loso;
    for (const Row& r : *rows) {
      if (Str(r, "source_id") != id) continue;
      std::string experiment;
      loso.Add(PredictRow(r, catalog, without, nullptr, &experiment), experiment);
    }
    *s->mutable_leave_one_source_out() = loso.Summary();
  }
  return report;
}

absl::StatusOr<std::string> ExplainRow(const std::string& csv_path, const Catalog& catalog, const std::string& row_id) {
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
    return absl::StrCat(FormatReport(*job, *p),
                        absl::StrFormat("\n  measured   %.4f s (%s): predicted %+.1f%%\n", run->measured_iter_time_s,
                                        run->measured_from, err));
  }
  return absl::NotFoundError(absl::StrCat("--explain: no row with row_id '", row_id, "' in ", csv_path));
}

std::string FormatValidation(const v1::ValidationReport& r) {
  std::string o = absl::StrFormat("%-5s %-4s %-26s %-16s %-9s %6s %11s %11s %8s  %-6s %s\n", "row", "src", "model",
                                  "framework", "gpu", "gpus", "measured_s", "predicted_s", "error", "memory",
                                  "bottleneck");
  for (const auto& row : r.rows()) {
    const std::string gpu = row.gpu().substr(0, 9);
    const std::string model = row.model().substr(0, 26);
    if (!row.skipped_reason().empty()) {
      absl::StrAppendFormat(&o, "%-5s %-4s %-26s %-16s %-9s %6d  cannot predict: %s\n", row.row_id(), row.source_id(),
                            model, row.framework(), gpu, row.gpu_count(), row.skipped_reason());
      continue;
    }
    absl::StrAppendFormat(&o, "%-5s %-4s %-26s %-16s %-9s %6d %11.3f %11.3f %+7.1f%%  %-6s %s\n", row.row_id(),
                          row.source_id(), model, row.framework_fallback() ? row.framework() + " (fallback)" : row.framework(),
                          gpu, row.gpu_count(), row.measured_iter_time_s(),
                          row.predicted_iter_time_s(), row.error_pct(), row.fits() ? "fits" : (row.tight() ? "TIGHT" : "NO FIT"),
                          row.bottleneck());
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
  return o;
}

}  // namespace stepcast::cli
