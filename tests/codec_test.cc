// Job spec parsing: YAML, JSON and text proto read the same job; malformed specs give an
// InvalidArgument that names the field path and the reason.
#include <fstream>
#include <limits>

#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "core/predict.h"
#include "proto/codec.h"
#include "stepcast/v1/probe.pb.h"
#include "tests/test_util.h"

namespace stepcast {
namespace {

using ::testing::HasSubstr;

constexpr char kYaml[] = R"(
name: t
model: llama3-8b
hardware: h100-sxm
cluster: {gpu_count: 16}
parallelism: {tp: 2, sequence_parallel: yes}
training:
  seq_length: 4096
  global_batch_size: 64
  micro_batch_size: 2
  precision: {gemm: fp8}
  recompute: selective
  sharding: zero1
  dataset_tokens: 1e12
)";

TEST(Codec, YamlJsonAndTextProtoAgree) {
  v1::JobSpec y, j, t;
  ASSERT_TRUE(ParseMessage(kYaml, SpecFormat::kYaml, "a.yaml", &y).ok());
  const char* json = R"({"name": "t", "model": {"preset": "llama3-8b"}, "hardware": "h100-sxm",
    "cluster": {"gpu_count": 16}, "parallelism": {"tp": 2, "sequence_parallel": true},
    "training": {"seq_length": 4096, "global_batch_size": 64, "micro_batch_size": 2,
                 "precision": {"gemm": "D_TYPE_FP8"}, "recompute": "RECOMPUTE_SELECTIVE",
                 "sharding": "zero1", "dataset_tokens": 1e12}})";
  ASSERT_TRUE(ParseMessage(json, SpecFormat::kJson, "a.json", &j).ok());
  const char* text = R"(name: "t" model { preset: "llama3-8b" } hardware { preset: "h100-sxm" }
    cluster { gpu_count: 16 } parallelism { tp: 2 sequence_parallel: true }
    training { seq_length: 4096 global_batch_size: 64 micro_batch_size: 2 precision { gemm: D_TYPE_FP8 }
               recompute: RECOMPUTE_SELECTIVE sharding: SHARDING_ZERO1 dataset_tokens: 1e12 })";
  ASSERT_TRUE(ParseMessage(text, SpecFormat::kTextProto, "a.textproto", &t).ok());
  EXPECT_EQ(y.SerializeAsString(), j.SerializeAsString());
  EXPECT_EQ(y.SerializeAsString(), t.SerializeAsString());
}

TEST(Codec, DefaultsAndDerivedDp) {
  auto job = testing::JobFromYaml(kYaml);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->parallelism.dp, 8);  // 16 / (tp 2)
  EXPECT_EQ(job->training.precision.gemm, DType::kFP8);
  EXPECT_EQ(job->training.precision.params, DType::kBF16);
  EXPECT_EQ(job->training.precision.grads, DType::kFP32);
  EXPECT_TRUE(job->training.flash_attention);
  EXPECT_EQ(job->profile.name, "h100-sxm-reference");
  // Inputs the spec leaves unset come from the framework (megatron-core by default) and are
  // recorded as assumed.
  EXPECT_EQ(job->framework.name, "megatron-core");
  auto assumed = [&](const std::string& field) {
    for (const auto& a : *job->assumed) {
      if (a.field == field) return true;
    }
    return false;
  };
  EXPECT_TRUE(assumed("framework"));
  EXPECT_TRUE(assumed("training.overlap_dp_comm"));
  EXPECT_TRUE(assumed("training.precision.grads"));
  EXPECT_FALSE(assumed("training.precision.gemm"));  // the spec states fp8
}

TEST(Codec, FormatFromPath) {
  EXPECT_EQ(*FormatFromPath("a/b.YML"), SpecFormat::kYaml);
  EXPECT_EQ(*FormatFromPath("a.json"), SpecFormat::kJson);
  EXPECT_EQ(*FormatFromPath("a.txtpb"), SpecFormat::kTextProto);
  EXPECT_FALSE(FormatFromPath("a.toml").ok());
}

struct BadSpec {
  const char* yaml;
  const char* expect;  // substring of the error: the field path and the reason
};

