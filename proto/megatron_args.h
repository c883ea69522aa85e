// File: proto/megatron_args.h
//
// Megatron-LM launch lines: `python pretrain_gpt.py --num-layers 80 ...`, also behind
// torchrun/srun arguments. The model, batch, parallelism and precision flags are mapped; every
// other argument is returned in ImportedJob::ignored (never silently dropped).
#ifndef STEPCAST_PROTO_MEGATRON_ARGS_H_
#define STEPCAST_PROTO_MEGATRON_ARGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/job.h"
#include "proto/launch_common.h"

namespace stepcast {

// Megatron-LM arguments (arguments.py names and defaults). `argv` is the whole command; the
// arguments after the first "*.py" (or "-m module") token are read, everything before it
// (python, torchrun and its flags) is skipped. Errors name the flag ("--num-layers: required").
//   model    --num-layers --hidden-size --num-attention-heads --group-query-attention
//            --num-query-groups --kv-channels --ffn-hidden-size (default 4h, SwiGLU
//            int(8h/3/64)*64) --swiglu --normalization --disable-bias-linear
//            --untie-embeddings-and-output-weights --position-embedding-type
//            --max-position-embeddings --vocab-size | --tokenizer-type/--tokenizer-model
//            (padded to --make-vocab-size-divisible-by x TP as Megatron does) --num-experts
//            --moe-router-topk --moe-ffn-hidden-size --moe-shared-expert-intermediate-size
//            --moe-layer-freq
//   training --seq-length --micro-batch-size --global-batch-size --bf16 --fp16 --fp8-format
//            --recompute-granularity --recompute-method --recompute-activations
//            --use-distributed-optimizer --use-torch-fsdp2 --overlap-grad-reduce
//            --tp-comm-overlap --attention-backend --use-flash-attn --hidden-dropout
//            --attention-dropout --train-iters --train-samples
//   layout   --tensor-model-parallel-size --pipeline-model-parallel-size
//            --num-layers-per-virtual-pipeline-stage --context-parallel-size
//            --expert-model-parallel-size --sequence-parallel
//   added (issue 10): --multi-latent-attention --q-lora-rank --kv-lora-rank --qk-head-dim
//            --qk-pos-emb-head-dim --v-head-dim (MLA), --quick-geglu, --squared-relu,
//            --num-virtual-stages-per-pipeline-rank, --expert-tensor-parallel-size,
//            --grad-reduce-in-bf16, --fp8-param-gather, --recompute-modules (nargs '*'),
//            --recompute-method/--recompute-num-layers (block), --padded-vocab-size,
//            --data-parallel-sharding-strategy (Megatron-FSDP), --cuda-graph-impl,
//            --enable-cuda-graph, --external-cuda-graph, --checkpoint-activations;
//            --moe-layer-freq accepts Megatron's Python-list patterns ("([0]*3+[1]*58)").
// Vocabulary: --padded-vocab-size, else --vocab-size, else the tokenizer's (GPT2BPETokenizer,
// Llama2Tokenizer, a local --tokenizer-model directory's config.json, or a known model name in
// --tokenizer-model), else InvalidArgument naming --vocab-size.
// Integer flags are bounded (sizes and degrees <= 2^31-1, run lengths <= 2^53): out of range is
// an error naming the flag, never an overflow.
// Every other argument (with all its values) is in `ignored`; presets/launchers/megatron_args.txt lists
// every option of arguments.py and a test checks each is modelled or listed.
absl::StatusOr<ImportedJob> JobFromMegatronArgs(const std::vector<std::string>& argv);

// True when the Megatron-LM option (with or without the leading "--") is read into the job.
bool IsModelledMegatronFlag(absl::string_view name);

// True when Megatron-LM's argument parser defines the option (presets/launchers/megatron_args.txt's
// list: megatron/training/arguments.py at NVIDIA/Megatron-LM commit 000c4ac2), with or without
// the leading "--" ("virtual-pipeline-model-parallel-size" is not one).
bool IsMegatronArgument(absl::string_view name);

// How a launch splits the decoder layers over pipeline stages beyond the even split:
// --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers (0: not given),
// --account-for-embedding-in-pipeline-split, --account-for-loss-in-pipeline-split,
// --pipeline-model-parallel-layout.
struct MegatronUnevenPipeline {
  int64_t first = 0, last = 0;
  bool account_embedding = false, account_loss = false, layout = false;
};

// Megatron-LM's rules for splitting `layers` decoder layers over `pp` pipeline stages of `vpp`
// virtual stages each (arguments.py validate_args and TransformerConfig.__post_init__ at the
// pinned commit): an even split unless `u` says otherwise; the middle stages' share divides
// evenly; first/last stage and per-rank counts are multiples of vpp. InvalidArgument naming the
// flag, with the uneven-split flags that make it accepted (MegatronUnevenPipelineAdvice).
absl::Status CheckMegatronPipelineSplit(int64_t layers, int64_t pp, int64_t vpp, const MegatronUnevenPipeline& u);

// The flags that make Megatron-LM accept `layers` on `pp` stages (of `vpp` virtual stages) when
// they do not divide evenly, as text ("--account-for-embedding-in-pipeline-split
// --account-for-loss-in-pipeline-split (96 = 8 x 12), or --decoder-first-pipeline-num-layers 11
// --decoder-last-pipeline-num-layers 11 (12 on each of the 6 other stages)"); the first/last
// pair is the most even one (smallest largest stage, first <= last). Empty when none fits.
// When neither fits, a --pipeline-model-parallel-layout placing the layers (MegatronPipelineLayout).
std::string MegatronUnevenPipelineAdvice(int64_t layers, int64_t pp, int64_t vpp);

// A --pipeline-model-parallel-layout string placing `layers` decoder layers over pp x vpp
// stages as evenly as possible, extra layers on the middle stages first, in Megatron-Core's
// layout syntax (pipeline_parallel_layer_layout.py: E embedding, t layer, L loss, | between
// stages, (..)*n and x*n repeats): 61 on 8 x 4 -> "Et|(t*2|)*29t*2|tL"-like. Empty when a stage
// would get no layer.
std::string MegatronPipelineLayout(int64_t layers, int64_t pp, int64_t vpp);

// The checks of a Megatron-LM launch that need the GPU count (arguments.py validate_args,
// megatron/core/num_microbatches_calculator.py, parallel_state.py), in the launcher's flags:
// the world size divisible by --tensor-model-parallel-size x --pipeline-model-parallel-size x
// --context-parallel-size; --global-batch-size a multiple of --micro-batch-size x DP (and set
// to micro-batch x DP when not given, as arguments.py does); expert layout
// (--expert-tensor-parallel-size x --expert-model-parallel-size divides TP x CP x DP). `spec` is
// the imported job (without the cluster); may set its global batch.
absl::Status CheckMegatronAllocation(v1::JobSpec& spec, int64_t gpu_count);

// Whether Megatron-LM (also as NeMo / Megatron-Bridge run it) starts `job`'s layout, by the
// same rules as JobFromMegatronArgs: heads, query groups and FFN split over TP; experts over EP;
// the pipeline split (accepted with the uneven-split flags in `needs` when the layers do not
// divide evenly and one fits; refused when none does); interleaving needs PP > 1; TP
// communication overlap needs TP > 1 with sequence parallelism; fp8 parameter gathers and
// distributed-optimizer instances need a sharded optimizer; CP needs seq_length % 2 CP == 0.
LayoutAcceptance MegatronAcceptsLayout(const Job& job);

// The Megatron-LM arguments that turn job field `field` (a LayoutChange field: "parallelism.vpp",
// "training.recompute", ...) from `before` into `after` (values as a job file writes them), for
// a job launched with `used_flags` (ImportedJob::flags; empty for a job file): only arguments of
// Megatron-LM's parser (IsMegatronArgument), "remove X" only for an X the job used. Empty when
// Megatron-LM has no argument for it (pp_schedule, dp).
std::string MegatronArgsForChange(const std::vector<std::string>& used_flags, absl::string_view field,
                                  absl::string_view before, absl::string_view after);

}  // namespace stepcast

#endif  // STEPCAST_PROTO_MEGATRON_ARGS_H_
