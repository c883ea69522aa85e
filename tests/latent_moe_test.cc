// Latent MoE (MoeShape.latent_size) and hybrid MTP modules (ModelShape.hybrid_mtp_pattern,
// mtp_repeated_layer): Nemotron 3 Super 120B-A12B against what NVIDIA published of it (the
// checkpoint's element count, Megatron-Bridge's printed TFLOP/s), Megatron-LM's and the HF
// config's spelling of it, and a hybrid MTP module that is a transformer's held to predict what
// the transformer's does.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/flop_conventions.h"
#include "core/flops.h"
#include "core/memory.h"
#include "core/predict.h"
#include "core/step_time.h"
#include "proto/codec.h"
#include "proto/hf_config.h"
#include "proto/launch_args.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace stepcast {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> Words(const std::string& s) { return absl::StrSplit(s, ' ', absl::SkipEmpty()); }

const ModelShape& Super() {
  static const ModelShape m = *testing::BuiltinCatalog().FindModel("nemotron-3-super-120b-a12b");
  return m;
}

TEST(LatentMoe, NemotronSuperIsItsCheckpointElementForElement) {
  // Megatron-Bridge examples/model_verification_cards/nemotron-3-super-120b-a12b/card.yaml
  // (@067f987), hf_to_megatron_gpu / megatron_to_hf_gpu: the export "exactly reproduces all
  // 42,683 source tensors and 123,611,033,088 elements, including the 41 FP32 router
  // correction-bias tensors" (88 layers; one MTP module). The bias vectors (one of 512 per MoE
  // layer, main model and MTP) are buffers the load balancer updates, not parameters.
  const ParameterCounts c = CountParameters(Super());
  EXPECT_DOUBLE_EQ(c.total + c.mtp + 41 * 512.0, 123611033088.0);
  // "12B active parameters and 120B parameters in total" (docs/models/nemotron/nemotron3-super.md).
  EXPECT_NEAR(c.total / 120e9, 1.0, 0.01);
  EXPECT_NEAR(c.active_without_input_embedding / 12e9, 1.0, 0.03);
  // One module although two depths train (mtp_use_repeated_layer).
  EXPECT_TRUE(Super().mtp_repeated_layer);
  EXPECT_DOUBLE_EQ(c.mtp, c.mtp_module);
}

TEST(LatentMoe, MegatronHybridFlopsAreBridgesPrintedRate) {
  // The same card, pretrain_performance.H100: 64 H100, GBS 1280 of 4096 tokens, MTP 2 depths,
  // "last_10_steps_step_time_ms_avg: 27588.580", "model_tflops_per_gpu_avg: 248.610",
  // "tokens_per_second_per_gpu_avg: 2969.345". Megatron-Bridge's count (flop_utils.py
  // hybrid_flops: the MTP pattern's layers once per depth, logits 1 + depths) over the run's own
  // tokens and time gives its printed rate.
  FlopCountInput in{Super(), "nemotron_h", 4096, 1280, 0};
  in.mtp_depths = 2;
  absl::StatusOr<double> f = ConventionFlopsPerStep(FlopConvention::kMegatron2025, in);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_NEAR(*f / (64 * 27.58858) / 248.610e12, 1.0, 0.0005);
  // Per token, as the printed tokens/s give it: 83.73 GFLOP.
  EXPECT_NEAR(*f / (1280.0 * 4096) / (248.610e12 / 2969.345), 1.0, 0.0005);
  // Without the MTP depths the count is 3.3% less: the printed figure includes them.
  in.mtp_depths = 0;
  EXPECT_LT(*ConventionFlopsPerStep(FlopConvention::kMegatron2025, in) / *f, 0.97);
  // Megatron-Bridge docs/performance-summary.md, 26.08, DGX-GB300 MXFP8, 8192 tokens: 9856
  // tokens/s per GPU and 831 TFLOP/s per GPU, printed rounded.
  in.mtp_depths = 2;
  in.seq_length = 8192;
  in.sequences = 1;
  EXPECT_NEAR(*ConventionFlopsPerStep(FlopConvention::kMegatron2025, in) / 8192 / (831e12 / 9856), 1.0, 0.01);
}

