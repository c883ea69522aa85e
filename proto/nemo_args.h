// File: proto/nemo_args.h
//
// Job specs from NeMo 2 and Megatron-Bridge launch lines (issues 10, 23):
//   * NeMo 2 / NeMo-Run: `nemo llm pretrain --factory llama3_70b [key=value ...]`, the factory
//     also as "llama3_70b(num_nodes=8)" (its arguments listed);
//   * Megatron-Bridge: `python scripts/training/run_recipe.py --recipe
//     llama3_8b_pretrain_2gpu_h100_bf16_config [-tp N -pp N -cp N -vp N -ep N -etp N -gb N -mb N
//     -sl N -ms N] [key=value ...]`, or `--model llama3_8b --mode pretrain` (the recipe
//     llama3_8b_pretrain_config), as run_recipe.py at the pinned commit reads them.
// The recipes are data: presets/launchers/nemo.toml (every pre-training recipe of
// nemo/collections/llm/recipes at NVIDIA/NeMo 8cfedd72: trainer parallelism, MockDataModule
// batch, model config) and presets/launchers/megatron-bridge.toml (every *_pretrain_*config of
// src/megatron/bridge/recipes and perf_recipes at NVIDIA-NeMo/Megatron-Bridge 067f987d, legacy
// aliases included: layout, sequence, batches, iterations, precision recipe, recompute, DDP
// sharding and overlap, TP overlap, CUDA graphs, uneven pipeline placement), both written by
// scripts/extract_launch_recipes.py. A recipe's model (its HF id, provider or config class) is a
// preset or a released model's shape, or the recipe is refused saying why (a hybrid Mamba or
// Gated DeltaNet model, a vision-language model, NVFP4, a model without a shape here).
// Overrides on top (a leading "recipe." and any ".config." dropped; the runner's short options
// first, KEY=VALUE after, as run_recipe.py): the layout fields on model.* / trainer.strategy.*,
// data.seq_length / dataset.seq_length, global and micro batch, trainer.max_steps /
// train.train_iters, recompute granularity and modules, trainer.plugins / mixed_precision, ddp.*
// sharding and overlap, comm_overlap.tp_comm_overlap, cuda_graph_impl; every other override is
// listed (trainer.num_nodes and trainer.devices with the note that the GPU count comes from the
// allocation or --gpus). The job names the nemo / megatron-bridge framework preset.
#ifndef STEPCAST_PROTO_NEMO_ARGS_H_
#define STEPCAST_PROTO_NEMO_ARGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/launch_common.h"

namespace stepcast {

// True when argv names a NeMo 2 factory (--factory), a Megatron-Bridge recipe (--recipe), or
// run_recipe.py with --model.
bool IsNemoCommand(const std::vector<std::string>& argv);

// InvalidArgument naming the flag or key: an unknown recipe (the message lists the known ones or
// the model's recipes), a recipe whose model is refused (and why), a malformed override.
absl::StatusOr<ImportedJob> JobFromNemoCommand(const std::vector<std::string>& argv);

}  // namespace stepcast

#endif  // STEPCAST_PROTO_NEMO_ARGS_H_
