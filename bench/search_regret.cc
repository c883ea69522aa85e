// Search regret against tuned framework recipes (issue 21, docs/SEARCH.md "Regret"): for each
// published run of the given sources, `stepcast search` over that run's model, GPU count, batch,
// hardware and framework, and the regret = predicted step time of the published layout / the
// search's best - 1. A tuned recipe is near the real optimum, so a large regret is a claim that
// needs a mechanism: for every row above --claim (15%), the step-time terms that make the best
// layout faster (the largest differences, published minus best) are printed.
//
//   build/bin/search_regret tests/data/validation/published_runs.csv --sources S10,S21,S22,S26
//
// Rows are selected by the sources named on the command line (a benchmark's row filter; the model
// and the search never see a source id). Prints one line per row and the median regret.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/predict.h"
#include "core/search.h"
#include "csv.h"
#include "proto/catalog.h"
#include "proto/codec.h"
#include "proto/launch_args.h"
#include "proto/published_runs.h"

namespace {

using stepcast::PublishedRow;

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

// The terms of a step breakdown, by name.
std::vector<std::pair<const char*, double>> Terms(const stepcast::StepBreakdown& b) {
  return {{"gemm", b.gemm_s},         {"attention", b.attention_s}, {"elementwise", b.elementwise_s},
          {"recompute", b.recompute_s}, {"tp_comm", b.tp_comm_s},     {"cp_comm", b.cp_comm_s},
          {"ep_comm", b.ep_comm_s},   {"pp_comm", b.pp_comm_s},     {"dp_comm", b.dp_comm_s},
          {"bubble", b.pipeline_bubble_s}, {"optimizer", b.optimizer_s}, {"launch", b.launch_overhead_s}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"search regret against the published (tuned) layouts"};
  std::string csv, sources = "S10,S21,S22,S26";
  double claim = 0.15, time_limit_s = 20;
  app.add_option("csv", csv, "published_runs.csv")->required();
  app.add_option("--sources", sources, "comma-separated source ids whose rows are searched");
  app.add_option("--claim", claim, "regret above which the mechanism is printed");
  app.add_option("--time-limit", time_limit_s, "seconds per search");
  std::vector<std::string> disabled;
  app.add_option("--disable", disabled,
                 "model choices switched off (core/job.h ModelChoices names, as validate --informed takes them): "
                 "the regret as it was before that mechanism");
  CLI11_PARSE(app, argc, argv);
  for (const std::string& name : disabled) {
    if (!stepcast::ModelChoices().Disable(name)) {
      std::fprintf(stderr, "--disable: unknown model choice '%s'\n", name.c_str());
      return 2;
    }
  }
  const std::vector<std::string> wanted = absl::StrSplit(sources, ',', absl::SkipEmpty());
  absl::StatusOr<stepcast::Catalog> catalog = stepcast::Catalog::Builtin();
  if (!catalog.ok()) {
    std::fprintf(stderr, "%s\n", std::string(catalog.status().message()).c_str());
    return 1;
  }
  std::vector<double> regrets;
  int rows = 0, skipped = 0, above = 0;
  for (const PublishedRow& row : ReadRows(csv)) {
    auto col = [&](const char* c) { auto it = row.find(c); return it == row.end() ? std::string() : it->second; };
    if (std::find(wanted.begin(), wanted.end(), col("source_id")) == wanted.end()) continue;
    ++rows;
    absl::StatusOr<stepcast::PublishedRun> run = stepcast::PublishedRunFromRow(row, *catalog);
    absl::StatusOr<stepcast::Job> job =
        run.ok() ? stepcast::JobFromSpec(run->spec, *catalog, "", nullptr) : absl::StatusOr<stepcast::Job>(run.status());
    if (!job.ok()) {
      std::printf("row %-4s %-26.26s skipped: %s\n", col("row_id").c_str(), col("model").c_str(),
                  std::string(job.status().message()).c_str());
      ++skipped;
      continue;
    }
    for (const std::string& name : disabled) job->choices.Disable(name);
    absl::StatusOr<stepcast::Prediction> own = stepcast::Predict(*job);
    stepcast::SearchOptions o;
    o.top_n = 1;
    o.accept = stepcast::FrameworkStartsLayout;
    o.deadline = std::chrono::steady_clock::now() +
                 std::chrono::microseconds(static_cast<int64_t>(time_limit_s * 1e6));
    absl::StatusOr<stepcast::SearchResult> r = stepcast::SearchLayouts(*job, o);
    if (!own.ok() || !r.ok() || r->top.empty()) {
      std::printf("row %-4s %-26.26s skipped: %s\n", col("row_id").c_str(), col("model").c_str(),
                  !own.ok() ? std::string(own.status().message()).c_str()
                  : !r.ok() ? std::string(r.status().message()).c_str()
                            : "nothing fits");
      ++skipped;
      continue;
    }
    const stepcast::RankedLayout& best = r->top.front();
    const double regret = own->step_time_s / best.prediction.step_time_s - 1;
    regrets.push_back(regret);
    std::printf("row %-4s %-26.26s published %-34s %7.3f s%s  best %-40s %7.3f s  regret %+6.1f%%%s\n",
                col("row_id").c_str(), col("model").c_str(),
                stepcast::LayoutSummary(stepcast::LayoutOf(*job)).c_str(), own->step_time_s,
                own->memory.fits ? "" : " (not fit)", stepcast::LayoutSummary(best.layout).c_str(),
                best.prediction.step_time_s, 100 * regret, r->partial ? " (search partial)" : "");
    if (regret > claim) {
      ++above;
      // The mechanism: the terms that differ most between the published layout and the best.
      std::vector<std::pair<const char*, double>> a = Terms(own->breakdown), b = Terms(best.prediction.breakdown);
      std::vector<std::pair<double, const char*>> diff;
      for (size_t i = 0; i < a.size(); ++i) diff.push_back({a[i].second - b[i].second, a[i].first});
      std::sort(diff.begin(), diff.end(), [](auto& x, auto& y) { return x.first > y.first; });
      std::printf("          mechanism: ");
      for (int i = 0; i < 3 && i < static_cast<int>(diff.size()) && diff[i].first > 0; ++i) {
        std::printf("%s%s -%.3f s", i ? ", " : "", diff[i].second, diff[i].first);
      }
      std::printf("\n");
    }
  }
  std::sort(regrets.begin(), regrets.end());
  const double median = regrets.empty() ? 0 : regrets[regrets.size() / 2];
  std::printf("\n%d rows of %s: %zu searched, %d skipped; median regret %+.1f%%, %d above %+.0f%%\n", rows,
              sources.c_str(), regrets.size(), skipped, 100 * median, above, 100 * claim);
  return 0;
}