TEST(HybridMtp, NemotronLightningIsNanoWithAnMtpModuleAsItsPrintedRateSays) {
  // Megatron-Bridge builds its Nemotron 3.5 Lightning benchmarks on Nemotron 3 Nano's model with
  // a 2-depth '*E' MTP module (perf_recipes/nemotronh/gb200/nemotronh.py @067f987); its 26.08 table
  // prints 807 TFLOP/s per GPU at 28,672 tokens/s per GPU (DGX-GB200, MXFP8, 8192 tokens).
  const ModelShape lightning = *testing::BuiltinCatalog().FindModel("nemotron-3.5-lightning-30b-a3b");
  FlopCountInput in{lightning, "nemotron_h", 8192, 1, 0};
  in.mtp_depths = 2;
  EXPECT_NEAR(*ConventionFlopsPerStep(FlopConvention::kMegatron2025, in) / 8192 / (807e12 / 28672), 1.0, 0.001);
  // The same layers as Nano's: the main model's parameters are Nano's.
  const ModelShape nano = *testing::BuiltinCatalog().FindModel("nemotron-3-nano-30b-a3b");
  EXPECT_DOUBLE_EQ(CountParameters(lightning).total, CountParameters(nano).total);
}

TEST(LatentMoe, ExpertsAndDispatchRunAtTheLatentWidth) {
  // Megatron-Core moe_layer.py: the experts read and write latent_size-wide rows and the
  // dispatcher moves them (token_dispatcher.py hidden_dim = moe_latent_size); the projections
  // h -> L and L -> h are two GEMMs per token. Against the same model with experts at h:
  // the forward GEMM FLOPs differ by exactly the routed experts' width and the projections, and
  // the dispatched bytes by L / h.
  ModelShape wide = Super();
  wide.moe.latent_size = 0;
  const double h = 4096, L = 1024, k = 22, fe = 2688;
  const double per_moe_layer = 2 * (k * 2 * fe * (L - h) + 2 * h * L);
  EXPECT_NEAR(ForwardGemmFlopsPerToken(Super()) - ForwardGemmFlopsPerToken(wide), 40 * per_moe_layer, 1.0);
  auto transfer = [](int64_t latent_size) {
    absl::StatusOr<Job> job = testing::JobFromYaml(
        "model: nemotron-3-super-120b-a12b\nhardware: h100-sxm\nframework: megatron-core\n"
        "cluster: {gpu_count: 64, gpus_per_node: 8}\nparallelism: {tp: 1, pp: 2, ep: 32}\n"
        "training: {seq_length: 4096, global_batch_size: 1280, micro_batch_size: 1, moe_dispatcher: alltoall}");
    EXPECT_TRUE(job.ok()) << job.status();
    job->model.moe.latent_size = latent_size;
    return EstimateLayerModules(*job, true).ep_transfer_s;
  };
  const double latent = transfer(1024), full = transfer(0);
  ASSERT_GT(full, 0);
  // 90,112 rows of 2 KB against 8 KB: bandwidth-bound, the latency a few percent.
  EXPECT_NEAR(latent / full, L / h, 0.03);
}

