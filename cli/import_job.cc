#include <filesystem>

#include "absl/strings/str_cat.h"
#include "cli/cli.h"
#include "proto/codec.h"
#include "proto/launch_args.h"

namespace stepcast::cli {

absl::StatusOr<ImportedSpec> ImportJobSpec(const std::string& job_path, const std::vector<std::string>& command,
                                           int64_t gpus, const std::string& hardware, int64_t gpus_per_node) {
  ImportedSpec out;
  if (!command.empty()) {
    if (!job_path.empty()) return absl::InvalidArgumentError("give a job file or -- TRAINING COMMAND, not both");
    absl::StatusOr<ImportedJob> imported = JobFromCommand(command, ".");
    if (!imported.ok()) return imported.status();
    absl::StatusOr<v1::JobSpec> spec = imported->Finalize(gpus, hardware, gpus_per_node);
    if (!spec.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(spec.status().message(), " (pass --gpus and --hardware)"));
    }
    out.spec = *std::move(spec);
    out.spec.set_name(imported->source + " command");
    out.ignored = imported->ignored;
    return out;
  }
  if (job_path.empty()) return absl::InvalidArgumentError("give a job file or -- TRAINING COMMAND");
  if (absl::Status s = ParseMessageFile(job_path, &out.spec); !s.ok()) return s;
  if (absl::Status s = InlineHfConfig(out.spec, std::filesystem::path(job_path).parent_path().string()); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(job_path, ": ", s.message()));
  }
  if (out.spec.name().empty()) out.spec.set_name(std::filesystem::path(job_path).stem().string());
  return out;
}

}  // namespace stepcast::cli
