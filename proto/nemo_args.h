// File: proto/nemo_args.h
//
// Job specs from NeMo 2 and Megatron-Bridge launch lines (issue 10):
//   * NeMo 2 / NeMo-Run: `nemo llm pretrain --factory llama3_70b [key=value ...]`, the factory
//     also as "llama3_70b(num_nodes=8)" (nemo/collections/llm/recipes/<name>.py);
//   * Megatron-Bridge: `python scripts/training/run_recipe.py --recipe llama3_70b_pretrain_config
//     [key=value ...]` (Hydra-style overrides of the recipe's ConfigContainer).
// Known recipes map to model presets. For NeMo 2 the recipe's own layout and batch defaults
// (its trainer() and data settings, read from the recipe files cited in nemo_args.cc) are the
// starting point; Megatron-Bridge recipes' defaults are not known here, so their layout starts
// at TP=PP=CP=EP=1 and the sequence length and global batch must be given as overrides.
// Overrides read (with or without "recipe." and "config." in the path):
//   trainer.strategy.{tensor,pipeline,virtual_pipeline,context,expert,expert_tensor}_model_parallel_size,
//   trainer.strategy.sequence_parallel, model.{same names}, model.sequence_parallel,
//   data.{seq_length,global_batch_size,micro_batch_size}, dataset.sequence_length,
//   train.{global_batch_size,micro_batch_size,train_iters}, trainer.max_steps,
//   model.recompute_granularity, trainer.plugins / mixed_precision (a value naming fp8).
// Every other override, and the factory's arguments, are listed in `ignored` (trainer.num_nodes
// and trainer.devices too: the GPU count comes from the allocation or --gpus).
#ifndef STEPCAST_PROTO_NEMO_ARGS_H_
#define STEPCAST_PROTO_NEMO_ARGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/launch_common.h"

namespace stepcast {

// True when argv names a NeMo 2 factory (--factory) or a Megatron-Bridge recipe (--recipe).
bool IsNemoCommand(const std::vector<std::string>& argv);

// InvalidArgument naming the flag or key: an unknown recipe (the message lists the known ones),
// a malformed override, a Megatron-Bridge recipe without its sequence length / global batch.
absl::StatusOr<ImportedJob> JobFromNemoCommand(const std::vector<std::string>& argv);

}  // namespace stepcast

#endif  // STEPCAST_PROTO_NEMO_ARGS_H_