TEST(LatentMoe, CapacityPaddingGrowsTheExpertsRowsAndTheAllToAllsOnly) {
  // Megatron-Core token_dispatcher.py drop_and_pad (moe_pad_expert_input_to_capacity with
  // moe_expert_capacity_factor f; moe_utils.py get_capacity = ceil(T k / E x f)): every expert
  // computes its capacity of rows, and the all-to-all dispatcher sends them (input splits of
  // capacity per expert); the router pads the routing map itself (apply_router_token_dropping),
  // so HybridEP dispatches the padded pairs too, deduplicated per destination rank (fewer than
  // f x more bytes); DeepEP with padding is refused (transformer_config.py raises).
  // Nemotron 3 Super's H100 recipe pads to 1.10 (recipes/nemotronh/h100/nemotron_3_super.py).
  auto modules = [](const std::string& dispatcher, bool pad) {
    absl::StatusOr<Job> job = testing::JobFromYaml(absl::StrCat(
        "model: nemotron-3-super-120b-a12b\nhardware: h100-sxm\nframework: megatron-core\n"
        "cluster: {gpu_count: 64, gpus_per_node: 8}\nparallelism: {tp: 1, pp: 2, ep: 32}\n"
        "training: {seq_length: 4096, global_batch_size: 1280, micro_batch_size: 1, moe_dispatcher: ",
        dispatcher, pad ? ", moe_expert_capacity_factor: 1.1, moe_pad_expert_input_to_capacity: true}" : "}"));
    EXPECT_TRUE(job.ok()) << job.status();
    return std::make_pair(EstimateLayerModules(*job, true), Predict(*job)->memory.activations_bytes);
  };
  const auto [a2a, a2a_mem] = modules("alltoall", false);
  const auto [a2a_pad, a2a_pad_mem] = modules("alltoall", true);
  EXPECT_NEAR(a2a_pad.ep_transfer_s / a2a.ep_transfer_s, 1.1, 0.02);
  EXPECT_GT(a2a_pad.mlp_gemm_fwd_s, a2a.mlp_gemm_fwd_s);
  EXPECT_GT(a2a_pad_mem, a2a_mem);
  const auto [flex, flex_mem] = modules("hybridep", false);
  const auto [flex_pad, flex_pad_mem] = modules("hybridep", true);
  EXPECT_GT(flex_pad.ep_transfer_s, flex.ep_transfer_s);
  EXPECT_LT(flex_pad.ep_transfer_s, 1.1 * flex.ep_transfer_s);
  EXPECT_GT(flex_pad.mlp_gemm_fwd_s, flex.mlp_gemm_fwd_s);
  // Padding needs a factor, and a factor under 1 (dropping balanced tokens) is not modelled.
  for (const auto& [training, error] :
       {std::pair<std::string, std::string>{"moe_pad_expert_input_to_capacity: true",
                                            "training.moe_pad_expert_input_to_capacity: needs"},
        {"moe_expert_capacity_factor: 0.5", "training.moe_expert_capacity_factor: 0.5 must be"},
        {"moe_expert_capacity_factor: 1.1, moe_pad_expert_input_to_capacity: true, moe_dispatcher: deepep",
         "training.moe_pad_expert_input_to_capacity: is not supported with the DeepEP dispatcher"}}) {
    absl::StatusOr<Job> bad = testing::JobFromYaml(absl::StrCat(
        "model: nemotron-3-super-120b-a12b\nhardware: h100-sxm\nframework: megatron-core\ncluster: {gpu_count: 64}\n"
        "parallelism: {tp: 1, pp: 2, ep: 32}\ntraining: {seq_length: 4096, global_batch_size: 1280, ",
        training, "}"));
    ASSERT_FALSE(bad.ok());
    EXPECT_THAT(std::string(bad.status().message()), HasSubstr(error));
  }
}

TEST(LatentMoe, TheProjectionsAreWholeOnEveryTensorParallelRank) {
  // fc1_latent_proj / fc2_latent_proj are TELinear with parallel_mode "duplicated" (tp_size 1):
  // every TP rank holds them whole, as it holds the router (moe/router.py: an unsplit 512 x 4096
  // weight) and every block's pre-norm (4096, fused into the first linear), while the rest of
  // the dense weights split by TP.
  auto dense = [](int tp) {
    absl::StatusOr<Job> job = testing::JobFromYaml(absl::StrCat(
        "model: nemotron-3-super-120b-a12b\nhardware: h100-sxm\nframework: megatron-core\ncluster: {gpu_count: 64}\n"
        "parallelism: {tp: ", tp, ", ep: 32, sequence_parallel: ", tp > 1 ? "true" : "false",
        "}\ntraining: {seq_length: 4096, global_batch_size: 1280, mtp_layers: 0}"));
    EXPECT_TRUE(job.ok()) << job.status();
    return LocalParameterCount(*job).dense;
  };
  // Super's 88 blocks, 40 of them MoE: per MoE block 2 x 4096 x 1024 (latent) + 512 x 4096
  // (router) + 4096 (norm); per other block its norm.
  const double whole = 40 * (2.0 * 4096 * 1024 + 512.0 * 4096 + 4096) + 48 * 4096.0;
  EXPECT_NEAR(dense(2) - (dense(1) - whole) / 2, whole, 1.0);
}

