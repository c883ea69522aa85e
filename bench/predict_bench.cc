// One full prediction (validation, FLOPs, memory, step time, bottleneck, cost) per iteration, and
// the whole request path a Predict RPC runs around it (spec message in, Prediction message out).
// Reproduce: build/bin/predict_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// Figures: docs/PERFORMANCE.md.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "core/gemm_model.h"
#include "core/predict.h"
#include "proto/catalog.h"
#include "proto/codec.h"
#include "stepcast/v1/service.pb.h"

namespace {

// The built-in catalog, loaded once (as `stepcast serve` holds it).
const stepcast::Catalog& BenchCatalog() {
  static const stepcast::Catalog* catalog = [] {
    auto c = stepcast::Catalog::Builtin();
    if (!c.ok()) std::abort();
    return new stepcast::Catalog(*std::move(c));
  }();
  return *catalog;
}

// A job from its YAML spec against the catalog loaded once (a benchmark's setup then costs
// ~nothing, which keeps callgrind runs of one benchmark short).
stepcast::Job MakeJob(const char* yaml) {
  stepcast::v1::JobSpec spec;
  if (!stepcast::ParseMessage(yaml, stepcast::SpecFormat::kYaml, "bench", &spec).ok()) std::abort();
  auto job = stepcast::JobFromSpec(spec, BenchCatalog(), "", nullptr);
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

// Predicts `jobs` one after the other, round and round, for the benchmark's iterations.
void PredictInTurn(benchmark::State& state, const std::vector<stepcast::Job>& jobs) {
  size_t i = 0;
  for (auto _ : state) {
    auto p = stepcast::Predict(jobs[i]);
    benchmark::DoNotOptimize(p);
    i = (i + 1) % jobs.size();
  }
}

// Predictions of jobs whose GEMM shapes change every time: Llama 3 70B and DeepSeek-V3, each at
// micro-batch sizes 1, 2, 4, 8 and sequence lengths 4096, 8192 in turn (every shape's m differs),
// some 16 x 25 distinct GEMM shapes per round, more than the step model's per-thread memo of
// estimates keeps (96 before it is emptied): the cost of a prediction whose estimates are not yet
// memoized (the first of a new job), where BM_PredictDense and BM_PredictMoE ask for the same
// shapes every time.
void BM_PredictNewShapes(benchmark::State& state) {
  std::vector<stepcast::Job> jobs;
  for (const char* yaml : {kLlama70B, kDeepSeekV3}) {
    for (int64_t mbs : {1, 2, 4, 8}) {
      for (int64_t seq : {4096, 8192}) {
        jobs.push_back(MakeJob(yaml));
        jobs.back().training.micro_batch_size = mbs;
        jobs.back().training.seq_length = seq;
        if (!stepcast::Predict(jobs.back()).ok()) std::abort();
      }
    }
  }
  PredictInTurn(state, jobs);
}
BENCHMARK(BM_PredictNewShapes);

// Predictions whose GEMM shapes no earlier prediction on the thread asked for: Llama 3 70B (the
// BM_PredictDense job) at 256 sequence lengths, 4096 + 64 i tokens, in turn. Every job's token
// count differs, so each prediction's ~25 GEMM shapes are new to the memo (which keeps under 100
// and is emptied when full, a few jobs' worth): the cost of the GEMM model's cold path alone,
// where BM_PredictNewShapes' mix of jobs also finds shapes an earlier job of the round left.
void BM_PredictUnseenShapes(benchmark::State& state) {
  std::vector<stepcast::Job> jobs;
  for (int64_t i = 0; i < 256; ++i) {
    jobs.push_back(MakeJob(kLlama70B));
    jobs.back().training.seq_length = 4096 + 64 * i;
    if (!stepcast::Predict(jobs.back()).ok()) std::abort();
  }
  PredictInTurn(state, jobs);
}
BENCHMARK(BM_PredictUnseenShapes);

void BM_StepTimeOnly(benchmark::State& state) {
  const stepcast::Job job = MakeJob(kLlama70B);
  for (auto _ : state) {
    auto st = stepcast::EstimateStepTime(job);
    benchmark::DoNotOptimize(st);
  }
}
BENCHMARK(BM_StepTimeOnly);

// One GEMM estimate (core/gemm_model.h), the call the step model makes 10-20 times per
// prediction: the h100-sxm reference profile (flat rates), eight shapes in turn (Llama 3 70B
// layer GEMMs at TP4, the logits, a small MoE expert, a thin-K attention bmm, an unaligned one).
constexpr stepcast::GemmShape kGemmShapes[] = {
    {stepcast::DType::kBF16, 1, 8192, 2560, 8192},   {stepcast::DType::kBF16, 1, 8192, 8192, 2048},
    {stepcast::DType::kBF16, 1, 8192, 14336, 8192},  {stepcast::DType::kBF16, 1, 8192, 8192, 7168},
    {stepcast::DType::kBF16, 1, 8192, 32064, 8192},  {stepcast::DType::kFP8, 1, 384, 2048, 7168},
    {stepcast::DType::kBF16, 64, 4096, 4096, 128},   {stepcast::DType::kBF16, 1, 8192, 3137, 8192},
};

stepcast::GemmModel MakeGemmModel() {
  auto catalog = stepcast::Catalog::Builtin();
  if (!catalog.ok()) std::abort();
  auto hw = catalog->FindHardware("h100-sxm");
  if (!hw.ok()) std::abort();
  auto model = stepcast::GemmModel::Create(*hw, hw->reference_profile);
  if (!model.ok()) std::abort();
  return *model;
}

void BM_GemmEstimate(benchmark::State& state) {
  const stepcast::GemmModel model = MakeGemmModel();
  size_t i = 0;
  for (auto _ : state) {
    auto e = model.Estimate(kGemmShapes[i++ & 7]);
    benchmark::DoNotOptimize(e);
  }
}
BENCHMARK(BM_GemmEstimate);

void BM_GemmEstimateOneShape(benchmark::State& state) {
  const stepcast::GemmModel model = MakeGemmModel();
  stepcast::GemmShape s = kGemmShapes[2];
  for (auto _ : state) {
    benchmark::DoNotOptimize(s);
    auto e = model.Estimate(s);
    benchmark::DoNotOptimize(e);
  }
}
BENCHMARK(BM_GemmEstimateOneShape);

// The same with a 56-point per-shape table (a calibrated profile): nearest-3 search over it.
void BM_GemmEstimateTable56(benchmark::State& state) {
  const stepcast::GemmModel flat = MakeGemmModel();
  std::vector<stepcast::GemmMeasurement> pts;
  for (double m : {512.0, 2048.0, 8192.0, 32768.0}) {
    for (double n : {1024.0, 4096.0, 16384.0, 3137.0}) {
      for (double k : {64.0, 1024.0, 8192.0, 1537.0}) {
        if (pts.size() == 56) break;
        const stepcast::GemmShape s{stepcast::DType::kBF16, 1, m, n, k};
        pts.push_back({s, 1.1 * flat.EstimateAnalytic(s)->time_s});
      }
    }
  }
  auto model = flat.WithTable(pts);
  if (!model.ok()) std::abort();
  size_t i = 0;
  for (auto _ : state) {
    auto e = model->Estimate(kGemmShapes[i++ & 7]);
    benchmark::DoNotOptimize(e);
  }
}
BENCHMARK(BM_GemmEstimateTable56);

// The request path of a Predict RPC beside the bare model: the JobSpec message as the service
// receives it (examples/llama3-70b-h100.yaml, read once) -> JobFromSpec (presets, framework
// defaults and recipes, fallbacks, validation) -> Predict -> PredictionToProto, against one
// catalog built once (BenchCatalog).

// `path` below the source tree (STEPCAST_SOURCE_DIR), so the bench runs from any directory; a file
// that cannot be read ends the run with its error, not an abort.
stepcast::v1::JobSpec ReadSpec(const char* path) {
  const std::string root = STEPCAST_SOURCE_DIR;
  stepcast::v1::JobSpec spec;
  if (absl::Status s = stepcast::ParseMessageFile(root + "/" + path, &spec); !s.ok()) {
    std::fprintf(stderr, "predict_bench: %s\n", std::string(s.message()).c_str());
    std::exit(1);
  }
  // A model given as hf_config is sent inline, as the clients do.
  if (absl::Status s = stepcast::InlineHfConfig(spec, root + "/examples"); !s.ok()) {
    std::fprintf(stderr, "predict_bench: %s\n", std::string(s.message()).c_str());
    std::exit(1);
  }
  return spec;
}

void RequestPath(benchmark::State& state, const char* path) {
  const stepcast::Catalog& catalog = BenchCatalog();
  const stepcast::v1::JobSpec spec = ReadSpec(path);
  for (auto _ : state) {
    auto job = stepcast::JobFromSpec(spec, catalog, "", nullptr);
    if (!job.ok()) std::abort();
    auto p = stepcast::Predict(*job);
    if (!p.ok()) std::abort();
    stepcast::v1::Prediction out = stepcast::PredictionToProto(*p);
    benchmark::DoNotOptimize(out);
  }
}
// Llama 3 70B on 64 H100 under megatron-bridge (its H100 recipe, 12 assumed inputs).
void BM_RequestPath(benchmark::State& state) { RequestPath(state, "examples/llama3-70b-h100.yaml"); }
BENCHMARK(BM_RequestPath);
// DeepSeek-V3 on 256 GB200 under megatron-bridge (text proto example).
void BM_RequestPathMoE(benchmark::State& state) { RequestPath(state, "examples/deepseek-v3-gb200.textproto"); }
BENCHMARK(BM_RequestPathMoE);
// A job that names no framework and leaves most fields to defaults and fallbacks.
void BM_RequestPathDefaults(benchmark::State& state) {
  RequestPath(state, "examples/llama3-8b-torchtitan-a100.yaml");
}
BENCHMARK(BM_RequestPathDefaults);

// The same on the wire bytes, as the server's handler sees them around the path: the request
// parsed from its binary encoding, the response serialized.
void BM_RequestPathWire(benchmark::State& state) {
  const stepcast::Catalog& catalog = BenchCatalog();
  std::string wire;
  if (!ReadSpec("examples/llama3-70b-h100.yaml").SerializeToString(&wire)) std::abort();
  std::string reply;
  for (auto _ : state) {
    stepcast::v1::JobSpec spec;
    if (!spec.ParseFromString(wire)) std::abort();
    auto job = stepcast::JobFromSpec(spec, catalog, "", nullptr);
    if (!job.ok()) std::abort();
    auto p = stepcast::Predict(*job);
    if (!p.ok()) std::abort();
    reply.clear();
    stepcast::PredictionToProto(*p).SerializeToString(&reply);
    benchmark::DoNotOptimize(reply);
  }
  state.counters["request_bytes"] = static_cast<double>(wire.size());
  state.counters["response_bytes"] = static_cast<double>(reply.size());
}
BENCHMARK(BM_RequestPathWire);

// BM_RequestPathWire as `stepcast serve` runs a Predict since issue 30's seventh pass: request
// and response on one protobuf arena whose first block is preallocated (the server's
// ArenaMessageAllocator, plugin/service.cc), the prediction written into the response in place.
void BM_RequestPathWireArena(benchmark::State& state) {
  const stepcast::Catalog& catalog = BenchCatalog();
  std::string wire;
  if (!ReadSpec("examples/llama3-70b-h100.yaml").SerializeToString(&wire)) std::abort();
  std::string reply;
  static char block[16 << 10];
  for (auto _ : state) {
    google::protobuf::ArenaOptions o;
    o.initial_block = block;
    o.initial_block_size = sizeof block;
    google::protobuf::Arena arena(o);
    auto* req = google::protobuf::Arena::CreateMessage<stepcast::v1::PredictRequest>(&arena);
    auto* resp = google::protobuf::Arena::CreateMessage<stepcast::v1::PredictResponse>(&arena);
    if (!req->mutable_job()->ParseFromString(wire)) std::abort();
    auto job = stepcast::JobFromSpec(req->job(), catalog, "", nullptr);
    if (!job.ok()) std::abort();
    auto p = stepcast::Predict(*job);
    if (!p.ok()) std::abort();
    stepcast::PredictionToProto(*p, resp->mutable_prediction());
    reply.clear();
    resp->SerializeToString(&reply);
    benchmark::DoNotOptimize(reply);
  }
  state.counters["response_bytes"] = static_cast<double>(reply.size());
}
BENCHMARK(BM_RequestPathWireArena);

// Loading the built-in catalog: everything parsed and resolved (what `stepcast serve` does once).
void BM_CatalogBuiltin(benchmark::State& state) {
  for (auto _ : state) {
    auto c = stepcast::Catalog::Builtin();
    if (!c.ok()) std::abort();
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK(BM_CatalogBuiltin)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