constexpr char kBase[] = R"(
model: llama3-8b
hardware: h100-sxm
cluster: {gpu_count: 8}
training: {seq_length: 4096, global_batch_size: 64}
)";

TEST(Codec, MalformedSpecsNameTheFieldAndReason) {
  const BadSpec cases[] = {
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\ntraining: {seq_length: abc, global_batch_size: 8}",
       "training.seq_length: 'abc' is not an integer"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\ntraining: {seq_length: 4096.5, global_batch_size: 8}",
       "training.seq_length: '4096.5' is not an integer"},
      {"model: nosuch\nhardware: h100-sxm\ncluster: {gpu_count: 8}\ntraining: {seq_length: 4096, global_batch_size: 8}",
       "model.preset: unknown model 'nosuch'"},
      {"model: llama3-8b\nhardware: h900\ncluster: {gpu_count: 8}\ntraining: {seq_length: 4096, global_batch_size: 8}",
       "hardware.preset: unknown hardware 'h900'"},
      {"hardware: h100-sxm\ncluster: {gpu_count: 8}\ntraining: {seq_length: 4096, global_batch_size: 8}",
       "model: required"},
      {"model: llama3-8b\ncluster: {gpu_count: 8}\ntraining: {seq_length: 4096, global_batch_size: 8}",
       "hardware: required"},
      {"model: llama3-8b\nhardware: h100-sxm\ntraining: {seq_length: 4096, global_batch_size: 8}",
       "cluster.gpu_count: required"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\ntraining: {global_batch_size: 8}",
       "training.seq_length: must be > 0"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\ntraining: {seq_length: 4096}",
       "training.global_batch_size: must be > 0"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\ntraining: {seq_length: 4096, global_batch_size: 12}",
       "training.global_batch_size: 12 is not a multiple of micro_batch_size*dp"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 12}\nparallelism: {tp: 8}\ntraining: {seq_length: 4096, global_batch_size: 8}",
       "cluster.gpu_count: 12 is not a multiple of tp*pp*cp = 8"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 12}\nparallelism: {tp: 3}\ntraining: {seq_length: 4096, global_batch_size: 8}",
       "parallelism.tp: 3 does not divide model attention_heads 32"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 64}\nparallelism: {pp: 64}\ntraining: {seq_length: 4096, global_batch_size: 64}",
       "parallelism.pp: pp*vpp = 64 exceeds model layers 32"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\nparallelism: {vpp: 2}\ntraining: {seq_length: 4096, global_batch_size: 8}",
       "parallelism.vpp: interleaving needs pp > 1"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\nparallelism: {tp: -2, dp: 1}\ntraining: {seq_length: 4096, global_batch_size: 8}",
       "parallelism.tp: -2 must be >= 1"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 16}\nparallelism: {tp: 2, dp: 4}\ntraining: {seq_length: 4096, global_batch_size: 8}",
       "cluster.gpu_count: 16 does not match tp*pp*dp*cp"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\nparallelism: {ep: 2}\ntraining: {seq_length: 4096, global_batch_size: 8}",
       "parallelism.ep: expert parallelism needs an MoE model"},
      {"model: mixtral-8x7b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\nparallelism: {ep: 3}\ntraining: {seq_length: 4096, global_batch_size: 8}",
       "parallelism.ep: 3 does not divide model moe.routed_experts 8"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\nparallelism: {cp: 8}\ntraining: {seq_length: 100, global_batch_size: 8}",
       "parallelism.cp: seq_length 100 must be a multiple of 2*cp = 16"},
      {"model: llama3-8b\nhardware: a100-80gb\ncluster: {gpu_count: 8}\ntraining: {seq_length: 4096, global_batch_size: 8, precision: {gemm: fp8}}",
       "training.precision.gemm: fp8 needs a hardware path"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\ntraining: {seq_length: 4096, global_batch_size: 8, precision: {gemm: fp7}}",
       "training.precision.gemm: 'fp7' is not one of: fp32, tf32, bf16, fp16, fp8, int8"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\ntraining: {seq_length: 4096, global_batch_size: 8, recompute: sometimes}",
       "training.recompute: 'sometimes' is not one of: none, selective, full"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\ntraining: {seq_length: 4096, global_batch_size: 8, flash_attention: maybe}",
       "training.flash_attention: 'maybe' is not a boolean"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\ntraining: {seq_lenght: 4096, global_batch_size: 8}",
       "training.seq_lenght: unknown field"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\ntraining: [1, 2]",
       "training: expected a map of fields, got a list"},
      {"model: {shape: {layers: 2, hidden_size: 64, attention_heads: 4, vocab_size: 100}}\nhardware: h100-sxm\ncluster: {gpu_count: 1}\ntraining: {seq_length: 64, global_batch_size: 1}",
       "model.shape.ffn_type: required (gelu or swiglu)"},
      {"model: {shape: {layers: 0, hidden_size: 64, attention_heads: 4, vocab_size: 100, ffn_type: gelu}}\nhardware: h100-sxm\ncluster: {gpu_count: 1}\ntraining: {seq_length: 64, global_batch_size: 1}",
       "model.shape.layers: must be > 0"},
      {"model: {shape: {layers: 2, hidden_size: 64, attention_heads: 4, kv_heads: 3, vocab_size: 100, ffn_type: gelu}}\nhardware: h100-sxm\ncluster: {gpu_count: 1}\ntraining: {seq_length: 64, global_batch_size: 1}",
       "model.shape.kv_heads: 3 does not divide attention_heads 4"},
      {"model: {shape: {layers: 2, hidden_size: 64, attention_heads: 4, vocab_size: 100, ffn_type: swiglu, moe: {routed_experts: 8, top_k: 9, expert_ffn_hidden_size: 32}}}\nhardware: h100-sxm\ncluster: {gpu_count: 1}\ntraining: {seq_length: 64, global_batch_size: 1}",
       "model.shape.moe.top_k: 9 exceeds moe.routed_experts 8"},
      {"model: {hf_config: /nonexistent/config.json}\nhardware: h100-sxm\ncluster: {gpu_count: 1}\ntraining: {seq_length: 64, global_batch_size: 1}",
       "model.hf_config: /nonexistent/config.json: cannot open file"},
      {"model: llama3-8b\nhardware: {spec: {name: x, hbm_capacity_bytes: 8e10}}\ncluster: {gpu_count: 1}\ntraining: {seq_length: 64, global_batch_size: 1}",
       "hardware.spec.peak: needs a bf16 or fp16 peak > 0"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8, price_per_gpu_hour_usd: -1}\ntraining: {seq_length: 64, global_batch_size: 8}",
       "cluster.price_per_gpu_hour_usd: must be >= 0"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\ntraining: {seq_length: 64, global_batch_size: 8, dataset_tokens: -5}",
       "training.dataset_tokens: must be >= 0"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\ntraining: {seq_length: 64, global_batch_size: 8, dataset_tokens: .nan}",
       "training.dataset_tokens: '.nan' is not a number"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\ntraining: {seq_length: 64, global_batch_size: 8\n",
       "test.yaml: line"},
      {"42", "(top level): expected a map of fields, got '42'"},
      // The interleaved schedule takes micro-batches in groups of pp (Narayanan et al. 2021
      // Sec. 2.2.2; Megatron-LM's forward_backward_pipelining_with_interleaving refuses a count
      // that pp does not divide): 6 micro-batches over pp 4 are refused (core/job.cc ValidateJob).
      {"model: llama3-70b\nhardware: h100-sxm\ncluster: {gpu_count: 32}\nparallelism: {tp: 8, pp: 4, vpp: 2}\ntraining: {seq_length: 4096, global_batch_size: 6}",
       "training.global_batch_size: interleaved 1F1B needs micro-batches per step (6) to be a multiple of pp (4)"},
      // Two members of one oneof: named, not protobuf's "oneof field 'source' is already set".
      {"model: {preset: llama3-8b, hf_config: x.json}\nhardware: h100-sxm\ncluster: {gpu_count: 8}",
       "model.hf_config: 'preset' and 'hf_config' are alternatives (one of: preset, shape, hf_config); give one"},
      // A second document is not dropped in silence (a JSON job's trailing text reads as one).
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\n---\ncluster: {gpu_count: 16}\n",
       "line 5: a second YAML document; a file holds one"},
  };
  for (const BadSpec& c : cases) {
    SCOPED_TRACE(c.yaml);
    absl::StatusOr<Job> job = testing::JobFromYaml(c.yaml);
    ASSERT_FALSE(job.ok());
    EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument) << job.status();
    EXPECT_THAT(std::string(job.status().message()), HasSubstr(c.expect));
  }
  EXPECT_TRUE(testing::JobFromYaml(kBase).ok());
}