TEST(LatentMoe, OffloadingTheExpertsActivationInputFreesItsBytes) {
  // Megatron-Core fine_grained_activation_offloading with offload_modules ["moe_act"]: the routed
  // experts' fc1 output (the activation's input) lives in host memory between forward and
  // backward. Nemotron 3 Super, one stage, micro-batch 1 of 4096 tokens, EP 32: each of the 40
  // MoE layers keeps 4096 x 22 rows of 2688 bf16 values fewer.
  auto act = [](const std::string& offload) {
    absl::StatusOr<Job> job = testing::JobFromYaml(absl::StrCat(
        "model: nemotron-3-super-120b-a12b\nhardware: h100-sxm\nframework: megatron-core\ncluster: {gpu_count: 64}\n"
        "parallelism: {tp: 1, ep: 32}\ntraining: {seq_length: 4096, global_batch_size: 1280, mtp_layers: 0, "
        "recompute: none", offload, "}"));
    EXPECT_TRUE(job.ok()) << job.status();
    return EstimateMemory(*job).activations_bytes;
  };
  EXPECT_NEAR(act("") - act(", offload_modules: [moe_act]"), 40 * 2.0 * 4096 * 22 * 2688, 1e3);
  // expert_fc1: the experts' input rows (1024 wide), one of the two dispatched copies.
  EXPECT_NEAR(act("") - act(", offload_modules: [expert_fc1]"), 40 * 2.0 * 4096 * 22 * 1024, 1e3);
  absl::StatusOr<Job> bad = testing::JobFromYaml(
      "model: nemotron-3-super-120b-a12b\nhardware: h100-sxm\nframework: megatron-core\ncluster: {gpu_count: 64}\n"
      "parallelism: {tp: 1, ep: 32}\ntraining: {seq_length: 4096, global_batch_size: 1280, offload_modules: [core_attn]}");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("training.offload_modules: 'core_attn' is not modelled"));
  // Megatron-Core refuses offloading inside an MoE layer that 'moe' recomputes whole.
  absl::StatusOr<Job> both = testing::JobFromYaml(
      "model: nemotron-3-super-120b-a12b\nhardware: h100-sxm\nframework: megatron-core\ncluster: {gpu_count: 64}\n"
      "parallelism: {tp: 1, ep: 32}\ntraining: {seq_length: 4096, global_batch_size: 1280, offload_modules: [moe_act], "
      "recompute: selective, recompute_modules: [moe]}");
  ASSERT_FALSE(both.ok());
  EXPECT_THAT(std::string(both.status().message()), HasSubstr("training.offload_modules: cannot offload inside the MoE layer"));
}

