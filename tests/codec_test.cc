// Job spec parsing: YAML, JSON and text proto read the same job; malformed specs give an
// InvalidArgument that names the field path and the reason.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
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
                          "\"memory\"", "\"total_bytes\"", "\"capacity_bytes\"", "\"fits\"", "\"cost\""}) {
    EXPECT_THAT(json, HasSubstr(key));
  }
}

}  // namespace
}  // namespace stepcast
