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

}  // namespace stepcast

#endif  // STEPCAST_PROTO_LAUNCH_ARGS_H_