TEST(Codec, RateProfileRoundTripsThroughJson) {
  const Hardware hw = *testing::BuiltinCatalog().FindHardware("h100-sxm");
  const std::string json = ToJson(RateProfileToProto(hw.reference_profile));
  v1::RateProfile back;
  ASSERT_TRUE(ParseMessage(json, SpecFormat::kJson, "p.json", &back).ok());
  absl::StatusOr<RateProfile> p = RateProfileFromProto(back, "profile");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(ToJson(RateProfileToProto(*p)), json);
  EXPECT_EQ(p->gemm.size(), hw.reference_profile.gemm.size());
}

// proto3 maps (the probe report's per-collective seconds) in JSON and YAML; a probe report with
// an empty map did not read back before (found on an H100, 2026-11-25: "expected a list").
TEST(Codec, MapFieldsReadFromJsonAndYaml) {
  v1::StepMeasurement s;
  ASSERT_TRUE(ParseMessage(R"({"communication_by_collective_s": {"all_reduce": 0.25, "all_gather": 1e-3}})",
                           SpecFormat::kJson, "j", &s).ok());
  EXPECT_DOUBLE_EQ(s.communication_by_collective_s().at("all_reduce"), 0.25);
  EXPECT_DOUBLE_EQ(s.communication_by_collective_s().at("all_gather"), 1e-3);
  v1::StepMeasurement y;
  ASSERT_TRUE(ParseMessage("communication_by_collective_s:\n  reduce_scatter: 2\nexposed_communication_by_collective_s: {}\n",
                           SpecFormat::kYaml, "y", &y).ok());
  EXPECT_DOUBLE_EQ(y.communication_by_collective_s().at("reduce_scatter"), 2.0);
  EXPECT_TRUE(y.exposed_communication_by_collective_s().empty());
  v1::StepMeasurement bad;
  EXPECT_THAT(ParseMessage(R"({"communication_by_collective_s": {"all_reduce": "fast"}})", SpecFormat::kJson, "j",
                           &bad).message(),
              ::testing::HasSubstr("communication_by_collective_s[all_reduce]: 'fast' is not a number"));
  EXPECT_THAT(ParseMessage(R"({"communication_by_collective_s": {"a": 1, "a": 2}})", SpecFormat::kJson, "j", &bad)
                  .message(),
              ::testing::HasSubstr("given twice"));
  EXPECT_THAT(ParseMessage(R"({"communication_by_collective_s": [1, 2]})", SpecFormat::kJson, "j", &bad).message(),
              ::testing::HasSubstr("expected a map of keys to values"));
}

