// File: proto/launch_args.h
//
// Job specs from what users already write to launch training:
//   * a Megatron-LM command line (`python pretrain_gpt.py --num-layers 80 ...`, also behind
//     torchrun/srun arguments): the model, batch, parallelism and precision flags are mapped;
//     every other argument is returned in `ignored` (never silently dropped);
//   * a torchtitan TOML config (`torchrun ... -m torchtitan.train --job.config_file X.toml`).
// GPU count and hardware come from the caller (the Slurm allocation or flags): Finalize().
#ifndef STEPCAST_PROTO_LAUNCH_ARGS_H_
#define STEPCAST_PROTO_LAUNCH_ARGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "stepcast/v1/job.pb.h"

namespace stepcast {

struct ImportedJob {
  v1::JobSpec spec;                  // model, training, parallelism; cluster/hardware unset
  std::vector<std::string> ignored;  // arguments or keys not modelled, as given
  std::string source;                // "megatron" or "torchtitan"
  // torchtitan gives the batch per data-parallel rank; resolved once the GPU count is known.
  int64_t local_batch_size = 0;

  // Sets the GPU count, GPUs per node (0: the hardware's) and hardware preset, and resolves
  // what depends on them (data-parallel degree, torchtitan's global batch). InvalidArgument
  // naming the field when they do not fit together.
  absl::StatusOr<v1::JobSpec> Finalize(int64_t gpu_count, const std::string& hardware_preset,
                                       int64_t gpus_per_node = 0) const;
};

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
// Every other argument (with all its values) is in `ignored`; tests/data/megatron_args.txt lists
// every option of arguments.py and a test checks each is modelled or listed.
absl::StatusOr<ImportedJob> JobFromMegatronArgs(const std::vector<std::string>& argv);

// True when the Megatron-LM option (with or without the leading "--") is read into the job.
bool IsModelledMegatronFlag(absl::string_view name);

// torchtitan job config (TOML): [model] name/flavor (llama3 8B/70B/405B), [training]
// seq_len, local_batch_size (or batch_size), global_batch_size, steps, mixed_precision_param,
// [parallelism] data_parallel_replicate_degree, data_parallel_shard_degree (FSDP),
// tensor_parallel_degree, pipeline_parallel_degree, context_parallel_degree,
// pipeline_parallel_microbatch_size, [activation_checkpoint] mode, float8 converters.
absl::StatusOr<ImportedJob> JobFromTorchtitanToml(absl::string_view toml, absl::string_view origin);

// torchtitan (issue 10): the TOML text (may be empty) with the command line's overrides applied
// as torchtitan's config manager applies them ("--training.local_batch_size 8",
// "--parallelism.tensor_parallel_degree=4", a bare "--section.flag" is true, "--x.no_flag" false).
// Flavors: every flavor torchtitan ships for llama3 (debugmodel, 8B, 70B, 405B), llama4
// (debugmodel, 17bx16e, 17bx128e), deepseek_v3 (debugmodel, 16B, 236B, 671B) and qwen3
// (debugmodel, 0.6B ... 32B, debugmodel_moe, 30B-A3B, 235B-A22B), attention-variant suffixes
// (_flex_attn, _varlen, _irope) included. Also read: expert_parallel_degree,
// expert_tensor_parallel_degree, pipeline_parallel_schedule, enable_async_tensor_parallel,
// mixed_precision_reduce, HSDP (data_parallel_replicate_degree > 1 with sharding), float8 /
// mx converters. Every other key (also nested: quantize.linear.float8.fqns) is in `ignored`.
absl::StatusOr<ImportedJob> JobFromTorchtitanCommand(absl::string_view toml, absl::string_view origin,
                                                     const std::vector<std::string>& overrides);

// A training command of either kind: torchtitan when it names --job.config_file (read relative
// to base_dir; the previous command line), --module/--config (the current one) or
// --model.name and --model.flavor; else Megatron-LM.
absl::StatusOr<ImportedJob> JobFromCommand(const std::vector<std::string>& argv, const std::string& base_dir);

}  // namespace stepcast

#endif  // STEPCAST_PROTO_LAUNCH_ARGS_H_
