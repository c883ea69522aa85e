// File: core/flop_conventions.h
//
// The FLOP counts frameworks and papers divide by a step time to print "TFLOP/s per GPU" or
// MFU. A throughput stated under one of them converts back to a step time exactly:
//   step_time_s = ConventionFlopsPerStep(convention, input) / (flops_per_s_per_gpu x GPUs),
// from the run's own model and batch. `validate` does this for published rows that give only a
// TFLOP/s or MFU figure; the same functions serve a measured run's report.
//
// Each convention, with its source (formulas per step of `sequences` sequences of s tokens; h
// hidden, L layers, a heads, g KV heads (query groups), d_h head size, f FFN size, V vocabulary,
// k experts per token):
//   kNarayananEq3      Narayanan et al. 2021 (SC21) Eq. 3 (full recompute, an HFU):
//                      96 B s L h^2 (1 + s/(6h) + V/(16 L h)).
//   kKorthikantiModel  Korthikanti et al. 2022 (arXiv:2205.05198) App. A model FLOPs, the PaLM
//                      MFU definition they use: 72 B s L h^2 (1 + s/(6h) + V/(12 L h)).
//   kMegatron2024      Megatron-LM megatron/training/training.py num_floating_point_operations,
//                      2024 form (GQA, kv_channels, MoE top-k, shared experts; non-causal; every
//                      layer counted with the MoE FFN when the model has experts):
//                      12 B s L h^2 [(1 + g/a + s/h)(a d_h / h) + (f_e/h) k G + (f_sh/h) G
//                      + V/(2 L h)], G = 3/2 with a gated FFN else 1; MLA models per that
//                      version's MLA branch.
//   kMegatron2025      Megatron-LM num_floating_point_operations -> transformer_flops @001b00c2
//                      (Megatron-Bridge 25.11 / 26.02 print it): causal attention (half the
//                      score matrix), dense and MoE layers by their pattern, MLA, MTP layers.
//                      Both Megatron forms count 3 FFN matrices only under Megatron's --swiglu
//                      (a SiLU gated unit): GeGLU models and GPT-OSS (its Megatron-Bridge
//                      provider's quick_gelu gated unit) are counted with 2.
//                      A hybrid Mamba-2 model (hybrid_layer_pattern) under either Megatron form:
//                      its hybrid_flops branch (training.py @d98e8a6), layer by kind with
//                      Megatron's own Mamba count (d_inner taken as 2 h whatever the heads;
//                      7 d_inner N per token for the scan). The 6N + 12 L a d_h s forms
//                      (llm-foundry, torchtitan, PaLM) count L as the layers with attention.
//   kNemoLlama         NeMo nemo/utils/flops_formulas.py llama2/llama3/mixtral (the dgxc
//                      READMEs' "12 L h^2 (1 + g/a + s/h) + 18 L f h + 6 V h" per token) with
//                      NeMo's vocabulary constant of the family (perf_metrics_utils.py
//                      LLM_VOCAB_SIZE_MAP: llama3 128256, llama2 32000, mixtral 32000), not the
//                      run's vocabulary; x k for MoE.
//   kNemoGpt3          NeMo flops_formulas.py gpt3 ("24 L h^2 + 12 L h s + 48 L h^2 + 6 V h"
//                      per token) with the family's constant (gpt3 51200, nemotron 256000).
//   kLlmFoundry        llm-foundry scripts/train/benchmarking/collect_results.py: 6 N s +
//                      12 L h s^2 per sequence, N every parameter (embeddings and learned
//                      positions included); non-causal.
//   kTorchtitan        torchtitan get_num_flop_per_token: 6 N + 12 L a d_h s per token, N the
//                      parameters without the nn.Embedding input table
//                      (get_num_params(model, exclude_embedding=True); later
//                      get_nparams_and_flops).
//   kTorchtitan2024    the same with N every parameter (torchtitan's first train.py,
//                      get_num_params(model); its docs/performance.md Llama 3 8B figures).
//   kPalm              PaLM (arXiv:2204.02311) App. B / nanoGPT model.py estimate_mfu: 6 N + 12
//                      L a d_h s per token, N the parameters without a learned position table
//                      (nanoGPT get_num_params(non_embedding=True); PaLM has none).
//   kMlperfConstant    MLPerf Training's NVIDIA configs MODEL_TFLOP_PER_SAMPLE, a constant per
//                      benchmark (Llama 3.1 405B 21508 TFLOP, Llama 3.1 8B 421.59 TFLOP per
//                      8192-token sample; mlcommons/training_results_v5.1 config_common_*.sh).
//   kStatedPerSample   a FLOP count per sample the source states (dgxc READMEs "model FLOPs
//                      per sample 4.27E+15").
#ifndef STEPCAST_CORE_FLOP_CONVENTIONS_H_
#define STEPCAST_CORE_FLOP_CONVENTIONS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/model_shape.h"