TEST(Codec, PredictionJsonHasTheDocumentedKeys) {
  auto job = testing::JobFromYaml(kBase);
  ASSERT_TRUE(job.ok());
  auto p = Predict(*job);
  ASSERT_TRUE(p.ok());
  const std::string json = ToJson(PredictionToProto(*p));
  for (const char* key : {"\"step_time_s\"", "\"tokens_per_s\"", "\"tokens_per_s_per_gpu\"", "\"mfu\"",
                          "\"hfu\"", "\"model_flops_per_step\"", "\"bottleneck\"", "\"breakdown\"",
                          "\"memory\"", "\"total_bytes\"", "\"capacity_bytes\"", "\"fits\"", "\"cost\"",
                          "\"active_without_input_embedding\""}) {
    EXPECT_THAT(json, HasSubstr(key));
  }
}


// The prediction carries the parameter counts the job file reference names (docs/JOB_SPEC.md):
// DeepSeek-V3's MTP module apart from the 671B main model, as its card counts it ("685B ...
// 671B of the Main Model weights and 14B of the Multi-Token Prediction (MTP) Module weights":
// the module's own weights plus the embedding and head the checkpoint stores again, 2 x V x h);
// gpt-oss-20b's active count without the input embedding, 3.61B (arXiv:2508.10925 Table 1).
TEST(Codec, PredictionCarriesTheMtpAndTheCardsActiveCount) {
  auto ds = testing::JobFromYaml("model: deepseek-v3\nhardware: h100-sxm\ncluster: {gpu_count: 256}\n"
                                 "parallelism: {pp: 8, ep: 32}\ntraining: {seq_length: 4096, global_batch_size: 1024, mtp_layers: 1}");
  ASSERT_TRUE(ds.ok()) << ds.status();
  auto p = Predict(*ds);
  ASSERT_TRUE(p.ok()) << p.status();
  const v1::ParameterCounts pc = PredictionToProto(*p).parameters();
  const double stored_again = 2.0 * 129280 * 7168;
  EXPECT_NEAR((pc.mtp() + stored_again) / 14e9, 1.0, 0.05) << pc.mtp();
  EXPECT_NEAR(pc.total() / 671e9, 1.0, 0.01);
  auto oss = testing::JobFromYaml("model: gpt-oss-20b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\n"
                                  "training: {seq_length: 4096, global_batch_size: 64}");
  ASSERT_TRUE(oss.ok()) << oss.status();
  auto q = Predict(*oss);
  ASSERT_TRUE(q.ok()) << q.status();
  const v1::ParameterCounts oc = PredictionToProto(*q).parameters();
  EXPECT_GE(oc.active_without_input_embedding(), 3.605e9);
  EXPECT_LT(oc.active_without_input_embedding(), 3.615e9);
  EXPECT_EQ(oc.mtp(), 0);
}