TEST(HybridMtp, AnAttentionAndMoeModuleIsTheTransformersMtpModule) {
  // A hybrid alternating '*' and 'E' is the MoE transformer with half the layers
  // (hybrid_test.cc); its MTP module "*E" is then the transformer's MTP module (a block of its
  // last layer's type): step, memory and parameters agree, on one stage and on the last of two.
  const std::string dims = "hidden_size: 2048, attention_heads: 16, kv_heads: 4, ffn_hidden_size: 5632, "
                           "ffn_type: swiglu, vocab_size: 32000, norm_type: rmsnorm, moe: {routed_experts: 8, top_k: 2, "
                           "expert_ffn_hidden_size: 5632}, mtp_layers: 2";
  std::string pattern;
  for (int i = 0; i < 8; ++i) pattern += "*E";
  for (const std::string par : {"{tp: 1, ep: 4}", "{tp: 2, pp: 2, ep: 4, sequence_parallel: true}"}) {
    SCOPED_TRACE(par);
    auto job = [&](const std::string& shape) {
      return testing::JobFromYaml(absl::StrCat("model: {shape: {", shape, "}}\nhardware: h100-sxm\nframework: megatron-core\n",
                                               "cluster: {gpu_count: 16}\nparallelism: ", par,
                                               "\ntraining: {seq_length: 4096, global_batch_size: 64, sharding: zero1}"));
    };
    absl::StatusOr<Job> tf = job(absl::StrCat("layers: 8, ", dims));
    absl::StatusOr<Job> hy = job(absl::StrCat("layers: 16, ", dims, ", hybrid_layer_pattern: '", pattern,
                                              "', hybrid_mtp_pattern: '*E'"));
    ASSERT_TRUE(tf.ok()) << tf.status();
    ASSERT_TRUE(hy.ok()) << hy.status();
    absl::StatusOr<Prediction> a = Predict(*tf), b = Predict(*hy);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_NEAR(b->step_time_s / a->step_time_s, 1.0, 1e-9);
    EXPECT_NEAR(b->memory.total_bytes / a->memory.total_bytes, 1.0, 1e-9);
    EXPECT_NEAR(b->parameters.mtp / a->parameters.mtp, 1.0, 1e-12);
    // And the MTP depths cost something: without them the step is shorter.
    tf->training.mtp_layers = 0;
    EXPECT_LT(EstimateStepTime(*tf).step_time_s, 0.99 * a->step_time_s);
  }
}

TEST(HybridMtp, TheLastStageHoldsTheModulesWeightsAndTheirDepthsActivations) {
  // Megatron-Core builds the MTP block after the decoder on the last pipeline stage
  // (multi_token_prediction.py): its weights (one module when the depths share a layer,
  // mtp_use_repeated_layer) and each depth's block activations and loss are that stage's. Nemotron
  // 3 Super's module: an attention and a latent MoE layer, 2.82e9 expert weights of its 2.94e9.
  auto stage = [](int depths, bool repeated) {
    absl::StatusOr<Job> job = testing::JobFromYaml(absl::StrCat(
        "model: nemotron-3-super-120b-a12b\nhardware: h100-sxm\nframework: megatron-core\n"
        "cluster: {gpu_count: 64}\nparallelism: {tp: 1, pp: 2, ep: 32}\n"
        "training: {seq_length: 4096, global_batch_size: 1280, micro_batch_size: 1, mtp_layers: ",
        depths, "}"));
    EXPECT_TRUE(job.ok()) << job.status();
    job->model.mtp_repeated_layer = repeated;
    return std::make_pair(EstimateStageMemory(*job, true), EstimateStageMemory(*job, false));
  };
  const ParameterCounts c = CountParameters(Super());
  const double experts = 512.0 * 2 * 1024 * 2688, module = c.mtp_module;
  const auto [none, none_first] = stage(0, true);
  const auto [shared, shared_first] = stage(2, true);
  const auto [own, own_first] = stage(2, false);
  // bf16 weights: 2 bytes per local parameter; experts over EP 32, the rest over TP 1; and, the
  // MTP being on a later stage than the embedding (PP 2), the last stage's own copy of the word
  // embedding (hybrid_model.py: `if self.pre_process or self.mtp_process: self.embedding`).
  const double embedding = 131072.0 * 4096;
  EXPECT_NEAR(shared.weights_bytes - none.weights_bytes, 2 * ((module - experts) + experts / 32 + embedding), 1.0);
  EXPECT_NEAR(own.weights_bytes - none.weights_bytes, 2 * (2 * ((module - experts) + experts / 32) + embedding), 1.0);
  EXPECT_GT(shared.activations_bytes, none.activations_bytes);
  EXPECT_DOUBLE_EQ(shared.activations_bytes, own.activations_bytes);  // the depths' compute is the same
  EXPECT_DOUBLE_EQ(shared_first.total_bytes, none_first.total_bytes);  // the first stage holds none of it
}

