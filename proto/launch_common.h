// File: proto/launch_common.h
//
// What the launch-line importers share (proto/megatron_args.h, proto/torchtitan_args.h,
// proto/nemo_args.h, and the dispatcher proto/launch_args.h): the imported job with its
// unmodelled arguments, the bounds on integer arguments, and where a training program's own
// arguments start behind its launcher (python, torchrun, srun, run_train.sh).
#ifndef STEPCAST_PROTO_LAUNCH_COMMON_H_
#define STEPCAST_PROTO_LAUNCH_COMMON_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "stepcast/v1/job.pb.h"

namespace stepcast {

// A job read from a launch line. `spec` holds the model, training and parallelism; the cluster
// and hardware are set by Finalize() from the allocation.
struct ImportedJob {
  v1::JobSpec spec;                  // model, training, parallelism; cluster/hardware unset
  std::vector<std::string> ignored;  // arguments or keys not modelled, as given
  std::string source;                // "megatron", "torchtitan", "nemo" or "megatron-bridge"
  // torchtitan gives the batch per data-parallel rank; resolved once the GPU count is known.
  int64_t local_batch_size = 0;
  // The GPU count the launchers in front of the program ask for (LauncherPrefix), 0: none;
  // Finalize uses it when the caller passes no count.
  int64_t launcher_gpus = 0;
  std::string launcher_gpus_from;
  // The training program's own flags as the user wrote them ("--recompute-activations",
  // "--parallelism.tensor_parallel_degree"), for suggestions that remove only what was given.
  std::vector<std::string> flags;

  // Sets the GPU count (0: launcher_gpus), GPUs per node (0: the hardware's) and hardware
  // preset, and resolves what depends on them (data-parallel degree, torchtitan's global batch).
  // InvalidArgument naming the launcher's flag (Megatron-LM: "--global-batch-size") or field
  // when they do not fit together as the launcher checks them.
  absl::StatusOr<v1::JobSpec> Finalize(int64_t gpu_count, const std::string& hardware_preset,
                                       int64_t gpus_per_node = 0) const;
};

// Whether a framework's launcher starts a layout (for the layout search: propose only what the
// framework accepts). `accepted` false: refused, `reason` names the rule and its source;
// accepted with a non-empty `needs`: only with these extra launcher arguments (e.g. Megatron-LM's
// uneven pipeline flags), which a suggestion must print.
struct LayoutAcceptance {
  bool accepted = true;
  std::string reason;
  std::string needs;
};

// Bounds on integer arguments, so that the products the importers form (4 x hidden, the
// vocabulary multiple divisible x TP, train samples x sequence length) cannot overflow int64:
// 2^31 - 1 for sizes and degrees, 2^53 for run lengths (train iterations / samples).
inline constexpr int64_t kMaxLaunchSize = (int64_t{1} << 31) - 1;
inline constexpr int64_t kMaxLaunchCount = int64_t{1} << 53;

// Index of the first argument of the training program in `argv` (LauncherPrefix's
// args_index): after the program that the launchers in front of it start. 0 when argv names no
// program (the whole line is the program's arguments). `shell_scripts`: a "*.sh" program counts
// (torchtitan's run_train.sh); otherwise the launchers' scan goes on past it.
size_t ProgramArgsStart(const std::vector<std::string>& argv, bool shell_scripts);

// What the launchers in front of a training program say: where the program and its arguments
// start, and the GPU count they ask for. Read as each launcher parses its own options:
//   torchrun / python -m torch.distributed.run|launch: --nproc-per-node|--nproc_per_node N,
//     --nnodes N (an elastic "MIN:MAX" range is not a count), -m MODULE / --module, the other
//     options with their values (torch/distributed/run.py get_args_parser);
//   srun: -N/--nodes, -n/--ntasks, --ntasks-per-node, --gpus-per-node, -G/--gpus (Slurm srun(1));
//   deepspeed: --num_gpus/--num-gpus, --num_nodes/--num-nodes; mpirun/mpiexec: -np/-n;
//   python [-u -O -B -X opt] (script.py | -m module); bash/sh [-x -e ...] script; env/VAR=value
//   prefixes; nsys profile, numactl, uv run, accelerate launch, time (their options skipped).
// The GPU count comes from the innermost launcher that starts one process per GPU: torchrun's
// nproc_per_node x nnodes; else srun's tasks (ntasks, or nodes x ntasks-per-node, or nodes x
// gpus-per-node) when srun starts the program itself; else deepspeed's; else mpirun's -np.
struct LauncherPrefix {
  size_t program_index = 0;  // the program token (script, module or executable); argv.size(): none
  size_t args_index = 0;     // its first argument
  std::string program;       // as written ("pretrain_gpt.py", "torchtitan.train", "run_train.sh")
  bool module = false;       // started with -m (python or torchrun)
  int64_t gpus = 0;          // 0: the launchers do not say
  std::string gpus_from;     // the arguments the count was read from ("torchrun --nproc_per_node 8 --nnodes 2")
};
LauncherPrefix ParseLauncherPrefix(const std::vector<std::string>& argv, bool shell_scripts);

// Words of a shell command string as sh would split it, without expanding anything: '...' and
// "..." quoting, backslash escapes, comments; control operators (; && || | & newline) end a
// simple command and are returned as separate words (";", "&&", ...). Variables ($X, ${X}) are
// kept as written. Used for `bash -c "CMD"` / `sh -c` launch lines. InvalidArgument for an
// unterminated quote.
absl::StatusOr<std::vector<std::string>> SplitShellWords(const std::string& command);

// When argv (after any launchers) is `bash|sh [-opts] -c "STRING" ...`: the first simple command
// of STRING that `is_training` accepts (as argv, quotes removed), else an empty vector (also when
// argv is not of that form). InvalidArgument for a malformed STRING.
absl::StatusOr<std::vector<std::string>> CommandInsideShellC(
    const std::vector<std::string>& argv, bool (*is_training)(const std::vector<std::string>&));

// Megatron-Core's MoE token dispatcher (TransformerConfig moe_token_dispatcher_type, and
// moe_flex_dispatcher_backend for "flex"), as a job's training.moe_dispatcher: "alltoall";
// "flex" with "hybridep", or "deepep" (flex's default backend); "allgather" (Megatron-Core's
// default) is not modelled and gives "" (the framework's default), as does a type not given
// ("" or None). Either value lower-cased. `bad` names the value that is none of those ("type" or
// "backend", with `why`); `dispatcher` is then "". Shared by the Megatron-LM and Megatron-Bridge
// importers.
struct MegatronMoeDispatcher {
  std::string dispatcher;
  std::string bad, why;
};
MegatronMoeDispatcher ReadMegatronMoeDispatcher(const std::string& type, const std::string& backend);

}  // namespace stepcast

#endif  // STEPCAST_PROTO_LAUNCH_COMMON_H_