// Every route rejects NaN and infinity with the path of the first one (fields in number order,
// depth first), built only when one is found.
TEST(Codec, NonFiniteNumbersAreNamedByTheirPath) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  v1::JobSpec spec;
  EXPECT_TRUE(CheckFiniteNumbers(spec, "").ok());
  auto* profile = spec.mutable_hardware()->mutable_spec()->mutable_reference_profile();
  profile->add_collectives()->add_points()->set_time_s(1);
  auto* second = profile->add_collectives();
  second->add_points()->set_time_s(2);
  second->add_points()->set_time_s(nan);
  absl::Status s = CheckFiniteNumbers(spec, "");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "hardware.spec.reference_profile.collectives[1].points[1].time_s: NaN is not a number stepcast accepts; "
            "give a finite value");
  EXPECT_EQ(CheckFiniteNumbers(spec, "job").message(),
            "job.hardware.spec.reference_profile.collectives[1].points[1].time_s: NaN is not a number stepcast "
            "accepts; give a finite value");
  // hardware (field 3) is read before cluster (field 4).
  spec.mutable_cluster()->set_price_per_gpu_hour_usd(inf);
  EXPECT_THAT(std::string(CheckFiniteNumbers(spec, "").message()), HasSubstr("collectives[1].points[1].time_s: NaN"));
  spec.mutable_hardware()->clear_spec();
  EXPECT_EQ(CheckFiniteNumbers(spec, "").message(),
            "cluster.price_per_gpu_hour_usd: infinity is not a number stepcast accepts; give a finite value");
  // Within one message, the lower field number first (dataset_tokens 11, activation_offload_fraction 18).
  spec.clear_cluster();
  spec.mutable_training()->set_activation_offload_fraction(nan);
  spec.mutable_training()->set_dataset_tokens(-inf);
  EXPECT_THAT(std::string(CheckFiniteNumbers(spec, "").message()), ::testing::StartsWith("training.dataset_tokens: infinity"));
  // Map values are not checked (as before: labels and per-collective maps).
  v1::StepMeasurement m;
  (*m.mutable_communication_by_collective_s())["all_reduce"] = nan;
  EXPECT_TRUE(CheckFiniteNumbers(m, "").ok());
  m.set_idle_s(nan);
  EXPECT_EQ(CheckFiniteNumbers(m, "").message(), "idle_s: NaN is not a number stepcast accepts; give a finite value");
}

