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
absl::StatusOr<ImportedJob> JobFromMegatronArgs(const std::vector<std::string>& argv);

// torchtitan job config (TOML): [model] name/flavor (llama3 8B/70B/405B), [training]
// seq_len, local_batch_size (or batch_size), global_batch_size, steps, mixed_precision_param,
// [parallelism] data_parallel_replicate_degree, data_parallel_shard_degree (FSDP),
// tensor_parallel_degree, pipeline_parallel_degree, context_parallel_degree,
// pipeline_parallel_microbatch_size, [activation_checkpoint] mode, float8 converters.
absl::StatusOr<ImportedJob> JobFromTorchtitanToml(absl::string_view toml, absl::string_view origin);

// A training command of either kind: torchtitan when it names --job.config_file (read relative
// to base_dir), else Megatron-LM.
absl::StatusOr<ImportedJob> JobFromCommand(const std::vector<std::string>& argv, const std::string& base_dir);

}  // namespace stepcast

#endif  // STEPCAST_PROTO_LAUNCH_ARGS_H_
