// The launch-line dispatcher and what the importers share (proto/launch_args.h,
// proto/launch_common.h).
#include "proto/launch_args.h"

#include <algorithm>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace stepcast {

size_t ProgramArgsStart(const std::vector<std::string>& argv, bool shell_scripts) {
  for (size_t i = 0; i < argv.size(); ++i) {
    if (absl::EndsWith(argv[i], ".py") || (shell_scripts && absl::EndsWith(argv[i], ".sh"))) return i + 1;
    if (argv[i] == "-m" && i + 1 < argv.size()) return i + 2;
  }
  return 0;
}

absl::StatusOr<v1::JobSpec> ImportedJob::Finalize(int64_t gpu_count, const std::string& hardware,
                                                  int64_t gpus_per_node) const {
  if (gpu_count <= 0) return absl::InvalidArgumentError("cluster.gpu_count: the GPU count is required (> 0)");
  if (hardware.empty()) return absl::InvalidArgumentError("hardware: a hardware preset is required");
  v1::JobSpec spec = this->spec;
  spec.mutable_cluster()->set_gpu_count(gpu_count);
  if (gpus_per_node > 0) spec.mutable_cluster()->set_gpus_per_node(gpus_per_node);
  spec.mutable_hardware()->set_preset(hardware);
  if (local_batch_size > 0 && spec.training().global_batch_size() == 0) {
    const auto& p = spec.parallelism();
    const int64_t model_parallel = std::max<int64_t>(1, p.tp()) * std::max<int64_t>(1, p.pp()) * std::max<int64_t>(1, p.cp());
    const int64_t dp = std::max<int64_t>(1, p.dp() > 0 ? p.dp() : gpu_count / model_parallel);
    if (local_batch_size > std::numeric_limits<int64_t>::max() / dp) {
      return absl::InvalidArgumentError(absl::StrCat("training.local_batch_size: ", local_batch_size, " x ", dp,
                                                     " data-parallel ranks overflows the global batch"));
    }
    spec.mutable_training()->set_global_batch_size(local_batch_size * dp);
  }
  return spec;
}

absl::StatusOr<ImportedJob> JobFromCommand(const std::vector<std::string>& argv, const std::string& base_dir) {
  // NeMo 2 (--factory) and Megatron-Bridge (--recipe) launch lines: proto/nemo_args.h.
  if (IsNemoCommand(argv)) return JobFromNemoCommand(argv);
  if (IsTorchtitanCommand(argv)) return JobFromTorchtitanLaunch(argv, base_dir);
  bool megatron = false;
  for (const auto& a : argv) megatron = megatron || absl::StartsWith(a, "--num-layers") || absl::StartsWith(a, "--num_layers");
  if (!megatron) {
    return absl::InvalidArgumentError(
        "the command is neither Megatron-LM (no --num-layers) nor torchtitan (no --job.config_file, "
        "--module or --model.name/--model.flavor)");
  }
  return JobFromMegatronArgs(argv);
}

}  // namespace stepcast