// Input files are read whole up to the limit and refused past it, without a buffer of the
// limit's size (the file grows the string).
TEST(Codec, ReadInputFileReadsUpToTheLimit) {
  const std::string path = ::testing::TempDir() + "/stepcast_read_input_file.txt";
  auto write = [&](const std::string& text) { std::ofstream(path, std::ios::binary) << text; };
  write("");
  EXPECT_EQ(*ReadInputFile(path, 10), "");
  write("0123456789");
  EXPECT_EQ(*ReadInputFile(path, 10), "0123456789");
  EXPECT_EQ(ReadInputFile(path, 9).status().code(), absl::StatusCode::kInvalidArgument);
  std::string big(200000, 'x');
  big[199999] = 'y';
  write(big);
  EXPECT_EQ(*ReadInputFile(path, 200000), big);
  EXPECT_EQ(ReadInputFile(path + ".missing").status().code(), absl::StatusCode::kNotFound);
}

// The request path gives the same job under a catalog parsed at load and one parsed on use,
// for every example, and the same assumed inputs as before presets were resolved at load
// (the list below is `stepcast predict --json examples/llama3-70b-h100.yaml` of the build
// before issue 30: fields, values, order, and the start of each source).
TEST(Codec, RequestPathIsTheSameUnderBothCatalogLoads) {
  absl::StatusOr<Catalog> on_use = Catalog::Builtin(CatalogLoad::kOnUse);
  ASSERT_TRUE(on_use.ok());
  const std::string examples = std::string(STEPCAST_SOURCE_DIR) + "/examples";
  for (const char* name : {"llama3-70b-h100.yaml", "llama3-70b-megatron-bridge-h100-fp8.yaml",
                           "llama3-8b-torchtitan-a100.yaml", "mpt-7b-llm-foundry-a100.yaml",
                           "gpt-1.3b-pytorch-h100.yaml", "deepseek-v3-gb200.textproto", "llama3-8b-hf.yaml"}) {
    SCOPED_TRACE(name);
    absl::StatusOr<Job> a = LoadJob(examples + "/" + name, testing::BuiltinCatalog(), nullptr);
    absl::StatusOr<Job> b = LoadJob(examples + "/" + name, *on_use, nullptr);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
    EXPECT_EQ(ToJson(PredictionToProto(*Predict(*a))), ToJson(PredictionToProto(*Predict(*b))));
  }
  absl::StatusOr<Job> job = LoadJob(examples + "/llama3-70b-h100.yaml", *on_use, nullptr);
  ASSERT_TRUE(job.ok());
  const std::vector<std::vector<std::string>> want = {
      {"training.fp8_param_gather", "false", "framework megatron-bridge recipe for llama 3 70b: "},
      {"training.recompute_modules", "core_attn", "framework megatron-bridge default: "},
      {"training.flash_attention", "true", "framework megatron-bridge default: "},
      {"training.precision.grad_reduce", "bf16", "framework megatron-bridge default: "},
      {"training.cuda_graphs", "false", "framework megatron-bridge default: "},
      {"training.dropout", "false", "framework megatron-bridge default: "},
      {"parallelism.pp_schedule", "1f1b", "framework megatron-bridge default: "},
      // Added after issue 30: the nemo preset's bf16 default, inherited (docs/MODEL.md "Memory").
      {"training.precision.master_weight_remainders", "true", "framework megatron-bridge default: NVIDIA/NeMo "},
      {"training.precision.grads", "bf16", "framework megatron-bridge default: "},
      {"training.optimizer", "adamw",
       "stepcast fallback (megatron-bridge documents none): AdamW (Adam with decoupled weight decay)"},
      {"training.precision.params", "bf16", "stepcast fallback: working weights in the 16-bit type of the GEMMs"},
      {"training.precision.master_weights", "fp32", "stepcast fallback: fp32 master weights"},
      {"training.precision.optimizer_states", "fp32", "stepcast fallback: fp32 Adam moments"},
  };
  ASSERT_EQ(job->assumed->size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const AssumedInput& a = (*job->assumed)[i];
    EXPECT_EQ(a.field, want[i][0]) << i;
    EXPECT_EQ(a.value, want[i][1]) << a.field;
    EXPECT_THAT(a.source, ::testing::StartsWith(want[i][2])) << a.field;
  }
}

