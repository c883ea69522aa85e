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

  // Sets the GPU count, GPUs per node (0: the hardware's) and hardware preset, and resolves
  // what depends on them (data-parallel degree, torchtitan's global batch). InvalidArgument
  // naming the field when they do not fit together.
  absl::StatusOr<v1::JobSpec> Finalize(int64_t gpu_count, const std::string& hardware_preset,
                                       int64_t gpus_per_node = 0) const;
};

// Bounds on integer arguments, so that the products the importers form (4 x hidden, the
// vocabulary multiple divisible x TP, train samples x sequence length) cannot overflow int64:
// 2^31 - 1 for sizes and degrees, 2^53 for run lengths (train iterations / samples).
inline constexpr int64_t kMaxLaunchSize = (int64_t{1} << 31) - 1;
inline constexpr int64_t kMaxLaunchCount = int64_t{1} << 53;

// Index of the first argument of the training program in `argv`: after the first "*.py"
// (also "*.sh" when `shell_scripts`) or after "-m module"; 0 when there is none (the whole
// line is the program's). Everything before it is the launcher's (python, torchrun and its
// flags, srun and its flags).
size_t ProgramArgsStart(const std::vector<std::string>& argv, bool shell_scripts);

}  // namespace stepcast

#endif  // STEPCAST_PROTO_LAUNCH_COMMON_H_
