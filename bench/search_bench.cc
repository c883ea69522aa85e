// Layout search (core/search.h): whole searches and the per-layout evaluation they rank with.
// Reproduce: build/bin/search_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
// Figures: docs/PERFORMANCE.md and docs/SEARCH.md.
//
// Counters per search: enumerated (layouts of the space), pruned (by the memory lower bound),
// evaluated (memory fit decided), fitting (step time estimated and ranked), evaluated_per_s
// (wall clock). Whole searches run with two threads (the development machine's two cores) and
// are timed on the wall clock (UseRealTime); the CPU column is the whole process's CPU time
// (MeasureProcessCPUTime), all threads together.
#include <thread>

#include "benchmark/benchmark.h"
#include "core/search.h"
#include "proto/catalog.h"
#include "proto/codec.h"

namespace {

stepcast::Job MakeJob(const char* yaml) {
  auto catalog = stepcast::Catalog::Builtin();
  stepcast::v1::JobSpec spec;
  if (!stepcast::ParseMessage(yaml, stepcast::SpecFormat::kYaml, "bench", &spec).ok()) std::abort();
  auto job = stepcast::JobFromSpec(spec, *catalog, "", nullptr);
  if (!job.ok()) {
    std::fprintf(stderr, "%s\n", std::string(job.status().message()).c_str());
    std::abort();
  }
  return *job;
}

// GPT-3 175B on 1,024 A100 80GB (Narayanan et al. 2021's setting: seq 2048, global batch 1536).
constexpr char kGpt3[] = R"(
model: gpt3-175b
hardware: a100-80gb
cluster: {gpu_count: 1024}
parallelism: {tp: 8, pp: 16}
training: {seq_length: 2048, global_batch_size: 1536, dataset_tokens: 300e9})";

// Llama 3 70B on 64..1024 H100 (every whole number of 8-GPU nodes in the range).
constexpr char kLlama70B[] = R"(
model: llama3-70b
hardware: h100-sxm
framework: megatron-bridge
cluster: {gpu_count: 64}
parallelism: {tp: 4, pp: 8, vpp: 5, sequence_parallel: true}
training: {seq_length: 8192, global_batch_size: 128, dataset_tokens: 15e12})";

// Llama 3 8B on 512 H100: a small model on many GPUs, where most layouts fit.
constexpr char kLlama8B[] = R"(
model: llama3-8b
hardware: h100-sxm
cluster: {gpu_count: 512}
parallelism: {tp: 8}
training: {seq_length: 8192, global_batch_size: 1024})";

void Report(benchmark::State& state, const stepcast::SearchResult& r) {
  state.counters["enumerated"] = static_cast<double>(r.stats.enumerated);
  state.counters["pruned"] = static_cast<double>(r.stats.pruned);
  state.counters["evaluated"] = static_cast<double>(r.stats.evaluated);
  state.counters["fitting"] = static_cast<double>(r.stats.fitting);
  state.counters["evaluated_per_s"] =
      benchmark::Counter(static_cast<double>(r.stats.evaluated), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = r.stats.threads;
}

void RunSearch(benchmark::State& state, const stepcast::Job& job, stepcast::SearchOptions o) {
  o.threads = static_cast<int>(state.range(0));
  stepcast::SearchResult last;
  for (auto _ : state) {
    auto r = stepcast::SearchLayouts(job, o);
    if (!r.ok() || r->partial) {
      state.SkipWithError(r.ok() ? "partial" : std::string(r.status().message()).c_str());
      return;
    }
    last = *std::move(r);
  }
  Report(state, last);
}

void BM_SearchGpt3_175B_1024(benchmark::State& state) {
  RunSearch(state, MakeJob(kGpt3), {});
}
BENCHMARK(BM_SearchGpt3_175B_1024)->Arg(2)->Arg(1)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);

// The same on request wider: every pipeline schedule, each overlap off as well as on.
void BM_SearchGpt3_175B_1024_Wide(benchmark::State& state) {
  stepcast::SearchOptions o;
  o.space.all_schedules = true;
  o.space.overlap_off = true;
  RunSearch(state, MakeJob(kGpt3), o);
}
BENCHMARK(BM_SearchGpt3_175B_1024_Wide)->Arg(2)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);

void BM_SearchLlama70B_64to1024(benchmark::State& state) {
  stepcast::SearchOptions o;
  o.space.gpu_counts = *stepcast::GpuCountsInRange(64, 1024, 8, "gpus");
  RunSearch(state, MakeJob(kLlama70B), o);
}
BENCHMARK(BM_SearchLlama70B_64to1024)->Arg(2)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);

void BM_SearchLlama70B_64(benchmark::State& state) {
  RunSearch(state, MakeJob(kLlama70B), {});
}
BENCHMARK(BM_SearchLlama70B_64)->Arg(2)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);

void BM_SearchLlama8B_512(benchmark::State& state) {
  RunSearch(state, MakeJob(kLlama8B), {});
}
BENCHMARK(BM_SearchLlama8B_512)->Arg(2)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);

// One layout's evaluation outside the search loop (cached layer costs, EstimateMemory,
// EstimateStepTime), against a full Predict of the same layout.
void BM_LayoutEvaluate(benchmark::State& state) {
  const stepcast::Job job = MakeJob(kLlama70B);
  stepcast::LayoutEvaluator ev(job);
  for (auto _ : state) {
    auto r = ev.Evaluate(job);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_LayoutEvaluate);

void BM_PredictSameLayout(benchmark::State& state) {
  const stepcast::Job job = MakeJob(kLlama70B);
  for (auto _ : state) {
    auto p = stepcast::Predict(job);
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(BM_PredictSameLayout);

}  // namespace

BENCHMARK_MAIN();