// An inline framework spec laid over a preset: the preset's defaults and recipes with the
// inline ones replacing them by field, its own name in every recorded source, and the errors
// of the spec path (a bad rate, an unknown base, a bad default) as before.
TEST(Codec, InlineFrameworkSpecsOverAPreset) {
  const std::string job = R"(model: llama3-70b
hardware: h100-sxm
cluster: {gpu_count: 64}
parallelism: {tp: 4, pp: 4}
training: {seq_length: 4096, global_batch_size: 256}
)";
  absl::StatusOr<Job> inline_job = testing::JobFromYaml(job + R"(framework:
  spec:
    base: nemo
    name: site-nemo
    defaults:
    - {field: training.sharding, value: zero2, source: 'a site default'}
)");
  ASSERT_TRUE(inline_job.ok()) << inline_job.status();
  absl::StatusOr<Job> preset_job = testing::JobFromYaml(job + "framework: nemo\n");
  ASSERT_TRUE(preset_job.ok()) << preset_job.status();
  EXPECT_EQ(inline_job->framework.name, "site-nemo");
  EXPECT_EQ(inline_job->training.sharding, Sharding::kZero2);
  EXPECT_EQ(preset_job->training.sharding, Sharding::kZero1);  // nemo's default
  // Everything else as under nemo itself, source by source with the name changed.
  ASSERT_EQ(inline_job->assumed->size(), preset_job->assumed->size());
  for (size_t i = 0; i < preset_job->assumed->size(); ++i) {
    const AssumedInput& a = (*inline_job->assumed)[i];
    const AssumedInput& b = (*preset_job->assumed)[i];
    EXPECT_EQ(a.field, b.field);
    if (a.field == "training.sharding") {
      EXPECT_EQ(a.source, "framework site-nemo default: a site default");
      continue;
    }
    EXPECT_EQ(a.value, b.value) << a.field;
    EXPECT_EQ(absl::StrReplaceAll(a.source, {{"site-nemo", "nemo"}}), b.source) << a.field;
  }
  auto error = [&](const std::string& framework) {
    absl::StatusOr<Job> j = testing::JobFromYaml(job + framework);
    return j.ok() ? std::string("ok") : std::string(j.status().message());
  };
  EXPECT_EQ(error("framework: {spec: {base: nemo, launch: {kernel_launch_overhead_s: 1}}}\n"),
            "framework.spec.launch.kernel_launch_overhead_s: 1 must be in [0, 0.01)");
  EXPECT_EQ(error("framework: {spec: {base: nemo, launch: {looped_launch_overhead_s: -1e-6}}}\n"),
            "framework.spec.launch.looped_launch_overhead_s: -1e-06 must be in [0, 0.01)");
  EXPECT_EQ(error("framework: {spec: {base: nemo, launch: {scaled_rope_kernels_backward: -3}}}\n"),
            "framework.spec.launch.scaled_rope_kernels_backward: -3 must be in [0, 1000000]");
  EXPECT_THAT(error("framework: {spec: {base: megatron-9000}}\n"),
              ::testing::StartsWith("framework.spec.base: unknown framework 'megatron-9000'; known: colossalai-gemini, deepspeed,"));
  EXPECT_EQ(error("framework: {spec: {base: nemo, defaults: [{field: training.dropout, value: maybe}]}}\n"),
            "framework nemo: training.dropout: default 'maybe' (framework nemo default): default of training.dropout: "
            "training.dropout: 'maybe' is not a boolean (true/false)");
  EXPECT_EQ(error("framework: {spec: {base: nemo, defaults: [{field: training.dropout, value: maybe}]}}\n"
                  "training: {seq_length: 4096, global_batch_size: 256, dropout: true}\n"),
            "ok");  // a bad default of a field the job states is never read
}

}  // namespace
}  // namespace stepcast
