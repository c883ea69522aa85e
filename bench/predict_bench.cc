// One full prediction (validation, FLOPs, memory, step time, bottleneck, cost) per iteration.
// Reproduce: build/bin/predict_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// Figures: docs/PERFORMANCE.md.
#include "benchmark/benchmark.h"
#include "core/predict.h"
#include "proto/catalog.h"
#include "proto/codec.h"

namespace {

stepcast::Job MakeJob(const char* yaml) {
  auto catalog = stepcast::Catalog::Builtin();
  stepcast::v1::JobSpec spec;
  if (!stepcast::ParseMessage(yaml, stepcast::SpecFormat::kYaml, "bench", &spec).ok()) std::abort();
  auto job = stepcast::JobFromSpec(spec, *catalog, "", nullptr);
  if (!job.ok()) std::abort();
  return *job;
}

constexpr char kLlama70B[] = R"(
model: llama3-70b
hardware: h100-sxm
cluster: {gpu_count: 64}
parallelism: {tp: 4, pp: 8, vpp: 5, sequence_parallel: true}
training: {seq_length: 8192, global_batch_size: 128, sharding: zero1, overlap_tp_comm: true,
           dataset_tokens: 15e12})";

constexpr char kDeepSeekV3[] = R"(
model: deepseek-v3
hardware: gb200
cluster: {gpu_count: 256}
parallelism: {pp: 4, vpp: 4, ep: 64}
training: {seq_length: 4096, global_batch_size: 4096, sharding: zero1})";

void BM_PredictDense(benchmark::State& state) {
  const stepcast::Job job = MakeJob(kLlama70B);
  for (auto _ : state) {
    auto p = stepcast::Predict(job);
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(BM_PredictDense);

void BM_PredictMoE(benchmark::State& state) {
  const stepcast::Job job = MakeJob(kDeepSeekV3);
  for (auto _ : state) {
    auto p = stepcast::Predict(job);
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(BM_PredictMoE);

void BM_StepTimeOnly(benchmark::State& state) {
  const stepcast::Job job = MakeJob(kLlama70B);
  for (auto _ : state) {
    auto st = stepcast::EstimateStepTime(job);
    benchmark::DoNotOptimize(st);
  }
}
BENCHMARK(BM_StepTimeOnly);

}  // namespace

BENCHMARK_MAIN();