TEST(HybridMtp, MegatronLinesCarryTheModuleAfterTheSlash) {
  // Megatron-LM tests/functional_tests/test_cases/nemotron/nemotron3_super_release_gb200/
  // model_config.yaml (@d98e8a6): Nemotron 3 Super's release run, its model flags as given
  // (--mtp-num-layers 2 and the pattern's two '/*E' depths agree; no --mtp-use-repeated-layer:
  // two modules with their own weights, Megatron-Core's default).
  const std::string line =
      "torchrun --nproc_per_node 4 --nnodes 16 pretrain_hybrid.py --tensor-model-parallel-size 2 "
      "--pipeline-model-parallel-size 1 --expert-model-parallel-size 64 --expert-tensor-parallel-size 1 "
      "--use-distributed-optimizer --sequence-parallel --micro-batch-size 1 --global-batch-size 512 "
      "--is-hybrid-model --mamba-num-heads 128 --num-layers 88 --hidden-size 4096 --ffn-hidden-size 2688 "
      "--num-attention-heads 32 --group-query-attention --num-query-groups 2 --kv-channels 128 "
      "--hybrid-layer-pattern MEMEMEM*EMEMEMEM*EMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEM*EMEMEMEME/*E/*E "
      "--position-embedding-type none --normalization RMSNorm --untie-embeddings-and-output-weights "
      "--disable-bias-linear --squared-relu --seq-length 8192 --max-position-embeddings 8192 --vocab-size 131072 "
      "--num-experts 512 --moe-router-topk 22 --moe-token-dispatcher-type flex --moe-grouped-gemm "
      "--moe-latent-size 1024 --moe-shared-expert-intermediate-size 5376 --mtp-num-layers 2 --bf16";
  absl::StatusOr<ImportedJob> r = JobFromCommand(Words(line), "");
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::ModelShape& s = r->spec.model().shape();
  EXPECT_EQ(s.layers(), 88);
  EXPECT_EQ(s.hybrid_mtp_pattern(), "*E");
  EXPECT_EQ(s.mtp_layers(), 2);
  EXPECT_FALSE(s.mtp_repeated_layer());
  EXPECT_EQ(s.moe().latent_size(), 1024);
  absl::StatusOr<ModelShape> m = ModelShapeFromProto(s, "model.shape");
  ASSERT_TRUE(m.ok()) << m.status();
  const ParameterCounts c = CountParameters(*m), preset = CountParameters(Super());
  EXPECT_DOUBLE_EQ(c.total, preset.total);
  EXPECT_DOUBLE_EQ(c.mtp, 2 * preset.mtp_module);  // two modules of their own
  // The legacy spelling (--mtp-hybrid-override-pattern with --mtp-num-layers; arguments.py
  // converts it to the unified pattern) reads the same; --mtp-use-repeated-layer shares them.
  std::string legacy = line;
  legacy.replace(legacy.find("/*E/*E"), 6, "");
  legacy += " --mtp-hybrid-override-pattern *E --mtp-use-repeated-layer";
  absl::StatusOr<ImportedJob> l = JobFromCommand(Words(legacy), "");
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->spec.model().shape().hybrid_mtp_pattern(), "*E");
  EXPECT_EQ(l->spec.model().shape().mtp_layers(), 2);
  EXPECT_TRUE(l->spec.model().shape().mtp_repeated_layer());
}

