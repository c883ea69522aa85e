// File: proto/launch_args.h
//
// Job specs from what users already write to launch training. One importer per launcher:
//   * Megatron-LM command lines: proto/megatron_args.h;
//   * torchtitan commands and TOML configs: proto/torchtitan_args.h;
//   * NeMo 2 and Megatron-Bridge recipes: proto/nemo_args.h;
// and what they share (ImportedJob, bounds, where the program's arguments start):
// proto/launch_common.h. This header includes them all and adds the dispatcher.
// GPU count and hardware come from the caller (the Slurm allocation or flags): Finalize().
#ifndef STEPCAST_PROTO_LAUNCH_ARGS_H_
#define STEPCAST_PROTO_LAUNCH_ARGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/job.h"
#include "proto/launch_common.h"
#include "proto/megatron_args.h"
#include "proto/nemo_args.h"
#include "proto/torchtitan_args.h"

namespace stepcast {

// A training command of any kind: NeMo 2 (--factory) or Megatron-Bridge (--recipe); torchtitan
// when it names --job.config_file (read relative to base_dir; the previous command line),
// --module/--config (the current one) or --model.name and --model.flavor; else Megatron-LM
// (it needs --num-layers).
absl::StatusOr<ImportedJob> JobFromCommand(const std::vector<std::string>& argv, const std::string& base_dir);

// `s` (an error about a job imported from `launcher`'s line: ImportedJob::source) in the
// launcher's own terms: job-file fields and model fields it names become the flags or keys the
// user wrote ("parallelism.etp" -> "--expert-tensor-parallel-size" for "megatron",
// "parallelism.tensor_parallel_degree" for "torchtitan", "model.tensor_model_parallel_size" for
// "megatron-bridge"). Other statuses are returned unchanged.
absl::Status InLauncherTerms(const std::string& launcher, const absl::Status& s);

// The launcher whose arguments a job of framework preset `framework` is written in:
// "torchtitan" for torchtitan / torchtitan-compile, "megatron-bridge", "nemo", else "megatron"
// (Megatron-Core and Megatron-LM presets, and frameworks without their own launch syntax).
std::string LauncherOfFramework(const std::string& framework);

// The launcher's arguments for one layout change (a LayoutChange's field, before, after): for
// "megatron" MegatronArgsForChange, "torchtitan" TorchtitanArgsForChange (`seq_length` turns a
// micro-batch into torchtitan's tokens per micro-batch), "megatron-bridge" / "nemo" their
// ConfigContainer / recipe overrides (model.tensor_model_parallel_size=8,
// trainer.strategy.tensor_model_parallel_size=8). `used_flags`: ImportedJob::flags (what may
// be removed); empty for a job file. Empty when the launcher has no such argument.
std::string LauncherArgsForChange(const std::string& launcher, const std::vector<std::string>& used_flags,
                                  int64_t seq_length, absl::string_view field, absl::string_view before,
                                  absl::string_view after);

// Whether the framework of `job` (Job::framework.name) starts its layout: Megatron-LM's rules
// (MegatronAcceptsLayout) for the Megatron-Core, Megatron-LM, NeMo and Megatron-Bridge presets,
// torchtitan's (TorchtitanAcceptsLayout) for torchtitan / torchtitan-compile; accepted for the
// others (no launch rules modelled). For the layout search to propose only accepted layouts.
LayoutAcceptance FrameworkAcceptsLayout(const Job& job);
// FrameworkAcceptsLayout as the layout search's filter (SearchOptions::accept).
inline bool FrameworkStartsLayout(const Job& job) { return FrameworkAcceptsLayout(job).accepted; }

}  // namespace stepcast

#endif  // STEPCAST_PROTO_LAUNCH_ARGS_H_