namespace stepcast {

enum class FlopConvention {
  kNarayananEq3,
  kKorthikantiModel,
  kMegatron2024,
  kMegatron2025,
  kNemoLlama,
  kNemoGpt3,
  kLlmFoundry,
  kTorchtitan,
  kTorchtitan2024,
  kPalm,
  kMlperfConstant,
  kStatedPerSample,
};

// Short name ("megatron-2025") and the source line of each convention.
absl::string_view FlopConventionName(FlopConvention c);
absl::string_view FlopConventionSource(FlopConvention c);

// A convention named by a definition text ("README 'Notes': model FLOPs/sample = s*[12*L*h^2*
// (1+g/a+s/h) + 18*L*ffn*h + 6*V*h]", "'Model TFLOP/sec/GPU' = framework analytic model FLOPs",
// "collect_results.py: ... 6*N*s + 12*n_layers*d_model*s^2"), never from who published it. In
// order: Eq. 3; MODEL_TFLOP_PER_SAMPLE; a FLOP count per sample stated as a number (taken as
// it is); Korthikanti App. A ("Appendix A"); the NeMo llama / gpt3 per-token formulas; llm-
// foundry's collect_results.py / 6*N*s + 12*...*s^2; torchtitan's get_num_flop_per_token
// (kTorchtitan2024 when the text says every parameter is counted); PaLM / nanoGPT / 6N + 12;
// Megatron's num_floating_point_operations or a "framework analytic(al) model FLOPs" count
// (kMegatron2025 from `framework_year` 2025 on, else kMegatron2024). NotFound naming the text
// when none is recognised.
struct FlopConventionChoice {
  FlopConvention convention;
  double stated_flops_per_sample = 0;  // kStatedPerSample
  int64_t mtp_depths = -1;             // MTP depths trained (training.mtp_layers); -1: model.mtp_layers
};
absl::StatusOr<FlopConventionChoice> FlopConventionFromText(absl::string_view definition, int framework_year);

// What a count needs: the model (resolved or not), its architecture-registry family (the
// NeMo formulas' vocabulary constant and the MLPerf constants are per family), the sequence
// length and the sequences per step.
struct FlopCountInput {
  ModelShape model;
  std::string family;  // "llama", "llama2", "gpt", "nemotron", "mixtral", ...
  int64_t seq_length = 0;
  double sequences = 0;
  double stated_flops_per_sample = 0;  // kStatedPerSample
  int64_t mtp_depths = -1;             // MTP depths trained (training.mtp_layers); -1: model.mtp_layers
};

// FLOPs of one step under `c`. InvalidArgument when the inputs are not positive, or the
// convention has no constant for the family or model (NeMo vocabulary, MLPerf benchmark).
absl::StatusOr<double> ConventionFlopsPerStep(FlopConvention c, const FlopCountInput& in);

// The step time a throughput under `c` means: flops_per_step / (flops_per_s_per_gpu x gpus).
// InvalidArgument unless all three are finite and > 0.
absl::StatusOr<double> StepTimeFromFlopRate(double flops_per_step, double flops_per_s_per_gpu, double gpus);

}  // namespace stepcast

#endif  // STEPCAST_CORE_FLOP_CONVENTIONS_H_