TEST(HybridMtp, HfConfigKeysAsMegatronBridgeMapsThem) {
  // Megatron-Bridge nemotron_h_bridge.py (@067f987): moe_latent_size, num_nextn_predict_layers
  // with mtp_hybrid_override_pattern (required then), mtp_use_repeated_layer (default true).
  const std::string base = R"({"model_type": "nemotron_h", "hidden_size": 1024, "num_attention_heads": 8,
      "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 32000, "tie_word_embeddings": false,
      "hybrid_override_pattern": "MEM*E", "mamba_num_heads": 32, "mamba_head_dim": 64, "n_routed_experts": 16,
      "num_experts_per_tok": 4, "moe_intermediate_size": 512, "moe_shared_expert_intermediate_size": 1024,
      "moe_latent_size": 256)";
  absl::StatusOr<HfImport> with = ReadHfConfig(base + R"(, "num_nextn_predict_layers": 1,
      "mtp_hybrid_override_pattern": "*E"})", "c.json");
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_EQ(with->shape.moe.latent_size, 256);
  EXPECT_EQ(with->shape.mtp_layers, 1);
  EXPECT_EQ(with->shape.hybrid_mtp_pattern, "*E");
  EXPECT_TRUE(with->shape.mtp_repeated_layer);
  // The list form of the module (transformers' mtp_layers_block_type), not shared.
  absl::StatusOr<HfImport> list = ReadHfConfig(base + R"(, "num_nextn_predict_layers": 1,
      "mtp_layers_block_type": ["attention", "moe"], "mtp_use_repeated_layer": false})", "c.json");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->shape.hybrid_mtp_pattern, "*E");
  EXPECT_FALSE(list->shape.mtp_repeated_layer);
  // No depth: the pattern is not read at all (_hf_mtp_config returns (0, None) first), not even
  // to check it.
  absl::StatusOr<HfImport> none = ReadHfConfig(base + R"(, "mtp_hybrid_override_pattern": "*G"})", "c.json");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->shape.mtp_layers, 0);
  EXPECT_TRUE(none->shape.hybrid_mtp_pattern.empty());
  EXPECT_FALSE(none->shape.mtp_repeated_layer);  // the bridge's default applies only with depths
  // Both spellings: transformers' NemotronHConfig keeps mtp_layers_block_type.
  absl::StatusOr<HfImport> both = ReadHfConfig(base + R"(, "num_nextn_predict_layers": 1,
      "mtp_hybrid_override_pattern": "*E", "mtp_layers_block_type": ["attention", "mlp"]})", "c.json");
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->shape.hybrid_mtp_pattern, "*-");
}

TEST(HybridMtp, ShapesAndJobsThatAreNotModelledSaySo) {
  auto err = [](const std::string& shape, const std::string& training = "") {
    absl::StatusOr<Job> j = testing::JobFromYaml(absl::StrCat(
        "model: {shape: {layers: 4, hidden_size: 1024, attention_heads: 8, ffn_hidden_size: 4096, ffn_type: squared_relu, "
        "vocab_size: 32000, norm_type: rmsnorm, ",
        shape, "}}\nhardware: h100-sxm\nframework: megatron-core\ncluster: {gpu_count: 8}\n",
        "training: {seq_length: 4096, global_batch_size: 64", training, "}"));
    return j.ok() ? std::string("ok") : std::string(j.status().message());
  };
  EXPECT_EQ(err("hybrid_layer_pattern: 'M*M-', hybrid_mtp_pattern: '*-', mtp_layers: 2"), "ok");
  EXPECT_THAT(err("hybrid_layer_pattern: 'M*M-/*-'"), HasSubstr("'/' at position 4 is an MTP separator"));
  EXPECT_THAT(err("hybrid_layer_pattern: 'M*M-', hybrid_mtp_pattern: '*G', mtp_layers: 1"),
              HasSubstr("hybrid_mtp_pattern: 'G' at position 1"));
  EXPECT_THAT(err("hybrid_layer_pattern: 'M*M-', mtp_layers: 1"), HasSubstr("hybrid_mtp_pattern: must name"));
  EXPECT_THAT(err("hybrid_mtp_pattern: '*-', mtp_layers: 1"), HasSubstr("hybrid_mtp_pattern: needs hybrid_layer_pattern"));
  EXPECT_THAT(err("hybrid_layer_pattern: 'M*M-', hybrid_mtp_pattern: '*E', mtp_layers: 1"),
              HasSubstr("moe.routed_experts: must be > 0: the MTP pattern has MoE"));
  EXPECT_THAT(err("hybrid_layer_pattern: 'M*M-'", ", mtp_layers: 1"),
              HasSubstr("training.mtp_layers: the hybrid model has no MTP module"));
  EXPECT_THAT(err("moe: {latent_size: 256}"), HasSubstr("moe.latent_size: needs MoE layers"));
  EXPECT_THAT(err("moe: {routed_experts: 8, top_k: 2, expert_ffn_hidden_size: 512, latent_size: -1}"),
              HasSubstr("moe.latent_size: -1 must be in [0, 2^20]"));
}

}  // namespace
}  // namespace stepcast
