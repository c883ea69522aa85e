// File: proto/torchtitan_args.h
//
// torchtitan launch lines and job configs: the TOML config of the previous command line
// (`torchrun ... -m torchtitan.train --job.config_file X.toml [--section.key value ...]`, also
// behind run_train.sh) and the config registry of the current one (`--module llama3 --config
// llama3_8b [...]`).
#ifndef STEPCAST_PROTO_TORCHTITAN_ARGS_H_
#define STEPCAST_PROTO_TORCHTITAN_ARGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/job.h"
#include "proto/launch_common.h"

namespace stepcast {

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

// True when the training program's arguments (after the script or "-m module") name
// --job.config_file, --module, or both --model.name and --model.flavor.
bool IsTorchtitanCommand(const std::vector<std::string>& argv);

// A torchtitan command line: --job.config_file (read relative to base_dir; the previous command
// line), --module/--config (the current one) or --model.name and --model.flavor.
absl::StatusOr<ImportedJob> JobFromTorchtitanLaunch(const std::vector<std::string>& argv, const std::string& base_dir);

// Whether torchtitan (at the pinned commit) starts `job`'s layout: CUDA graphs (on unless
// training.disable_cuda_graphs) refuse PP (trainer.py _validate_cuda_graphs); EP divides
// dp_shard x cp x tp (configs.py's mesh constraint); virtual stages need PP.
LayoutAcceptance TorchtitanAcceptsLayout(const Job& job);

// torchtitan's command-line arguments for one layout change (field, before, after as a
// LayoutChange has them): --parallelism.* degrees and schedule, tokens per micro-batch
// (`seq_length` x sequences; --training.local_batch_size for a job that used it),
// "activation-checkpoint:full|selective|none", --compile.enable_async_tensor_parallel. Only keys
// of the pinned commit's command line (presets/torchtitan_configs/cli_keys.txt), except a key
// the job itself used. Empty when torchtitan has none (ZeRO-1/2, fp8 converters).
std::string TorchtitanArgsForChange(const std::vector<std::string>& used_flags, int64_t seq_length,
                                    absl::string_view field, absl::string_view before, absl::string_view after);

// The model of torchtitan flavor `module`/`flavor` ("qwen3", "30B-A3B") as a job's model spec
// (a preset name or the shape), for the other importers (Megatron-Bridge / NeMo recipes of the
// same models). NotFound for an unknown flavor; InvalidArgument with the reason for a flavor
// that is known but not expressible (gpt-oss without its presets).
absl::StatusOr<v1::ModelSpec> TorchtitanFlavorModel(const std::string& module, const std::string& flavor);

// True when `key` ("parallelism.tensor_parallel_degree", with or without "--") is an option of
// torchtitan's command line at the pinned commit (presets/torchtitan_configs/cli_keys.txt).
bool IsTorchtitanCliKey(absl::string_view key);

}  // namespace stepcast

#endif  // STEPCAST_PROTO_TORCHTITAN_ARGS_H_
